"""Activation patching against the obviously right reference (issue 54, item 6): for every family, each grid
(residual stream, attention and feed-forward blocks, heads, one head's query, key and value; both directions)
computed by explain/patching.py equals the same patches made on `transformers`' own model with plain PyTorch
forward hooks, one patched forward per cell, within 1e-5 of the score's range |F_clean - F_corrupt|.

The checkpoints are tests/helpers/family_models.py's random ones (tiny: 2-3 layers, 32 wide, 4 heads) at about 8 tokens.
ALBERT's one layer serves every depth: its reference counts the shared module's calls and patches one call only, and
the depths' rows must differ (a patch of the weights would make them equal)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.explain import patch_grids
from bertviz_lab.explain.patching import Runs, twin
from bertviz_lab.explain.score import Score
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

TEXT = "the cat sat on the [MASK] ."  # 9 tokens or so, with the specials, in every family's tokenizer
CHANGED = 2  # the token the corrupted run changes
REL = 1e-5
# transformers' module names, per family: the layers, then q, k, v, W_O (its input: the heads) and W_2
NAMES = {
    "bert": ("encoder.layer", "attention.self.query", "attention.self.key", "attention.self.value",
             "attention.output.dense", "output.dense"),
    "distilbert": ("transformer.layer", "attention.q_lin", "attention.k_lin", "attention.v_lin",
                   "attention.out_lin", "ffn.lin2"),
    "albert": ("encoder.albert_layer_groups.0.albert_layers", "attention.query", "attention.key", "attention.value",
               "attention.dense", "ffn_output"),
}
SITES = ("q", "k", "v", "heads", "mlp")  # in NAMES' order after the layers; "attn" is W_O's output


class Reference:
    """F of a patched run of the transformers model: one forward, one hook on the module a site names."""

    def __init__(self, family: str, hf, score: Score):
        self.hf, self.score = hf.eval(), score
        self.base = getattr(hf, hf.base_model_prefix)
        names = NAMES.get(family, NAMES["bert"])
        self.layers = self.base.get_submodule(names[0])
        self.names = dict(zip(SITES, names[1:]))
        self.shared = family == "albert"  # one layer object, called once per depth
        self.depths = hf.config.num_hidden_layers

    def site(self, site: str, depth: int) -> tuple[torch.nn.Module, bool, int]:
        """(module, whether its input is patched, which of its calls in a forward is this depth's)."""
        if site == "resid" and depth == 0:  # what enters layer 1: the embeddings (projected to the layers' width)
            names = ("encoder.embedding_hidden_mapping_in", "embeddings_project", "embeddings")
            return next(m for m in map(self._maybe, names) if m is not None), False, 0
        at = depth - 1 if site == "resid" else depth  # resid: the output of the layer below
        layer, call = (self.layers[0], at) if self.shared else (self.layers[at], 0)
        if site == "resid":
            return layer, False, call
        name = self.names["heads"] if site == "attn" else self.names[site]  # attn: W_O's output, heads: its input
        return layer.get_submodule(name), site == "heads", call

    def _maybe(self, name: str) -> torch.nn.Module | None:
        try:
            return self.base.get_submodule(name)
        except AttributeError:
            return None

    def forward(self, ids: torch.Tensor, hooks: list) -> float:
        """F of one run of `ids` (1, T) with `hooks`: (module, before, call, fn) where fn maps a tensor to the
        tensor to use instead (or records it and returns it)."""
        handles = [self._hook(*h) for h in hooks]
        try:
            with torch.no_grad():
                logits = self.hf(input_ids=ids).logits[0, self.score.position]
        finally:
            for handle in handles:
                handle.remove()
        if self.score.replaced:
            return float(logits)
        return float(logits[self.score.target] - logits[self.score.contrast])

    @staticmethod
    def _hook(module, before: bool, call: int, fn):
        seen = [0]

        def on(value):
            seen[0] += 1
            return fn(value) if seen[0] - 1 == call else value

        if before:
            return module.register_forward_pre_hook(lambda _m, args: (on(args[0]), *args[1:]))

        def after(_m, _args, out):
            return (on(out[0]), *out[1:]) if isinstance(out, tuple) else on(out)

        return module.register_forward_hook(after)

    def activation(self, ids: torch.Tensor, site: str, depth: int) -> torch.Tensor:
        kept = []
        module, before, call = self.site(site, depth)
        self.forward(ids, [(module, before, call, lambda t: kept.append(t.clone()) or t)])
        return kept[0]

    def cell(self, target: torch.Tensor, source: torch.Tensor, site: str, depth: int, mask: torch.Tensor) -> float:
        """F of the target run with the source run's activation at (site, depth) where `mask` (T, d) is True."""
        value = self.activation(source, site, depth)
        module, before, call = self.site(site, depth)
        return self.forward(target, [(module, before, call, lambda t: torch.where(mask, value, t))])


@dataclass
class Member:
    family: str
    reference: Reference
    runs: Runs
    traced: patch_grids.Traced


def ids_of(ckpt) -> tuple[torch.Tensor, torch.Tensor]:
    clean = torch.tensor([ckpt.tokenizer.encode(TEXT).ids])
    corrupt = clean.clone()
    corrupt[0, CHANGED] = clean[0, 3]  # another word of the sentence: a token every vocabulary has
    assert clean.shape[1] <= 16 and not torch.equal(clean, corrupt)
    return clean, corrupt


def member(name: str, tmp_path_factory) -> Member:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(name)
    hf, _ = build(name, folder)
    if name == "bert":  # built with its NSP head too: the masked-LM class reads the same weights
        hf = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="eager")
    ckpt = load_checkpoint(folder)
    hf, model = hf.double(), ckpt.model.double()  # float64 both: rounding far below 1e-5 of any range
    clean, corrupt = ids_of(ckpt)
    position = int((clean[0] == ckpt.tokenizer.mask_id).nonzero()[0, 0])
    if name == "electra-discriminator":
        score = Score(CHANGED, None)
    else:  # the answer and foil the change moves most: a wide range, so 1e-5 of it is a sharp test
        with torch.no_grad():
            moved = hf(input_ids=clean).logits[0, position] - hf(input_ids=corrupt).logits[0, position]
        score = Score(position, int(moved.argmax()), int(moved.argmin()), ckpt.tokenizer.vocab_size)
    runs = Runs(twin(model), clean, corrupt, torch.zeros_like(clean), score)
    family = "albert" if name.startswith("albert") else "distilbert" if name == "distilbert" else "bert"
    return Member(family, Reference(family, hf, score), runs, patch_grids.trace(runs))


FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra-generator", "electra-discriminator"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory) -> Member:
    return member(request.param, tmp_path_factory)


def cells(m: Member, kind: str, head: tuple[int, int]) -> list[tuple[str, int, torch.Tensor]]:
    """The grid's cells in its row-major order, as (site, depth, mask (T, d)) for the reference."""
    T, L, H = m.runs.length, m.runs.layers, m.runs.heads
    d = m.runs.model.config.hidden_size
    D = d // H

    def mask(positions, h=None):
        out = torch.zeros(T, d, dtype=torch.bool)
        cols = slice(None) if h is None else slice(h * D, (h + 1) * D)
        out[positions, cols] = True
        return out

    if kind == "resid":
        return [("resid", depth, mask([t])) for depth in range(L + 1) for t in range(T)]
    if kind in ("attn", "mlp"):
        return [(kind, layer, mask([t])) for layer in range(L) for t in range(T)]
    if kind == "heads":
        return [("heads", layer, mask(list(range(T)), h)) for layer in range(L) for h in range(H)]
    return [(site, head[0], mask([t], head[1])) for site in ("q", "k", "v") for t in range(T)]


def reference_grid(m: Member, kind: str, direction: str, head: tuple[int, int]) -> np.ndarray:
    clean, corrupt = m.runs.clean, m.runs.corrupt
    target, source = (corrupt, clean) if direction == "denoise" else (clean, corrupt)
    return np.array([m.reference.cell(target, source, *c) for c in cells(m, kind, head)])


@pytest.mark.parametrize("direction", patch_grids.DIRECTIONS)
def test_every_grid_equals_transformers_with_hooks(family, direction):
    m = family
    f_clean, f_corrupt = m.reference.forward(m.runs.clean, []), m.reference.forward(m.runs.corrupt, [])
    scale = abs(f_clean - f_corrupt)
    assert scale > 1e-3, (m.family, f_clean, f_corrupt)  # a range worth normalising by
    assert abs(m.traced.f_clean - f_clean) <= REL * scale and abs(m.traced.f_corrupt - f_corrupt) <= REL * scale
    head = (1, 2)
    for kind in patch_grids.GRIDS:
        ours = patch_grids.grid(m.traced, kind, direction, head=head)
        ref = reference_grid(m, kind, direction, head)
        assert ours.f.shape == (len(ours.rows), ref.size // len(ours.rows)), kind
        np.testing.assert_allclose(ours.f.ravel(), ref, rtol=0, atol=REL * scale, err_msg=f"{m.family} {kind}")
        np.testing.assert_allclose(ours.values, (ours.f - f_corrupt) / (f_clean - f_corrupt), atol=1e-4)


def test_albert_patches_a_depth_not_the_shared_weights(tmp_path_factory):
    """ALBERT's one layer at depths 1 and 2: the same weights, different patches, and each row equals the reference,
    which hooks only that depth's call of the shared module."""
    m = member("albert", tmp_path_factory)
    assert m.runs.model.bert.encoder.layer[1] is m.runs.model.bert.encoder.layer[2]
    for kind in ("attn", "mlp", "resid"):
        grid = patch_grids.grid(m.traced, kind, "denoise")
        rows = grid.f[1:3] if kind != "resid" else grid.f[2:4]  # resid's rows start at the embeddings
        assert np.abs(rows[0] - rows[1]).max() > 1e-3, kind
        scale = abs(m.traced.f_clean - m.traced.f_corrupt)
        ref = reference_grid(m, kind, "denoise", (0, 0)).reshape(grid.f.shape)
        np.testing.assert_allclose(grid.f, ref, rtol=0, atol=REL * scale)
