"""The lesson's two head steps: which head puts the most weight on the previous token ("heads"), and which key one
head's query weighs most ("softmax"), with the head that step starts on.

One sentence is not evidence of a head's job, so both steps measure it elsewhere too. "heads" asks about the
sentence on screen, then gives the winning head's score on other sentences (`previous_elsewhere`); when no head
puts even twice what attention spread evenly would give on the previous token, it says no head clearly does it
and does not score. "softmax" starts on a head chosen for following pronouns to their nouns, and a choice is only
as good as its test: the head is chosen on sentences other than the one the class sees (`pronoun_heads`), and
its weight is then measured on sentences that had no say in the choice, so the class reads how well it does
that job elsewhere, beside the one example on screen.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus.probes import PROBES, ProbeSentence
from bertviz_lab.errors import InputError
from bertviz_lab.head_id import HeadId
from bertviz_lab.pretrain import head_roles
from bertviz_lab.pretrain.head_roles import CLEAR
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.lesson.questions import Question, Quiz, ranked, token_options

ROLE = "pronoun_referent"
# More sentences with a pronoun and the noun it stands for, written like the probe set's in the story world's
# words (each is in the shipped model's vocabulary: a test checks): (text, the pronoun's word, the noun's word).
# In the first ten the noun is the subject, word 1; in the last six it is not the first noun, and gender or
# animacy leaves one reading. Those come in adjacent pairs, so that the alternate split of `pronoun_heads` puts
# one of each pair on each side and both the choice and the held-out score read more than one construction.
MORE_PRONOUNS = (
    ("the dog did not cross the road because it was too scared .", 8, 1),
    ("the horse did not cross the bridge because it was too old .", 8, 1),
    ("the boy did not cross the street because he was too sleepy .", 8, 1),
    ("the man wore a hat because he was cold .", 6, 1),
    ("the woman read a letter because she was bored .", 6, 1),
    ("the girl wore a coat because she was cold .", 6, 1),
    ("the cat was hungry and it ate the fish .", 5, 1),
    ("the king was happy and he ate the cake .", 5, 1),
    ("the teacher was tired and she sat on the bench .", 5, 1),
    ("the fox was hungry and it ate the bread .", 5, 1),
    ("the boy helped the girl because she was sad .", 6, 4),
    ("the girl hugged the boy because he was scared .", 6, 4),
    ("the woman fed the dog because it was hungry .", 6, 4),
    ("the man gave the horse an apple because it was hungry .", 8, 4),
    ("the boy gave the book to the girl because she was tired .", 9, 7),
    ("the queen followed the man because he was kind .", 6, 4),
)
PRONOUN_SENTENCES = (*(p for p in PROBES if ROLE in p.links),
                     *(ProbeSentence(text, 0, {ROLE: ((pronoun, noun),)}) for text, pronoun, noun in MORE_PRONOUNS))
NOT_AN_EXPLANATION = ("A weight shows where a head looks, not what the model does with what it finds there: "
                      "whether a head explains a guess takes a test that changes the input, or switches the head "
                      "off, and watches the guess.")


# --- Attention heads ------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreviousElsewhere:
    """Each head's previous-token score on sentences other than the one shown (the probe set and the pronoun
    sentences): how one sentence's winner does that job elsewhere."""
    sentences: int
    scores: np.ndarray  # (L, H): each head's previous-token score, mean over the sentences
    even: float  # the weight attention spread evenly gives the previous token (1/T), mean over the sentences

    def note(self, name: str) -> str:
        shown = HeadId.parse(name)
        top = np.unravel_index(int(np.argmax(self.scores)), self.scores.shape)
        best = str(HeadId(*top))
        where = ("it is also the head that does it most there" if best == name else
                 f"the head that does it most there is {best} ({self.scores[top]:.1%})")
        return (f"On {self.sentences} other sentences, from the probe set and the pronoun sentences (this one left "
                f"out), {name} gives the previous token {self.scores[shown.layer, shown.head]:.1%} of each word's "
                f"attention on average, where even attention gives {self.even:.1%}; {where}.")


