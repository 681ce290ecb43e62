"""Syntax across a corpus: evidence over many sentences rather than one. Which heads follow which dependency
relation against a fixed-offset baseline (Clark et al. 2019), where one head puts its weight across the corpus
(exBERT), a structural probe per layer (Hewitt & Manning 2019), and subject-verb agreement across attractors
(Linzen et al. 2016). One run of the analysis serves those four tabs; "Probing, carefully" runs its own probes (layer by
layer, against control tasks, as a codelength, and whether the model uses what they find). Only the open tab draws."""

import streamlit as st

from bertviz_lab.ui.shell import state
from bertviz_lab.ui.syntax import analysis as ui_syntax
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.state import Syntax as K
from bertviz_lab.ui.syntax.probe_and_agreement import agreement_tab, probe_tab
from bertviz_lab.ui.syntax.probing import probing_tab
from bertviz_lab.ui.shell.state_probing import TAB as CAREFUL, Careful
from bertviz_lab.ui.kit.widgets import family_note

TABS = {"Relations by head": ui_syntax.relations_tab, "Search by a head": ui_syntax.search_tab, "Structural probe": probe_tab,
        CAREFUL: probing_tab, "Agreement": agreement_tab}

st.title("Syntax across a corpus")
st.caption("One sentence's attention can show anything. These tabs count over hundreds of sentences with their "
           "dependency trees, each beside a baseline that needs no model, so a pattern can be told from chance. "
           "Heads are named as on the Attention page: L2 H1 is head 1 of layer 2, both counted from 0.")
ckpt = active_model()
family_note(ckpt)
state.keep(*K.INPUTS, *Careful.INPUTS)  # the closed tabs' choices, kept while another tab is open
source = ui_syntax.source_picker()
report = ui_syntax.analysed(ckpt, source)  # None until the button runs it
state.keep_valid(K.TAB, list(TABS))
for tab, draw in zip(st.tabs(list(TABS), key=K.TAB.name, on_change="rerun"), TABS.values()):
    if tab.open:  # only the open tab draws: a picker's change redraws that tab alone
        with tab:
            draw(ckpt, source, report)
