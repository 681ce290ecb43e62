"""The grids activation patching draws, and value zeroing, from the machinery in explain/patching.py.

Each grid holds the normalised score of every patched row: 0 is the corrupted run's F, 1 the clean run's, so a cell
says which share of the logit difference the patched activation carries. Two directions:
- "denoise" (clean into corrupted): the corrupted run with one clean activation; a cell near 1 says that activation
  is *enough* to bring the answer back;
- "noise" (corrupted into clean): the clean run with one corrupted activation; a cell near 0 says that activation
  is *needed* (breaking it alone breaks the answer).

`resid` also patches every position of each depth at once (`whole`): that row is the source run itself from that
depth on, so it must give the source's score (1 denoising, 0 noising) to within rounding, and patching nothing
must give the target's; `Grid.checks` says how far each was from it.

Value zeroing (Mohebbi et al. 2023): in one layer, token j's value vectors (every head) set to zero, and how far
each token's output of that layer moves (cosine distance); each row normalised to sum 1, the layers' matrices then
multiplied through as rollout does (the explained position's row: what reaches it from each input token).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.explain.patching import (Patch, Record, Runs, head_columns, patched, position_mask, record, twin,
                                          run_from)
from bertviz_lab.explain.score import Score

DIRECTIONS = ("denoise", "noise")
GRIDS = ("resid", "attn", "mlp", "heads", "qkv")
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Traced:
    """The two runs, each recorded once: every grid patches between them."""

    runs: Runs
    clean: Record
    corrupt: Record

    @property
    def f_clean(self) -> float:
        return float(self.clean.f.mean())

    @property
    def f_corrupt(self) -> float:
        """F of the corrupted run (under noise, the mean over the draws)."""
        return float(self.corrupt.f.mean())

    @property
    def p_clean(self) -> float:
        return float(self.clean.p.mean())

    @property
    def p_corrupt(self) -> float:
        return float(self.corrupt.p.mean())

    def normalised(self, f: np.ndarray) -> np.ndarray:
        return (np.asarray(f, float) - self.f_corrupt) / (self.f_clean - self.f_corrupt)

    def ends(self, direction: str) -> tuple[Record, Record]:
        """(target, source): the run patched into, and the run its activations come from."""
        return (self.corrupt, self.clean) if direction == "denoise" else (self.clean, self.corrupt)


def trace(runs: Runs) -> Traced:
    with torch.no_grad():
        return Traced(runs, record(runs, "clean"), record(runs, "corrupt"))


@dataclass(frozen=True)
class Grid:
    """One grid: `values` normalised (rows, columns), `f` the raw F of each cell."""

    kind: str  # one of GRIDS
    direction: str  # "denoise" or "noise"
    values: np.ndarray
    f: np.ndarray
    rows: list[str]  # "embeddings", "layer 1", ... / "attention", "feed-forward" / "query", "key", "value"
    whole: np.ndarray | None = None  # resid: each depth with every position patched, normalised (rows,)
    nothing: float | None = None  # resid: no position patched, normalised
    head: tuple[int, int] | None = None  # qkv: (layer, head)

    @property
    def expected_whole(self) -> float:
        """What a whole depth patched must give: the source run's normalised score."""
        return 1.0 if self.direction == "denoise" else 0.0

    @property
    def checks(self) -> dict[str, float]:
        """resid only: the largest distance of a whole-depth row from the source's score, and of the
        nothing-patched row from the target's (both should be rounding, under 1e-5 in fp32)."""
        if self.whole is None:
            return {}
        return {"whole": float(np.abs(self.whole - self.expected_whole).max()),
                "nothing": abs(self.nothing - (1.0 - self.expected_whole))}


def _run(traced: Traced, direction: str, patches: list[Patch], progress: Progress | None, what: str) -> np.ndarray:
    """F of every row, a layer's rows at a time; progress after each layer, in shares of the work (a row at layer l
    runs the L - l layers above it, and the head)."""
    target, source = traced.ends(direction)
    f = np.zeros(len(patches))
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(patches):
        groups.setdefault(p.layer, []).append(i)
    work = {layer: len(rows) * (traced.runs.layers - layer + 1) for layer, rows in groups.items()}
    done = 0
    with torch.no_grad():
        for layer in sorted(groups):
            indices = groups[layer]
            f[indices] = patched(traced.runs, target, source, [patches[i] for i in indices])
            done += work[layer]
            if progress is not None:
                progress(done / sum(work.values()), what)
    return f


def depth_names(layers: int) -> list[str]:
    return ["embeddings", *(f"layer {i + 1}" for i in range(layers))]


