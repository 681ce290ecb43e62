"""Where is the answer made? Activation patching on a [MASK]: a clean and a corrupted run, one inner activation copied
from one into the other at a time, and how much of the answer comes back, layer by layer, position by position, head
by head (Vig et al. 2020; Meng et al. 2022; Heimersheim & Nanda 2024).

The score F is logit(answer) - logit(foil) at the [MASK] (ELECTRA's discriminator: its replaced-token logit at the
first token that differs), normalised so the corrupted run is 0 and the clean run 1."""

import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.ui.kit.widgets import family_note, say
from bertviz_lab.ui.patching import grids as ui_patch_grids
from bertviz_lab.ui.patching import sections as ui_patching
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.router import end_page
from bertviz_lab.ui.shell.state_patching import Patch as K  # this page's session-state keys
from bertviz_lab.views.patching import reading as vpa_read

st.title("Where is the answer made?")
st.caption(ui_patching.LEAD)
ckpt = active_model()
replaced = ckpt.model.has_rtd and not ckpt.model.has_mlm  # ELECTRA's discriminator: a logit per token, no guesses
if not (ckpt.model.has_mlm or replaced):
    st.error("This model has no masked-language-model (MLM) head: "
             f"{ckpt.family.no_mlm(ckpt.model.has_rtd)}"
             ", so it gives no answer to patch. Pick another model in the sidebar.")
    end_page()
family_note(ckpt, what=ui_patching.DISCRIMINATOR if replaced else "")
state.init(K.PAIR, *K.INPUTS)
state.keep(K.PAIR, *K.INPUTS)  # the boxes a run does not draw (the answer under noise) keep what was typed

st.subheader("Two runs: clean and corrupted")
ui_patching.pair_picker()
try:
    ask = ui_patching.ask_inputs(ckpt, replaced)
    patching = ui_patching.prepared(ckpt, ask)
except InputError as exc:
    say("error", str(exc)[0].upper() + str(exc)[1:])  # it quotes the typed words: shown as typed
    end_page()
ui_patching.runs(patching)

st.subheader("Copy one activation across, and see how much of the answer moves")
view, direction, head = ui_patch_grids.pickers(patching)
drawn = [ui_patch_grids.grid(ckpt, patching, kind, direction, head) for kind in ui_patch_grids.KINDS[view]]
ui_patch_grids.draw(patching, drawn, view)

st.subheader("Checks")
st.caption("Each can fail: the patching machinery is tested on this very pair, on the residual stream.")
ui_patch_grids.checks(patching, drawn[0] if view == "resid" else ui_patch_grids.grid(ckpt, patching, "resid", direction))

st.subheader("What patching does not show")
st.markdown(vpa_read.LIMITS)
