"""Where the answer is made, as it learned: one minimal pair's residual grid at each checkpoint a run kept.

At a kept checkpoint the pair (corpus/minimal_pairs.py; number agreement across one attractor by default) is run
clean and corrupted, and the residual stream patched clean into corrupted (views/patching/runs.py, denoising): each
cell says which share of logit(answer) - logit(foil) one layer's vector at one position brings back. Played in step
order, the grids show where the answer is made move as the model learns. A checkpoint where the pair cannot be
patched (an untrained model may give both runs the same score, to within rounding, or a tokenizer may split a
word) gets the sentence that says why, in place of its grid. On the shipped model's shape one checkpoint takes about 0.05 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus.minimal_pairs import MinimalPair
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk

PAIR = "agreement-1"  # corpus/minimal_pairs.py's key: the subject's number has one noun of the other number to pass
# A grid is noise when float rounding alone may move a cell this far (views/patching/runs.py's `tolerance`, a
# generous bound, in the grid's own units): a barely trained model can give both runs scores millionths apart.
ROUNDING_MAX = 0.1


@dataclass(frozen=True)
class AnswerAt:
    """One checkpoint's residual grid of the pair (denoising), or `note`: why the pair cannot be patched there."""

    values: np.ndarray | None = None  # (D, T) normalised: 0 the corrupted run's score, 1 the clean run's
    f: np.ndarray | None = None  # (D, T) the raw score of each cell
    rows: list[str] = field(default_factory=list)  # "embeddings", "layer 1", ...
    tokens: list[str] = field(default_factory=list)  # the clean sentence's tokens
    metric: str = ""  # "logit(were) - logit(was)"
    sentences: list[str] = field(default_factory=list)  # views/patching/reading.py's, from this grid
    note: str = ""  # the InputError's sentence, when there is no grid


def sentence(exc: InputError) -> str:
    """An InputError's message as a sentence: a capital first, a full stop last."""
    text = str(exc).strip()
    return text[:1].upper() + text[1:] + ("" if text[-1:] in ".?!”" else ".")


def readable(patching: vpa.Patching) -> None:
    """An InputError when the two runs' scores are too close for the grid to be more than rounding."""
    if vpa.tolerance(patching) > ROUNDING_MAX:
        raise InputError(f"the two runs give nearly the same score ({patching.f_clean:.6g} and "
                         f"{patching.f_corrupt:.6g}): float rounding alone could move every cell of the grid, so "
                         "there is nothing to read here")


def answer_at(model: BertForPreTraining, tokenizer: WordPieceTokenizer, pair: MinimalPair) -> AnswerAt:
    """The pair's residual grid on this checkpoint's model, or the sentence saying why there is none."""
    try:
        patching = vpa.prepare(model, tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer,
                                                          foil=pair.foil))
        readable(patching)
    except InputError as exc:
        return AnswerAt(note=sentence(exc))
    grid = vpa.grid(patching, "resid", "denoise")
    return AnswerAt(grid.values, grid.f, list(grid.rows), patching.tokens, patching.metric,
                    vpa_read.sentences(patching, grid))


def kept_at(checkpoints: tuple[tuple[int, Path], ...], step: int) -> tuple[int, Path] | None:
    """The last kept checkpoint (step, folder) at or before `step`; None when every one is later (or none kept)."""
    earlier = [(s, folder) for s, folder in checkpoints if s <= step]
    return max(earlier, key=lambda kept: kept[0]) if earlier else None
