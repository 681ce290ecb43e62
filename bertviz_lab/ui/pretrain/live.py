"""What only the Pretrain live page draws: the new-run form (described in `views.pretrain.live.FORM`, drawn by
ui/kit/forms.py) with where its text comes from, the live panel's metrics, curves and probe sentence, and the table
of past runs. The run picker, the live panel's frame, Stop / Resume / Delete / Use this model and the overlay box
are the run pages' shared library (ui/kit/runs.py), set up for this page by `RUNS`.

What is shown (ETA, run descriptions, the form's values as a TrainConfig) comes from `bertviz_lab.views.pretrain.live`.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab import metrics
from bertviz_lab.errors import LabError
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import training as ftr
from bertviz_lab.figures.attention import attention_heatmap
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.pretrain import records, runs
from bertviz_lab.ui.kit import forms as ui_forms
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import plain_error, shown
from bertviz_lab.ui.kit.runs import RunPage, curves_of, may_start
from bertviz_lab.ui.shell.state import Pretrain as K
from bertviz_lab.ui.kit.tables import number, percents, points
from bertviz_lab.ui.kit.widgets import chart, say, say_field
from bertviz_lab.views.pretrain import live as vp
from bertviz_lab.views.pretrain import probe
from bertviz_lab.views.predict.guesses import candidate_rows


# --- The form --------------------------------------------------------------------------------
def run_form(active: int) -> runs.RunInfo | None:
    """The new-run form; on a valid submit it starts the run (in the background) and returns it.
    In classroom mode a visitor may start one only while fewer than `classroom.max_runs()` train."""
    gate = may_start(active)
    ui_forms.restore(K.FORM)  # Streamlit drops the widgets' values while another page is open
    kind = st.radio("Training text", list(vp.CORPUS), format_func=vp.CORPUS.get, horizontal=True,
                    key=K.CORPUS_KIND.name)
    with st.form("pretrain.form", border=False):
        if kind == "upload":
            st.file_uploader("Your text file (UTF-8 .txt, at least 20 sentences)", type=["txt"], key=K.UPLOAD.name)
        elif kind == "paste":
            st.text_area("Your text (at least 20 sentences and 200 words)", key=K.PASTE.name, height=150)
        ui_forms.draw(K.FORM)
        submitted = st.form_submit_button("Start training", type="primary", key=K.START.name,
                                          icon=":material/play_arrow:", disabled=not gate.allowed)
    ui_forms.save(K.FORM)
    if not submitted:
        return None
    try:
        return vp.start_run(form_config(kind), state.get(K.FORM["name"]).strip() or None, gate.who, gate.cap)
    except LabError as exc:
        said = shown(vp.explain(exc))
        if said == shown(str(exc)):  # no form field named: a setting (BERTVIZ_THREADS, ...) or a path, shown as typed
            plain_error(said)
        else:
            say_field(said)
        return None


def form_config(kind: str) -> vp.NewRun:
    """The form's values, read from the session, as a validated new run (see `views.pretrain.live.form_config`)."""
    values = ui_forms.values(K.FORM)
    del values["name"]  # the run's, not a setting
    values["nsp"] = bool(values["nsp"])
    if kind == "upload":
        upload = state.get(K.UPLOAD)
        return vp.form_config(values, kind, None if upload is None else upload.getvalue(),
                              "" if upload is None else upload.name)
    return vp.form_config(values, kind, state.get(K.PASTE) if kind == "paste" else None)


# --- The live panel --------------------------------------------------------------------------
def live_body(run: runs.RunInfo, curves: ftr.Curves) -> None:
    """Under the progress bar: the held-out metrics, the curves and the probe sentence."""
    nsp = run.config.get("nsp", True)
    metric_row(curves, nsp)
    if curves.train.empty:
        st.info("The curves appear with the first training steps (the process is loading the corpus and model).")
    else:
        chart_grid({run.name: curves}, key="pretrain.live", nsp=nsp)
    for note in (vp.arithmetic_note(run), records.metrics_note(run.path)):
        if note:
            st.caption(note)
    probe_panel(run)


ACTIVE_NOTE = "This run's model is now the active model: open Mask & predict or Attention to explore it."
RUNS = RunPage("pretrain", K.RUNS, vp.describe, live_body, ACTIVE_NOTE, warn=vp.warmup_note)


