"""The Representations page's second and fourth tabs: nearest neighbours, and the embeddings' geometry.

Both read the sentence bank: a few thousand corpus sentences encoded once per model and device for every
session (ui/shell/once.py), with a progress bar for whoever waits on it, then shared by every session and rerun.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.figures import representations as fr
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Representations as K
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import MAX_CHARS, WORD_START, chart, say
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views import inputs
from bertviz_lab.views.representations import neighbours as nv

PRECISION_KS = (1, 3, 5, 10)


BANKS: once.Slots[nv.SentenceBank] = once.Slots("Encoding the sentence bank", keep=4)  # one per model_key


def sentence_bank(ckpt: Checkpoint) -> nv.SentenceBank:
    """The model's sentence bank: encoded once for every session, each one that waits on it watching the same
    progress bar."""
    def work(report: once.Report) -> nv.SentenceBank:
        sentences = nv.bank_sentences(ckpt.model)
        note = f"Encoding {len(sentences):,} corpus sentences once for this model"
        report((0.0, note))
        return nv.build_bank(ckpt.model, ckpt.tokenizer, sentences,
                             progress=lambda done: report((done, f"{note}: {done:.0%}")))

    return once.follow(BANKS.slot(model_key(ckpt)), work, lambda news: st.progress(*news),
                       first=(0.0, "Encoding corpus sentences once for this model…"))


@st.cache_resource(max_entries=32, show_spinner=False)
def _query(key: ModelKey, ids: tuple[int, ...], position: int, _ckpt: Checkpoint, _encoding) -> np.ndarray:
    return nv.token_vectors(_ckpt.model, _encoding, position)


@st.cache_resource(max_entries=4, show_spinner="Encoding the sense sets' sentences…")
def _sense_vectors(key: ModelKey, _ckpt: Checkpoint, _bank: nv.SentenceBank) -> list[nv.SenseVectors]:
    return nv.sense_vectors(_ckpt.model, _ckpt.tokenizer, _bank)  # once per model: every k reads them


@st.cache_data(max_entries=16, show_spinner=False)
def _precision(key: ModelKey, k: int, _sets: list[nv.SenseVectors]):
    return nv.precision_at_k(_sets, k)


@st.cache_data(max_entries=8, show_spinner=False)
def _anisotropy(key: ModelKey, _bank: nv.SentenceBank):
    return nv.anisotropy(_bank)


def neighbours_tab(ckpt: Checkpoint) -> None:
    st.markdown(f"{cite('001', start=True)}, exercise 2: judge vectors by their nearest neighbours. Pick a token: on the left, the "
                "rows of the input embedding matrix nearest to its row (one vector per word, whatever the "
                "sentence); on the right, the vectors nearest to its vector at one layer among every token of a "
                "bank of corpus sentences.")
    state.init(K.NN_TEXT, K.NN_K, K.PRECISION_K)
    text = st.text_input("Sentence", key=K.NN_TEXT.name, max_chars=MAX_CHARS)
    try:
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text, allow_truncation=False)
    except InputError as exc:
        say("warning", str(exc))
        return
    choices = [i for i, s in enumerate(encoding.sequence_ids) if s is not None]  # not the special tokens
    if not choices:
        st.warning("Type a sentence with at least one word.")
        return
    senses = nv.sense_words(ckpt.tokenizer, text, encoding)  # position -> "bank", whatever its spelling (Ġbank)
    state.keep_valid(K.NN_TOKEN, choices)
    state.setdefault(K.NN_TOKEN, min(senses, default=choices[0]))
    L = ckpt.config.num_hidden_layers
    state.keep_valid(K.NN_LAYER, range(L + 1))
    state.setdefault(K.NN_LAYER, L)
    cols = st.columns([2, 3, 1])
    position = cols[0].selectbox("Token", choices, key=K.NN_TOKEN.name,
                                 format_func=lambda i: f"{i} {encoding.tokens[i]}")
    layer = cols[1].select_slider("Layer of the contextual vectors", range(L + 1), key=K.NN_LAYER.name,
                                  format_func=fr.layer_name)
    k = cols[2].number_input("Neighbours", 1, 30, key=K.NN_K.name)
    try:
        bank = sentence_bank(ckpt)
    except once.WorkFailed as exc:
        st.error(plain(str(exc)), icon=":material/error:")
        return
    token = encoding.tokens[position]
    left, right = st.columns([1, 3])
    with left:
        st.markdown(f"**Static: the embedding matrix row of “{plain(token)}”**")
        table = nv.static_neighbours(ckpt.model, ckpt.tokenizer, encoding.ids[position], int(k))
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
    with right:
        st.markdown(f"**Contextual: “{plain(token)}” in your sentence after layer {fr.layer_name(layer)}**")
        query = _query(model_key(ckpt), tuple(encoding.ids), position, ckpt, encoding)
        table = nv.contextual_neighbours(bank, ckpt.tokenizer, query[layer], layer, int(k),
                                         word=senses.get(position), own=tuple(encoding.tokens))
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
    specials = ckpt.tokenizer.specials
    st.caption(f"The bank: {len(bank.sentences):,} corpus sentences, {bank.size:,} word tokens (special tokens such "
               f"as {plain(specials['cls'])} and {plain(specials['sep'])} left out), each compared by cosine; your own sentence, "
               "when the bank holds it, is left out (its token would find itself at cosine 1). «» marks the "
               "neighbour in its sentence; the sense column tells the meaning of a sense-set word where the "
               "sentence shows it (— where it does not).")
    st.subheader("Retrieval by sense, layer by layer")
    k = st.segmented_control("k", PRECISION_KS, required=True, key=K.PRECISION_K.name)
    try:
        table = _precision(model_key(ckpt), k, _sense_vectors(model_key(ckpt), ckpt, bank))
    except InputError as exc:
        say("info", str(exc))
        return
    chart(fr.precision_lines(table, k, f"precision@{k}: how many of the {k} nearest share the sense"),
          f"precision_at_{k}")
    st.caption(f"For each built-in sentence of a word (the first tab's sets), its {k} nearest occurrences of the "
               "same word in the bank (its own sentence left out) are compared by sense; dotted: what a random "
               "pick would score. When a sense has fewer than k other sentences, the share is of those there are.")


def _row_of(token: str, kind: str) -> str:
    """What the row shown is: for byte-level BPE and SentencePiece, a token with its space mark is the word
    after a space (at a sentence's start BPE writes it otherwise); WordPiece has no such mark."""
    mark = WORD_START.get(kind)
    if mark is None:
        return (f"The row of “{plain(token)}”: a piece that continues a word." if token.startswith("##") else
                f"The row of “{plain(token)}”: {kind} writes the word alike wherever it stands.")
    if token.startswith(mark):
        return (f"The row of “{plain(token)}”: the word as it stands inside a sentence, after a space ({mark} "
                "stands for it).")
    return f"The row of “{plain(token)}”: a piece written without a space before it."


def geometry_tab(ckpt: Checkpoint) -> None:
    positions = ckpt.config.max_tokens
    st.markdown("**Position embeddings.** BERT learns one vector per position and adds it to each token's "
                "embedding: this is how it knows word order.")
    state.init(K.GEO_WORD)
    state.keep_valid(K.GEO_POSITIONS, range(2, positions + 1))
    state.setdefault(K.GEO_POSITIONS, min(K.GEO_POSITIONS.default, positions))
    left, right = st.columns([1, 3])
    n = left.number_input("Positions shown", 2, positions, key=K.GEO_POSITIONS.name)
    sims = nv.position_cosines(ckpt.model, int(n))
    far_apart = max(2, int(n) // 2)
    near = float(np.mean(np.diag(sims, 1)))
    far = float(np.mean(sims[np.triu_indices(int(n), far_apart)]))
    left.caption(f"Neighbouring positions have mean cosine {near:.3f}; positions {far_apart} or more apart "
                 f"{far:.3f}. A band along the diagonal means nearby positions got similar vectors. Positions that "
                 "training inputs rarely or never reached stay near their random start: no pattern.")
    with right:
        chart(fr.position_heatmap(sims, f"Cosine similarity of the first {n} position embeddings"), "positions")
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**Token embeddings.** The rows of the word-embedding matrix nearest to one word's row.")
        word = st.text_input("Word", key=K.GEO_WORD.name, max_chars=100)
        try:
            token_id = nv.vocabulary_id(ckpt.tokenizer, word)
        except InputError as exc:
            say("warning", str(exc))
        else:
            table = nv.static_neighbours(ckpt.model, ckpt.tokenizer, token_id, 10)
            st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
            st.caption(_row_of(ckpt.tokenizer.id_to_token(token_id), ckpt.tokenizer.kind))
    with right:
        st.markdown("**Anisotropy.** The mean cosine between unrelated tokens (different words in different "
                    "sentences of the bank) after each layer. Near 0, vectors spread in every direction; near 1, "
                    "they all point one way and every cosine looks high.")
        try:
            table = _anisotropy(model_key(ckpt), sentence_bank(ckpt))
        except once.WorkFailed as exc:
            st.error(plain(str(exc)), icon=":material/error:")
            return
        low = min(0.0, float(table["mean cosine"].min()) - 0.05)  # the whole 0..1 scale: near 0 must look near 0
        chart(fr.sense_lines(table, ["mean cosine"], "Mean cosine of unrelated tokens by layer",
                               y_range=[low, 1.0]), "anisotropy")
        values = table["mean cosine"].to_numpy()
        st.caption(f"Here it runs from {values.min():.3f} to {values.max():.3f} (layer {int(values.argmax())} "
                   "highest), so compare cosines within one layer, against this baseline.")
