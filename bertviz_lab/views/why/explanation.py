"""What the Why-this-guess page and the `attribute` command show: a sentence, the [MASK] to explain, the guess
explained (a target word, optionally against a contrast word), every attribution method's value per token,
their agreement, and the deletion curves that test them.

`target_id` reads a word the way a learner types it ("mat", not "Ġmat" for RoBERTa); `why` runs every
method for what an `Ask` (views/why/ask.py) asks; `with_attention` shows its attention strip at another layer or
head without running anything again; `deletion_for` runs the causal check (separately: it costs the most
forwards); `rows` and `json_report` give the tables and the CLI's JSON, `titled` the figures' names. ELECTRA's
discriminator guesses no words: its explained score is the replaced-token logit at a chosen token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import WORD_MARKERS
from bertviz_lab.errors import InputError
from bertviz_lab.explain import checks, methods
from bertviz_lab.explain.methods import Case, Progress
from bertviz_lab.explain.report import METHODS, Explanation, case_for, explain
from bertviz_lab.explain.score import Score
from bertviz_lab.views.predict.guesses import NothingMasked, Prediction, ReadOptions, predict_at
from bertviz_lab.views.why.ask import Ask

# The longest input explained: integrated gradients, occlusion and value zeroing grow with the square of the length,
# attention flow (one maximum flow per token, explain/flow.py) faster still (a random BERT-base: 0.7 s at 32 tokens,
# 2.4 s at 64, `python -m bench.flow`); past this, minutes.
MAX_TOKENS = 128
TITLES = {key: method.title for key, method in METHODS.items()}
SIGNED = {m.title: m.signed for m in METHODS.values()}  # by title: whether a strip is drawn on a diverging scale
NEVER_F = {m.title for m in METHODS.values() if m.kind != "score"}  # by title: read from attention or from the
# layers' mixing, never from F (the same for any target or contrast): the dashed deletion curves


def titled(by_key: dict) -> dict:
    """A dict keyed by METHODS key, keyed by each method's title instead: what the figures and tables name them."""
    return {TITLES[key]: value for key, value in by_key.items()}


@dataclass(frozen=True)
class Why:
    """One explained guess: the input, the guesses at the explained [MASK], and every method's answer."""

    encoding: Encoding
    masks: list[int]  # every [MASK] position in the input
    position: int  # the explained one (for the discriminator: the explained token)
    guesses: Prediction | None  # top-k at the explained [MASK]; None for the discriminator
    target: str  # the target token as the vocabulary writes it ("" for the discriminator)
    contrast: str | None
    explanation: Explanation
    case: Case  # what deletion_for needs to run more forwards

    @property
    def agreement(self) -> dict[str, dict[str, float | None]]:
        return self.explanation.agreement

    @property
    def agreement_p(self) -> dict[str, float | None]:
        """Each method's permutation p-value against occlusion (explain/rank.py)."""
        return checks.agreement_p(self.explanation.values, self.explanation.movable)

    @property
    def agreement_sentence(self) -> str:
        return checks.agreement_sentence(self.agreement, TITLES, self.agreement_p, len(self.explanation.movable))

    @property
    def follows(self) -> str:
        """What the deletion curves follow, in the sentence's words: "p(mat)", "p(mat | mat or rug)" (sigmoid(F),
        with a contrast) or "p(replaced)"."""
        if self.guesses is None:
            return "p(replaced)"
        return f"p({self.target})" if self.contrast is None else \
            f"p({self.target} | {self.target} or {self.contrast})"


def mask_positions(encoding: Encoding, tokenizer: WordPieceTokenizer) -> list[int]:
    return [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]


def check_length(encoding: Encoding, tokenizer: WordPieceTokenizer) -> None:
    """An InputError for an input longer than MAX_TOKENS (every method on every token would take minutes)."""
    if len(encoding) > MAX_TOKENS:
        raise InputError(f"the text is {len(encoding)} tokens long; this page explains texts of up to {MAX_TOKENS} "
                         f"tokens, since attention flow, integrated gradients and occlusion grow fast with the length: "
                         f"keep the sentence or two around the {tokenizer.mask_token}")