def metric_row(curves: ftr.Curves, nsp: bool) -> None:
    held, train = curves.eval, curves.train
    cols = st.columns(4)
    if not held.empty:
        first, last = metrics.row(held, 0), metrics.row(held, -1)
        cols[0].metric("Held-out MLM loss", f"{last.loss:.3f}", f"{last.loss - first.loss:+.3f}",
                       delta_color="inverse", help="Change since the first evaluation (before training).")
        cols[1].metric("Held-out top-1", f"{last.acc:.1%}", points(last.acc - first.acc),
                       help=f"Masked words guessed right at the first try; top-5: {last.top5:.1%}.")
        if nsp and "nsp_acc" in held:
            cols[2].metric("Held-out NSP acc.", f"{last.nsp_acc:.1%}", points(last.nsp_acc - first.nsp_acc))
        else:
            cols[2].metric("NSP", "off")
    if not train.empty and "tokens_per_s" in train:
        cols[3].metric("Tokens / s", f"{train['tokens_per_s'].tail(20).mean():,.0f}",
                       help="Training speed over the last 20 steps.")


# Held-out is other stories (or your text's last documents), not unseen sentences: the generator's sentences recur,
# and about half of the held-out batches' sentences are in seed 0's 600 steps of training pairs (before truncation).
CURVES_NOTE = ("Thin lines: each training batch (noisy). Bold: held-out stories, drawn apart from the training stream "
               "(your own text: its last 10% of documents); sentences recur in both, so held-out means other stories, "
               "not sentences the model never saw. Losses are in nats; guessing uniformly over the vocabulary scores "
               "ln(vocabulary size).")


def chart_grid(curves: dict[str, ftr.Curves], key: str, train: bool = True, nsp: bool = True) -> None:
    """Loss and accuracy for MLM and NSP, then learning rate and speed (with train curves only)."""
    pairs = [(ftr.loss_curves(curves, "mlm", train), ftr.loss_curves(curves, "nsp", train)),
             (ftr.accuracy_curves(curves, "mlm", train), ftr.accuracy_curves(curves, "nsp", train))]
    if train:
        pairs.append((ftr.lr_curve(curves), ftr.throughput_curve(curves)))
        st.caption(CURVES_NOTE)
    for row, (left, right) in enumerate(pairs):
        a, b = st.columns(2)
        chart(left, f"{key}-{row}a", a, key=f"{key}.{row}a")
        if row < 2 and not nsp:
            b.info("NSP is off for this run: only masked words are learned.")
        else:
            chart(right, f"{key}-{row}b", b, key=f"{key}.{row}b")


def probe_panel(run: runs.RunInfo) -> None:
    st.subheader("Watch it learn: a probe sentence")
    cols = st.columns([4, 1, 1])
    text = cols[0].text_input("Probe sentence", K.PROBE.default, key=K.PROBE.name)
    result = probe.probe_run(run.path, text)
    if not result.ok:
        say("info", result.message)
        return
    L, H = result.attention.shape[:2]
    state.keep_valid(K.LAYER, range(L))  # a run of another shape
    state.keep_valid(K.HEAD, range(H))
    layer = cols[1].selectbox("Layer", range(L), key=K.LAYER.name)
    head = cols[2].selectbox("Head", range(H), key=K.HEAD.name)
    st.caption(f"Read by the newest checkpoint, step {result.step:,}; it changes as training writes new ones."
               + (f" {result.message}" if result.message else ""))
    left, right = st.columns([1, 2])
    for i, mask in enumerate(result.predictions[:2]):
        chart(prediction_bars(candidate_rows(mask), f"[MASK] #{i + 1}: top guesses"), f"probe_mask{i + 1}", left,
              key=f"pretrain.guess.{i}")
    labels = token_labels(result.tokens)
    chart(attention_heatmap(result.attention[layer, head], labels, labels,
                            f"Layer {layer} · head {head} · step {result.step:,}"), f"probe_L{layer}_H{head}", right,
          key="pretrain.heatmap")


# --- The table of runs -----------------------------------------------------------------------
RUN_COLUMNS = {"held-out MLM loss": number("%.3f"),
               "started": st.column_config.DatetimeColumn(format="D MMM, HH:mm:ss")}


def compare_runs(all_runs: list[runs.RunInfo]) -> None:
    """The table of every run and held-out curves of the chosen ones on shared axes."""
    st.dataframe(percents(vp.run_rows(all_runs, curves_of), "top-1", "top-5", "NSP acc"), hide_index=True,
                 column_config=RUN_COLUMNS, key="pretrain.table")
    paths = {r.name: r.path for r in all_runs}
    chosen = RUNS.overlaid(all_runs, help="E.g. the same settings with and without NSP: held-out curves on shared "
                                          "axes.")
    if chosen:
        chart_grid({name: curves_of(paths[name]) for name in chosen}, key="pretrain.compare",
                   train=False, nsp=any(r.config.get("nsp", True) for r in all_runs if r.name in chosen))
