"""The "Inside the feed-forward layer" page's sentence and its first two sections: One sentence (every layer's
activations, the most active neurons at a token with what each writes, the layer's factors) and One neuron (its top
contexts over a corpus, what it writes, and what switching it off does to the guess).

What is the same for the whole class is computed once for it (ui/shell/once.py), a progress bar while it runs: a
sentence's view per (model, ask), a corpus's index per (model, corpus) (and kept on disk by neurons/index.py, so a
restart reads it), a neuron's view per (model, corpus, ask). A change of layer or neuron reads the index again, and
never builds it again.
"""

from __future__ import annotations

import hashlib
from functools import partial

import pandas as pd
import streamlit as st

from bertviz_lab import files
from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.figures import neurons as fne
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state_neurons import CORPORA, Neurons as K
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.neurons import corpus as vne_corpus
from bertviz_lab.views.neurons import reading as vne_read
from bertviz_lab.views.neurons.ask import MAX_FACTORS, NeuronAsk
from bertviz_lab.views.neurons.neuron import NeuronView, neuron_view
from bertviz_lab.views.neurons.sentence import SentenceView, default_token, encode, sentence_view

LEAD = ("Two thirds of BERT's weights sit in its feed-forward layers, not in attention. Each neuron fires on some "
        "pattern in the text (its input weights, the \"key\") and then adds its own direction to the token's vector "
        "(its output weights, the \"value\"), which can push some words up as the guess (Geva et al. 2021). Layers "
        "and neurons are counted from 0.")
DISCRIMINATOR = ("This is a discriminator: it guesses no words, so no [MASK] is needed. Its guess here is its "
                 "replaced-token logit F at the token picked (p = sigmoid(F), the probability that the token was "
                 "replaced), and no neuron's value can be read in a vocabulary")
SENTENCES = once.Slots("Reading the sentence", keep=16)
INDEXES = once.Slots("Indexing the corpus", keep=4)
NEURONS = once.Slots("Reading the neuron", keep=32)


def family_words(ckpt: Checkpoint) -> str | None:
    """What the family note adds on this page: the discriminator's guess; None: the family's own note."""
    return DISCRIMINATOR if ckpt.model.has_rtd and not ckpt.model.has_mlm else None


def no_guess(ckpt: Checkpoint) -> str:
    """Why this model has no guess to explain ("" : it has one: an MLM head, or ELECTRA's replaced-token head)."""
    model = ckpt.model
    if model.has_mlm or model.has_rtd:
        return ""
    return (f"This model has no masked-language-model (MLM) head: {ckpt.family.no_mlm(model.has_rtd)}, so it makes "
            "no guess for its neurons to move. Pick another model in the sidebar.")


def _bar(news: tuple[float, str]) -> None:
    st.progress(*news)


def _follow(slots: once.Slots, key, work, first: str):
    """`work(report)` once for the class under `key`, a progress bar while it runs."""
    return once.follow(slots.slot(key), work, _bar, first=(0.0, first))


def text_box() -> str:
    """The sentence every section reads."""
    return st.text_input("Sentence, with [MASK] where a guess goes", key=K.TEXT.name,
                         help="One sentence. With a [MASK], the sections also show the guess there and the neurons "
                              "it rests on; without one, only what the neurons do.")


def _layer_picker(layers: int) -> int:
    state.keep_valid(K.LAYER, range(layers))
    state.setdefault(K.LAYER, layers - 1)
    return st.segmented_control("Layer", list(range(layers)), key=K.LAYER.name, required=True, wrap=True)


def _token_picker(ckpt: Checkpoint, text: str) -> int:
    encoding = encode(ckpt, text)
    positions = list(range(len(encoding.tokens)))
    state.keep_valid(K.TOKEN, positions)
    state.setdefault(K.TOKEN, default_token(ckpt, encoding))
    return st.selectbox("Token", positions, key=K.TOKEN.name, format_func=lambda i: f"{i} {encoding.tokens[i]}",
                        help="The token whose most active neurons are listed, and where One neuron's default "
                             "neuron is the most active.")


def _neuron() -> int | None:
    value = state.get(K.NEURON)
    return None if value is None else int(value)


def sentence(ckpt: Checkpoint, text: str) -> SentenceView:
    """The sentence's view for the asks of this page's pickers (their values as they stand), computed once."""
    ask = NeuronAsk(text, layer=state.get(K.LAYER), neuron=_neuron(), token=state.get(K.TOKEN),
                    factors=state.get(K.FACTORS))
    return _follow(SENTENCES, (model_key(ckpt), ask), lambda report: sentence_view(ckpt, ask),
                   "Running the sentence through every layer…")


