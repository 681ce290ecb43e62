"""The Attention page's cached forward passes: one traced forward per (model, text, heads off), shared by every
rerun and session (cached under `model_key` and the token ids, segment ids and heads off), the prediction table
with and without those heads, the rest of one layer for one query (W_O, residual, LayerNorm, FFN) drawn as steps,
and what keeps the page's token pickers honest when the sentence changes."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.errors import InputError
from bertviz_lab.figures import attention as fa
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Attention as K
from bertviz_lab.ui.kit.tables import numbers, table_height
from bertviz_lab.ui.kit.widgets import chart, say
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.attention import layer as lv
from bertviz_lab.views.attention import overview as ov

# A weight in a table, as st.column_config formats it (sprintf-js): %.6g keeps 6 significant
# digits, so 0.000123456 is not cut to 0.000123 the way %.6f would cut it.
WEIGHT_FORMAT = f"%.{fa.WEIGHT_DIGITS}g"
CONTEXT_DIMS = 6  # dimensions of v the context table shows (it fits a projector); all of them in its expander
SUMMARY_KEYS = 3  # keys named in the one-line summary under the sentence box


def explore(ckpt: Checkpoint, encoding: Encoding, off: tuple[str, ...] = ()) -> av.AttentionView:
    """The traced forward pass of `encoding` with the heads `off` switched off (e.g. ("L0 H1",)), every step kept."""
    return _explore(model_key(ckpt), tuple(encoding.ids), tuple(encoding.segment_ids), tuple(off), ckpt, encoding)


def predictions(ckpt: Checkpoint, encoding: Encoding, off: tuple[str, ...]) -> pd.DataFrame:
    """The top guesses for each [MASK], with every head and with the heads `off` switched off."""
    return _predictions(model_key(ckpt), tuple(encoding.ids), tuple(encoding.segment_ids), tuple(off), ckpt, encoding)


def _head_mask(ckpt: Checkpoint, off: tuple[str, ...]):
    return av.head_mask(list(off), ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads)


# cache_resource, not cache_data: the view is read-only (its arrays are frozen), so every rerun and
# session shares it instead of unpickling a copy; a few entries, as BERT-base at 512 tokens is ~400 MB.
# Its spinner shows only past 0.5 s: BERT-base at 512 tokens (1.7 s), never the shipped model.
@st.cache_resource(max_entries=8, show_spinner="Running the model, every step of attention kept…")
def _explore(key: ModelKey, ids: tuple[int, ...], segments: tuple[int, ...], off: tuple[str, ...],
             _ckpt: Checkpoint, _encoding: Encoding) -> av.AttentionView:
    return av.explore(_ckpt.model, _encoding, _head_mask(_ckpt, off), _ckpt.tokenizer.mask_id)


@st.cache_data(max_entries=32, show_spinner=False)
def _predictions(key: ModelKey, ids: tuple[int, ...], segments: tuple[int, ...], off: tuple[str, ...],
                 _ckpt: Checkpoint, _encoding: Encoding) -> pd.DataFrame:
    view = explore(_ckpt, _encoding, off)  # its pass gives one of the two columns: one forward less
    return av.prediction_change(_ckpt.model, _ckpt.tokenizer, _encoding, _head_mask(_ckpt, off), view=view)


@st.cache_data(max_entries=64, show_spinner=False)
def _layer_steps(key: ModelKey, ids: tuple[int, ...], segments: tuple[int, ...], off: tuple[str, ...], layer: int,
                 token: int, _ckpt: Checkpoint, _encoding: Encoding) -> lv.LayerSteps:
    return lv.layer_steps(_ckpt.model, explore(_ckpt, _encoding, off), layer, token)


def rest_of_layer(ckpt: Checkpoint, encoding: Encoding, off: tuple[str, ...], layer: int, token: int) -> None:
    """The layer after the heads, for one token: the steps as a table, what checks them, their lengths."""
    steps = _layer_steps(model_key(ckpt), tuple(encoding.ids), tuple(encoding.segment_ids), tuple(off), layer, token,
                         ckpt, encoding)
    label = explore(ckpt, encoding, off).axis_labels[token]  # HTML-escaped: it goes into a plotly title
    st.caption("Post-LN, as in the original BERT: x = LayerNorm(x + Sublayer(x)), first with attention as the "
               "sublayer, then with the feed-forward network (FFN). Each row is one vector for query token "
               f"{token} in layer {layer}: its size, its length ‖·‖ and its first {lv.DIMS_SHOWN} entries. "
               f"{cite('004', start=True)} writes these equations without W_O and with ReLU in the FFN; BERT has W_O and uses the "
               "activation named below.")
    st.dataframe(steps.table, hide_index=True, height=table_height(steps.table), column_config=numbers(steps.table))
    zeros = f" Switched off here: head {', '.join(map(str, steps.heads_off))}, zeros in c." if steps.heads_off else ""
    st.caption(f"LayerNorm(v) = γ ⊙ (v − mean v) ÷ √(var v + ε) + β with this layer's γ, β and ε = {steps.eps:g}; "
               f"the activation is {steps.activation}.{zeros} Computed here in float64 from the model's weights: c "
               f"equals the heads' contexts the model computed to within {steps.concat_difference:.1e}, and the "
               f"last row equals the model's own output for this layer and token (hidden_states[{layer + 1}]) to "
               f"within {steps.max_difference:.1e}.")
    norms = steps.table[lv.NORM].to_numpy()
    chart(fa.step_norms(list(steps.table[lv.STEP]), norms, f"Layer {layer} · query {label}: the length of each "
                          "vector (orange: just normalised)"), f"layer_L{layer}_q{token}")


def keep_token_choices(view: av.AttentionView) -> None:
    """Before the token pickers are drawn: a remembered query or key survives a new sentence only where the new
    tokens have the same token at the same position. Otherwise it is forgotten, and the page sets its default
    (the query: `av.default_query`; the key: the query's strongest) into session state before drawing the box:
    a value set, not a widget default, is sent to the browser, whose box would otherwise keep its last label."""
    before, now = state.get(K.TOKENS), tuple(view.tokens)
    state.put(K.TOKENS, now)
    for key in (K.QUERY, K.KEY):
        state.keep_valid(key, range(len(now)))  # a link's position past the end is dropped
    if before is None or tuple(before) == now:
        return
    for key in (K.QUERY, K.KEY):
        position = state.get(key)
        if position is None or position >= len(before) or before[position] != now[position]:
            state.forget(key)


def query_summary(view: av.AttentionView, layer: int, head: int | None, query: int) -> str:
    """One line (Markdown) under the sentence box: the keys the query gives the most weight to, so typing shows
    its effect without scrolling. `head` None: the layer's mean over heads."""
    row = (av.mean_over_heads(view)[layer] if head is None else view.weights[layer, head])[query]
    strongest = row.argsort()[::-1][:SUMMARY_KEYS]
    where = f"layer {layer}, " + ("mean over heads" if head is None else f"head {head}")
    keys = ", ".join(f"{plain(view.labels[k])} ({row[k]:.2f})" for k in strongest)
    return f"Query **{plain(view.labels[query])}** ({where}) gives the most weight to: {keys}."


def context_table(ctx: av.ContextSteps, name: str) -> None:
    """The context as a weighted sum: weight and the first CONTEXT_DIMS dimensions of v (a table that fits the
    screen), every dimension in an expander beneath; the handout gets the whole table."""
    whole = record_table(ctx.table, name)
    dims = whole.shape[1] - 1
    shown = whole.iloc[:, :1 + min(dims, CONTEXT_DIMS)]
    st.dataframe(shown, height=table_height(shown), column_config=numbers(shown, "%.3f", weight=WEIGHT_FORMAT))
    if dims > CONTEXT_DIMS:
        with st.expander(f"All {dims} dimensions of v"):
            st.dataframe(whole, height=table_height(whole), column_config=numbers(whole, weight=WEIGHT_FORMAT))


def pooled_input(view: av.AttentionView, layer: int, head: int | None) -> None:
    """A long input whole: its tokens pooled into blocks (`head` None: the layer's mean over heads)."""
    T = len(view.tokens)
    with st.expander(f"The whole input: {T} tokens pooled into blocks", expanded=True):
        size = ov.block_size(T)
        labels = ov.block_labels(view, size)
        full = av.mean_over_heads(view)[layer] if head is None else view.weights[layer, head]
        title = f"Layer {layer} · " + ("mean over heads" if head is None else f"head {head}") + f" · blocks of {size}"
        chart(fa.attention_heatmap(ov.pooled(full, size), labels, labels, title, height=760), f"pooled_L{layer}")
        st.caption(f"Each cell: the total weight a query of one block of {size} tokens gives to the keys of "
                   "another block, averaged over the block's queries; each row sums to 1.")


def all_heads(view: av.AttentionView, hide: bool, block: str) -> None:
    """Every layer's heads at once, in an expander drawn only while open (the costliest figure of the page);
    with too many cells, each head as one number instead."""
    with st.expander("All layers × heads at once", key=K.GRID.name, on_change="rerun") as grid_box:
        try:
            if grid_box.open:
                everything = av.grid(view, hide, block)
                chart(fa.attention_grid(everything.weights, everything.col_axis, everything.row_axis,
                                          view.heads_on, everything.title), everything.name)
        except InputError as exc:
            say("info", f"{exc} Below, each head as one number.")
            chart(fa.head_summary(ov.head_distances(view), "How far each head looks", ".1f", "tokens"),
                  "head_distance")
            chart(fa.head_summary(ov.head_entropies(view), "How spread each head is", ".2f", "nats"),
                  "head_entropy")
            st.caption("Distance: Σ weight × |query − key|, averaged over the queries (about 1 for a previous- or "
                       "next-token head). Spread: the entropy of each row (0 for one key, log T for all alike).")
