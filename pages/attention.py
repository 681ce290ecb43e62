"""Attention explorer: every head's weights, the grid of all heads, heads switched off,
one query's softmax worked out step by step, and the rest of its layer, all from one traced forward pass.

The layer, head and query pickers sit above five tabs (one screen each in projector view); a line under the
sentence box says what the chosen query looks at, so a new sentence shows its effect without scrolling."""

from functools import partial

import pandas as pd
import streamlit as st

from bertviz_lab import files
from bertviz_lab.errors import InputError
from bertviz_lab.figures import attention as fa
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.attention.cached import (WEIGHT_FORMAT, all_heads, context_table, explore, keep_token_choices,
                                      pooled_input, predictions, query_summary, rest_of_layer)
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.state import Attention as K  # this page's session-state keys
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import chart, encode_or_stop, family_note, index_picker, say, sentence_inputs
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.attention import overview as ov

TABS = ("The matrix", "Switch heads off", "Softmax, step by step", "Context and q · k", "The rest of the layer")

st.title("Attention explorer")
st.caption("Every number below is what the model computed for your text in one forward pass. "
           "Layers, heads and tokens are counted from 0, as in the code.")
ckpt = active_model()
family_note(ckpt)
L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
text_a, text_b = sentence_inputs(K.SENTENCES, ckpt.config)
encoding = encode_or_stop(ckpt, text_a, text_b)
summary = st.empty()  # filled once the pickers below are read
names = av.head_names(L, H)
state.keep_valid(K.OFF, names)
off = tuple(state.get(K.OFF))  # heads switched off
view = explore(ckpt, encoding, off)
tokens = range(len(view.tokens))
for key, options in ((K.LAYER, range(L)), (K.HEAD, range(H)), (K.BLOCK, av.BLOCKS)):
    state.keep_valid(key, options)  # a new sentence or model may not offer the remembered choice
keep_token_choices(view)  # a remembered query or key: the same token at the same position, or the default
state.setdefault(K.QUERY, av.default_query(view))

# --- What to look at: shared by every tab ------------------------------------------
cols = st.columns(2)
layer = index_picker(cols[0], "Layer", L, K.LAYER.name, K.LAYER.default)  # buttons, or a slider for many
head = index_picker(cols[1], "Head", H, K.HEAD.name, K.HEAD.default)
cols = st.columns([4, 3, 3])
query = cols[0].selectbox("Query token", tokens, format_func=view.labels.__getitem__, key=K.QUERY.name,
                          on_change=state.forget, args=(K.KEY,))  # a new query: its strongest key
mean = cols[1].toggle("Mean over heads", key=K.MEAN.name)
specials = ckpt.tokenizer.specials
hide = cols[2].toggle(plain(f"Hide {specials['cls']}, {specials['sep']}"), key=K.HIDE.name)
block = K.BLOCK.default
if view.is_pair:
    block = st.segmented_control("Queries → keys", av.BLOCKS, default=K.BLOCK.default, required=True,
                                 key=K.BLOCK.name)
summary.markdown(query_summary(view, layer, None if mean else head, query))
state.keep_valid(K.TAB, TABS)
matrix_tab, off_tab, softmax_tab, context_tab, layer_tab = st.tabs(TABS, key=K.TAB.name, on_change="rerun")

# --- The matrix: one head, or the mean over heads -----------------------------------
with matrix_tab:
    T, window = len(view.tokens), None
    if T > ov.LONG:  # a long input: one token range to read, and the whole input pooled below
        state.keep_valid(K.RANGE, [0, T - 1])
        state.setdefault(K.RANGE, ov.default_window(T))
        window = st.slider(f"Tokens shown (of {T}), as queries and as keys", 0, T - 1, key=K.RANGE.name,
                           help="A long input's matrix is too big to read whole: pick the tokens to look at.")
    shown = av.matrix(view, layer, None if mean else head, hide, block, window)
    chart(fa.attention_heatmap(shown.weights, shown.col_axis, shown.row_axis, shown.title), shown.name)
    if hide or block != "all" or (window is not None and tuple(window) != (0, T - 1)):
        st.caption("Rows no longer sum to 1: the hidden columns keep their share of each row's weight "
                   "(nothing is renormalised).")
    else:
        st.caption("Each row is one query's softmax over all keys and sums to 1. Hover a cell for its weight to "
                   f"{fa.WEIGHT_DIGITS} significant digits.")
    if off:
        st.caption(f"Shown with {len(off)} head(s) switched off: {', '.join(off)}. "
                   "Layers above them change too.")
    st.download_button("Download this matrix (CSV)", partial(files.csv_text, shown.frame()),  # written on click
                       file_name=f"{shown.name}.csv", mime="text/csv", key=K.CSV.name, on_click="ignore")
    if window is not None:
        pooled_input(view, layer, None if mean else head)
    all_heads(view, hide, block)

