"""The Attention page's cached forward passes: one traced forward per (model, text, heads off),
shared by every rerun and session, the prediction table with and without those heads, and the
rest of one layer for one query (W_O, residual, LayerNorm, FFN) drawn as steps."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.figures import attention as figs
from bertviz_lab.ui.models import device_name
from bertviz_lab.ui.tables import numbers, table_height
from bertviz_lab.ui.widgets import chart
from bertviz_lab.views import attention as av
from bertviz_lab.views import layer as lv

# A weight in a table, as st.column_config formats it (sprintf-js): %.6g keeps 6 significant
# digits, so 0.000123456 is not cut to 0.000123 the way %.6f would cut it.
WEIGHT_FORMAT = f"%.{figs.WEIGHT_DIGITS}g"


@dataclass(frozen=True)
class Forward:
    """What one forward pass depends on. Hashable, so it keys the caches; the model and the
    encoding themselves are passed beside it, unhashed (Streamlit skips `_`-prefixed arguments)."""
    path: str
    device: str
    ids: tuple[int, ...]
    segments: tuple[int, ...]
    off: tuple[str, ...]  # heads switched off, e.g. ("L0 H1",)

    @classmethod
    def of(cls, ckpt: Checkpoint, encoding: Encoding, off) -> "Forward":
        return cls(str(ckpt.path), device_name(), tuple(encoding.ids), tuple(encoding.segment_ids), tuple(off))

    def head_mask(self, ckpt: Checkpoint):
        return av.head_mask(list(self.off), ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads)


# cache_resource, not cache_data: the view is read-only (its arrays are frozen), so every rerun and
# session shares it instead of unpickling a copy; a few entries, as BERT-base at 512 tokens is ~400 MB.
# Its spinner shows only past 0.5 s: BERT-base at 512 tokens (1.7 s), never the shipped model.
@st.cache_resource(max_entries=8, show_spinner="Running the model, every step of attention kept…")
def explore(key: Forward, _ckpt: Checkpoint, _encoding: Encoding) -> av.AttentionView:
    return av.explore(_ckpt.model, _encoding, key.head_mask(_ckpt), _ckpt.tokenizer.mask_id)


@st.cache_data(max_entries=32, show_spinner=False)
def predictions(key: Forward, _ckpt: Checkpoint, _encoding: Encoding) -> pd.DataFrame:
    view = explore(key, _ckpt, _encoding)  # its pass gives one of the two columns: one forward less
    return av.prediction_change(_ckpt.model, _ckpt.tokenizer, _encoding, key.head_mask(_ckpt), view=view)


@st.cache_data(max_entries=64, show_spinner=False)
def layer_steps(key: Forward, layer: int, token: int, _ckpt: Checkpoint, _encoding: Encoding) -> lv.LayerSteps:
    return lv.layer_steps(_ckpt.model, explore(key, _ckpt, _encoding), layer, token)


def rest_of_layer(key: Forward, ckpt: Checkpoint, encoding: Encoding, layer: int, token: int) -> None:
    """The layer after the heads, for one token: the steps as a table, what checks them, their lengths."""
    steps = layer_steps(key, layer, token, ckpt, encoding)
    label = explore(key, ckpt, encoding).axis_labels[token]  # HTML-escaped: it goes into a plotly title
    st.caption("Post-LN, as in the original BERT: x = LayerNorm(x + Sublayer(x)), first with attention as the "
               "sublayer, then with the feed-forward network (FFN). Each row is one vector for query token "
               f"{token} in layer {layer}: its size, its length ‖·‖ and its first {lv.DIMS_SHOWN} entries. "
               "Seed 004 writes these equations without W_O and with ReLU in the FFN; BERT has W_O and uses the "
               "activation named below.")
    st.dataframe(steps.table, hide_index=True, height=table_height(steps.table), column_config=numbers(steps.table))
    off = f" Switched off here: head {', '.join(map(str, steps.heads_off))}, zeros in c." if steps.heads_off else ""
    st.caption(f"LayerNorm(v) = γ ⊙ (v − mean v) ÷ √(var v + ε) + β with this layer's γ, β and ε = {steps.eps:g}; "
               f"the activation is {steps.activation}.{off} Computed here in float64 from the model's weights: c "
               f"equals the heads' contexts the model computed to within {steps.concat_difference:.1e}, and the "
               f"last row equals the model's own output for this layer and token (hidden_states[{layer + 1}]) to "
               f"within {steps.max_difference:.1e}.")
    norms = steps.table[lv.NORM].to_numpy()
    chart(figs.step_norms(list(steps.table[lv.STEP]), norms, f"Layer {layer} · query {label}: the length of each "
                          "vector (orange: just normalised)"), f"layer_L{layer}_q{token}")