def other_sentences(example: str) -> tuple[str, ...]:
    """The probe set's and the pronoun sentences' texts, each once, less the example."""
    texts = dict.fromkeys(p.text for p in (*PROBES, *PRONOUN_SENTENCES))
    return tuple(t for t in texts if words(t) != words(example))


def previous_elsewhere(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
                       example: str) -> PreviousElsewhere | None:
    """Every head's previous-token score on the other sentences this model can read; None when none is left."""
    encodings = []
    for text in other_sentences(example):
        try:
            encodings.append(head_roles.encode(tokenizer, model.config.max_tokens, text))
        except InputError:  # longer than this model reads
            continue
    if not encodings:
        return None
    weights = head_roles.attention(model, encodings)
    scores = [head_roles.positional(w, e.sequence_ids)["previous"] for w, e in zip(weights, encodings)]  # N x (L, H)
    return PreviousElsewhere(len(encodings), np.mean(scores, axis=0), float(np.mean([1 / len(e) for e in encodings])))


def previous_token(view: av.AttentionView, elsewhere: PreviousElsewhere | None = None) -> tuple[Quiz, pd.DataFrame]:
    """On this sentence, which head gives the most of each word's attention to the token just before it
    (head_roles.positional)? Under CLEAR times even attention (1/T) no head clearly does it: the step says so and is not
    scored. `elsewhere`: the winner's score on other sentences, said beside it."""
    scores = head_roles.positional(view.weights, view.sequence_ids)["previous"]  # (L, H)
    names = av.head_names(view.num_layers, view.num_heads)
    table = pd.DataFrame({"head": names, "score": scores.reshape(-1)}).sort_values("score", ascending=False)
    best, second = table.iloc[0], table.iloc[min(1, len(table) - 1)]
    T = len(view.tokens)
    question = Question("On this sentence, which head puts the most weight on the previous token?", tuple(names))
    why = (f"{best['head']} gives {best['score']:.1%} of each word's attention, on average, to the token just before "
           f"it; the next best head, {second['head']}, gives {second['score']:.1%}. Attention spread evenly over the "
           f"{T} tokens would give 1/{T} = {1 / T:.1%}.")
    if best["score"] < CLEAR / T:
        quiz = Quiz(question, best["head"], f"{why} Not even {CLEAR} times that: no head clearly looks at the "
                                            "previous token on this sentence, so the step is not scored.",
                    scored=False, unclear="No head clearly does it")
    else:
        quiz = ranked(question, dict(zip(table["head"], table["score"].astype(float))), why)
    if elsewhere is not None:  # one sentence is not evidence: the same head on others
        quiz = dataclasses.replace(quiz, why=f"{quiz.why} {elsewhere.note(best['head'])}")
    return quiz, table.reset_index(drop=True)


# --- The softmax steps: the head it starts on, then the question ----------------------------------
@dataclass(frozen=True)
class PronounHeads:
    """Each head's weight from a pronoun to the noun it stands for, on sentences other than the example: the
    head is chosen on some (`chosen_on`) and measured on the rest (`held_out`), which had no say in the choice."""
    chosen_on: tuple[str, ...]
    held_out: tuple[str, ...]
    choosing: np.ndarray  # (L, H): the mean pronoun -> noun weight over chosen_on
    scores: np.ndarray  # (N, L, H): each held-out sentence's pronoun -> noun weight
    even: float  # the weight attention spread evenly over a held-out sentence gives the noun, on average

    @property
    def chosen(self) -> tuple[int, int]:
        """(layer, head) with the largest mean weight on `chosen_on`."""
        layer, head = np.unravel_index(int(np.argmax(self.choosing)), self.choosing.shape)
        return int(layer), int(head)

    @property
    def best(self) -> str:
        """The chosen head as the head picker names it: 'L2 H1'."""
        return str(HeadId(*self.chosen))

    def note(self, layer: int, head: int) -> str:
        """What the class reads beside the example: how the head was chosen and how it does on held-out sentences."""
        held = self.scores[:, layer, head]
        here = "it" if (layer, head) == self.chosen else f"{HeadId(layer, head)}, the head shown here,"
        return (f"On {len(self.chosen_on)} sentences other than this one, {self.best} is the head in which a pronoun "
                f"gives the noun it stands for the most attention ({self.choosing[self.chosen]:.2f} on average). On "
                f"{len(self.held_out)} held-out sentences, which had no say in that choice, {here} gives the noun "
                f"{held.mean():.2f} of the pronoun's attention on average (from {held.min():.2f} to "
                f"{held.max():.2f}); attention spread evenly would give about {self.even:.2f}. {NOT_AN_EXPLANATION}")


