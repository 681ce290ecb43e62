"""Activation patching (causal tracing): run a clean and a corrupted input, copy activations from one run into the
other, and measure how much of the answer moves with them (Vig et al. 2020; Meng et al. 2022; Heimersheim & Nanda
2024 on how to use and read it).

The machinery, with PyTorch's own forward hooks on the model's modules (named as in Hugging Face's BERT, so a test
can hook `transformers` the same way):

- `Runs`: the two runs, on a private copy of the model that shares its weights (hooks on the shared model would
  reach every page and session running it), and the score: the logit difference F = logit(answer) - logit(foil) at
  the [MASK] (ELECTRA's discriminator: its replaced-token logit at one token).
- `record`: one pass of a run, keeping each depth's residual stream and each layer's sublayer outputs, head outputs
  and query, key and value vectors.
- `patched`: many patched rows at once. A row patches one layer (`Patch`), so it starts from the target run's
  residual stream at that layer (the layers below are the target run's, computed once) and runs the rest in one
  batch; a hook puts the source run's numbers where the row's mask says. The layers above the patched one have no
  hook and run by the fast path (bert/fast.py's `encoder_layer`), the last of them for the scored position's row
  only (`scored_row`: F reads nothing else); tests/explain/test_patch_grids.py proves these rows equal the
  textbook layers', tests/explain/test_patching.py every grid equal to transformers with hooks. Measured on 1
  thread of this project's 2-core machine: the shipped model's residual grid (10 tokens) 0.04 s of CPU, a base-sized
  model's (12 layers, 768 wide, 16 tokens) 2.8 s, 3.9 s before the fast path and the one-row last layer.

What a site patches, in a post-LayerNorm BERT (every layer: a = LN(x + attn(x)), out = LN(a + ffn(a))):
- "resid": the residual stream entering layer l (l = 0: the embeddings after their LayerNorm and projection;
  l = L: the last layer's output);
- "attn" / "mlp": the sublayer's output before its residual add and LayerNorm (`attention.output.dense` and
  `output.dense`, whose dropout is off in eval);
- "heads": a head's output before W_O (its D columns of the input to `attention.output.dense`);
- "q" / "k" / "v": a head's query, key or value vectors (`attention.self.query` / `key` / `value`).

With `noise` (Meng et al.'s corruption), the corrupted run is the clean one with Gaussian noise added to chosen
tokens' word vectors, several seeded draws: each patched row runs once per draw and its F is the mean.
ALBERT's one layer serves every depth: a hook is added around one depth's call, so a patch is at a depth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from bertviz_lab.bert import fast
from bertviz_lab.bert.attention import AttentionOptions, merge_heads, split_heads
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import twin  # noqa: F401  (here too: the patching pages' copy of the model)
from bertviz_lab.explain.score import Score

SITES = ("resid", "attn", "mlp", "heads", "q", "k", "v")
LAYER_SITES = SITES[1:]  # inside a layer: patched by a hook on one of its modules
Progress = Callable[[float, str], None]


def module_at(layer: torch.nn.Module, site: str) -> tuple[torch.nn.Module, bool]:
    """The module whose output a site patches (input, for "heads": the second item says so), in layer `layer`."""
    return {"attn": (layer.attention.output.dense, False), "mlp": (layer.output.dense, False),
            "heads": (layer.attention.output.dense, True), "q": (layer.attention.self.query, False),
            "k": (layer.attention.self.key, False), "v": (layer.attention.self.value, False)}[site]


@dataclass(frozen=True)
class Runs:
    """Two runs of one length. `clean`, `corrupt`: (1, T) ids (the same ids under noise); `noise`: (N, T, e) added to
    the corrupted run's word vectors, one row per draw (None: the corruption is the typed one)."""

    model: BertForPreTraining  # a twin (`twin`)
    clean: torch.Tensor
    corrupt: torch.Tensor
    segments: torch.Tensor
    score: Score
    noise: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.clean.shape[1]

    @property
    def layers(self) -> int:
        return self.model.config.num_hidden_layers

    @property
    def heads(self) -> int:
        return self.model.config.num_attention_heads

    def embedded(self, which: str) -> torch.Tensor:
        """The residual stream entering layer 0 for the clean or the corrupt run: (1, T, d), or (N, T, d) per draw."""
        bert = self.model.bert
        ids = self.clean if which == "clean" else self.corrupt
        vectors = bert.embeddings.word_embeddings(ids)  # (1, T, e)
        if which == "corrupt" and self.noise is not None:
            vectors = vectors + self.noise.to(vectors.dtype)  # (N, T, e)
            ids = ids.expand(len(self.noise), -1)
        x = bert.embeddings(ids, self.segments.expand_as(ids), inputs_embeds=vectors)
        return x if bert.embeddings_project is None else bert.embeddings_project(x)


