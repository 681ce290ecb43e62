"""Activation-patching speed (issue 54, point 9): the residual-stream grid, ours against the same computation with
`transformers` and plain PyTorch forward hooks, on the same weights in the same run.

The grid: every depth (the embeddings and each layer's output) x every position, one clean activation patched into
the corrupted run (denoising), the score F = logit(answer) - logit(foil) at the [MASK]. Ours is
views/patching/runs.py's `grid` on the recorded runs (explain/patch_grids.py: a row per patched cell, the rows of a
depth batched and started from the corrupted run's residual stream at that depth; it also runs each depth patched
whole and nothing patched, the checks' rows). Theirs is a transformers BertForMaskedLM with a forward hook on
`bert.embeddings` and on each `bert.encoder.layer[l]` that caches the clean run's output and replaces one position's
in the corrupted run: "per cell", one patched forward per cell, as a tutorial writes it; "batched", one forward per
depth with a row per position. Both sides record the clean and the corrupted run inside the timed call. The grids
are checked equal first (the largest difference of F, and of the normalised share).

Two models: the shipped checkpoint on a 16-token agreement pair, and a BERT-base-sized random model (12 x 768, 12
heads, vocabulary 30522, seeded) at 16 tokens. Goals: the shipped model under 1 s, base under 10 s on 2 threads.
The untimed run that checks the grids is the warm-up. Interleaved rounds; each ratio is the median of per-round ratios ours / theirs (below 1.0: we are faster).

    .venv/bin/python -m bench.patching [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics

import numpy as np
import torch

from bench.attribution import SHIPPED, base, cpu_name, hf_masked_lm
from bench.common import interleaved_ms, median_ratio, pin_threads
from bertviz_lab.explain import patch_grids
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk

TOKENS = 16
CLEAN = "the children in the park with the dog [MASK] happy and the cat ."
CORRUPT = "the child in the park with the dog [MASK] happy and the cat ."
GOALS = {"shipped": 1.0, "base": 10.0}  # seconds for the residual grid (issue 54, point 9)


def shipped_pair():
    """(title, model, tokenizer, ask): the shipped model on the agreement pair."""
    from bertviz_lab.bert.checkpoint import load_checkpoint

    ckpt = load_checkpoint(SHIPPED, device=torch.device("cpu"))
    ask = PatchAsk(CLEAN, CORRUPT, answer="were", foil="was")
    length = len(ckpt.tokenizer.encode(CLEAN))
    cfg = ckpt.config
    return (f"shipped model {SHIPPED.name} ({cfg.num_hidden_layers}x{cfg.hidden_size}), {length} tokens",
            "shipped", ckpt.model, ckpt.tokenizer, ask)


def base_pair(tokens: int = TOKENS):
    """(title, model, tokenizer, ask): a random BERT-base, `tokens` random words with a [MASK], one word changed."""
    subject = base(tokens)
    words = subject.encoding.tokens[1:-1]
    changed = list(words)
    changed[1] = next(w for w in (f"w{i}" for i in range(100)) if w != words[1])
    ask = PatchAsk(" ".join(words), " ".join(changed))
    return (f"random BERT-base (12x768, 12 heads, vocabulary 30522), {tokens} tokens", "base", subject.model,
            subject.tokenizer, ask)


def ours(patching) -> np.ndarray:
    """Our residual grid's F (depths, positions), both runs recorded again first."""
    traced = patch_grids.trace(patching.traced.runs)
    return patch_grids.grid(traced, "resid", "denoise").f


