"""The Lesson's step after "where is the answer made?": on which word of a sentence does one feed-forward neuron fire?

The neuron is the active model's own, picked from its index of top contexts over the story world (views/neurons/
corpus.py, neurons/index.py: built once per model and kept on disk): the neuron whose top contexts fire on one word
most often (`clearest`), a token detector the class can see at a glance, its top activations breaking ties. The
sentence asked about is a story-world sentence with that word in it that is none of the neuron's top contexts (so
the reveal's contexts are other evidence), and the activations at its words come from a forward pass now
(neurons.read.one_sentence). The answer is the word of largest activation; one within NEAR of it (a share of the
largest) counts too, and a neuron that fires on no word of the sentence is not scored. No head is needed: every
family, ELECTRA's discriminator too, has feed-forward neurons.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.read import one_sentence
from bertviz_lab.views.lesson.questions import NEAR, Question, Quiz, token_options
from bertviz_lab.views.lesson.vector_steps import shown
from bertviz_lab.views.neurons.corpus import Progress, story
from bertviz_lab.views.neurons.corpus import index as corpus_index

SHORT = (6, 14)  # the sentence asked about: tokens, specials included, so its words fit the first screen as pills


@dataclass(frozen=True)
class Context:
    """One top context of the neuron: its tokens as the class reads them, the firing one's position, the value."""

    words: tuple[str, ...]  # specials left out
    position: int  # in `words`
    value: float


@dataclass(frozen=True)
class Fired:
    """The neuron asked about and what it does on the sentence, as plain numbers (the Lesson keeps it)."""

    layer: int  # counted from 0, as the neurons page counts
    neuron: int
    word: str  # the word its top contexts fire on most often (as shown)
    share: int  # how many of its top contexts fire on `word`
    contexts: list[Context]  # its top contexts over the story world, highest first
    mean: float  # its mean activation over the story world's tokens
    labels: list[str]  # the sentence's words as the class picks them (token_options), in order
    values: np.ndarray  # (W,) the neuron's activation at each of them
    sentence: str  # the sentence as the class reads it

    @property
    def name(self) -> str:
        return f"neuron {self.neuron} of layer {self.layer}"


def _word(token: str, specials: set[str]) -> bool:
    """Whether a token is a word the class can read (letters only, without the marks of a word start or ##)."""
    return token not in specials and shown(token).removeprefix("##").isalpha()


def clearest(index, specials: set[str]) -> tuple[int, int, str, int]:
    """(layer, neuron, firing token, share): the neuron whose top contexts (index.where (L, N, K, 2)) fire on one
    word most often, its mean top activation breaking ties; words only (specials and punctuation left out)."""
    names: dict[str, int] = {}
    width = max(len(s) for s in index.sentences)
    table = np.full((len(index.sentences), width), -1, dtype=np.int64)  # (S, T) a word's number, -1 for the rest
    for s, tokens in enumerate(index.sentences):
        for p, token in enumerate(tokens):
            if _word(token, specials):
                table[s, p] = names.setdefault(token, len(names))
    where = index.where  # (L, N, K, 2)
    ids = np.where(where[..., 0] >= 0, table[where[..., 0].clip(0), where[..., 1].clip(0)], -1)  # (L, N, K)
    same = (ids[..., :, None] == ids[..., None, :]) & (ids[..., None, :] >= 0)  # (L, N, K, K)
    counts = same.sum(-1)  # (L, N, K): how many contexts share each context's firing word
    share = counts.max(-1)  # (L, N)
    if share.max() == 0:
        raise InputError("no neuron of this model fires most on a word anywhere in the story world")
    values = np.asarray(index.values, np.float64)
    mean_top = np.where(np.isfinite(values), values, 0).mean(-1)  # (L, N): -inf marks a context missing
    top = np.where(share == share.max(), mean_top, -np.inf)  # (L, N)
    layer, neuron = np.unravel_index(int(np.argmax(top)), top.shape)  # the first of equals, in (layer, neuron) order
    k = int(counts[layer, neuron].argmax())
    s, p = where[layer, neuron, k]
    return int(layer), int(neuron), index.sentences[s][p], int(share.max())


