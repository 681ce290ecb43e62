"""The guided lesson's quiz and its first steps' numbers: a question, the model's own answer to it, and what the
step draws, all computed live from the active model on the lesson's sentences.

A step's function returns a `Quiz` (the question, the model's answer, the numbers behind that answer) and
a plain record for the step's chart or table. Nothing is hard-coded: the options come from the model and
the sentence (its top guesses shuffled with a seeded RNG, its heads, the sentence's tokens) and the answer
is read off the same numbers, in the run where the class presses Reveal. An answer that is the largest of
several numbers (`ranked`) counts a runner-up within NEAR of it too, and a question the model cannot
answer clearly is not scored. Here: the quiz itself and the steps "tokens", "guess", "loss" and "nsp"; which
function each step asks, and where it lives, is the list of steps (views/lesson/steps.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import re
from dataclasses import dataclass

import pandas as pd
import torch

from bertviz_lab.bert import losses
from bertviz_lab.bert.family import FAMILIES
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import MASK, Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.losses import walkthrough

SEED = 16  # shuffles the options: the same order for every student, every time
# A runner-up this close to the best answer is a near tie. The steps that rank read cosines (-1 to 1), attention
# weights or probabilities (0 to 1): on those scales two hundredths is less than a class can tell apart on a bar.
NEAR = 0.02
LOSS_EDGES = (0.5, 2.0, 5.0)  # the loss bands' edges; each band says its p(true word) = e^−loss too


def _loss_band(low: float, high: float) -> str:
    """'0.5 to 2: p from 0.14 to 0.61': a band of the loss and the probabilities it means (p = e^−loss)."""
    def p(loss: float) -> str:
        return f"{math.exp(-loss):.2g}"
    if low == 0:
        return f"below {high:g}: p above {p(high)}"
    if high == math.inf:
        return f"above {low:g}: p below {p(low)}"
    return f"{low:g} to {high:g}: p from {p(high)} to {p(low)}"


LOSS_BANDS = tuple((high, _loss_band(low, high))
                   for low, high in zip((0.0, *LOSS_EDGES), (*LOSS_EDGES, math.inf)))


@dataclass(frozen=True)
class Question:
    prompt: str
    options: tuple[str, ...] = ()  # what the class picks from; () asks for a whole number


@dataclass(frozen=True)
class Quiz:
    question: Question
    answer: str | int  # the model's answer: one of the options, or the number
    why: str  # the model's numbers behind the answer, in one or two plain sentences
    also: tuple = ()  # options as good as the answer within the step's margin (a near tie): right too
    scored: bool = True  # False: the model gives no clear answer here, so the step says so and does not score
    unclear: str = "Too close to call"  # what an unscored step's verdict says first: why there is no clear answer

    def is_right(self, guess) -> bool:
        return guess is not None and (guess == self.answer or guess in self.also)


@dataclass(frozen=True)
class Answered:
    """A revealed step: what it was computed for (model and sentences), the class's guess, the model's quiz."""
    basis: tuple
    guess: str | int
    quiz: Quiz

    @property
    def right(self) -> bool:
        return self.quiz.scored and self.quiz.is_right(self.guess)


def score(answered: dict[str, Answered]) -> str:
    """'2 of 3 right so far': the scored steps only; a step with no clear answer is named, not counted."""
    if not answered:
        return "no answers revealed yet"
    scored = [a for a in answered.values() if a.quiz.scored]
    unscored = len(answered) - len(scored)
    note = f" ({unscored} with no clear answer, not scored)" if unscored else ""
    return f"{sum(a.right for a in scored)} of {len(scored)} right so far{note}"


def ranked(question: Question, values: dict[str, float], why: str) -> Quiz:
    """The option with the largest value is the answer. A runner-up within NEAR of it is a near tie, and counts
    as right too; when more options come that close, or both of a two-way question do, the model has no clear
    answer: the step says so and is not scored. `values` holds each option's number (options left out rank
    below every one given)."""
    order = sorted(values, key=lambda option: values[option], reverse=True)
    best = order[0]
    near = tuple(o for o in order[1:] if values[best] - values[o] < NEAR)
    if not near:
        return Quiz(question, best, why)
    gaps = ", ".join(f"“{o}” {values[best] - values[o]:.3f} below" for o in near[:3])
    if len(near) > 3:
        gaps += f" and {len(near) - 3} more"
    if len(near) == 1 and len(question.options) > 2:
        return Quiz(question, best, f"{why} A near tie: {gaps} (the margin is {NEAR}), so it counts as right too.",
                    also=near)
    return Quiz(question, best, f"{why} Too close to call: {gaps} it, within the margin of {NEAR}; on this model "
                                "the question has no clear answer, so it is not scored.", also=near, scored=False)


def shuffled(options: list[str], salt: str) -> tuple[str, ...]:
    """The options in an order fixed by SEED and `salt` (the sentence), so no position gives the answer away."""
    order = list(options)
    random.Random(f"{SEED}:{salt}").shuffle(order)
    return tuple(order)


def token_options(tokens: list[str]) -> list[str]:
    """One label per token: the token itself, with its position where the same token comes more than once."""
    return [t if tokens.count(t) == 1 else f"{t} ({i})" for i, t in enumerate(tokens)]


class MissingHead(InputError):
    """The step needs a head the active model lacks (an MLM or NSP head): a note, not a mistake."""


def needs(model: BertForPreTraining, head: str) -> None:
    """A MissingHead naming the missing head ("mlm" or "nsp") and why this model lacks it."""
    has = model.has_mlm if head == "mlm" else model.has_nsp
    if not has:
        what = "a masked-language-model (MLM) head" if head == "mlm" else "a next-sentence (NSP) head"
        why = FAMILIES[model.config.family].lacks or "it was saved without one"
        raise MissingHead(f"This step needs {what}, and the active model has none ({why.rstrip('.')}). "
                         "Pick a pretrained BERT in the sidebar, or go on to the next step.")


# --- Tokens ---------------------------------------------------------------------------------------
def token_rows(encoding: Encoding) -> pd.DataFrame:
    return pd.DataFrame({"position": range(len(encoding.ids)), "token": encoding.tokens, "id": encoding.ids,
                         "segment": encoding.segment_ids})


def framing_note(tokenizer: WordPieceTokenizer) -> str:
    """The sentence under the tokens step's paragraph (Markdown): this model's framing of a pair, read off a real encode of
    one (`views.losses.walkthrough.framing`), and its blank."""
    frame = " ".join(part if part in ("A", "B") else f"`{part}`" for part in walkthrough.framing(tokenizer).split(" "))
    typed = (f" (typing {MASK} works too)" if tokenizer.mask_token != MASK
             and tokenizer.mask_id in tokenizer.encode(f"a {MASK} .").ids else "")
    return (f"This model's tokenizer frames two sentences A and B as {frame}, and writes the blank "
            f"`{tokenizer.mask_token}`{typed}.")


def tokens(encoding: Encoding) -> Quiz:
    n, special = len(encoding.ids), sum(s is None for s in encoding.sequence_ids)
    return Quiz(Question("How many tokens will BERT read for this sentence? Count every token it sees."), n,
                f"The tokenizer made {n} tokens: {' '.join(encoding.tokens)}. That is {n - special} from the "
                f"text and {special} special ones that frame it.")


# --- The guess at [MASK], the MLM loss ---------------------------------------------------------------
def first_mask(encoding: Encoding, tokenizer: WordPieceTokenizer) -> int:
    positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
    if not positions:
        raise vpr.NothingMasked("the sentence has no [MASK]: write [MASK] where BERT should guess a word, "
                                    "as in “the cat sat on the [MASK] .”")
    return positions[0]


def mask_guess(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
               encoding: Encoding) -> tuple[Quiz, vpr.MaskPrediction]:
    """BERT's top five guesses at the first [MASK], shuffled (its fifth below the four it ranks); the answer is its
    top-1."""
    needs(model, "mlm")
    position = first_mask(encoding, tokenizer)
    read = vpr.predict_at(model, tokenizer, encoding, [position], vpr.ReadOptions(top_k=min(
        10, tokenizer.vocab_size)))
    mask = read.masks[0]
    top = [c.token for c in mask.candidates[:4]]
    decoys = [c.token for c in mask.candidates[4:]]  # its fifth guess: the same kind as the four, never a giveaway
    best = mask.candidates[0]
    return (ranked(Question(f"Which word will BERT put at [MASK] (position {position})?",
                            shuffled(top + decoys[:1], " ".join(encoding.tokens))),
                   {c.token: c.prob for c in mask.candidates[:4]},  # the decoy ranks below all four
                   f"Its top guess is “{best.token}” with probability {best.prob:.3f}; then "
                   + ", ".join(f"“{c.token}” {c.prob:.3f}" for c in mask.candidates[1:4]) + "."),
            mask)


def word_at_mask(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text: str, word: str) -> int:
    """The id of `word` as the tokenizer reads it in the sentence in place of the first [MASK] (so a byte-level
    BPE reads it with its space); an InputError unless it is exactly one token there."""
    word = word.strip()
    if not word:
        raise InputError("type the word that was hidden under [MASK]")
    masked = inputs.encode(tokenizer, model, text, allow_truncation=False)
    position = first_mask(masked, tokenizer)
    typed = re.compile(r"\[mask\]|" + re.escape(tokenizer.mask_token), re.IGNORECASE)
    filled = inputs.encode(tokenizer, model, typed.sub(lambda _: word, text, count=1), allow_truncation=False)
    n = len(filled.ids) - len(masked.ids) + 1  # the tokens the word takes where [MASK] was
    if n != 1 or filled.ids[position] in tokenizer.special_ids:
        pieces = " ".join(filled.tokens[position:position + max(n, 0)]) or "nothing"
        raise InputError(f"this model reads “{word}” there as {max(n, 0)} tokens ({pieces}); the loss at one "
                         "[MASK] needs a word that is one token")
    return filled.ids[position]


def mask_loss(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text: str,
              true_word: str) -> tuple[Quiz, losses.MaskedPrediction]:
    """The MLM loss at the first [MASK] of `text` if the hidden word was `true_word`: −log p(true word)."""
    needs(model, "mlm")
    encoding = inputs.encode(tokenizer, model, text, allow_truncation=False)
    position = first_mask(encoding, tokenizer)
    true_id = word_at_mask(model, tokenizer, text, true_word)
    out = inputs.run(model, encoding, masked_positions=[position])
    logits = out.mlm_logits[:, :tokenizer.vocab_size].float()  # (1, V)
    _, record = losses.mlm_loss(logits, torch.tensor([true_id]), top_k=min(5, tokenizer.vocab_size),
                                id_to_token=tokenizer.id_to_token)
    m = dataclasses.replace(record.predictions[0], position=position)  # row 0 of the sparse logits
    band = next(label for edge, label in LOSS_BANDS if m.neg_log_p < edge)
    chance = math.log(tokenizer.vocab_size)
    return (Quiz(Question(f"If the hidden word was “{m.true_token}”, how large is BERT's loss at the mask, "
                          "−log p(true word)? (Each band gives its p too: p = e^−loss.)",
                          tuple(label for _, label in LOSS_BANDS)), band,
                 f"p(“{m.true_token}”) = {m.p_true:.4f} (rank {m.rank}), so the loss is −log {m.p_true:.4f} = "
                 f"{m.neg_log_p:.3f}. A uniform guess over the {tokenizer.vocab_size:,} tokens would cost "
                 f"ln {tokenizer.vocab_size:,} = {chance:.2f}."),
            m)


def loss_panel(m: losses.MaskedPrediction) -> dict:
    """The mask's top guesses and the true word, as `figures.losses.topk_grid` draws one panel."""
    return {"title": f"[MASK] at position {m.position}: the true word “{m.true_token}”",
            "tokens": m.top_tokens, "probs": m.top_probs,
            "true_token": m.true_token, "p_true": m.p_true, "rank": m.rank}


