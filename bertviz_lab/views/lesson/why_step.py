"""The Lesson's step after the guess at the mask: which word mattered most for this guess?

Two answers from the model's own numbers (the two of views/why/explanation.py's nine that the class can read off at once):
occlusion, what hiding each word alone under the mask does to the guess's score (its logit), and attention, where
the last layer looked from the mask (mean over heads). The class's guess is scored against occlusion, the question
asked ("hiding which one lowers the score most?"); the step says whether attention pointed at the same word, and where each ranks the other's word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.explain import methods
from bertviz_lab.explain.report import case_for
from bertviz_lab.explain.score import Score
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.lesson.questions import NEAR, Question, Quiz, first_mask, needs, token_options
from bertviz_lab.views.lesson.vector_steps import shown


@dataclass(frozen=True)
class Mattered:
    """Per removable word (in sentence order): its label, what hiding it does to the score, its attention."""

    labels: list[str]  # as the class picks them (views.lesson.questions.token_options)
    drop: np.ndarray  # (W,) occlusion: F(x) - F(x with the word masked); F the top guess's logit
    weight: np.ndarray  # (W,) last-layer attention from the mask, mean over heads
    guess: str  # the top guess explained
    mask: str  # the model's mask token

    @property
    def occluded(self) -> str:  # the first of equal values, as views.why.explanation.strongest takes it
        return self.labels[int(np.argmax(self.drop))]

    @property
    def attended(self) -> str:
        return self.labels[int(np.argmax(self.weight))]


def mattered(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding) -> Mattered:
    """Occlusion and last-layer attention for the top guess at the first mask, over the words that can be hidden
    (every token but the framing ones and the mask itself)."""
    needs(model, "mlm")
    position = first_mask(encoding, tokenizer)
    top = vpr.predict_at(model, tokenizer, encoding, [position], vpr.ReadOptions(1)).masks[0].candidates[0]
    case = case_for(model, tokenizer, encoding, Score(position, top.id, None, tokenizer.vocab_size))
    words = np.flatnonzero(case.removable)
    if not len(words):
        raise vpr.NothingMasked(f"the sentence has no word besides {tokenizer.mask_token}: type a sentence "
                                    "around it")
    drop = methods.occlusion(case)
    weight = methods.attention(methods.weights(methods.trace(case)), position)
    labels = token_options([shown(t) for t in encoding.tokens])
    return Mattered([labels[i] for i in words], drop[words], weight[words], shown(top.token),
                    tokenizer.mask_token)


def _rank(values: np.ndarray, label: str, labels: list[str]) -> int:
    """1 for the largest value; ties share the better rank."""
    return int((values > values[labels.index(label)]).sum()) + 1


def quiz(found: Mattered) -> Quiz:
    """The class guesses the word whose hiding lowers the score most; a word within NEAR of the top drop's size
    (a near tie) counts too. The answer says what attention picked and whether the two agree."""
    drop, labels = found.drop, found.labels
    best, attended = found.occluded, found.attended
    top = float(drop.max())
    also = tuple(o for o, d in zip(labels, drop) if o != best and top - d < NEAR * abs(top))
    question = Question(f"BERT's top guess at {found.mask} is “{found.guess}”. Which word mattered most for this "
                        f"guess: hiding which one under {found.mask} lowers the guess's score most?", tuple(labels))
    lowers = (f"hiding “{best}” lowers the score of “{found.guess}” (its logit) by {top:.3f}, the most of the "
              f"{len(labels)} words" if top > 0 else
              f"hiding no word lowers the score of “{found.guess}”; hiding “{best}” raises it least ({top:+.3f})")
    why = f"Occlusion: {lowers}."
    if also:
        why += (f" Within {NEAR:.0%} of that: " + ", ".join(f"“{o}” ({drop[labels.index(o)]:.3f})" for o in also)
                + ", so it counts as right too.")
    weight = found.weight[labels.index(attended)]
    looked = f"The most-attended word (last layer, mean over heads) is “{attended}”, with weight {weight:.3f}"
    if attended == best:
        why += f" {looked}: attention and occlusion agree."
    else:
        why += (f" {looked}: they disagree. Occlusion ranks “{attended}” {_rank(drop, attended, labels)} of "
                f"{len(labels)} (hiding it changes the score by {drop[labels.index(attended)]:+.3f}); attention "
                f"ranks “{best}” {_rank(found.weight, best, labels)} of {len(labels)} (weight "
                f"{found.weight[labels.index(best)]:.3f}). On this sentence, the word the last layer looked at most "
                "is not the one whose hiding alone lowers the score most.")
    return Quiz(question, best, why, also=also)


def word_that_mattered(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
                       encoding: Encoding) -> tuple[Quiz, Mattered]:
    found = mattered(model, tokenizer, encoding)
    return quiz(found), found
