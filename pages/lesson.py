"""Lesson: a class walks through how BERT works step by step, from tokens to contextual vectors.

Each step (views/lesson/steps.py's list: its title, its paragraph, its question) is one short paragraph, a question
the class answers before it sees anything (predict, then reveal), and the live view the Reveal unlocks
(ui/lesson/steps.py): every number computed from the active model on the lesson's sentences, which the teacher can
edit. Back / Next or the step picker move through the steps; the score counts the revealed answers.
"""

import streamlit as st

from bertviz_lab.ui.lesson.stepper import Frame, header, nav, shown_errors
from bertviz_lab.ui.lesson.steps import RENDERERS
from bertviz_lab.ui.kit.widgets import family_note
from bertviz_lab.ui.shell import projector
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.views.lesson import steps as vls

if not projector.on():  # projector view: the top bar names the page, and every line counts at 1024 x 768
    st.title("Lesson: how BERT works")
    st.caption(f"{len(vls.STEPS)} steps through BERT, each with a question to answer before the model shows its own "
               "answer, computed live from the active model.")
ckpt = active_model()
family_note(ckpt)
step = header()  # the picker, the score and Start over: the step shown
left, right = st.columns([3, 2], gap="medium")  # the question on the right, on the first screen
if not projector.on():  # projector view: the step picker above names the step
    left.subheader(f"{vls.position(step.id)}. {step.title}")
lead = left.container()
read = left.expander("About this step", expanded=step.id not in state.get(K.ANSWERS), icon=":material/menu_book:")
read.markdown(step.paragraph)
frame = Frame(lead, left.container(), right.container(), right.container(horizontal=True), st.container())
with frame.ask, shown_errors():  # bad input or a missing head: a sentence saying so, and the lesson goes on
    RENDERERS[step.id](ckpt, frame)
nav(frame.bar)
