"""Attention explorer: every head's weights, the grid of all heads, heads switched off,
and one query's softmax worked out step by step, all from one traced forward pass."""

import pandas as pd
import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.figures import attention as figs
from bertviz_lab.ui.models import active_checkpoint, device_name
from bertviz_lab.ui.widgets import encode_or_stop, sentence_inputs
from bertviz_lab.views import attention as av

DEFAULT_A = "the animal did not cross the street because it was too tired ."


# cache_resource, not cache_data: the view is read-only (its arrays are frozen), so every rerun and
# session shares it instead of unpickling a copy; a few entries, as BERT-base at 512 tokens is ~400 MB.
@st.cache_resource(max_entries=8, show_spinner=False)
def explore(path: str, device: str, ids: tuple, segments: tuple, off: tuple, _ckpt, _encoding) -> av.AttentionView:
    cfg = _ckpt.config
    return av.explore(_ckpt.model, _encoding, av.head_mask(list(off), cfg.num_hidden_layers, cfg.num_attention_heads))


@st.cache_data(max_entries=32, show_spinner=False)
def predictions(path: str, device: str, ids: tuple, segments: tuple, off: tuple, _ckpt, _encoding) -> pd.DataFrame:
    cfg = _ckpt.config
    mask = av.head_mask(list(off), cfg.num_hidden_layers, cfg.num_attention_heads)
    return av.prediction_change(_ckpt.model, _ckpt.tokenizer, _encoding, mask)


def keep_valid(key: str, options) -> None:
    """Forget a remembered choice the new sentence or model no longer offers."""
    value = st.session_state.get(key)
    if isinstance(value, list):
        st.session_state[key] = [v for v in value if v in options]
    elif key in st.session_state and value not in options:
        del st.session_state[key]


def numbers(df: pd.DataFrame, fmt: str = "%.4f", **special: str) -> dict:
    """Display formats only: the table keeps every digit the model computed."""
    return {c: st.column_config.NumberColumn(format=special.get(c, fmt)) for c in df.columns
            if pd.api.types.is_float_dtype(df[c])}


def table_height(df: pd.DataFrame):
    return "content" if len(df) <= 24 else 600


def chart(fig, filename: str) -> None:
    st.plotly_chart(fig, theme=None, config=figs.export_config(filename))


st.title("Attention explorer")
st.caption("Every number below is what the model computed for your text in one forward pass. "
           "Layers, heads and tokens are counted from 0, as in the code.")
ckpt = active_checkpoint()
L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
text_a, text_b = sentence_inputs("attn", DEFAULT_A)
encoding = encode_or_stop(ckpt, text_a, text_b)
names = av.head_names(L, H)
keep_valid("attn.off", names)
off = tuple(st.session_state.get("attn.off", []))
key = (str(ckpt.path), device_name(), tuple(encoding.ids), tuple(encoding.segment_ids), off)
view = explore(*key, ckpt, encoding)
for k, options in (("attn.layer", range(L)), ("attn.head", range(H)), ("attn.block", av.BLOCKS),
                   ("attn.query", range(len(view.tokens))), ("attn.key", range(len(view.tokens)))):
    keep_valid(k, list(options))

# --- One head's matrix -------------------------------------------------------------
cols = st.columns(4)
layer = cols[0].segmented_control("Layer", list(range(L)), default=0, required=True, key="attn.layer")
head = cols[1].segmented_control("Head", list(range(H)), default=0, required=True, key="attn.head")
mean = cols[2].toggle("Mean over heads", key="attn.mean")
hide = cols[2].toggle("Hide [CLS], [SEP]", key="attn.hide")
block = "all"
if view.is_pair:
    block = cols[3].segmented_control("Queries → keys", av.BLOCKS, default="all", required=True, key="attn.block")
shown = av.matrix(view, layer, None if mean else head, hide, block)
chart(figs.attention_heatmap(shown.weights, shown.col_axis, shown.row_axis, shown.title), shown.name)
if hide or block != "all":
    st.caption("Rows no longer sum to 1: the hidden columns keep their share of each row's weight "
               "(nothing is renormalised).")
else:
    st.caption("Each row is one query's softmax over all keys and sums to 1. Hover a cell for the exact weight.")
if off:
    st.caption(f"Shown with {len(off)} head(s) switched off: {', '.join(off)}. Layers above them change too.")