# --- Heads switched off --------------------------------------------------------------
with off_tab:
    st.multiselect("Heads to switch off", names, key=K.OFF.name, placeholder="none: every head is on")
    st.caption("A switched-off head still computes its weights, but its context is multiplied by 0, so the "
               "layers above never see it. The top guesses for each [MASK], with every head and without yours:")
    try:
        table = predictions(ckpt, encoding, off)
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
    except InputError as exc:
        say("info", str(exc))

# --- Softmax steps for the query ---------------------------------------------------------
with softmax_tab:
    tau = st.slider("What-if attention temperature τ", 0.1, 5.0, K.TAU.default, 0.05, key=K.TAU.name,
                    help="Not part of BERT: divides the masked scores by τ before the softmax.")
    st.caption(f"Layer {layer}, head {head}"
               + (" (the head picker above; steps are per head)." if mean else "."))
    steps = av.softmax_steps(view, layer, head, query, tau)
    st.dataframe(record_table(steps, f"softmax_steps_L{layer}_H{head}_q{query}"), hide_index=True,
                 height=table_height(steps), column_config=numbers(steps, **{av.MASK: "%.0f", **dict.fromkeys(
                     (av.EXP, av.SUM, av.WEIGHT, av.MODEL_WEIGHT), WEIGHT_FORMAT)}))
    st.caption("exp is taken of x − max(x): the shift cancels in exp ÷ Σ and keeps exp from overflowing. A mask "
               "of −1e9 makes exp exactly 0; with one unpadded input every key is visible, so the mask adds 0.")
    if tau != 1.0:
        st.warning(f"What-if, not what the model computes: the masked scores are divided by τ = {tau:g} before "
                   "the softmax (τ < 1 sharpens attention, τ > 1 flattens it). The model's own weights are in the "
                   "last column.")
    bars_title = f"Layer {layer} · head {head} · query {view.axis_labels[query]}"
    chart(fa.softmax_bars(av.weights_by_key(view, steps), bars_title), f"softmax_L{layer}_H{head}_q{query}")
    if tau != 1.0:
        chart(fa.attention_heatmap(av.what_if_weights(view, layer, head, tau), view.axis_labels,
                                     view.axis_labels, f"WHAT-IF τ = {tau:g} · layer {layer} · head {head}"),
              f"what_if_L{layer}_H{head}")

# --- The context vector, and where one score comes from ---------------------------------
with context_tab:
    st.markdown("**The context vector is the weighted sum of the value vectors**")
    ctx = av.context_steps(view, layer, head, query)
    context_table(ctx, f"context_L{layer}_H{head}_q{query}")
    if ctx.head_on:
        st.caption(f"The last row is Σ weight × v over the rows above; it equals the context the model computed "
                   f"to within {ctx.max_difference:.1e}.")
    else:
        st.caption("This head is switched off: the model multiplies its context by 0 and passes on zeros instead.")
    chart(fa.vector_bars(pd.DataFrame({"context = Σ weight × v": ctx.context}), "Context vector"), "context")

    st.markdown("**Where the score comes from: q · k, dimension by dimension**")
    state.setdefault(K.KEY, av.strongest_key(view, layer, head, query))
    other = st.selectbox("Key token", tokens, format_func=view.labels.__getitem__, key=K.KEY.name)
    dot = av.dot_product(view, layer, head, query, other)
    pair_title = f"q of {view.axis_labels[query]}, k of {view.axis_labels[other]}; below, q × k (it sums to q·k)"
    chart(fa.vector_bars(dot.table, pair_title, height=520, lower=["q × k"]), f"q_k_L{layer}_H{head}")
    st.text(f"q·k = Σ q × k = {dot.dot:.4f}   ÷ {av.sqrt_head_dim(view.head_dim)}   →   score {dot.score:.4f}")

# --- The rest of the layer ------------------------------------------------------------
with layer_tab:
    st.subheader("After attention: the rest of the layer for this query")
    rest_of_layer(ckpt, encoding, off, layer, query)