# --- Next sentence prediction ------------------------------------------------------------------------
def lowers(tokenizer: WordPieceTokenizer) -> bool:
    """Whether the tokenizer reads text in lower case: its own flag, or a normalizer that lower-cases."""
    return tokenizer.lowercase or (tokenizer.normalizer is not None and tokenizer.normalizer.normalize_str("A") == "a")


def spaced(text: str, tokenizer: WordPieceTokenizer) -> str:
    """A sentence with words and punctuation apart and single spaces, in lower case only where the tokenizer
    lower-cases (a cased model reads the capitals as typed): the typed sentence B and the corpus's one are
    written alike, so no spacing gives the answer away, and the model reads what the class typed."""
    return " ".join(re.findall(r"\w+|[^\w\s]", text.lower() if lowers(tokenizer) else text))


def written_note(tokenizer: WordPieceTokenizer) -> str:
    """How the NSP step writes both sentences B (`spaced`), in words: true of this model's tokenizer."""
    case = ("in lower case, as this model reads them" if lowers(tokenizer) else
            "capitals as typed, since this model tells them from small letters")
    return f"Both are written alike: words and punctuation apart, one space between, {case}."


def random_b(tokenizer: WordPieceTokenizer, typed: str) -> str:
    """The NotNext sentence B: a sentence of the built-in world, as `spaced` writes it, never the typed one
    (`typed`, written alike): the draw for SEED, else for SEED + 1, and so on, the same for every class."""
    draws = (spaced(walkthrough.random_sentence(SEED + k), tokenizer) for k in itertools.count())
    return next(sentence for sentence in draws if sentence != typed)


