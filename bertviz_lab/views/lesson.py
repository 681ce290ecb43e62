"""The guided lesson's numbers: for each of its ten steps a question, the model's own answer to it, and what
the step draws, all computed live from the active model on the lesson's sentences.

A step's function returns a `Quiz` (the question, the model's answer, the numbers behind that answer) and
a plain record for the step's chart or table. Nothing is hard-coded: the options come from the model and
the sentence (its top guesses shuffled with a seeded RNG, its heads, the sentence's tokens) and the answer
is read off the same numbers, in the run where the class presses Reveal. The two steps that train (a tiny
BERT from scratch, a linear probe) are in `views/lesson_runs.py`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert import losses
from bertviz_lab.bert.family import FAMILIES
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.pretrain import heads
from bertviz_lab.views import attention as av
from bertviz_lab.views import inputs, neighbours, predict
from bertviz_lab.views import losses as lv
from bertviz_lab.views import representations as rv

STEPS = ("Tokens", "Embeddings", "Attention heads", "The softmax steps", "The guess at [MASK]", "The MLM loss",
         "Next sentence prediction", "A short training run", "Fine-tuning", "Contextual vectors")
SEED = 16  # shuffles the options: the same order for every student, every time
RANKED = 2_000  # nearest embedding rows ranked to draw the embedding question's options from
FUNCTION_WORDS = frozenset("a an the this that on in at of to for from by with and or but is was are were be it he she "
                           "they i you we his her its their my our your not".split())
LOSS_BANDS = ((0.5, "below 0.5: BERT was nearly sure of it"), (2.0, "between 0.5 and 2"),
              (5.0, "between 2 and 5"), (math.inf, "above 5: BERT hardly considered it"))


@dataclass(frozen=True)
class Question:
    prompt: str
    options: tuple[str, ...] = ()  # what the class picks from; () asks for a whole number


@dataclass(frozen=True)
class Quiz:
    question: Question
    answer: str | int  # the model's answer: one of the options, or the number
    why: str  # the model's numbers behind the answer, in one or two plain sentences

    def is_right(self, guess) -> bool:
        return guess is not None and guess == self.answer


@dataclass(frozen=True)
class Answered:
    """A revealed step: what it was computed for (model and sentences), the class's guess, the model's quiz."""
    basis: tuple
    guess: str | int
    quiz: Quiz

    @property
    def right(self) -> bool:
        return self.quiz.is_right(self.guess)


def score(answered: dict[int, Answered]) -> str:
    right = sum(a.right for a in answered.values())
    return f"{right} of {len(answered)} right so far" if answered else "no answers revealed yet"


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


# --- 1. Tokens ---------------------------------------------------------------------------------------
def token_rows(encoding: Encoding) -> pd.DataFrame:
    return pd.DataFrame({"position": range(len(encoding.ids)), "token": encoding.tokens, "id": encoding.ids,
                         "segment": encoding.segment_ids})


def tokens(encoding: Encoding) -> Quiz:
    n, special = len(encoding.ids), sum(s is None for s in encoding.sequence_ids)
    return Quiz(Question("How many tokens will BERT read for this sentence? Count every token it sees."), n,
                f"The tokenizer made {n} tokens: {' '.join(encoding.tokens)}. That is {n - special} from the "
                f"text and {special} special ones that frame it.")


# --- 2. Embeddings -----------------------------------------------------------------------------------
def shown(token: str) -> str:
    """A vocabulary entry as the class reads it: without the marks of a word start (Ġ, ▁)."""
    return token.lstrip("Ġ▁")


def embedding_words(encoding: Encoding, tokenizer: WordPieceTokenizer) -> list[str]:
    """The sentence's words that are one vocabulary entry each, as the vocabulary writes them (the embedding
    question asks about one of them)."""
    pieces = Counter(w for w in encoding.word_ids if w is not None)
    found: dict[str, str] = {}  # as shown -> the vocabulary entry
    for token, i, word in zip(encoding.tokens, encoding.ids, encoding.word_ids):
        if word is not None and pieces[word] == 1 and i not in tokenizer.special_ids and shown(token).isalpha():
            found.setdefault(shown(token), token)
    return list(found.values())


def content_word(words: list[str]) -> str:
    """The first word that is not a function word (the embeddings step asks about it first), else the first."""
    return next((w for w in words if shown(w).lower() not in FUNCTION_WORDS), words[0])


def embeddings(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
               token: str) -> tuple[Quiz, pd.DataFrame, pd.DataFrame]:
    """Which of four words has the embedding row nearest to `token`'s (a vocabulary entry): the nearest row and
    three from far down the ranking. Returns the quiz, the options' cosines (best first) and the ranking's
    first rows."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None or token_id in tokenizer.special_ids:
        raise InputError(f"{token!r} is not a word of this model's vocabulary")
    k = min(RANKED, tokenizer.vocab_size - len(tokenizer.special_ids) - 1)
    ranked = neighbours.static_neighbours(model, tokenizer, token_id, k)
    ranked[neighbours.TOKEN] = ranked[neighbours.TOKEN].map(shown)
    words = ranked[ranked[neighbours.TOKEN].map(str.isalpha)].drop_duplicates(neighbours.TOKEN)
    words = words[words[neighbours.TOKEN] != shown(token)].reset_index(drop=True)
    if len(words) < 4:
        raise InputError(f"the vocabulary has too few whole words near “{shown(token)}” to ask about")
    n, word = len(words), shown(token)
    picks = words.iloc[[0, max(1, n // 40), max(2, n // 5), n - 1]]  # the nearest, then ever farther
    options = shuffled(picks[neighbours.TOKEN].tolist(), word)
    best = picks.loc[picks[neighbours.COSINE].idxmax()]
    rest = ", ".join(f"{t} {c:.3f}" for t, c in zip(picks[neighbours.TOKEN], picks[neighbours.COSINE]))
    return (Quiz(Question(f"Which word's embedding is closest to the embedding of “{word}”?", options),
                 best[neighbours.TOKEN], f"Cosine similarity of each embedding row with “{word}”'s: {rest}."),
            picks.reset_index(drop=True), ranked.head(8))


# --- 3. Attention heads, 4. the softmax steps ---------------------------------------------------------
def previous_token(view: av.AttentionView) -> tuple[Quiz, pd.DataFrame]:
    """Which head gives the most of each word's attention to the word just before it (heads.positional)."""
    scores = heads.positional(view.weights, view.sequence_ids)["previous"]  # (L, H)
    names = av.head_names(view.num_layers, view.num_heads)
    table = pd.DataFrame({"head": names, "score": scores.reshape(-1)}).sort_values("score", ascending=False)
    best, second = table.iloc[0], table.iloc[min(1, len(table) - 1)]
    return (Quiz(Question("Which head looks at the previous token?", tuple(names)), best["head"],
                 f"{best['head']} gives {best['score']:.0%} of each word's attention, on average, to the token "
                 f"just before it; the next best head, {second['head']}, gives {second['score']:.0%}."),
            table.reset_index(drop=True))


def pronoun_head(model: BertForPreTraining, tokenizer: WordPieceTokenizer) -> str:
    """The head that links pronouns to the nouns they stand for most, on the built-in probe sentences."""
    try:
        roles = heads.head_roles(model, tokenizer)
    except InputError:  # a probe sentence longer than this model reads
        return "L0 H0"
    role = "pronoun_referent" if "pronoun_referent" in roles.scores else "previous"
    layer, head, _ = roles.strongest(role)
    return f"L{layer} H{head}"


def strongest_key(view: av.AttentionView, layer: int, head: int, query: int) -> tuple[Quiz, pd.DataFrame]:
    """Which key the query gives the largest weight in one head, with its softmax step table."""
    steps = av.softmax_steps(view, layer, head, query)
    options = token_options(view.tokens)
    best = av.strongest_key(view, layer, head, query)
    row = steps.iloc[best]
    return (Quiz(Question(f"In head L{layer} H{head}, which token gets the largest weight from "
                          f"“{view.tokens[query]}”?", tuple(options)), options[best],
                 f"“{view.tokens[best]}” has the largest score, q·k = {row[av.DOT]:.3f} divided by "
                 f"{math.sqrt(view.head_dim):g} = {row[av.MASKED]:.4f}, so the largest exp: "
                 f"{row[av.EXP]:.4f} (after subtracting the largest score). The exps of all keys add up to "
                 f"{row[av.SUM]:.4f}, so its weight is {row[av.EXP]:.4f} / {row[av.SUM]:.4f} = {row[av.WEIGHT]:.4f}."),
            steps)


# --- 5. The guess at [MASK], 6. the MLM loss ---------------------------------------------------------
def first_mask(encoding: Encoding, tokenizer: WordPieceTokenizer) -> int:
    positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
    if not positions:
        raise predict.NothingMasked("the sentence has no [MASK]: write [MASK] where BERT should guess a word, "
                                    "as in “the cat sat on the [MASK] .”")
    return positions[0]


def mask_guess(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
               encoding: Encoding) -> tuple[Quiz, predict.MaskPrediction]:
    """BERT's top four guesses at the first [MASK] and one word of the sentence, shuffled; the answer is its top-1."""
    needs(model, "mlm")
    position = first_mask(encoding, tokenizer)
    read = predict.predict_at(model, tokenizer, encoding, [position], predict.ReadOptions(top_k=min(
        10, tokenizer.vocab_size)))
    mask = read.masks[0]
    top = [c.token for c in mask.candidates[:4]]
    decoys = [t for t, i in zip(encoding.tokens, encoding.ids) if i not in tokenizer.special_ids and t not in top]
    decoys += [c.token for c in mask.candidates[4:]]
    best = mask.candidates[0]
    return (Quiz(Question(f"Which word will BERT put at [MASK] (position {position})?",
                          shuffled(top + decoys[:1], " ".join(encoding.tokens))), best.token,
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
                          "−log p(true word)?", tuple(label for _, label in LOSS_BANDS)), band,
                 f"p(“{m.true_token}”) = {m.p_true:.4f} (rank {m.rank}), so the loss is −log {m.p_true:.4f} = "
                 f"{m.neg_log_p:.3f}. A uniform guess over the {tokenizer.vocab_size:,} tokens would cost "
                 f"ln {tokenizer.vocab_size:,} = {chance:.2f}."),
            m)


def loss_panel(m: losses.MaskedPrediction) -> dict:
    """The mask's top guesses and the true word, as `figures.losses.topk_grid` draws one panel."""
    return {"title": f"[MASK] at position {m.position}: the true word “{m.true_token}”",
            "tokens": m.top_tokens, "probs": m.top_probs,
            "true_token": m.true_token, "p_true": m.p_true, "rank": m.rank}


# --- 7. Next sentence prediction ---------------------------------------------------------------------
def next_sentence(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text_a: str,
                  text_b: str) -> tuple[Quiz, pd.DataFrame]:
    """P(IsNext) for the class's sentence B and for a random sentence of the built-in world after A."""
    needs(model, "nsp")
    if not text_b.strip():
        raise InputError("type a second sentence B that continues sentence A")
    candidates = [(text_b.strip(), losses.IS_NEXT), (lv.random_sentence(SEED, avoid=text_b), losses.NOT_NEXT)]
    rows = []
    for sentence, label in candidates:
        encoding = inputs.encode(tokenizer, model, text_a, sentence, allow_truncation=False)
        _, record = losses.nsp_loss(inputs.run(model, encoding).nsp_logits[0].float(), torch.tensor(label))
        rows.append({"sentence B": sentence, "label": "IsNext" if label == losses.IS_NEXT else "NotNext",
                     "P(IsNext)": record.p_is_next[0], "L_NSP": record.loss})
    table = pd.DataFrame(rows)
    best = table.loc[table["P(IsNext)"].idxmax()]
    return (Quiz(Question("Which sentence B does BERT think comes right after sentence A?",
                          shuffled(table["sentence B"].tolist(), text_a)), best["sentence B"],
                 "P(IsNext) = " + " for your sentence B, ".join(f"{p:.3f}" for p in table["P(IsNext)"])
                 + " for the random one."),
            table)


# --- 10. Contextual vectors --------------------------------------------------------------------------
def contextual(model: BertForPreTraining, tokenizer: WordPieceTokenizer, word: str,
               sentences: list[str]) -> tuple[Quiz, pd.DataFrame]:
    """The cosine of the word's vectors in two sentences, layer by layer: closer at layer 0 or at the last?"""
    if len([s for s in sentences if s.strip()]) != 2:
        raise InputError("type two sentences that use the word in two different senses")
    found = rv.word_in_context(model, tokenizer, word, sentences)
    cosine = rv.cosines(found.vectors)[:, 0, 1]  # (L + 1,)
    last = len(cosine) - 1
    options = ("at layer 0 (the embeddings)", f"at the last layer ({last})")
    table = pd.DataFrame({rv.LAYER: np.arange(len(cosine)), "cosine": cosine})
    return (Quiz(Question(f"Are the two “{found.word}” vectors closer at layer 0 or at the last layer?", options),
                 options[0] if cosine[0] > cosine[-1] else options[1],
                 f"Cosine of the two vectors: {cosine[0]:.3f} at layer 0, {cosine[-1]:.3f} at layer {last}."),
            table)