def target_id(tokenizer: WordPieceTokenizer, word: str, what: str = "target") -> int:
    """The vocabulary id of `word` as a learner types it: the token itself, or the word-start form byte-level and
    SentencePiece vocabularies give a word after a space ("Ġmat", "▁mat"), or its lowercase for an uncased model."""
    if not isinstance(word, str) or not word.strip():
        raise InputError(f"the {what} word is empty: type a word of the vocabulary, e.g. the top guess")
    word = word.strip()
    forms = [word] if word.startswith(WORD_MARKERS) or word.startswith("##") else \
        [*(marker + word for marker in WORD_MARKERS), word]
    if tokenizer.lowercase:
        forms += [f.lower() for f in forms]
    for form in forms:
        i = tokenizer.token_to_id(form)
        if i is not None and i not in tokenizer.special_ids:
            return i
    encoded = tokenizer.encode(word)
    pieces = [t for t, special in zip(encoded.tokens, encoded.special_mask) if not special]
    if len(pieces) == 1 and tokenizer.token_to_id(pieces[0]) not in tokenizer.special_ids:
        return tokenizer.token_to_id(pieces[0])  # one token as the tokenizer reads it (ALBERT's lowercases "The")
    split = f": it reads as {len(pieces)} pieces ({' '.join(pieces)})" if len(pieces) > 1 else ""
    raise InputError(f"'{word}' is not a single token of this model's vocabulary of {tokenizer.vocab_size:,}"
                     f"{split}. The {what} must be one token: pick one of the guesses or another whole word.")


def top_guess(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, mask: int = 0) -> int | None:
    """The vocabulary id of the model's top guess at the `mask`-th [MASK] (None: no such mask), from one forward."""
    masks = mask_positions(encoding, tokenizer)
    if not 0 <= mask < len(masks):
        return None
    return predict_at(model, tokenizer, encoding, [masks[mask]], ReadOptions(1)).masks[0].candidates[0].id


def why(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, ask: Ask | None = None,
        progress: Progress | None = None) -> Why:
    """Explain what `ask` asks (default: `Ask()`, the top guess at the first [MASK]): the guess at its `mask`-th
    [MASK] (0-based), its `target` (default: the top guess), against its `contrast` if given. For an ELECTRA
    discriminator, explain its replaced-token logit at token `ask.position` instead."""
    ask = Ask() if ask is None else ask
    check_length(encoding, tokenizer)
    if model.has_rtd and not model.has_mlm:
        return _why_replaced(model, tokenizer, encoding, ask, progress)
    masks = mask_positions(encoding, tokenizer)
    ReadOptions(ask.top_k).check(model, tokenizer)
    if not masks:
        raise NothingMasked(f"the text has no {tokenizer.mask_token}: write {tokenizer.mask_token} where the model "
                            "should guess a word; that guess is what gets explained")
    if not ask.mask < len(masks):
        raise InputError(f"there is no [MASK] #{ask.mask + 1}: the text has {len(masks)}")
    at = masks[ask.mask]
    guesses = predict_at(model, tokenizer, encoding, [at], ReadOptions(ask.top_k))
    target_index = target_id(tokenizer, ask.target) if ask.target.strip() else guesses.masks[0].candidates[0].id
    contrast_index = None
    if ask.contrast.strip():
        contrast_index = target_id(tokenizer, ask.contrast, "contrast")
        if contrast_index == target_index:
            raise InputError("the contrast word is the target itself: pick another word to compare against")
    score = Score(at, target_index, contrast_index, tokenizer.vocab_size)
    case, explanation = _explained(model, tokenizer, encoding, score, ask, progress)
    return Why(encoding, masks, at, guesses, tokenizer.id_to_token(target_index),
               None if contrast_index is None else tokenizer.id_to_token(contrast_index), explanation, case)


def _explained(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, score: Score, ask: Ask,
               progress: Progress | None) -> tuple[Case, Explanation]:
    """Every method on `encoding` for `score`, the attention strip at `ask`'s layer and head (checked)."""
    layer, head = _layer(model, ask.layer), _head(model, ask.head)
    case = case_for(model, tokenizer, encoding, score)
    return case, explain(case, encoding.tokens, layer=layer, head=head, ig_steps=ask.ig_steps, progress=progress)


