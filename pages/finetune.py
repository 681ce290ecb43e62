"""Fine-tune: the other half of BERT's paradigm. Put one linear layer on a pretrained BERT (on [CLS] for a
sentence or a pair, on every token for tags), train it on a small task, and see what pretraining is worth.

A run is a background process (the CLI's `finetune` command), followed live as on Pretrain live. Runs
started from the same model with and without pretraining (or from a run without NSP) overlay on one
chart; a stopped run shows its confusion matrix, the dev examples it still gets wrong, a box to try your
own sentence, and the dev set's [CLS] vectors before and after fine-tuning.
"""

import streamlit as st

from bertviz_lab.ui.finetune import live as ui_finetune
from bertviz_lab.ui.finetune.results import results
from bertviz_lab.ui.shell.router import end_page, ensure_router
from bertviz_lab.ui.kit.widgets import say

ensure_router()
st.title("Fine-tune")
st.caption("Pretraining taught BERT the language of its corpus; fine-tuning teaches it a task with a few thousand "
           "labelled examples. One linear layer reads the [CLS] vector through the pooler (a sentence or a pair) or "
           "every word's vector (a tag per word), and the whole model, or only that layer, learns.")

all_runs = ui_finetune.RUNS.all_runs()
with st.expander("Start a new run", expanded=not all_runs, icon=":material/add:"):
    st.caption("Try the same task twice: from the pretrained model and from random weights of the same size. "
               "The defaults take a minute or two on a laptop, the class demo settings about half a minute; every "
               "value is checked before anything starts.")
    started = ui_finetune.run_form(sum(r.active for r in all_runs))
if started is not None:
    say("toast", f"Started {started.name}", icon=":material/play_arrow:")
    all_runs = ui_finetune.RUNS.all_runs()

ui_finetune.RUNS.notice()
if not all_runs:
    st.info("No fine-tuning runs yet. Start one above: it trains in the background, and this page follows it live.")
    end_page()

st.header("Live")
run = ui_finetune.RUNS.pick(all_runs, started)
ui_finetune.RUNS.live_panel(run)
ui_finetune.RUNS.actions(run)

st.header("What it learned")
results(run)

st.header("Compare runs")
st.caption("Every fine-tuning run on this machine. Overlay several to put pretrained against from scratch, or "
           "a start with NSP against one without, on one chart.")
ui_finetune.compare_runs(all_runs)