class HookedResid:
    """The residual grid with transformers and forward hooks: the clean run's output of every depth cached, then
    each patched forward of the corrupted run with one hook that writes a clean position in."""

    def __init__(self, hf, patching) -> None:
        runs = patching.traced.runs
        self.hf, self.depths = hf, [hf.bert.embeddings, *hf.bert.encoder.layer]
        self.clean, self.corrupt, self.segments = runs.clean, runs.corrupt, runs.segments
        self.position, self.answer, self.foil = runs.score.position, runs.score.target, runs.score.contrast

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = self.hf(input_ids=ids, token_type_ids=self.segments.expand_as(ids),
                         attention_mask=torch.ones_like(ids)).logits[:, self.position]
        return logits[:, self.answer] - logits[:, self.foil]

    def cached(self) -> list[torch.Tensor]:
        cache = []
        hooks = [m.register_forward_hook(lambda _m, _i, out: cache.append(_first(out))) for m in self.depths]
        try:
            self.forward(self.clean)
        finally:
            for hook in hooks:
                hook.remove()
        return cache

    def grid(self, batched: bool) -> np.ndarray:
        with torch.no_grad():
            cache = self.cached()
            self.forward(self.corrupt)  # the corrupted run's F, which a grid is normalised by
            T = self.clean.shape[1]
            rows = []
            for depth, module in enumerate(self.depths):
                clean = cache[depth][0]  # (T, D)
                if batched:  # row t patches position t
                    hook = module.register_forward_hook(lambda _m, _i, out, c=clean: _put(out, range(T), c))
                    rows.append(self._patched(hook, self.corrupt.expand(T, -1)))
                    continue
                cells = []
                for t in range(T):
                    hook = module.register_forward_hook(lambda _m, _i, out, c=clean, t=t: _put(out, [t], c))
                    cells.append(self._patched(hook, self.corrupt))
                rows.append(torch.cat(cells))
            return torch.stack(rows).double().numpy()

    def _patched(self, hook, ids: torch.Tensor) -> torch.Tensor:
        try:
            return self.forward(ids)
        finally:
            hook.remove()


def _first(out) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _put(out, positions, clean: torch.Tensor):
    """`out` with row i's position positions[i] (every row's, for one position) set to the clean run's."""
    hidden = _first(out).clone()
    for row, t in enumerate(positions):
        hidden[row if hidden.shape[0] > 1 else 0, t] = clean[t]
    return (hidden, *out[1:]) if isinstance(out, tuple) else hidden


def compare(make, rounds: int) -> bool:
    """Time one model's grid both ways, print the figures; whether its goal was met."""
    title, key, model, tokenizer, ask = make()
    patching = vpa.prepare(model, tokenizer, ask)
    hooked = HookedResid(hf_masked_lm(model), patching)
    mine, per_cell, batched = ours(patching), hooked.grid(False), hooked.grid(True)
    span = abs(patching.f_clean - patching.f_corrupt)
    diff = max(np.abs(mine - per_cell).max(), np.abs(mine - batched).max())
    ms = interleaved_ms({"ours": lambda: ours(patching), "per cell": lambda: hooked.grid(False),
                         "batched": lambda: hooked.grid(True)}, rounds, warmup=0)  # the check above warmed up
    s = {name: statistics.median(t) / 1000 for name, t in ms.items()}
    met = s["ours"] < GOALS[key]
    print(f"\n{title}; {patching.metric}, F clean {patching.f_clean:.4g}, corrupted {patching.f_corrupt:.4g}")
    print(f"  grids agree: largest |F ours - F transformers| {diff:.2e} (normalised: {diff / span:.2e})")
    print(f"  ours (views.patching.runs.grid)             {s['ours']:8.3f} s   goal < {GOALS[key]:g} s: "
          f"{'met' if met else 'MISSED'}")
    for name in ("per cell", "batched"):
        print(f"  transformers + hooks, {name:<9} {s[name]:8.3f} s   ratio ours / theirs "
              f"{median_ratio(ms['ours'], ms[name]):.3f}")
    assert diff <= 1e-4 * max(1.0, abs(patching.f_clean)), "the two grids disagree"
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds after a warm-up (default 3)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="the base model's sentence length (default 16)")
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"{dt.date.today()} · {platform.node()} · {cpu_name()} · {os.cpu_count()} cores, {args.threads} threads, "
          f"CPU, torch {torch.__version__} · load average {os.getloadavg()[0]:.1f} at the start · medians of "
          f"{args.rounds} interleaved rounds after a warm-up")
    missed = sum(not compare(make, args.rounds) for make in (shipped_pair, lambda: base_pair(args.tokens)))
    print("\nevery goal met" if not missed else f"\n{missed} goal(s) MISSED")


if __name__ == "__main__":
    main()
