"""The Lesson's step after "which word mattered": where is number agreement decided?

One built-in minimal pair (corpus/minimal_pairs.py's agreement pair with one attractor: "the children in the park
[MASK] happy ." / "the child in the park [MASK] happy .") run twice, and the residual stream patched clean into
corrupted (views/patching/runs.py, denoising): each cell, one layer's vector at one position put back alone, says
which share of logit(answer) - logit(foil) it brings back. The class guesses the depth from which the [MASK]'s own
vector brings back more than any other position's: where the [MASK] has got the subject's number. The answer is read
off the grid of the active model, by the rule views/patching/reading.py's sentences use, so the verdict and the
sentences under the grid always agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus.minimal_pairs import by_key
from bertviz_lab.views.lesson.questions import NEAR, Question, Quiz, needs
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.timelapse.answer import readable

PAIR = "agreement-1"  # number agreement across one attractor: the subject's number has a noun to get past


@dataclass(frozen=True)
class AnswerPath:
    """The residual grid of one pair, denoising, as plain numbers (the Lesson caches and keeps it)."""

    values: np.ndarray  # (D, T) normalised: 0 the corrupted run's score, 1 the clean run's; D = embeddings + layers
    f: np.ndarray  # (D, T) the raw score of each cell, logit(answer) - logit(foil)
    rows: list[str]  # "embeddings", "layer 1", ...
    tokens: list[str]  # the clean sentence's tokens
    position: int  # the [MASK]
    clean: str
    corrupt: str
    answer: str
    foil: str
    metric: str  # "logit(were) - logit(was)"
    sentences: list[str]  # views/patching/reading.py's, written from this grid


def depth(row: str) -> str:
    """How the options name a depth: "the embeddings", "layer 2"."""
    return "the embeddings" if row == "embeddings" else row


def arrival(values: np.ndarray, position: int) -> int | None:
    """The first depth whose largest cell is at `position` (reading.resid_sentences' rule); None if none is."""
    best = values.argmax(1)
    return next((d for d in range(len(best)) if best[d] == position), None)


def answer_path(model: BertForPreTraining, tokenizer: WordPieceTokenizer, key: str = PAIR) -> tuple[Quiz, AnswerPath]:
    """The pair's residual grid on the active model and the quiz read off it; an InputError sentence for a model
    that cannot read the pair (a word split in two, the same score twice, to within rounding) and a MissingHead without an MLM head."""
    needs(model, "mlm")
    pair = by_key(key)
    patching = vpa.prepare(model, tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer, foil=pair.foil))
    readable(patching)
    grid = vpa.grid(patching, "resid", "denoise")
    found = AnswerPath(grid.values, grid.f, list(grid.rows), patching.tokens, patching.position, pair.clean,
                       pair.corrupt, patching.answer, patching.foil, patching.metric,
                       vpa_read.sentences(patching, grid))
    return quiz(found), found


def quiz(found: AnswerPath) -> Quiz:
    """The depth from which the [MASK]'s vector matters most; an earlier depth where it is within NEAR of the
    row's best (a near tie) counts too. Not scored when no depth has the [MASK] first."""
    labels = tuple(depth(r) for r in found.rows)
    mask = found.tokens[found.position]
    question = Question(f"“{found.clean}” against “{found.corrupt}”: from which layer on does the {mask}'s own "
                        f"vector, put back alone, bring back more of {found.metric} than any other position's?", labels)
    values, at = found.values, found.position
    first = arrival(values, at)
    if first is None:
        return Quiz(question, "at no depth", f"At no depth does the {mask}'s vector bring back the most.",
                    scored=False, unclear="The [MASK] never leads")
    why = f"At {labels[first]}, the {mask}'s vector put back alone brings back {values[first, at]:.2f} of the difference"
    others = np.delete(values[first], at)
    why += f", more than any other position's (the next best: {others.max():.2f})." if len(others) else "."
    if first > 0:
        before = int(values[first - 1].argmax())
        why += (f" At {labels[first - 1]} the most came from “{found.tokens[before]}” "
                f"({values[first - 1, before]:.2f}; the {mask}'s: {values[first - 1, at]:.2f}).")
    also = tuple(labels[d] for d in range(first) if values[d].max() - values[d, at] < NEAR)
    if also:
        why += " Within " + f"{NEAR:.2f} of the best there, so right too: " + ", ".join(also) + "."
    return Quiz(question, labels[first], why, also=also)
