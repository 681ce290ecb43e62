"""Time-lapse: scrub through a model's training, and watch its heads take on their roles.

Every pretraining run records a snapshot of the probe sentences at each checkpoint step (0, 1, 2, 5,
10, 20, 50, ... and every checkpoint interval): the guesses at [MASK], every head's attention, each
head's role scores and where chosen words sit. The shipped model comes with its own. Play them in
order, or compare two steps: which heads changed most, which guesses changed. And syntax as it forms: the
structural probe, each relation's best head and agreement at every kept checkpoint (measured here on a run's). And
where the answer is made: one minimal pair's residual grid at the kept checkpoint of the step shown, under the player.
"""

import streamlit as st

from bertviz_lab.ui.timelapse import player as ui_timelapse
from bertviz_lab.ui.timelapse.answer import section as answer_section
from bertviz_lab.ui.timelapse import syntax as timelapse_syntax
from bertviz_lab.ui.shell.router import end_page, ensure_router
from bertviz_lab.views.timelapse import history as vt

ensure_router()
st.title("Time-lapse")
st.caption("How a BERT learns, frame by frame: a snapshot of the probe sentences at every checkpoint step. "
           "A head's role score is the mean attention its word tokens give to the previous token, the next "
           "one, themselves, [CLS] or [SEP], or along a grammatical link (determiner → noun, verb → "
           "subject, pronoun → referent). " + vt.twins_note())
lapse = ui_timelapse.pick()
if lapse is None:
    end_page()
ui_timelapse.controls(lapse)
ui_timelapse.player(lapse, answer_section)  # the pair's grid follows the slider: "Where the answer is made"

st.header("Heads taking on roles")
ui_timelapse.formed(lapse)

st.header("Compare two steps")
ui_timelapse.diff(lapse)

st.header("Syntax as it forms")
timelapse_syntax.section(lapse)
