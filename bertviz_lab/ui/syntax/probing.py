"""The Syntax page's "Probing, carefully" tab: what a probe finds layer by layer (Tenney et al. 2019), against control
tasks (Hewitt & Liang 2019), as a description length (Voita & Titov 2020), and whether the model uses it (amnesic
probing, Elazar et al. 2021).

The probes (probing/report.py `probe_corpus`) take about as long as the page's analysis, so they run when the button
is pressed, once per model and corpus for the whole class (ui/shell/once.py), with a progress bar every session that
waits on it follows; this tab alone computes them, and a picker's change afterwards reads the result. An amnesic probe
(probing/amnesic.py) is one more button, once per model, corpus, task and hidden state.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.errors import LabError
from bertviz_lab.figures.probing import accuracy_by_layer, agreement_removal, codelength_curves, control_curves, \
    lm_effect, mix_heatmap, probe_removal, selectivity_bars, task_depths
from bertviz_lab.probing.amnesic import amnesic, default_layer
from bertviz_lab.probing.records import Amnesic, Probing
from bertviz_lab.probing.report import probe_corpus, seconds_needed
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import chart, say
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state_probing import Careful as K
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.ui.syntax.analysis import Source
from bertviz_lab.views.syntax.amnesic import (agreement_rows, agreement_sentence, amnesic_table, notes,
                                              removal_sentence, use_sentences)
from bertviz_lab.views.syntax.probing import (INTRO, LIMITS, NO_TREES, accuracy_curves, codelength_sentence,
                                              codelength_table, control_table, depths, layer_table, missing_sentences,
                                              mix_weights, name, order_sentence, selectivity_sentences, task_sentence)
from bertviz_lab.views.syntax.analysis import duration, layer_label

PROBED = once.Slots("Careful probing", keep=4)
REMOVED = once.Slots("The amnesic probe", keep=16)


def _news(fraction: float, message: str) -> tuple[float, str]:
    return fraction, f"{message[:1].upper()}{message[1:]} · {fraction:.0%}"


def _follow(slot: once.Once, work, first: str):
    return once.follow(slot, lambda report: work(lambda f, m: report(_news(f, m))), lambda news: st.progress(*news),
                       first=(0.0, first))


def probing_tab(ckpt: Checkpoint, source: Source | None, report=None) -> None:
    """The caption, the button, then the four sections and what a probe cannot prove (`report`: the page's analysis,
    not read here)."""
    st.markdown(INTRO)
    if source is None:
        return
    if source.corpus is None:
        st.info(NO_TREES, icon=":material/account_tree:")
        return
    probing = _probed(ckpt, source)
    if probing is None:
        return
    for sentence in missing_sentences(probing):
        say("caption", sentence)
    if not probing.tasks:
        return
    state.init(*K.DEFAULTS)
    _layers(probing)
    tasks = list(probing.tasks)
    state.keep_valid(K.TASK, tasks)
    st.subheader("2 · Control tasks: is it the vectors or the probe?")
    task = st.selectbox("Task", tasks, key=K.TASK.name, format_func=name,
                        help="The task read by this section and the next.")
    _controls(task, probing)
    _codelength(task, probing)
    _amnesic(ckpt, source, probing)
    st.subheader("What a probe cannot prove")
    st.markdown(LIMITS)


def _probed(ckpt: Checkpoint, source: Source) -> Probing | None:
    """The button and what it costs, then the probing of `source` by this model (None until it is run)."""
    slot = PROBED.slot((model_key(ckpt), source.key))
    ask = st.empty()
    if not (slot.ready() or slot.running()):
        box, config, n = ask.container(), ckpt.config, len(source.corpus.trees)
        seconds = seconds_needed(config.num_hidden_layers, config.hidden_size, n)
        box.caption(f"Reads {n:,} sentences with this model and with random weights of its shape, then fits a linear "
                    "and an MLP probe for every task at every hidden state, on the task and its control task, the "
                    f"scalar mixes and the codelengths: {duration(seconds)} on one core, longer on a busy machine. "
                    "Once run, it serves the whole class.")
        if not box.button("Run the probes", key=K.RUN.name, type="primary", icon=":material/play_arrow:"):
            return None
    try:
        probing = _follow(slot, lambda progress: probe_corpus(ckpt.model, ckpt.tokenizer, source.corpus,
                                                              progress=progress), "Starting…")
    except LabError as exc:
        say("error", str(exc))
        return None
    ask.empty()
    say("caption", f"Probed {probing.sentences:,} sentences of {probing.corpus}: {probing.train_sentences:,} to "
                   f"train, {probing.sentences - probing.train_sentences:,} to test, in "
                   f"{sum(probing.seconds.values()):.0f} s" + (f"; {probing.note}" if probing.note else "") + ".")
    record_table(layer_table(probing), "syntax_probing")
    return probing


def _layers(probing: Probing) -> None:
    st.subheader("1 · Layer by layer")
    chart(accuracy_by_layer(*accuracy_curves(probing), "The linear probe's accuracy by hidden state (dotted: "
                                                           "always the commonest label)"), "syntax_probing_layers")
    st.markdown("\n".join(f"- {plain(task_sentence(t, p))}" for t, p in probing.tasks.items()))
    names, expected, centre = depths(probing)
    if not names:
        return
    chart(task_depths(names, expected, centre, probing.hidden_states,
                      "Where each task is read: expected layer and centre of gravity"), "syntax_probing_order")
    st.markdown(plain(order_sentence(probing)))
    st.caption("Tenney et al.'s scalar mix: a linear probe reads a learned weighted sum of the hidden states. The "
               "**centre of gravity** is the mean hidden state under its weights; the **expected layer** is the mean "
               "depth at which a mix allowed hidden states 0..l gains accuracy over one allowed 0..l − 1.")
    names, weights = mix_weights(probing)
    chart(mix_heatmap(weights, names, "The scalar mix's weights (each row sums to 1)"), "syntax_probing_mix")


def _controls(task: str, probing: Probing) -> None:
    p = probing.tasks[task]
    fits = {f.kind: f for f in (p.linear, p.mlp) if f is not None}
    left, right = st.columns(2)
    chart(control_curves({k: f.accuracy for k, f in fits.items()}, {k: f.control for k, f in fits.items()},
                         p.majority, f"{name(task)[:1].upper()}{name(task)[1:]}: task and control task",
                         p.random_weights), f"syntax_probing_control_{task}", left)
    chart(selectivity_bars({k: f.selectivity for k, f in fits.items()}, "Selectivity: task minus control accuracy"),
          f"syntax_probing_selectivity_{task}", right)
    st.markdown("\n\n".join(plain(s) for s in selectivity_sentences(task, p)))
    if p.note:
        say("caption", f"{p.note[:1].upper()}{p.note[1:]}.")
    with st.expander("Every hidden state's accuracies, as a table"):
        table = record_table(control_table(p), f"syntax_probing_control_{task}")
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table, "%.3f"))


def _codelength(task: str, probing: Probing) -> None:
    p = probing.tasks[task]
    st.subheader("3 · Description length: how easily is it read?")
    if p.codelength is None:
        st.caption("No codelength was computed for this task.")
        return
    cl = p.codelength
    chart(codelength_curves(cl.online, cl.control, cl.random_weights, cl.uniform,
                            f"Online codelength of {name(task)}'s {cl.examples:,} training labels"),
          f"syntax_probing_codelength_{task}")
    st.markdown(plain(codelength_sentence(task, p)))
    st.caption("Voita & Titov's online code: the labels are sent block by block, each block coded by a probe trained "
               "on the blocks before it. Compression is the uniform code's length over this one.")
    with st.expander("Every hidden state's codelength, as a table"):
        table = record_table(codelength_table(p), f"syntax_probing_codelength_{task}")
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table, "%.3f"))


def _amnesic(ckpt: Checkpoint, source: Source, probing: Probing) -> None:
    st.subheader("4 · Amnesic probing: found, but used?")
    st.markdown("Remove what a linear probe reads of one task from one hidden state (iterative nullspace projection, "
                "Ravfogel et al. 2020), let the model run on, and compare its masked-word guesses on held-out "
                "sentences with those after removing as many random directions.")
    tasks = list(probing.tasks)
    states = list(range(probing.hidden_states))
    state.keep_valid(K.AMNESIC_TASK, tasks)
    state.keep_valid(K.AMNESIC_LAYER, states)
    state.setdefault(K.AMNESIC_LAYER, default_layer(probing.hidden_states - 1))
    left, right = st.columns([2, 3])
    task = left.selectbox("Remove", tasks, key=K.AMNESIC_TASK.name, format_func=name)
    layer = right.segmented_control("At hidden state", states, key=K.AMNESIC_LAYER.name, required=True, wrap=True,
                                    format_func=layer_label)
    slot = REMOVED.slot((model_key(ckpt), source.key, task, layer))
    ask = st.empty()  # the button; gone once the result is there
    if not (slot.ready() or slot.running()) and not ask.button(
            "Remove it and measure", key=K.REMOVE.name, icon=":material/content_cut:",
            help="Runs the model on the held-out sentences with the task's directions removed, and again for each "
                 "of 5 random projections of the same rank."):
        return
    try:
        result = _follow(slot, lambda progress: amnesic(ckpt.model, ckpt.tokenizer, source.corpus, task, layer,
                                                        progress=progress), "Starting…")
    except LabError as exc:
        say("error", str(exc))
        return
    ask.empty()
    _amnesic_result(result)


def _amnesic_result(a: Amnesic) -> None:
    found, used = st.columns(2)
    found.markdown("#### Found by a probe")
    chart(probe_removal(a.probe_before, a.probe_after, a.probe_random, a.majority,
                        f"A fresh linear probe for {name(a.task)}"), f"syntax_amnesic_probe_{a.task}_{a.layer}", found)
    found.markdown(plain(removal_sentence(a)))
    used.markdown("#### Used by the model")
    if a.masked and a.rank:
        chart(lm_effect(a.loss_before, a.loss_after, a.loss_random, "loss (nats; higher: worse)",
                        f"Masked-LM loss, {a.masked:,} held-out tokens"),
              f"syntax_amnesic_loss_{a.task}_{a.layer}", used)
    used.markdown("\n\n".join(plain(s) for s in use_sentences(a)))
    if a.agreement_pairs:
        ks, before, after, random, pairs = agreement_rows(a)
        chart(agreement_removal(ks, before, after, random, pairs, "Agreement by attractors, number removed or not"),
              f"syntax_amnesic_agreement_{a.layer}")
        st.markdown(plain(agreement_sentence(a)))
    for note in notes(a):
        say("caption", note)
    with st.expander("The amnesic probe's numbers, as a table"):
        table = record_table(amnesic_table(a), f"syntax_amnesic_{a.task}_{a.layer}")
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table, "%.4f"))
