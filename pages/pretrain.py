"""Pretrain live: start a small BERT training in the background and watch it learn.

The run is a separate process (the CLI's `train` command), so the page never waits
for it and a refresh finds it still going. While it trains, the live panel redraws
itself every second or two: status, progress, loss and accuracy curves, and a probe
sentence read by the newest checkpoint. A run that is not training can be resumed or deleted; in
classroom mode a visitor controls only its own runs.
"""

import streamlit as st

from bertviz_lab.ui.pretrain import live as ui_pretrain
from bertviz_lab.ui.shell.router import end_page, ensure_router
from bertviz_lab.ui.timelapse.player import open_button
from bertviz_lab.ui.kit.widgets import say

ensure_router()
st.title("Pretrain live")
st.caption("Train a small BERT on the built-in story world or on your own text, and watch the masked-word "
           "(MLM) and next-sentence (NSP) losses fall while its guesses and attention heads take shape.")

all_runs = ui_pretrain.RUNS.all_runs()
with st.expander("Start a new run", expanded=not any(r.active for r in all_runs), icon=":material/add:"):
    st.caption("The defaults are the classroom preset: its held-out MLM loss halves within about 250 of its 600 "
               "steps, under a minute on a 2-core laptop. Every value is checked before anything starts.")
    started = ui_pretrain.run_form(sum(r.active for r in all_runs))
if started is not None:
    say("toast", f"Started {started.name}", icon=":material/play_arrow:")
    all_runs = ui_pretrain.RUNS.all_runs()

ui_pretrain.RUNS.notice()
if not all_runs:
    st.info("No runs yet. Start one above: it trains in the background, and this page follows it live.")
    end_page()

st.header("Live")
run = ui_pretrain.RUNS.pick(all_runs, started)
ui_pretrain.RUNS.live_panel(run)
ui_pretrain.RUNS.actions(run)
open_button(run.name)

st.header("All runs")
st.caption("Runs are folders under the runs directory, so every tab and every visitor sees them. Overlay "
           "several to compare, e.g. the same settings with and without NSP.")
ui_pretrain.compare_runs(all_runs)
