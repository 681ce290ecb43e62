"""Worked examples: the hand computations of the seed texts (bertviz_lab/seeds.py names them) as calculators,
preloaded with the seeds' inputs, computed exactly, and checked against the figures the seeds printed."""

import streamlit as st

from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.router import ensure_router
from bertviz_lab.ui.shell.state import Worked as K  # this page's session-state keys
from bertviz_lab.ui.worked.calculators import attention_section, mlm_section, one_hot_section

ensure_router()
st.title("Worked examples")
st.caption(f"The hand computations of two of the teaching texts this lab was made from, {cite('000')} and "
           f"{cite('001')}, redone exactly. Edit any number and everything recomputes; with the texts' own "
           "inputs, the figures they printed are checked against the exact ones.")
state.init(*K.INPUTS)  # the seeds' inputs, until edited or reset
attention, mlm, one_hot = st.tabs([f"Attention softmax · {cite('000')}", f"MLM head and loss · {cite('000')}",
                                   f"One-hot attention, with and without 1/√d · {cite('001')}"])
with attention:
    attention_section()
with mlm:
    mlm_section()
with one_hot:
    one_hot_section()
