"""What the model makes of words: its guesses at [MASK] (Mask & predict), one word's vectors across sentences and
the logit lens (Representations). Each call returns the figure the page draws, from the same view and builder."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.figures import representations as fr
from bertviz_lab.figures.predictions import prediction_bars, replaced_bars
from bertviz_lab.notebook.lab import (as_int, choice, encode, flag, index, lab_of, needs_mlm, positive,
                                     sentence_list, whole)
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.representations import vectors as rv

SAME_WORD_KINDS = ("matrix", "senses", "projection")


def predict(lab, text: str, text_b: str | None = None, *, top_k: int = 5, mask: int = 0,
            words: Iterable[int | str] = (), temperature: float = 1.0, causal: bool = False) -> go.Figure:
    """The model's top-k guesses for one [MASK], as bars: the Mask & predict page's chart.

    Type [MASK] where a word is hidden (the family's own mask token, e.g. <mask>, works too), or hide words of the
    text with `words` (their labels as the page's pills show them, "the₂" for the second "the", or their word
    numbers from 0): every piece of a hidden word becomes [MASK] (whole-word masking). `mask` picks which [MASK]
    is drawn, counted from 0 (the title counts from 1, as the page does). Each bar is a probability of the full
    softmax over the vocabulary, so the bars need not sum to 1: the rest is spread over every other token. Every
    mask is guessed from the same pass, independently: no guess sees another.

    `temperature` divides the logits before the softmax (below 1 sharpens, above 1 flattens; the ranking never
    changes), so at τ ≠ 1 the bars are not the model's own probabilities. `causal=True` is an ablation, out of
    distribution: the model was trained to read both ways, so these are the guesses of a model with its right
    context cut off, not those of a left-to-right model. An ELECTRA discriminator guesses no words: for it this
    draws each token's probability of having been replaced, as the page does.
    """
    lab = lab_of(lab)
    model, tokenizer = lab.model, lab.tokenizer
    encoding = encode(lab, text, text_b)
    if model.has_rtd and not model.has_mlm:
        return replaced_bars(vpr.replaced_rows(model, encoding), "p(replaced) = sigmoid(logit) per token; dashed: 50%")
    needs_mlm(lab, "cannot fill masks")
    chosen = _hidden_words(encoding, text, text_b, tokenizer.mask_token, words)
    top_k, temperature = whole(top_k, 1, tokenizer.vocab_size, "top_k"), positive(temperature, "temperature")
    report = vpr.explore_masks(model, tokenizer, encoding, chosen, top_k=top_k, temperature=temperature,
                              causal=flag(causal, "causal"),
                              max_steps=1)  # one pass: the page's left-to-right filling draws no bars
    masks = report.independent.masks
    n = index(mask, len(masks), "mask", owner="the text")
    return prediction_bars(vpr.candidate_rows(masks[n]), f"Top-{top_k} for mask #{n + 1}")


def _hidden_words(encoding, text: str, text_b: str | None, mask_token: str, words) -> list[int]:
    """The word numbers of `words` (labels as the page's pills show them, or word numbers)."""
    if isinstance(words, (str, numbers.Integral)):
        words = [words]
    if not isinstance(words, Iterable):
        raise InputError(f"words must be words of the text or their numbers, e.g. words=[\"cat\"], got {words!r}")
    found = {w.label: w.index for w in inputs.words(encoding, text, text_b, mask_token) if not w.is_mask}
    chosen = []
    for word in words:
        if isinstance(word, str) and word not in found:
            raise InputError(f"the text has no word {word!r} to hide; its words are {', '.join(map(repr, found))}")
        number = found[word] if isinstance(word, str) else as_int(word)  # not a bool: True is no word number
        if number is None:
            raise InputError(f"words must be words of the text or their numbers, e.g. words=[\"cat\"], got {word!r}")
        chosen.append(number)
    return chosen


def same_word(lab, sentences: Iterable[str], word: str, *, layer: int | None = None,
              senses: Iterable[str | None] | None = None, kind: str = "matrix") -> go.Figure:
    """One word's vectors across sentences (the BERT tutorial's "bank", seed text 002): the Representations page's
    first tab.

    kind "matrix": the cosine similarity of the word's vectors in every pair of sentences at `layer` (0 is the
    embedding layer's output, then layers 1 to L; default: the last). "senses": the mean cosine of same-sense and
    different-sense pairs, layer by layer (give `senses`, one label or None per sentence, e.g. ["river", "money"]).
    "projection": the vectors at `layer` on their two principal components, coloured by sense.

    A word split into pieces is the mean of its pieces' vectors. Read one layer at a time: each layer has its own
    geometry (anisotropy), so a cosine at one layer does not compare with one at another. The projection drops
    every other dimension: trust the matrix for distances. A handful of sentences shows what this model does with
    them, not a rule: give more sentences of each sense before concluding.
    """
    lab = lab_of(lab)
    sentences = sentence_list(sentences)
    if isinstance(senses, str) or not (senses is None or isinstance(senses, Iterable)):
        raise InputError("senses must be a list with one label (or None) per sentence, e.g. [\"river\", \"money\"]")
    senses = [None] * len(sentences) if senses is None else list(senses)
    if len(senses) != len(sentences) or not all(s is None or isinstance(s, str) for s in senses):
        raise InputError(f"senses must give one label (or None) per sentence: {len(sentences)} of them")
    senses = [s.strip() or None if isinstance(s, str) else None for s in senses]
    kind = choice(kind, SAME_WORD_KINDS, "kind")
    wic = lab.remember(("same_word", word, tuple(sentences)),
                       lambda: rv.word_in_context(lab.model, lab.tokenizer, word, sentences))
    sims = rv.cosines(wic.vectors)  # (L + 1, S, S)
    last = wic.layers - 1
    layer = last if layer is None else index(layer, wic.layers, "layer", "the embeddings' output")
    shown = f"layer {fr.layer_name(layer)}"
    if kind == "matrix":
        return fr.similarity_heatmap(sims[layer], fr.sentence_labels(list(wic.sentences), senses),
                                       list(wic.sentences), f"Cosine similarity of “{wic.word}” across the "
                                                            f"sentences · {shown}")
    if kind == "projection":
        points, explained = rv.projection(wic.vectors)
        spanned = rv.components(explained[layer])
        title = ("Two principal components" if spanned == 2 else "The principal component" if spanned else
                 "The vectors") + f" · {shown}"
        return fr.projection_scatter(points[layer], senses, list(wic.sentences), explained[layer], title)
    same, cross = rv.pairs(senses)
    drawn = [column for column, n in ((rv.SAME, same), (rv.CROSS, cross)) if n]
    if not drawn:
        raise InputError("give at least two sentences one sense and one sentence another (senses=[\"river\", "
                         "\"river\", \"money\"]) to compare same-sense and different-sense pairs")
    single = same + cross == 1
    title = ("Cosine of the one " + ("same" if same else "different") + "-sense pair" if single else
             "Mean similarity") + " by layer"
    return fr.sense_lines(rv.sense_similarity(sims, senses), drawn, title, "cosine" if single else "mean cosine")


def logit_lens(lab, text: str, *, top_k: int = 5, mask: int = 0) -> go.Figure:
    """The logit lens at one [MASK]: the MLM head applied to every layer's vector there, as p(token) per layer
    (the Representations page's third tab; rows: the tokens in any layer's top-k, the last layer's first).

    The head was trained on the last layer's output only, so an earlier row shows what this head can decode from
    that layer, not all that the layer knows: a layer can hold the answer in a form the head cannot read, and a
    late first appearance does not prove the answer formed late. The last layer is exactly Mask & predict's guess.
    Layer 0 is the embedding layer's output: there the head sees only the mask token, its position (and segment),
    nothing of the other words. `mask` picks the [MASK], counted from 0.
    """
    lab = lab_of(lab)
    needs_mlm(lab, "has nothing to read at [MASK]")
    tokenizer = lab.tokenizer
    top_k = whole(top_k, 1, tokenizer.vocab_size, "top_k")
    encoding = encode(lab, text)
    found = rv.logit_lens(lab.model, encoding, tokenizer.mask_id)
    chosen = found.masks[index(mask, len(found.masks), "mask", owner="the text")]
    ids, probs = rv.lens_grid(chosen, top_k)
    return fr.lens_heatmap(probs, [tokenizer.id_to_token(i) for i in ids],
                             f"[MASK] at token {chosen.position}: p(token) after each layer")