def next_sentence(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text_a: str,
                  text_b: str) -> tuple[Quiz, pd.DataFrame]:
    """P(IsNext) for the class's sentence B and for a random sentence of the built-in world after A, both written
    alike (`spaced`) and read by the model as written."""
    needs(model, "nsp")
    if not text_b.strip():
        raise InputError("type a second sentence B that continues sentence A")
    typed = spaced(text_b, tokenizer)
    candidates = [(typed, losses.IS_NEXT), (random_b(tokenizer, typed), losses.NOT_NEXT)]
    rows = []
    for sentence, label in candidates:
        encoding = inputs.encode(tokenizer, model, text_a, sentence, allow_truncation=False)
        _, record = losses.nsp_loss(inputs.run(model, encoding).nsp_logits[0].float(), torch.tensor(label))
        rows.append({"sentence B": sentence, "label": "IsNext" if label == losses.IS_NEXT else "NotNext",
                     "P(IsNext)": record.p_is_next[0], "L_NSP": record.loss})
    table = pd.DataFrame(rows)
    return (ranked(Question("Which sentence B does BERT think comes right after sentence A?",
                            shuffled(table["sentence B"].tolist(), text_a)),
                   dict(zip(table["sentence B"], table["P(IsNext)"].astype(float))),
                   "P(IsNext) = " + " for your sentence B, ".join(f"{p:.3f}" for p in table["P(IsNext)"])
                   + " for the random one."),
            table)
