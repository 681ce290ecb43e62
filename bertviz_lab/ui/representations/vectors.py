"""The Representations page's first and third tabs: one word in many sentences, and the logit lens.

Each computation is cached per model (`model_key`) and input, shared by every session, so a redraw after an
edit runs one small forward pass at most; a tab that is not open computes nothing (the page asks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.corpus.senses import SENSE_SETS, examples
from bertviz_lab.errors import InputError
from bertviz_lab.figures import representations as fr
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Representations as K
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import MAX_CHARS, chart, say
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views import inputs
from bertviz_lab.views.representations import vectors as rv
from bertviz_lab.views.representations.vectors import embedding_layer
from bertviz_lab.views.representations.words import MAX_WORD_CHARS

OWN = "your own sentences"
BAR = "|"  # "money | i went to the bank ." : a sense, then the sentence


# --- Same word, different contexts ---------------------------------------------------------------------
def set_lines(word: str) -> str:
    return "\n".join(f"{sense} {BAR} {sentence}" for sentence, sense in examples(word))


def parse_lines(text: str) -> tuple[list[str], list[str | None]]:
    """'sense | sentence' lines (the sense is optional) -> sentences and their senses."""
    sentences, senses = [], []
    for line in (text or "").splitlines():
        sense, bar, sentence = line.partition(BAR)
        if not bar:
            sense, sentence = "", line
        if sentence.strip():
            sentences.append(sentence.strip())
            senses.append(sense.strip() or None)
    return sentences, senses


@dataclass(frozen=True)
class Contexts:
    wic: rv.WordInContext
    senses: tuple[str | None, ...]
    sims: np.ndarray  # (L + 1, S, S)
    by_sense: pd.DataFrame  # layer, same sense, different senses
    points: np.ndarray  # (L + 1, S, 2)
    explained: np.ndarray  # (L + 1, 2)


@st.cache_resource(max_entries=16, show_spinner="Reading the word's vectors in every sentence…")  # shown past 0.5 s
def contexts(key: ModelKey, word: str, text: str, _ckpt: Checkpoint) -> Contexts:
    sentences, senses = parse_lines(text)
    wic = rv.word_in_context(_ckpt.model, _ckpt.tokenizer, word, sentences)
    sims = rv.cosines(wic.vectors)
    points, explained = rv.projection(wic.vectors)
    return Contexts(wic, tuple(senses), sims, rv.sense_similarity(sims, senses), points, explained)


def _choose_set() -> None:
    chosen = state.get(K.SET)
    if chosen in SENSE_SETS:
        state.put(K.WORD, chosen)
        state.put(K.SENTENCES, set_lines(chosen))


def contexts_tab(ckpt: Checkpoint) -> None:
    st.markdown(f"{cite('002', start=True)}: *bank* by a river and *bank* for money are the same token(s) with the same input "
                "embedding wherever the tokenizer writes them alike, but after BERT's layers each sentence gives the "
                "word its own vector. Compare them layer by layer.")
    state.init(K.SET, K.WORD)  # the set picker's callback writes these two: the widgets take them from the session
    state.setdefault(K.SENTENCES, set_lines(K.SET.default))
    state.keep_valid(K.SET, [*SENSE_SETS, OWN])
    left, right = st.columns([1, 3])
    left.selectbox("Start from", [*SENSE_SETS, OWN], key=K.SET.name, on_change=_choose_set,
                   format_func=lambda s: s if s == OWN else f"the “{s}” sentences")
    word = left.text_input("Word to follow", key=K.WORD.name, max_chars=MAX_WORD_CHARS)
    text = right.text_area("Sentences, one per line (“sense | sentence”; the sense is optional and only colours "
                           "the charts)", key=K.SENTENCES.name, height=190, max_chars=MAX_CHARS)
    try:
        found = contexts(model_key(ckpt), word, text, ckpt)
    except InputError as exc:
        say("warning", str(exc))
        return
    wic, L = found.wic, found.wic.layers - 1
    note = rv.spelling_note(wic)
    if note:
        st.info(plain(note))
    state.keep_valid(K.LAYER, range(L + 1))
    state.setdefault(K.LAYER, L)  # the last layer first
    layer = st.select_slider("Layer", range(L + 1), key=K.LAYER.name, format_func=fr.layer_name,
                             help=f"0 is the embedding layer's output: {embedding_layer(ckpt.config)} 1 to L are "
                                  "the outputs of the encoder layers.")
    labels = fr.sentence_labels(list(wic.sentences), list(found.senses))
    chart(fr.similarity_heatmap(found.sims[layer], labels, list(wic.sentences),
                                  f"Cosine similarity of “{wic.word}” across the sentences · layer "
                                  f"{fr.layer_name(layer)}"), f"similarity_{wic.word}_L{layer}")
    _verdict(found, layer)
    left, right = st.columns(2)
    with left:
        _sense_chart(found)
    with right:
        spanned = rv.components(found.explained[layer])
        chart(fr.projection_scatter(found.points[layer], list(found.senses), list(wic.sentences),
                                      found.explained[layer], ("Two principal components" if spanned == 2 else
                                                               "The principal component" if spanned else
                                                               "The vectors") + f" · layer {fr.layer_name(layer)}"),
              f"pca_{wic.word}_L{layer}")
    st.caption(_projection_note(len(wic.sentences), spanned))


def _projection_note(sentences: int, spanned: int) -> str:
    if spanned == 2:
        return ("The projection (PCA) keeps the two directions in which this layer's vectors differ most; numbers "
                "are the sentences' lines. A 2-D picture drops the other dimensions, so trust the matrix for "
                "distances.")
    if spanned == 1 and sentences == 2:
        return ("Two points span one direction: the projection (PCA) has one component, the line through them, "
                "so the map is that line and holds all of their difference. Give three sentences or more for a "
                "2-D map.")
    if spanned == 1:
        return ("At this layer these vectors differ along one direction only: the projection (PCA) has one "
                "component, so the map is a line.")
    return "At this layer the word's vectors in these sentences are equal: there is no direction to draw."


def _sense_chart(found: Contexts) -> None:
    """Same-sense and different-sense cosines by layer: the lines that have pairs, and a note for a missing one."""
    same, cross = rv.pairs(list(found.senses))
    drawn = [column for column, n in ((rv.SAME, same), (rv.CROSS, cross)) if n]
    if not drawn:
        st.info("Give at least two sentences one sense and one sentence another (“money | …”, "
                "“river | …”) to compare same-sense and different-sense pairs.")
        return
    single = same + cross == 1
    title = ("Cosine of the one " + ("same" if same else "different") + "-sense pair" if single else
             "Mean similarity") + " by layer"
    chart(fr.sense_lines(found.by_sense, drawn, title, "cosine" if single else "mean cosine"),
          f"same_vs_different_{found.wic.word}")
    if same and cross:
        st.caption(f"Means over {_count(same, 'same-sense pair')} and {_count(cross, 'different-sense pair')}. "
                   "Read the two lines at one layer at a time: each layer has its own geometry (anisotropy, see "
                   "Embedding geometry), so a cosine at one layer does not compare with one at another.")
        return
    has, lacks, add = (("different", "same", "a sentence with a sense one of them already has") if cross else
                       ("same", "different", "a sentence with another sense"))
    st.info(f"These sentences make {_count(same + cross, has + '-sense pair')} and no {lacks}-sense pair, so "
            f"there is no {lacks}-sense line: add {add} (“sense | sentence”) to compare the two at each layer.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _verdict(found: Contexts, layer: int) -> None:
    """One sentence with the numbers: are same-sense pairs closer than different-sense pairs here?"""
    row = found.by_sense.iloc[layer]
    same, cross = row[rv.SAME], row[rv.CROSS]
    if np.isnan(same) or np.isnan(cross):
        return
    closer = "closer than" if same > cross else "no closer than"
    first = found.by_sense.iloc[0]
    spelled_alike = len(set(found.wic.spellings)) <= 1
    st.markdown(f"At layer {fr.layer_name(layer)}, two sentences with the same sense have mean cosine "
                f"**{same:.3f}**, two with different senses **{cross:.3f}**: same-sense vectors are {closer} "
                f"the rest. At the embeddings (layer 0) it was {first[rv.SAME]:.3f} vs {first[rv.CROSS]:.3f}: "
                "there the word's vectors differ only by " + ("its position in the sentence." if spelled_alike else
                                                             "its position and by the tokens it is written as."))


# --- The logit lens --------------------------------------------------------------------------------------
@st.cache_resource(max_entries=16, show_spinner=False)
def lens(key: ModelKey, ids: tuple[int, ...], _ckpt: Checkpoint, _encoding) -> rv.Lens:
    return rv.logit_lens(_ckpt.model, _encoding, _ckpt.tokenizer.mask_id)


def lens_tab(ckpt: Checkpoint) -> None:
    st.markdown("The MLM head turns the **last** layer's vector at [MASK] into a guess. Apply the same head "
                "(dense, activation, LayerNorm, the tied word-embedding decoder) to every layer's vector: the logit "
                "lens. The head was trained on the last layer's output only, so an earlier row shows what *this "
                "head* can decode from that layer, not all that the layer knows: a layer can hold the answer in a "
                "form the head cannot read, and a late first appearance does not prove the answer formed late.")
    if not ckpt.model.has_mlm:
        st.info("This checkpoint has no MLM head, so there is nothing to read at [MASK]. Pick another model.")
        return
    state.init(K.LENS_TEXT, K.LENS_K, K.LENS_MASK)
    text = st.text_input("Sentence with [MASK]", key=K.LENS_TEXT.name, max_chars=MAX_CHARS)
    k = st.slider("Top-k per layer", 1, min(10, ckpt.tokenizer.vocab_size), key=K.LENS_K.name)
    try:
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text, allow_truncation=False)
        found = lens(model_key(ckpt), tuple(encoding.ids), ckpt, encoding)
    except InputError as exc:
        say("warning", str(exc))
        return
    choices = range(len(found.masks))
    state.keep_valid(K.LENS_MASK, choices)
    state.init(K.LENS_MASK)
    n = 0
    if len(found.masks) > 1:
        n = st.segmented_control("[MASK]", choices, required=True, key=K.LENS_MASK.name,
                                 format_func=lambda i: f"#{i + 1} (token {found.masks[i].position})")
    mask = found.masks[n]
    ids, probs = rv.lens_grid(mask, k)
    tokens = [ckpt.tokenizer.id_to_token(i) for i in ids]
    chart(fr.lens_heatmap(probs, tokens, f"[MASK] at token {mask.position}: p(token) after each layer"),
          f"logit_lens_{mask.position}")
    table = rv.lens_table(mask, ckpt.tokenizer, k)
    st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
    last = ckpt.tokenizer.id_to_token(mask.top(mask.probs.shape[0] - 1, 1)[0][0])
    st.caption(f"Columns: the top-{k} tokens after each layer with their probabilities, then the final answer "
               f"(“{plain(last)}”)'s probability and rank at every layer. The last row is exactly what Mask & predict "
               f"shows: it equals the model's own output to within {found.final_difference:.1e}. Row 0 reads layer 0, "
               f"the embedding layer's output, before any attention. {embedding_layer(ckpt.config)} So there the head "
               f"sees only the {plain(ckpt.tokenizer.mask_token)} token"
               f"{', its position and its segment' if ckpt.config.type_vocab_size > 1 else ' and its position'}, "
               "nothing of the other words.")