st.download_button("Download this matrix (CSV)", shown.frame().to_csv(), file_name=f"{shown.name}.csv",
                   mime="text/csv", key="attn.csv", on_click="ignore")

with st.expander("All layers × heads at once", key="attn.grid", on_change="rerun") as grid_box:
    try:
        if grid_box.open:  # drawn only while open: it is the costliest figure on the page
            everything = av.grid(view, hide, block)
            chart(figs.attention_grid(everything.weights, everything.col_axis, everything.row_axis, view.heads_on,
                                      everything.title), everything.name)
    except InputError as exc:
        st.info(str(exc))

# --- Heads switched off --------------------------------------------------------------
st.subheader("Switch heads off")
st.multiselect("Heads to switch off", names, key="attn.off", placeholder="none: every head is on")
st.caption("A switched-off head still computes its weights, but its context is multiplied by 0, so the "
           "layers above never see it. The top guesses for each [MASK], with every head and without yours:")
try:
    table = predictions(*key, ckpt, encoding)
    st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table))
except InputError as exc:
    st.info(str(exc))

# --- Softmax steps ------------------------------------------------------------------
st.subheader("Softmax steps for one query")
cols = st.columns([2, 2])
query = cols[0].selectbox("Query token", range(len(view.tokens)), index=av.default_query(view),
                          format_func=view.labels.__getitem__, key="attn.query",
                          on_change=lambda: st.session_state.pop("attn.key", None))  # new query: its strongest key
tau = cols[1].slider("What-if attention temperature τ", 0.1, 5.0, 1.0, 0.05, key="attn.tau",
                     help="Not part of BERT: divides the masked scores by τ before the softmax.")
st.caption(f"Layer {layer}, head {head}" + (" (the head picker above; steps are per head)." if mean else "."))
steps = av.softmax_steps(view, layer, head, query, tau)
st.dataframe(steps, hide_index=True, height=table_height(steps), column_config=numbers(
    steps, **{av.MASK: "%.0f", av.EXP: "%.6f", av.SUM: "%.6f", av.WEIGHT: "%.6f", av.MODEL_WEIGHT: "%.6f"}))
st.caption("exp is taken of x − max(x): the shift cancels in exp ÷ Σ and keeps exp from overflowing. A mask of "
           "−1e9 makes exp exactly 0; with one unpadded input every key is visible, so the mask adds 0.")
if tau != 1.0:
    st.warning(f"What-if, not what the model computes: the masked scores are divided by τ = {tau:g} before the "
               "softmax (τ < 1 sharpens attention, τ > 1 flattens it). The model's own weights are in the last "
               "column.")
bars_title = f"Layer {layer} · head {head} · query {view.axis_labels[query]}"
chart(figs.softmax_bars(av.weights_by_key(view, steps), bars_title), f"softmax_L{layer}_H{head}_q{query}")
if tau != 1.0:
    chart(figs.attention_heatmap(av.what_if_weights(view, layer, head, tau), view.axis_labels, view.axis_labels,
                                 f"WHAT-IF τ = {tau:g} · layer {layer} · head {head}"), f"what_if_L{layer}_H{head}")

st.markdown("**The context vector is the weighted sum of the value vectors**")
ctx = av.context_steps(view, layer, head, query)
st.dataframe(ctx.table, height=table_height(ctx.table), column_config=numbers(ctx.table, weight="%.6f"))
if ctx.head_on:
    st.caption(f"The last row is Σ weight × v over the rows above; it equals the context the model computed to "
               f"within {ctx.max_difference:.1e}.")
else:
    st.caption("This head is switched off: the model multiplies its context by 0 and passes on zeros instead.")
chart(figs.vector_bars(pd.DataFrame({"context = Σ weight × v": ctx.context}), "Context vector"), "context")

st.markdown("**Where the score comes from: q · k, dimension by dimension**")
other = st.selectbox("Key token", range(len(view.tokens)), index=av.strongest_key(view, layer, head, query),
                     format_func=view.labels.__getitem__, key="attn.key")
dot = av.dot_product(view, layer, head, query, other)
pair_title = f"q of {view.axis_labels[query]}, k of {view.axis_labels[other]}; below, q × k (it sums to q·k)"
chart(figs.vector_bars(dot.table, pair_title, height=520, lower=["q × k"]), f"q_k_L{layer}_H{head}")
st.text(f"q·k = Σ q × k = {dot.dot:.4f}   ÷ √{view.head_dim} = {dot.sqrt_d:g}   →   score {dot.score:.4f}")
