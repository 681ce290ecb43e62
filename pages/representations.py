"""Representations: what BERT learned, read from its vectors.

Five tabs, each computed only while open: one word's vectors across sentences layer by layer (the BERT
tutorial's "bank", seed text 002), nearest neighbours static vs contextual with retrieval by sense (the academic
manual, seed text 001, exercise 2), the logit lens at [MASK], the embeddings' geometry, and the shapes of a padded
batch (the BERT tutorial's small BertModel).
"""

import streamlit as st

from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.representations.neighbours import geometry_tab, neighbours_tab
from bertviz_lab.ui.representations.vectors import contexts_tab, lens_tab
from bertviz_lab.ui.representations.shapes import shapes_tab
from bertviz_lab.ui.shell.state import Representations as K
from bertviz_lab.ui.shell.state import Shapes
from bertviz_lab.ui.kit.widgets import family_note

TABS = {"Same word, different contexts": contexts_tab, "Nearest neighbours": neighbours_tab,
        "Logit lens": lens_tab, "Embedding geometry": geometry_tab, "Shapes and padding": shapes_tab}

st.title("Representations")
st.caption("BERT's output is one vector per token, and downstream tasks are built on them. What do they hold? "
           "Layers are counted as hidden states are: 0 is the embeddings' output, then layer 1 to L.")
ckpt = active_model()
family_note(ckpt)
state.keep(*K.INPUTS, *Shapes.INPUTS)  # the closed tabs' inputs, kept while another tab is open
state.keep_valid(K.TAB, list(TABS))
for tab, draw in zip(st.tabs(list(TABS), key=K.TAB.name, on_change="rerun"), TABS.values()):
    if tab.open:  # only the open tab computes: a redraw after an edit costs that tab alone
        with tab:
            draw(ckpt)