def resid_grid(traced: Traced, direction: str, progress: Progress | None = None) -> Grid:
    """Every depth 0..L x every position: the residual stream there patched. Plus each depth whole, and nothing."""
    runs = traced.runs
    T, L = runs.length, runs.layers
    patches = [Patch("resid", depth, position_mask(runs, [t])) for depth in range(L + 1) for t in range(T)]
    patches += [Patch("resid", depth, position_mask(runs, slice(None))) for depth in range(L + 1)]
    patches.append(Patch("resid", 0, position_mask(runs, [])))
    f = _run(traced, direction, patches, progress, "residual stream")
    cells = f[: (L + 1) * T].reshape(L + 1, T)
    return Grid("resid", direction, traced.normalised(cells), cells, depth_names(L),
                whole=traced.normalised(f[(L + 1) * T: -1]), nothing=float(traced.normalised(f[-1:])[0]))


def block_grid(traced: Traced, direction: str, site: str, progress: Progress | None = None) -> Grid:
    """Every layer x every position: the attention ("attn") or feed-forward ("mlp") sublayer's output patched."""
    runs = traced.runs
    T, L = runs.length, runs.layers
    patches = [Patch(site, layer, position_mask(runs, [t])) for layer in range(L) for t in range(T)]
    cells = _run(traced, direction, patches, progress, "attention blocks" if site == "attn" else "feed-forward blocks")
    cells = cells.reshape(L, T)
    return Grid(site, direction, traced.normalised(cells), cells, depth_names(L)[1:])


def head_grid(traced: Traced, direction: str, progress: Progress | None = None) -> Grid:
    """Every layer x every head: the head's output (before W_O) patched at every position."""
    runs = traced.runs
    L, H = runs.layers, runs.heads
    patches = [Patch("heads", layer, position_mask(runs, slice(None), head_columns(runs, h)))
               for layer in range(L) for h in range(H)]
    cells = _run(traced, direction, patches, progress, "heads").reshape(L, H)
    return Grid("heads", direction, traced.normalised(cells), cells, depth_names(L)[1:])


def qkv_grid(traced: Traced, direction: str, layer: int, head: int, progress: Progress | None = None) -> Grid:
    """One head's query, key and value vectors patched apart, one position at a time: (3, T)."""
    runs = traced.runs
    T, cols = runs.length, head_columns(runs, head)
    patches = [Patch(site, layer, position_mask(runs, [t], cols)) for site in ("q", "k", "v") for t in range(T)]
    cells = _run(traced, direction, patches, progress, f"layer {layer + 1} head {head + 1}").reshape(3, T)
    return Grid("qkv", direction, traced.normalised(cells), cells, ["query", "key", "value"], head=(layer, head))


def grid(traced: Traced, kind: str, direction: str, head: tuple[int, int] | None = None,
         progress: Progress | None = None) -> Grid:
    """The grid `kind` (one of GRIDS) in `direction`; "qkv" needs `head` (layer, head), from 0."""
    if kind == "resid":
        return resid_grid(traced, direction, progress)
    if kind in ("attn", "mlp"):
        return block_grid(traced, direction, kind, progress)
    if kind == "heads":
        return head_grid(traced, direction, progress)
    return qkv_grid(traced, direction, *head, progress=progress)


def value_zeroing(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor,
                  runs: Runs | None = None) -> np.ndarray:
    """(L, T, T) float64: [l, i, j] the cosine distance between token i's output of layer l and that output with
    token j's value vectors zeroed in layer l (every head); each row then normalised to sum 1."""
    runs = runs or Runs(twin(model), ids, ids, segments, Score(0, None))
    with torch.no_grad():
        clean = record(runs, "clean", scored=False)
        T, d = runs.length, runs.model.config.hidden_size
        zeros = torch.zeros(T, d, dtype=clean.resid[0].dtype, device=ids.device)
        out = []
        for layer in range(runs.layers):
            patches = [Patch("v", layer, position_mask(runs, [j]), zeros) for j in range(T)]
            moved = run_from(runs, clean, patches, None, stop=layer + 1)  # (T_j, T_i, d)
            kept = clean.resid[layer + 1][0]  # (T_i, d)
            cos = torch.nn.functional.cosine_similarity(moved.double(), kept.double()[None], dim=-1)  # (j, i)
            out.append((1 - cos).T)
    mixing = torch.stack(out).clamp_min(0).cpu().numpy()  # (L, i, j)
    return mixing / np.maximum(mixing.sum(-1, keepdims=True), 1e-12)


def value_zeroing_rollout(mixing: np.ndarray, position: int) -> np.ndarray:
    """The layers' value-zeroing matrices multiplied through (the first layer rightmost), `position`'s row (T,)."""
    R = np.eye(mixing.shape[-1])
    for layer in mixing:
        R = layer @ R
    return R[position]