def asked_sentence(index, layer: int, neuron: int, token: str) -> int:
    """The story-world sentence asked about: the first one with `token` in it, of SHORT tokens, that is not one of
    the neuron's top contexts, where the token comes once (so the options name it alone) if one does; else the
    shortest one with the token; else its top context."""
    taken = {int(s) for s in index.where[layer, neuron, :, 0] if s >= 0}
    having = [s for s, tokens in enumerate(index.sentences) if token in tokens and s not in taken]
    short = [s for s in having if SHORT[0] <= len(index.sentences[s]) <= SHORT[1]]
    if short:
        return next((s for s in short if index.sentences[s].count(token) == 1), short[0])
    return min(having, key=lambda s: len(index.sentences[s])) if having else int(index.where[layer, neuron, 0, 0])


def fired(model: BertForPreTraining, tokenizer: WordPieceTokenizer, index) -> Fired:
    """The clearest neuron of `index` (this model's NeuronIndex over the story world) and its activation at each word
    of the sentence asked about, from one forward pass."""
    specials = {tokenizer.id_to_token(i) for i in tokenizer.special_ids}
    layer, neuron, token, share = clearest(index, specials)
    tokens = index.sentences[asked_sentence(index, layer, neuron, token)]
    ids = torch.tensor([[tokenizer.token_to_id(t) for t in tokens]], device=next(model.parameters()).device)  # (1, T) as indexed
    activation = one_sentence(model, ids)[layer][:, neuron]  # (T,)
    words = [i for i, t in enumerate(tokens) if t not in specials]
    labels = token_options([shown(tokens[i]) for i in words])
    contexts = []
    for c in index.contexts(layer, neuron):
        kept = [i for i, t in enumerate(c.tokens) if t not in specials or i == c.position]
        contexts.append(Context(tuple(shown(c.tokens[i]) for i in kept), kept.index(c.position), float(c.value)))
    return Fired(layer, neuron, shown(token), share, contexts, float(index.mean[layer, neuron]), labels,
                 activation[words].astype(np.float64), " ".join(shown(tokens[i]) for i in words))


def quiz(found: Fired) -> Quiz:
    """The word of largest activation; another within NEAR of it (as a share of it) counts too. A neuron that does
    not fire (activation at most 0) on any word of the sentence is not scored."""
    values, labels = found.values, found.labels
    best = int(np.argmax(values))
    top = float(values[best])
    question = Question(f"{found.name.capitalize()} on “{found.sentence}”: on which word does it fire most?",
                        tuple(labels))
    if top <= 0:
        return Quiz(question, labels[best], f"The neuron does not fire on this sentence: its largest activation is "
                    f"{top:.3f}.", scored=False, unclear="It does not fire here")
    also = tuple(o for o, v in zip(labels, values) if o != labels[best] and top - v < NEAR * top)
    runner = max((i for i in range(len(values)) if i != best), key=lambda i: values[i], default=None)
    why = (f"Its activation at “{labels[best]}” is {top:.3f}"
           + (f"; the next largest, at “{labels[runner]}”, is {round(values[runner], 3) + 0.0:.3f}"
              if runner is not None else "")
           + f" (its mean over the story world's tokens: {found.mean:.3f}). {found.share} of its "
           f"{len(found.contexts)} top contexts in the story world fire on “{found.word}”"
           + (f", at {found.contexts[-1].value:.3f} to {found.contexts[0].value:.3f}." if found.contexts else "."))
    if also:
        why += " Within " + f"{NEAR:.0%} of the largest, so right too: " + ", ".join(f"“{o}”" for o in also) + "."
    return Quiz(question, labels[best], why, also=also)


def neuron_fires(model: BertForPreTraining, tokenizer: WordPieceTokenizer, index) -> tuple[Quiz, Fired]:
    found = fired(model, tokenizer, index)
    return quiz(found), found


def story_neuron(ckpt: Checkpoint, progress: Progress | None = None) -> tuple[Quiz, Fired]:
    """The step on the active model: its index over the story world (the neurons page's, read from disk where it
    was built before, else built now, progress(fraction, message), and kept)."""
    return neuron_fires(ckpt.model, ckpt.tokenizer, corpus_index(ckpt, story(), progress))
