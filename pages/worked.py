"""Worked examples: the seed texts' hand computations as calculators, preloaded with the seeds'
inputs, computed exactly, and checked against the figures the seeds printed."""

import streamlit as st

from bertviz_lab.ui import state
from bertviz_lab.ui.router import ensure_router
from bertviz_lab.ui.state import Worked as K  # this page's session-state keys
from bertviz_lab.ui.worked import attention_section, mlm_section, one_hot_section

ensure_router()
st.title("Worked examples")
st.caption("The seed texts' hand computations, redone exactly. Edit any number and everything recomputes; "
           "with the seeds' own inputs, the figures they printed are checked against the exact ones.")
state.init(*K.INPUTS)  # the seeds' inputs, until edited or reset
attention, mlm, one_hot = st.tabs(["Seed 000 · attention softmax", "Seed 000 · MLM head and loss",
                                   "Seed 001 · one-hot attention (with and without 1/√d)"])
with attention:
    attention_section()
with mlm:
    mlm_section()
with one_hot:
    one_hot_section()
