"""Inside the feed-forward layer: two thirds of BERT's weights, read as key-value memories (Geva et al. 2021). What one
sentence does in each layer's neurons, what one neuron fires on over a corpus and what it writes (Dar et al. 2022),
the neurons a [MASK] guess rests on and whether switching them off moves it more than random ones do (Dai et al.
2022; Niu et al. 2024), and the LayerNorms' outlier dimensions (Kovaleva et al. 2021).

Four sections, one tab each; only the open one computes."""

import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.ui.kit.widgets import family_note, say
from bertviz_lab.ui.neurons import guess as ui_neurons_guess
from bertviz_lab.ui.neurons import sections as ui_neurons
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.state_neurons import SECTIONS, Neurons as K  # this page's session-state keys
from bertviz_lab.views.neurons import reading as vne_read

DRAW = dict(zip(SECTIONS, (ui_neurons.sentence_tab, ui_neurons.neuron_tab, ui_neurons_guess.behind_tab,
                           ui_neurons_guess.outliers_tab)))

st.title("Inside the feed-forward layer")
st.caption(ui_neurons.LEAD)
ckpt = active_model()
family_note(ckpt, what=ui_neurons.family_words(ckpt))
state.init(*K.DEFAULTS)  # the widgets take no value=: a closed tab's widget keeps what the session holds
state.keep(*K.INPUTS)  # a closed tab's pickers keep what was picked
text = ui_neurons.text_box()
state.keep_valid(K.SECTION, SECTIONS)
for tab, draw in zip(st.tabs(SECTIONS, key=K.SECTION.name, on_change="rerun"), DRAW.values()):
    if tab.open:  # only the open section computes
        with tab:
            try:
                draw(ckpt, text)
            except InputError as exc:
                say("error", str(exc)[0].upper() + str(exc)[1:])  # it quotes the typed words: shown as typed

st.subheader("Limits of these readings")
st.markdown(vne_read.LIMITS)
