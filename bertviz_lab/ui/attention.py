"""The Attention page's cached forward passes: one traced forward per (model, text, heads off),
shared by every rerun and session, and the prediction table with and without those heads."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.ui.models import device_name
from bertviz_lab.views import attention as av


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
@st.cache_resource(max_entries=8, show_spinner=False)
def explore(key: Forward, _ckpt: Checkpoint, _encoding: Encoding) -> av.AttentionView:
    return av.explore(_ckpt.model, _encoding, key.head_mask(_ckpt))


@st.cache_data(max_entries=32, show_spinner=False)
def predictions(key: Forward, _ckpt: Checkpoint, _encoding: Encoding) -> pd.DataFrame:
    return av.prediction_change(_ckpt.model, _ckpt.tokenizer, _encoding, key.head_mask(_ckpt))