def words(text: str) -> str:
    """A sentence as a comparable string of words: lower case, punctuation split off, single spaces."""
    return " ".join(re.findall(r"\w+|[^\w\s]", text.lower()))


def pronoun_heads(model: BertForPreTraining, tokenizer: WordPieceTokenizer, example: str) -> PronounHeads | None:
    """Every head's pronoun -> noun weight on PRONOUN_SENTENCES less the example (and less any longer than this
    model reads): chosen on every other one, measured on the rest. None when fewer than two are left."""
    pool, encodings = [], []
    for sentence in PRONOUN_SENTENCES:
        if words(sentence.text) == words(example):
            continue
        try:
            encodings.append(head_roles.encode(tokenizer, model.config.max_tokens, sentence.text))
        except InputError:  # longer than this model reads
            continue
        pool.append(sentence)
    if len(pool) < 2:
        return None
    weights = head_roles.attention(model, encodings)
    per_sentence = np.stack([head_roles.linked(w, e, p)[ROLE] for w, e, p in zip(weights, encodings, pool)])  # (N, L, H)
    even = [sum(w == p.links[ROLE][0][1] for w in e.word_ids) / len(e.ids) for e, p in zip(encodings, pool)]
    return PronounHeads(tuple(p.text for p in pool[0::2]), tuple(p.text for p in pool[1::2]),
                        per_sentence[0::2].mean(axis=0), per_sentence[1::2], float(np.mean(even[1::2])))


def strongest_key(view: av.AttentionView, layer: int, head: int, query: int) -> tuple[Quiz, pd.DataFrame]:
    """Which key the query gives the largest weight in one head, with its softmax step table."""
    steps = av.softmax_steps(view, layer, head, query)
    options = token_options(view.tokens)
    best = av.strongest_key(view, layer, head, query)
    row = steps.iloc[best]
    return (ranked(Question(f"In head {HeadId(layer, head)}, which token gets the largest weight from "
                            f"“{view.tokens[query]}”?", tuple(options)),
                   dict(zip(options, steps[av.WEIGHT].astype(float))),
                   f"“{view.tokens[best]}” has the largest score, q·k = {row[av.DOT]:.3f} divided by "
                   f"{math.sqrt(view.head_dim):g} = {row[av.MASKED]:.4f}, so the largest exp: {row[av.EXP]:.4f} "
                   f"(after subtracting the largest score). The exps of all keys add up to {row[av.SUM]:.4f}, so "
                   f"its weight is {row[av.EXP]:.4f} / {row[av.SUM]:.4f} = {row[av.WEIGHT]:.4f}."),
            steps)


def steps_table(steps: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The softmax steps as few columns as tell them (key, q·k, the score, exp, weight), so the table fits a
    projector's width; the mask column only where it masks a key, Σ exp (one number) in the note beside it."""
    score = next(c for c in steps.columns if c.startswith("÷"))
    masked = bool((steps[av.MASK] != 0).any())
    columns = [av.KEY, av.DOT, score, *([av.MASKED] if masked else []), av.EXP, av.WEIGHT]
    table = steps[columns].rename(columns={score: "score", av.MASKED: "masked", av.EXP: "exp", av.WEIGHT: "weight"})
    note = (f"score = q·k ÷ {score[1:].removesuffix(' = score')}; exp is taken after subtracting the largest score (the weights stay the same); the exps add up to "
            f"Σ exp = {steps[av.SUM].iloc[0]:.4f}, and each weight is its exp ÷ Σ exp."
            + ("" if masked else " No key is masked here, so the mask adds 0 to every score."))
    return table, note