@dataclass
class Record:
    """One run, layer by layer: `resid[l]` (R, T, d) for l = 0..L, and `sites[(site, l)]` for each layer's
    modules; `f`, `p`: (R,) the score and p(answer) (p(replaced)) of each row, float64."""

    resid: list[torch.Tensor]
    sites: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    f: np.ndarray | None = None
    p: np.ndarray | None = None
    top: np.ndarray | None = None  # (R,) the top guess's id at the position (MLM only)


def evaluate(runs: Runs, top: torch.Tensor, at: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(F, p, top guess) per row from the last layer's output (R, T, d), read at the scored position (or at row
    `at` of `top`), in float64 (the top guess's id only for an MLM; None for the discriminator)."""
    score = runs.score
    f, p, logits = score.read(runs.model, top[:, score.position if at is None else at])  # from (R, d)
    return f.cpu().numpy(), p.cpu().numpy(), None if logits is None else logits.argmax(-1).cpu().numpy()


OPTIONS = AttentionOptions()  # one sentence, nothing masked, untraced


def record(runs: Runs, which: str, scored: bool = True) -> Record:
    """One pass of the clean or the corrupt run (every draw), keeping every site's activations (and, `scored`, F)."""
    x = runs.embedded(which)
    rec = Record([x])
    for depth, layer in enumerate(runs.model.bert.encoder.layer):
        handles = []
        for site in LAYER_SITES:
            module, before = module_at(layer, site)

            def keep(_m, args, out=None, site=site, before=before, depth=depth):
                rec.sites[(site, depth)] = (args[0] if before else out).detach()

            handles.append(module.register_forward_pre_hook(keep) if before else module.register_forward_hook(keep))
        try:
            x, _ = layer(x, OPTIONS)
        finally:
            for handle in handles:
                handle.remove()
        rec.resid.append(x)
    if scored:
        rec.f, rec.p, rec.top = evaluate(runs, x)
    return rec


@dataclass(frozen=True)
class Patch:
    """One patched row: `site` at `layer` (for "resid", the depth 0..L), where `mask` (T, d) bool is True. The source
    may also be given outright (`value`, (T, d)): zeros, for value zeroing."""

    site: str
    layer: int
    mask: torch.Tensor
    value: torch.Tensor | None = None


def position_mask(runs: Runs, positions, columns: slice = slice(None)) -> torch.Tensor:
    """(T, d) bool: True at `positions` (a list, or slice(None) for all), in `columns` (a head's D columns)."""
    d = runs.model.config.hidden_size
    mask = torch.zeros(runs.length, d, dtype=torch.bool, device=runs.clean.device)
    rows = torch.zeros(runs.length, dtype=torch.bool, device=mask.device)
    rows[positions] = True
    cols = torch.zeros(d, dtype=torch.bool, device=mask.device)
    cols[columns] = True
    return mask | (rows[:, None] & cols[None])


def head_columns(runs: Runs, head: int) -> slice:
    D = runs.model.config.hidden_size // runs.heads
    return slice(head * D, (head + 1) * D)


def _stack(patches: list[Patch], source: Record, key, draws: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows' masks and sources at one site, each row repeated per draw: (R * N, T, d) twice."""
    masks = torch.stack([p.mask for p in patches]).repeat_interleave(draws, 0)
    values = []
    for p in patches:
        if p.value is not None:
            values.append(p.value.expand(draws, *p.value.shape))
        else:
            kept = source.resid[p.layer] if key == "resid" else source.sites[(p.site, p.layer)]
            values.append(kept.expand(draws, *kept.shape[1:]))
    return masks, torch.cat(values).to(masks.device)


def run_from(runs: Runs, target: Record, patches: list[Patch], source: Record | None,
             stop: int | None = None, scored: bool = False) -> torch.Tensor:
    """Rows that each patch one site of one layer `l` (the same for all), run from the target's residual stream at
    `l` to layer `stop` (default: the top). Returns the residual stream there, (R * N, T, d), row r's draws together;
    `scored` (to the top only): the scored position's row alone, (R * N, 1, d).

    The patched layer runs module by module, so that the hook on its site fires; the layers above it, untouched,
    run by the fast path (bert/fast.py: q, k and v in one product, oneDNN's packed weights), and with `scored` the
    last of them computes one query row (every key and value), since only the scored position's output is read.
    """
    (layer_index,) = {p.layer for p in patches}
    (site,) = {p.site for p in patches}
    draws = target.resid[0].shape[0] if source is None else max(target.resid[0].shape[0], source.resid[0].shape[0])
    x = target.resid[layer_index].expand(draws, -1, -1).repeat(len(patches), 1, 1)  # (R * N, T, d)
    masks, values = _stack(patches, source, "resid" if site == "resid" else site, draws)
    if site == "resid":
        x = torch.where(masks, values.to(x.dtype), x)
    layers = runs.model.bert.encoder.layer
    stop = len(layers) if stop is None else stop
    position = runs.score.position
    start = layer_index
    if site != "resid":  # the patched layer, by its modules, with the hook
        x = _hooked(layers[layer_index], x, site, masks, values)
        start += 1
    for depth in range(start, stop):
        if scored and depth == len(layers) - 1:
            return scored_row(layers[depth], x, position)
        x, _ = fast.encoder_layer(layers[depth], x, OPTIONS)
    return x[:, position:position + 1] if scored else x


def _hooked(layer: torch.nn.Module, x: torch.Tensor, site: str, masks: torch.Tensor,
            values: torch.Tensor) -> torch.Tensor:
    """One layer by its modules, the output (input, for "heads") of the site's module replaced where `masks` says."""
    module, before = module_at(layer, site)
    if before:
        handle = module.register_forward_pre_hook(
            lambda _m, args: (torch.where(masks, values.to(args[0].dtype), args[0]),))
    else:
        handle = module.register_forward_hook(lambda _m, _args, out: torch.where(masks, values.to(out.dtype), out))
    try:
        return layer(x, OPTIONS)[0]
    finally:
        handle.remove()


def scored_row(layer: torch.nn.Module, x: torch.Tensor, position: int) -> torch.Tensor:
    """The layer's output at `position` only, (B, 1, d), from x (B, T, d): that row's query against every key and
    value, then W_O, the residual adds, LayerNorms and the feed-forward block on one row."""
    attn = layer.attention.self
    row = x[:, position:position + 1]  # (B, 1, d)
    q, k, v = (split_heads(fast.linear(m, h), attn.num_heads)
               for m, h in ((attn.query, row), (attn.key, x), (attn.value, x)))  # (B, H, 1 or T, D)
    context, _ = fast.attention(q, k, v, OPTIONS)  # (B, H, 1, D)
    out = layer.attention.output
    a = out.LayerNorm(fast.linear(out.dense, merge_heads(context)) + row)  # (B, 1, d)
    ffn = layer.output
    return ffn.LayerNorm(fast.linear(ffn.dense, layer.intermediate.act(fast.linear(layer.intermediate.dense, a))) + a)


def patched(runs: Runs, target: Record, source: Record | None, patches: list[Patch],
            chunk: int = 256) -> np.ndarray:
    """F of every patched row (float64, mean over the noise draws), the rows grouped by site and layer and batched
    up to `chunk` sequences (rows times the draws) in one forward."""
    out = np.zeros(len(patches))
    draws = max(target.resid[0].shape[0], source.resid[0].shape[0] if source is not None else 1)
    rows = max(1, chunk // draws)
    groups: dict[tuple[str, int], list[int]] = {}
    for i, p in enumerate(patches):
        groups.setdefault((p.site, p.layer), []).append(i)
    for indices in groups.values():
        for start in range(0, len(indices), rows):
            part = indices[start:start + rows]
            top = run_from(runs, target, [patches[i] for i in part], source, scored=True)  # (R * N, 1, d)
            f = evaluate(runs, top, 0)[0]
            out[part] = f.reshape(len(part), -1).mean(1)
    return out
