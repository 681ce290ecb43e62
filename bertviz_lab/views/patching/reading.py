"""What a patching grid says, in sentences written from its numbers; the checks a page shows beside it; its rows for
a CSV file. Nothing here is canned: every name and number in a sentence is read from the grid it describes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertviz_lab.explain.patch_grids import Grid
from bertviz_lab.views.patching.runs import Patching, tolerance

DIRECTION_WORDS = {
    "denoise": "clean into corrupted (denoising): the corrupted run with one clean activation put back. A cell near 1 "
               "says that activation alone is enough to bring the answer back.",
    "noise": "corrupted into clean (noising): the clean run with one activation taken from the corrupted run. A cell "
             "near 0 says the answer needs that activation: breaking it alone breaks the answer.",
}
KIND_WORDS = {
    "resid": "the residual stream: everything a position carries into the next layer (row 'embeddings': what enters "
             "layer 1; row 'layer l': layer l's output)",
    "attn": "each layer's attention block: its output W_O·(heads) + b before the residual add and LayerNorm",
    "mlp": "each layer's feed-forward block: its output W_2·act(W_1·a) + b before the residual add and LayerNorm",
    "heads": "each head's output before W_O (its share of the attention block), at every position at once",
    "qkv": "one head's query, key and value vectors, patched apart, one position at a time: where the head reads from",
}
LIMITS = ("What patching does not show. Denoising asks what is *enough* to restore the answer, noising what it "
          "*needs*: a component can be one and not the other, so read both. The picture depends on the metric (the "
          "logit difference here; p(answer) can hide a change that the logits show) and on the corruption: noise "
          "pushes activations off anything the model saw in training, so a large effect under noise may be the model "
          "breaking rather than the answer moving. And one pair is one sentence: try the built-in pairs before "
          "calling a layer 'where agreement is decided'.")


SMALL_GAP = 0.1  # logits: two runs whose scores differ by less make every normalised cell a ratio of small numbers


def small_gap(patching: Patching) -> str | None:
    """A warning when the corruption barely moves the score (None when it moves it by SMALL_GAP logits or more)."""
    gap = abs(patching.f_clean - patching.f_corrupt)
    if gap >= SMALL_GAP:
        return None
    return (f"The two runs' scores differ by only {gap:.3g} logits, so every cell below divides a small change by a "
            "small number: values far outside 0 to 1 may be rounding or noise rather than the answer moving. Pick a "
            "corruption that moves the answer more (another word, or more noise).")


def _cell(patching: Patching, t: int) -> str:
    token = patching.tokens[t]
    return f"'{token}' (token {t})"


def _depth(name: str) -> str:
    return "the embeddings" if name == "embeddings" else name


def resid_sentences(patching: Patching, grid: Grid) -> list[str]:
    """Where the answer sits, depth by depth, and between which layers it reaches the scored position."""
    best = grid.values.argmax(1) if grid.direction == "denoise" else grid.values.argmin(1)
    verb = "restores" if grid.direction == "denoise" else "leaves"
    out = []
    first = int(best[0])
    out.append(f"At the embeddings, patching {_cell(patching, first)} {verb} {grid.values[0, first]:.2f} of the "
               f"difference, the most of any position.")
    at = patching.position
    arrived = next((d for d in range(len(best)) if best[d] == at), None)
    if arrived is None:
        out.append(f"At no depth is the scored position {_cell(patching, at)} the one that matters most.")
    elif arrived == 0:
        out.append(f"From the embeddings on, the position that matters most is {_cell(patching, at)} itself.")
    else:
        before = int(best[arrived - 1])
        out.append(f"The answer moves from {_cell(patching, before)} to {_cell(patching, at)} between "
                   f"{_depth(grid.rows[arrived - 1])} and {_depth(grid.rows[arrived])}: there, patching "
                   f"{_cell(patching, at)} {verb} {grid.values[arrived, at]:.2f}, patching "
                   f"{_cell(patching, before)} {grid.values[arrived, before]:.2f}.")
    return out


def block_sentences(patching: Patching, grid: Grid) -> list[str]:
    values = grid.values if grid.direction == "denoise" else 1 - grid.values
    row, col = np.unravel_index(np.argmax(values), values.shape)
    block = "attention block" if grid.kind == "attn" else "feed-forward block"
    verb = "restores" if grid.direction == "denoise" else "takes away"
    return [f"The {block} that matters most is {grid.rows[row]}'s at {_cell(patching, int(col))}: patching it "
            f"{verb} {values[row, col]:.2f} of the difference; the next largest cell is {np.sort(values.ravel())[-2]:.2f}."]


def head_sentences(patching: Patching, grid: Grid) -> list[str]:
    values = grid.values if grid.direction == "denoise" else 1 - grid.values
    row, col = np.unravel_index(np.argmax(values), values.shape)
    many = int((values > 0.1).sum())
    verb = "restores" if grid.direction == "denoise" else "takes away"
    return [f"Head {row + 1}.{col + 1} matters most: patching its output alone {verb} {values[row, col]:.2f} of the "
            f"difference. {many} of {values.size} heads move it by more than 0.1."]


def qkv_sentences(patching: Patching, grid: Grid) -> list[str]:
    values = grid.values if grid.direction == "denoise" else 1 - grid.values
    layer, head = grid.head
    out = []
    for i, name in enumerate(grid.rows):
        t = int(np.argmax(values[i]))
        out.append(f"{name}: {_cell(patching, t)}, {values[i, t]:.2f}")
    return [f"Head {layer + 1}.{head + 1}: the position whose vector matters most, for each of " + "; ".join(out) + "."]


def sentences(patching: Patching, grid: Grid) -> list[str]:
    """What `grid` says, in sentences written from its numbers."""
    return {"resid": resid_sentences, "attn": block_sentences, "mlp": block_sentences, "heads": head_sentences,
            "qkv": qkv_sentences}[grid.kind](patching, grid)


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def checks(patching: Patching, resid: Grid) -> list[Check]:
    """The checks a page shows beside the residual grid, each able to fail."""
    out = []
    tol = tolerance(patching)
    off = resid.checks
    source = resid.expected_whole
    out.append(Check("every position patched at a depth gives the source run's score", off["whole"] <= tol,
                     f"{source:.3f} expected at every depth; the farthest is off by {off['whole']:.1e} "
                     f"(allowed {tol:.1e})"))
    out.append(Check("nothing patched gives the target run's score", off["nothing"] <= tol,
                     f"{1 - source:.3f} expected; off by {off['nothing']:.1e}"))
    if patching.guesses is not None:
        traced = patching.traced
        for label, guess, rec, name in (("clean", patching.guesses[0], traced.clean, patching.tops[0]),
                                        ("corrupted", patching.guesses[1], traced.corrupt, patching.tops[1])):
            top = guess.masks[0].candidates[0]
            here = int(rec.top[0])
            shown = next((c.prob for c in guess.masks[0].candidates if c.token == patching.answer), None)
            ok = here == top.id and (shown is None or abs(shown - float(rec.p[0])) <= 1e-5)
            detail = f"top guess '{name}' here, '{top.token}' on Mask & predict"
            if shown is not None:
                detail += f"; p({patching.answer}) = {float(rec.p[0]):.6f} here, {shown:.6f} there"
            out.append(Check(f"the {label} run reads as Mask & predict reads it", ok, detail))
    return out


def rows(patching: Patching, grid: Grid) -> list[dict]:
    """One row per cell, for a CSV file: where, what was patched, the normalised score and F."""
    columns = patching.tokens if grid.kind != "heads" else [f"head {h + 1}" for h in range(grid.values.shape[1])]
    return [{"grid": grid.kind, "direction": grid.direction, "row": name,
             "column": columns[j], "column_index": j,
             "score": float(grid.values[i, j]), "F": float(grid.f[i, j])}
            for i, name in enumerate(grid.rows) for j in range(grid.values.shape[1])]