# --- One sentence --------------------------------------------------------------------------------------------------
def sentence_tab(ckpt: Checkpoint, text: str) -> None:
    """The pickers, the activations, the top neurons at the token, the factors, and their sentences."""
    left, right = st.columns(2)
    with left:
        _token_picker(ckpt, text)
    with right:
        _layer_picker(ckpt.config.num_hidden_layers)
    view = sentence(ckpt, text)
    token = view.tokens[view.token]
    if view.guesses:
        st.markdown(f"The guess at the [MASK]: **{plain(view.guess)}** (p = {view.guesses[0][1]:.4f}).")
    if view.replaced is not None:
        st.markdown(f"The discriminator at '{plain(token)}': p(replaced) = {view.replaced:.4f}.")
    chart(fne.activation_heatmap(view.activations[view.layer], view.tokens, view.layer, keep=(view.neuron,)),
          f"neurons_activations_L{view.layer}")
    st.caption("Each cell is one neuron's activation (after the activation function) at one token: blue where it "
               "fires, red where it goes a little below 0. Hover for the exact value.")
    chart(fne.top_neurons_bar([t.neuron for t in view.top], [t.activation for t in view.top],
                              [", ".join(t.promoted[:3]) for t in view.top], token, view.layer),
          f"neurons_top_L{view.layer}")
    if view.no_head:
        st.caption(plain(view.no_head[0].upper() + view.no_head[1:]) + ".")
    record_table(pd.DataFrame([{"layer": view.layer, "neuron": t.neuron, "activation": t.activation,
                                "promotes": " ".join(t.promoted)} for t in view.top]),
                 f"neurons_top_L{view.layer}_t{view.token}")
    st.slider("Number of factors", 1, MAX_FACTORS, key=K.FACTORS.name,
              help="Non-negative matrix factorisation of this layer's activations over the sentence (as Ecco): "
                   "each factor is a group of neurons that fire together, its strip shows on which tokens.")
    factors = view.factors
    labels = [f"factor {f + 1}: " + ", ".join(fne.neuron_label(n) for n in factors.top_neurons(f, 3))
              for f in range(factors.strengths.shape[1])]
    chart(fne.factor_strips(factors.strengths, view.tokens, labels,
                            f"Layer {view.layer}'s activations as {len(labels)} factors"),
          f"neurons_factors_L{view.layer}")
    st.markdown("\n".join(f"- {plain(s)}" for s in vne_read.sentence_sentences(view)))


# --- One neuron ----------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def _story() -> vne_corpus.Sentences:
    return vne_corpus.story()


