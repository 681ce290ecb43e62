"""The Syntax page's last two tabs: the structural probe (Hewitt & Manning 2019) and agreement across attractors
(Linzen et al. 2016). Both read the analysis ui/syntax/analysis.py ran; the probe's tree for one sentence runs one forward
of that sentence, cached per model."""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.figures import syntax as fsy
from bertviz_lab.syntax.agreement import verdict
from bertviz_lab.syntax.report import SyntaxReport
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Syntax as K
from bertviz_lab.ui.syntax.analysis import Source, needs
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.syntax import analysis as vs


@st.cache_resource(max_entries=32, show_spinner=False)
def _vectors(key: ModelKey, source: tuple, index: int, _ckpt: Checkpoint, _report: SyntaxReport) -> np.ndarray:
    return vs.sentence_vectors(_ckpt.model, _ckpt.tokenizer, _report, index)


def probe_tab(ckpt: Checkpoint, source: Source | None, report: SyntaxReport | None) -> None:
    st.markdown("Hewitt & Manning (2019) train a linear map per layer so that squared distances between the mapped "
                "word vectors match the number of edges between the words in the gold tree, then test it on "
                "sentences it never saw. **UUAS**: the share of gold edges found by the minimum spanning tree of the "
                "predicted distances (punctuation left out); **distance Spearman**: how well each word's predicted "
                "distances rank the others as the tree does; **root accuracy**: how often the shallowest word by a "
                "second (depth) probe is the sentence's root.")
    if not needs(source, report):
        return
    table = vs.probe_table(report)
    control = None if report.control is None else table["UUAS, random weights"].to_numpy()
    chart(fsy.probe_curves({name: table[column].to_numpy() for column, name in vs.PROBE_CURVES.items()},
                            report.probe.linear_uuas, "The structural probe, layer by layer (held-out sentences)",
                            control), "syntax_probe")
    st.markdown(plain(vs.probe_sentence(report)))
    st.caption("Layers count hidden states: 0 is the embeddings' output and n the output of encoder layer n, whose "
               "heads the other tabs name L(n − 1) H0, L(n − 1) H1 and so on. A probe that finds a tree shows that "
               "the tree can be read from the vectors with a linear map trained for it, not that the model uses it.")
    with st.expander("Every layer's scores, as a table"):
        shown = record_table(table, "syntax_probe")
        st.dataframe(shown, hide_index=True, height=table_height(shown), column_config=numbers(shown))
    st.subheader("One held-out sentence: the gold tree and the probe's")
    held = vs.held_out(report)
    layers = [s.layer for s in report.probe.layers]
    state.keep_valid(K.SENTENCE, held)
    state.keep_valid(K.PROBE_LAYER, layers)
    state.setdefault(K.PROBE_LAYER, report.best_uuas()[0])
    left, right = st.columns([3, 2])
    index = left.selectbox("Sentence", held, key=K.SENTENCE.name,
                           format_func=lambda i: f"{i + 1}: {report.corpus.trees[i].text}")
    layer = right.segmented_control("Probe at layer", layers, key=K.PROBE_LAYER.name, required=True, wrap=True,
                                    format_func=vs.layer_label)
    found = vs.probe_tree(report, layer, index, _vectors(model_key(ckpt), source.key, index, ckpt, report))
    title = (f"Layer {vs.layer_label(layer)}: {found.right} of {len(found.gold)} gold edges found "
             "(gold above the words, the probe's below)")
    chart(fsy.tree_arcs(list(found.words), [tuple(sorted(e)) for e in found.gold],
                         [tuple(sorted(e)) for e in found.predicted], title), "syntax_tree")
    st.caption("Blue, solid: an edge both trees have. Orange, dashed: an edge of the probe's that the gold tree lacks. "
               "Grey, dotted: a gold edge the probe missed. Punctuation takes no part, as in UUAS.")


def agreement_tab(ckpt: Checkpoint, source: Source | None, report: SyntaxReport | None) -> None:
    st.markdown("Linzen et al. (2016), with Goldberg's (2019) masked version: the verb is masked and the model "
                "agrees when it scores the right form above the wrong one. **Attractors** are nouns of the other "
                "number between the subject and the verb (*the children in the **park** were*).")
    if not needs(source, report):
        return
    agreement = report.agreement
    if agreement is None:
        model = ckpt.model
        note = (f"{vs.NO_MLM[:-1]}: {ckpt.family.no_mlm(getattr(model, 'has_rtd', False))}."
                if not getattr(model, "has_mlm", False) else
                f"Agreement could not be scored here: {report.agreement_note}.")
        st.info(plain(note), icon=":material/block:")
        return
    pair = vs.example_pair(agreement)
    if pair is not None:  # the issue's own pair first, whatever the model makes of it
        box = st.container(border=True)
        left, *right = box.columns([4, 1, 1])
        left.markdown(f"**{plain(pair.masked)}**\n\n{vs.example_sentence(pair)}")
        for where, form, p in zip(right, (pair.right, pair.wrong), (pair.p_right, pair.p_wrong)):
            where.metric(f"p({form}){' (right)' if form == pair.right else ''}", f"{p:.3f}")
    chart(fsy.agreement_bars(*vs.accuracies(agreement), "Right form scored higher, by number of attractors"),
          "syntax_agreement")
    st.markdown(plain(vs.agreement_sentence(agreement)))
    st.markdown(plain(verdict(agreement)))
    options = ["all", *sorted({s.attractors for s in agreement.scores})]
    state.keep_valid(K.ATTRACTORS, options)
    state.init(K.ATTRACTORS)
    shown = st.segmented_control("Pairs with", options, key=K.ATTRACTORS.name, required=True,
                                 format_func=lambda k: "any number of attractors" if k == "all" else
                                 f"{k} attractor{'' if k == 1 else 's'}")
    table = record_table(vs.agreement_table(agreement, shown), "syntax_agreement")
    st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
