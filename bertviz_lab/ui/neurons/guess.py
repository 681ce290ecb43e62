"""The "Inside the feed-forward layer" page's last two sections: Neurons behind the guess (the [MASK] guess attributed
to every neuron, the top ones, and the causal test against random neurons of the same layers; the grammatical and the
word-knowledge built-in guesses side by side, Niu et al. 2024) and Outlier dimensions (the LayerNorms' outlying
dimensions, and the held-out loss with two of them switched off against two random ones, Kovaleva et al. 2021).

Each result is computed once for the class per (model, what it was asked), a progress bar while it runs; the loss
test (hundreds of sentences, twenty draws) waits for its button, and once run for the class it is shown to everyone.
"""

from __future__ import annotations

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
from bertviz_lab.ui.shell.state_neurons import Neurons as K
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.ui.neurons.sections import no_guess
from bertviz_lab.views.neurons import reading as vne_read
from bertviz_lab.views.neurons.ask import MAX_K, METHODS, NeuronAsk
from bertviz_lab.views.neurons.behind import BehindView, behind_view, niu_view
from bertviz_lab.neurons.outliers import Outliers, outlier_dims
from bertviz_lab.views.neurons.outliers import NO_LOSS, outliers_view

BEHIND = once.Slots("Finding the neurons behind the guess", keep=16)
NIU = once.Slots("Grammar vs word knowledge", keep=4)
OUTLIERS = once.Slots("The loss test", keep=4)
METHOD_LABELS = {"ig": "Integrated gradients", "grad": "Activation × gradient"}


def _bar(news: tuple[float, str]) -> None:
    st.progress(*news)


# --- Neurons behind the guess --------------------------------------------------------------------------------------
def behind_tab(ckpt: Checkpoint, text: str) -> None:
    """The answer, foil, method and k; the attribution, the causal test and their sentences; the side-by-side."""
    why = no_guess(ckpt)
    if why:
        st.info(plain(why), icon=":material/info:")
        return
    replaced = not ckpt.model.has_mlm
    answer = foil = ""
    if not replaced:
        left, right = st.columns(2)
        answer = left.text_input("Answer", key=K.ANSWER.name, placeholder="the top guess",
                                 help="The word whose logit F measures; empty: the model's top guess.")
        foil = right.text_input("Foil (optional)", key=K.FOIL.name, placeholder="none",
                                help="With a foil, F = logit(answer) − logit(foil): what makes this word win over "
                                     "that one.")
    left, right = st.columns([2, 1])
    state.keep_valid(K.METHOD, list(METHODS))
    method = left.segmented_control("Attribution", list(METHODS), format_func=METHOD_LABELS.get, key=K.METHOD.name,
                                    required=True, help="Integrated gradients scale each neuron's activation from 0 "
                                                        "up to its value (Dai et al. 2022); activation × gradient is "
                                                        "its first step, cheaper and rougher.")
    k = right.number_input("Neurons switched off (k)", 1, MAX_K, step=1, key=K.K.name)
    ask = NeuronAsk(text, answer=answer.strip(), foil=foil.strip(), method=method, k=int(k))
    view = once.follow(BEHIND.slot((model_key(ckpt), ask)), lambda report: behind_view(ckpt, ask), _bar,
                       first=(0.0, "Attributing the guess to every neuron, then switching the top ones off…"))
    draw_behind(view)
    niu(ckpt, ask)


def _labels(view: BehindView) -> list[str]:
    return [fne.neuron_label(r.neuron, r.layer) + (f" → {r.promoted}" if r.promoted else "") for r in view.top]


def draw_behind(view: BehindView) -> None:
    where = plain(view.tokens[view.position])
    st.markdown(f"**F = {plain(view.metric)}** at '{where}' (token {view.position}) = {view.f:.4f}.")
    chart(fne.attribution_bar(_labels(view), [r.score for r in view.top], view.metric,
                              f"The {len(view.top)} neurons the guess rests on most"), "neurons_attribution")
    st.markdown(plain(vne_read.attribution_sentence(view)))
    test = view.test
    chart(fne.causal_test(test.drop_top, test.drops, test.k, view.metric,
                          f"Switching off the top {test.k} against {test.k} random neurons"), "neurons_causal")
    st.markdown(plain(vne_read.causal_sentence(view)))
    table = record_table(pd.DataFrame(vne_read.top_rows(view)), "neurons_behind_the_guess")
    st.download_button("Download the top neurons (CSV)", partial(files.csv_text, table),
                       file_name="neurons_behind_the_guess.csv", mime="text/csv", on_click="ignore",
                       icon=":material/table:")