def corpus_picker() -> tuple[tuple, vne_corpus.Sentences] | None:
    """The corpus picked, with the key its index is kept under; None while an upload is awaited (said)."""
    state.keep_valid(K.CORPUS, list(CORPORA))
    kind = st.segmented_control("Top contexts over", list(CORPORA), format_func=CORPORA.get, key=K.CORPUS.name,
                                required=True, wrap=True)
    if kind == "own":
        text = st.text_area("Your sentences, one a line", key=K.OWN.name, height=120)
        return ("own", text), vne_corpus.typed(text)
    if kind == "upload":
        upload = st.file_uploader("A .txt file, one sentence a line", type=["txt"], key=K.UPLOAD.name,
                                  max_upload_size=max(vne_corpus.MAX_FILE_BYTES // 2**20, 1))
        if upload is None:
            st.info("Upload a .txt file to read its sentences.", icon=":material/upload_file:")
            return None
        raw = upload.getvalue()
        return ("upload", hashlib.sha256(raw).hexdigest()), vne_corpus.uploaded(upload.name, raw)
    return ("story",), _story()


def index(ckpt: Checkpoint, key: tuple, corpus: vne_corpus.Sentences):
    """The corpus's index for this model, built once for the class (and kept on disk), a progress bar meanwhile."""
    def work(report: once.Report):
        return vne_corpus.index(ckpt, corpus, progress=lambda done, what: report((min(max(done, 0.0), 1.0), what)))

    return _follow(INDEXES, (model_key(ckpt), key), work,
                   f"Reading {len(corpus.sentences):,} sentences once for the whole class…")


def neuron_tab(ckpt: Checkpoint, text: str) -> None:
    """The layer and neuron, the corpus, then the neuron's contexts, its value and its switch-off."""
    left, right = st.columns(2)
    with left:
        layer = _layer_picker(ckpt.config.num_hidden_layers)
    with right:
        state.setdefault(K.NEURON, None)
        st.number_input("Neuron", min_value=0, step=1, key=K.NEURON.name,
                        placeholder="the most active at the token",
                        help="Empty: the neuron of this layer most active at the token picked under One sentence.")
    picked = corpus_picker()
    if picked is None:
        return
    key, corpus = picked
    found = index(ckpt, key, corpus)
    ask = NeuronAsk(text, layer=layer, neuron=_neuron(), token=state.get(K.TOKEN))
    view = _follow(NEURONS, (model_key(ckpt), key, ask), lambda report: neuron_view(ckpt, found, ask, corpus.name),
                   "Reading the neuron…")
    draw_neuron(view, corpus, no_guess(ckpt))


def context_line(tokens: tuple[str, ...], position: int, value: float) -> str:
    """One top context as Markdown: the activation, then the sentence without its framing tokens, the firing token
    highlighted; every token escaped (`plain`: a corpus is the learner's text)."""
    words = [plain(t) for t in tokens]
    words[position] = f":orange-background[**{words[position]}**]"
    inside = words[1:-1] if 0 < position < len(tokens) - 1 else words  # without the framing tokens ([CLS], [SEP])
    return f"- `{value:.3f}` " + " ".join(inside)


def draw_neuron(view: NeuronView, corpus: vne_corpus.Sentences, why: str = "") -> None:
    """The neuron's contexts, what it writes and its switch-off; `why`: why the model makes no guess ("" : it does)."""
    st.markdown(f"#### Layer {view.layer}, neuron {view.neuron}")
    st.markdown("**Where it fires** (its top contexts over " + plain(corpus.name) + ", the firing token marked; "
                f"its mean activation there is {view.mean:.4f})")
    if corpus.note:
        st.caption(plain(corpus.note))
    firing = [c for c in view.contexts if c.value > 0]  # a small corpus fills the top K with tokens it ignores
    if firing:
        st.markdown("\n".join(context_line(c.tokens, c.position, c.value) for c in firing))
    if len(firing) < len(view.contexts):
        st.caption(f"{len(view.contexts) - len(firing)} of its top {len(view.contexts)} contexts are at or below 0, "
                   "where it does not fire: not shown (they are in the CSV).")
    record_table(pd.DataFrame(vne_read.context_rows(view)), f"neurons_contexts_L{view.layer}_n{view.neuron}")
    st.markdown("**What it writes**")
    if view.promoted is None:
        st.caption(plain(view.no_head[0].upper() + view.no_head[1:]) + ".")
    else:
        up, down = st.columns(2)
        for where, name, rows in ((up, "promotes", view.promoted), (down, "suppresses", view.suppressed)):
            frame = record_table(pd.DataFrame(rows, columns=["token", "score"]),
                                 f"neurons_{name}_L{view.layer}_n{view.neuron}")
            where.markdown(f"Tokens it {name} most")
            where.dataframe(frame, hide_index=True, column_config={"score": st.column_config.NumberColumn(
                format="%.3f")})
        st.caption(vne_read.VALUE_READING)
    st.markdown("**Switching it off**")
    line = vne_read.switch_sentence(view)
    if view.switch is None:
        st.caption(plain(why) if why else
                   "Type a sentence with a [MASK] to see what switching this neuron off does to the guess.")
    else:
        cells = st.columns(3)
        s = view.switch
        for cell, name, f, guess in zip(cells, ("As it is", "Switched off (0)", "At its corpus mean"),
                                        (s.f, s.f_zero, s.f_mean), (view.guess, view.guess_zero, view.guess_mean)):
            cell.metric(name, f"{f:.4f}", help=plain(f"F = {view.metric}"))
            if guess:
                cell.caption("Top guess: " + plain(guess))
    if line:
        st.markdown(plain(line))
    st.markdown("\n".join(f"- {plain(s)}" for s in vne_read.neuron_sentences(view)))
    table = pd.DataFrame(vne_read.context_rows(view))
    st.download_button("Download its top contexts (CSV)", partial(files.csv_text, table),
                       file_name=f"neurons_contexts_L{view.layer}_n{view.neuron}.csv", mime="text/csv",
                       on_click="ignore", icon=":material/table:")