def _why_replaced(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, ask: Ask,
                  progress: Progress | None) -> Why:
    """The discriminator's replaced-token logit at `ask.position` (None: the first word), explained."""
    words = [i for i, special in enumerate(encoding.special_mask) if not special]
    if not words:
        raise InputError("the text has no words: type a sentence")
    position = words[0] if ask.position is None else ask.position
    if position not in words:
        raise InputError(f"token {position} is not a word of this text: pick one of tokens {words[0]} to {words[-1]}")
    case, explanation = _explained(model, tokenizer, encoding, Score(position, None), ask, progress)
    return Why(encoding, mask_positions(encoding, tokenizer), position, None, "", None, explanation, case)


def with_attention(result: Why, layer: int, head: int | None) -> Why:
    """`result` with its attention strip at `layer` (0-based) and `head` (None: the mean over heads), read from the
    weights its explanation kept: the numbers `why` gives for an Ask with that layer and head, without another
    forward, the gradients, integrated gradients or occlusion (a page that changes the layer runs nothing)."""
    e = result.explanation
    values = {**e.values, "attention": methods.attention(e.weights, result.position, layer, head)}
    return replace(result, explanation=replace(e, values=values, layer=layer % e.weights.shape[0], head=head))


def _layer(model: BertForPreTraining, layer: int) -> int:
    L = model.config.num_hidden_layers
    if not -L <= layer < L:
        raise InputError(f"layer {layer} does not exist: this model has layers 0 to {L - 1}")
    return layer % L


def _head(model: BertForPreTraining, head: int | None) -> int | None:
    H = model.config.num_attention_heads
    if head is not None and not 0 <= head < H:
        raise InputError(f"head {head} does not exist: this model has heads 0 to {H - 1}")
    return head


def deletion_for(result: Why, *, random_orders: int = checks.RANDOM_ORDERS, seed: int = checks.RANDOM_SEED,
                 progress: Progress | None = None) -> checks.Deletion:
    """The causal check for every method's ranking (see explain/checks.py)."""
    return checks.deletion(result.case, result.explanation.values, random_orders=random_orders, seed=seed,
                           progress=progress)


def deletion_inputs(result: Why, *, random_orders: int = checks.RANDOM_ORDERS, seed: int = checks.RANDOM_SEED) -> int:
    """How many inputs `deletion_for` will run through the model (counted, none run)."""
    return checks.plan(result.case, result.explanation.values, random_orders, seed).inputs


def deletion_seconds(result: Why) -> float:
    """What the causal check should take on this machine: its inputs times the seconds one input took in this
    explanation's own occlusion (the same sentence, masked one token at a time, in batches, as the check runs it)."""
    e = result.explanation
    one = e.seconds["occlusion"] / len(e.movable) if len(e.movable) else e.seconds["forward (traced)"]
    return deletion_inputs(result) * one


def rows(result: Why) -> list[dict]:
    """One row per token: its position, text, and every method's value (the page's table, the CSV)."""
    values = result.explanation.values
    return [{"position": i, "token": token, **{TITLES[k]: float(v[i]) for k, v in values.items()}}
            for i, token in enumerate(result.encoding.tokens)]


def json_report(result: Why, deletion: checks.Deletion | None = None) -> dict:
    """The `attribute --json` document (docs/reference.md documents its fields)."""
    e = result.explanation
    report = {
        "tokens": list(result.encoding.tokens), "mask_position": result.position,
        "target": result.target or None, "contrast": result.contrast, "score": e.value,
        "probability": e.prob,
        "methods": {k: [float(x) for x in v] for k, v in e.values.items()},
        "ig": {"steps": e.ig.steps, "score": e.ig.score, "baseline_score": e.ig.baseline_score,
               "delta": e.ig.delta, "flagged": e.ig.flagged},
        "agreement": result.agreement, "agreement_p": result.agreement_p,
        "removable": len(e.movable),
        "attention": {"layer": e.layer, "head": e.head},
    }
    if deletion is not None:
        report["deletion"] = {
            "positions": list(deletion.positions),
            "curves": {k: [float(x) for x in v] for k, v in deletion.curves.items()},
            "aopc": deletion.aopc, "random_aopc": [float(x) for x in deletion.random_aopc],
            "beats_random": {k: deletion.beats_random(k) for k in deletion.curves},
            "verdict": {k: deletion.verdict(k) for k in deletion.curves}, "follows": deletion.follows,
            "tied": {k: deletion.tied(k) for k in deletion.curves}}
    return report


def strongest(values: np.ndarray, movable: np.ndarray) -> int | None:
    """The removable token a method scores highest (None when there is none)."""
    return None if not len(movable) else int(movable[np.argmax(values[movable])])