def niu(ckpt: Checkpoint, ask: NeuronAsk) -> None:
    """The causal test on the built-in grammatical and word-knowledge guesses, side by side, when opened."""
    box = st.expander("Grammar vs word knowledge", key=K.NIU.name, on_change="rerun",
                      icon=":material/compare_arrows:")
    if not box.open:
        return
    with box:
        st.caption("Are \"knowledge neurons\" special? The same causal test on a grammatical guess (number "
                   "agreement) and on a guess of word knowledge (Niu et al. 2024).")
        view = once.follow(NIU.slot((model_key(ckpt), ask.k, ask.method)),
                           lambda report: niu_view(ckpt, k=ask.k, method=ask.method), _bar,
                           first=(0.0, "Running the causal test on both built-in guesses…"))
        for where, guess, one in zip(st.columns(len(view.views)), view.guesses, view.views):
            where.markdown(f"**{plain(guess.title[0].upper() + guess.title[1:])}**: {plain(guess.text)}")
            where.caption(plain(guess.note[0].upper() + guess.note[1:]) + ".")
            test = one.test
            title = f"{guess.title[0].upper() + guess.title[1:]}: top {test.k} vs random"
            chart(fne.causal_test(test.drop_top, test.drops, test.k, one.metric, title), f"neurons_niu_{guess.key}",
                  where)
        st.markdown(plain(vne_read.niu_sentence(view)))


# --- Outlier dimensions --------------------------------------------------------------------------------------------
def outliers_tab(ckpt: Checkpoint, text: str) -> None:
    """Each layer's outlying dimensions (at once: a read of the weights), then the gains drawn and the loss test: on
    its button, or at once when it was run for the class."""
    slot = OUTLIERS.slot(model_key(ckpt))
    drawn = not (slot.ready() or slot.running())  # the table is drawn here, before the button, and not again below
    if drawn:
        dims_table(outlier_dims(ckpt.model))
        if not ckpt.model.has_mlm:
            st.info(plain(NO_LOSS[0].upper() + NO_LOSS[1:]) + ".", icon=":material/info:")
            return
        st.markdown("**The loss test**: the held-out masked-LM loss with the two dimensions that stand out most "
                    "zeroed in every LayerNorm, against as many random dimensions (20 seeded draws).")
        if not st.button("Run the loss test", key=K.LOSS.name, icon=":material/play_arrow:",
                         help="Hundreds of held-out sentences, 21 times: seconds on the shipped model, minutes on "
                              "a base-sized one. Once run, it is shown to the whole class."):
            return

    def work(report: once.Report):
        return outliers_view(ckpt, progress=lambda done, what: report((min(max(done, 0.0), 1.0), what)))

    view = once.follow(slot, work, _bar, first=(0.0, "Zeroing the dimensions and scoring held-out sentences…"))
    if not drawn:
        dims_table(view.outliers)
    chart(fne.outlier_weights(view.gamma, view.outliers.weight_dims, "Each layer's LayerNorm gain γ, by dimension"),
          "neurons_outlier_gain")
    test = view.test
    if test is None:
        st.info(plain(view.no_head[0].upper() + view.no_head[1:]) + ".", icon=":material/info:")
    else:
        chart(fne.outlier_loss(test.loss, test.loss_off, test.random_loss, tuple(test.dims),
                               f"Held-out loss with dims {test.dims[0]} and {test.dims[1]} zeroed"),
              "neurons_outlier_loss")
    st.markdown("\n".join(f"- {plain(s)}" for s in vne_read.outlier_sentences(view)))


def dims_table(found: Outliers) -> None:
    """Each layer's two outlying gain and bias dimensions with their z-scores, and the two that stand out most."""
    st.markdown(f"Across the layers, dimensions **{found.dims[0]}** and **{found.dims[1]}** stand out most often.")
    rows = [{"layer": layer, "gain dims": " ".join(map(str, found.weight_dims[layer])),
             "gain z": " ".join(f"{z:.1f}" for z in found.weight_z[layer]),
             "bias dims": " ".join(map(str, found.bias_dims[layer])),
             "bias z": " ".join(f"{z:.1f}" for z in found.bias_z[layer])} for layer in range(len(found.weight_dims))]
    st.dataframe(record_table(pd.DataFrame(rows), "neurons_outlier_dims"), hide_index=True)
