"""What only the Fine-tune page draws: the new-run form (described in `views.finetune.classifier.FORM`, drawn by
ui/kit/forms.py) with its task picker and class demo button, the live panel's metrics and curves, and the overlay of
runs with what they show. The run picker, the live panel's frame, Stop / Resume / Delete / Use this model and the
overlay box are the run pages' shared library (ui/kit/runs.py), set up for this page by `RUNS`.

Runs live on disk and are started, stopped and deleted by the run machinery (`finetune.runs`,
`pretrain.runs`), exactly as on the Pretrain live page; what is shown comes from views/finetune/.
The chosen run's results (dev set, Try it, before and after) are in `ui/finetune/results.py`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab import metrics
from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.figures import finetune as ff
from bertviz_lab.figures.training import Curves
from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune import tasks
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.pretrain import runs
from bertviz_lab.ui.kit import forms as ui_forms
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.finetune.results import chance_of
from bertviz_lab.ui.shell.models import active_model, device_name, shown
from bertviz_lab.ui.kit.runs import RunPage, curves_of, may_start
from bertviz_lab.ui.shell.state import SHIPPED
from bertviz_lab.ui.shell.state import Finetune as K
from bertviz_lab.ui.kit.tables import percents, points
from bertviz_lab.ui.kit.widgets import chart, say, say_field
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views.finetune import dev as fd

CSV = "csv"
TASK_NAMES = {**{name: name for name in tasks.BUILTIN}, CSV: "your own CSV"}
CSV_HELP = """A header row names the columns (any order; an optional `split` column says train, dev or test, else
the rows are dealt 80 / 10 / 10). Three layouts:

| layout | a row | task |
| --- | --- | --- |
| `text,label` | `the cat sat on the mat .,ok` | one sentence → a label |
| `text,text_b,label` | `it rained .,we stayed in .,follows` | a sentence pair → a label |
| `tokens,tags` | `ali ate a pie,PERSON O O FOOD` | a tag per word (words and tags separated by spaces) |

At least 8 training rows, 2 dev rows and two different labels."""


# --- The form --------------------------------------------------------------------------------------
@st.cache_data(max_entries=4, show_spinner="Checking the CSV file…")
def _parsed(raw: bytes, name: str) -> tasks.Task:
    return vf.read_upload(raw, name)


def task_picker(name: str) -> tuple[tasks.Task | None, bytes | None, str | None]:
    """The chosen task, described with a few rows; for a CSV, the file checked at once. Returns
    (task, the CSV's bytes, the error already shown): task None while no usable file is chosen."""
    if name != CSV:
        with st.spinner("Writing the task's examples…"):  # a task's first use generates them: a second or two
            task = tasks.builtin(name)
        st.caption(f"{tasks.KIND_NAMES[task.kind].capitalize()}, labels {', '.join(task.labels)}. "
                   f"{task.description} {len(task.train):,} training and {len(task.dev):,} dev examples.")
        st.table(vf.example_rows(task).style.hide(axis="index"))  # wraps: text and text_b fit any width
        return task, None, None
    st.file_uploader("Your CSV file (UTF-8)", type=["csv"], key=K.UPLOAD.name)
    st.markdown(CSV_HELP)
    upload = state.get(K.UPLOAD)
    if upload is None:
        return None, None, None
    raw = upload.getvalue()
    try:
        task = _parsed(raw, upload.name)
    except LabError as exc:
        say("error", shown(str(exc)).removeprefix("data:").lstrip(), lead=f"**{vf.LABELS['data']}**: ")
        return None, raw, str(exc)
    labels = ", ".join(task.labels[:8]) + ("…" if len(task.labels) > 8 else "")
    st.success(f"{plain(upload.name)}: {tasks.KIND_NAMES[task.kind]}, {len(task.labels)} labels ({plain(labels)}), "
               f"{len(task.train):,} training and {len(task.dev):,} dev rows.", icon=":material/check:")
    st.table(vf.example_rows(task).style.hide(axis="index"))  # wraps: text and text_b fit any width
    return task, raw, None


def class_demo() -> None:
    """The "Class demo settings" button: the default task from the shipped model it was measured on, pretrained,
    every weight, the demo's numbers."""
    for key in (K.TASK, K.FORM["weights"], K.FORM["mode"]):
        state.put(key, key.default)
    shipped = Path(state.Model.PATH.default).resolve()
    for start in vf.starting_points(SHIPPED):
        if Path(start.checkpoint).resolve() == shipped:
            state.put(K.FORM["start"], start.label)
    for name, value in vf.CLASS_DEMO.items():
        state.put(K.FORM[name], value)


def run_form(active: int) -> runs.RunInfo | None:
    """The new-run form; on a valid submit it starts the run (in the background) and returns it.
    In classroom mode a visitor may start one only while fewer than `classroom.max_runs()` train."""
    gate = may_start(active)
    ui_forms.restore(K.FORM)  # Streamlit drops the widgets' values while another page is open
    st.button(f"Class demo settings ({vf.CLASS_DEMO['steps']} steps)", key=K.DEMO.name, icon=":material/timer:",
              on_click=class_demo, help=vf.CLASS_DEMO_HELP)
    name = st.radio("Task", list(TASK_NAMES), format_func=TASK_NAMES.get, horizontal=True, key=K.TASK.name)
    task, raw, error = task_picker(name)
    ckpt = active_model()  # one opened from a folder or the Hub is offered first (the CLI's finetune --from FOLDER)
    starts = {s.label: s for s in vf.starting_points(SHIPPED, active=(ckpt.path, ckpt.config))}
    if not starts:
        st.warning("No model to start from: the shipped checkpoints are missing and no pretraining run has a "
                   "checkpoint yet.")
    state.keep_valid(K.FORM["start"], starts)
    with st.form("finetune.form", border=False):
        ui_forms.draw(K.FORM, options={"start": list(starts)})
        submitted = st.form_submit_button("Start fine-tuning", type="primary", key=K.GO.name,
                                          icon=":material/play_arrow:", disabled=not gate.allowed or not starts)
    ui_forms.save(K.FORM)
    if not submitted or error is not None:  # a broken CSV: its one message is shown above
        return None
    values = ui_forms.values(K.FORM)
    start, weights, mode, run_name = (values.pop(field) for field in ("start", "weights", "mode", "name"))
    try:
        if name == CSV and task is None:
            raise InputError(vf.NO_CSV)
        if start not in starts:  # deleted while the form was open
            raise ConfigError("checkpoint: choose a model to start from")
        config = vf.form_config(values, starts[start], weights, mode, task="" if name == CSV else name,
                                data=str(vf.upload_path(raw, state.get(K.UPLOAD).name)) if name == CSV else "",
                                device=device_name())  # the sidebar's device, where the page reads its results
        return vf.start_run(config, raw, run_name.strip() or None, gate.who, gate.cap)
    except LabError as exc:
        say_field(shown(vf.explain(exc)))
        return None


# --- The live panel ------------------------------------------------------------------------------------
def live_body(run: runs.RunInfo, curves: Curves) -> None:
    """Under the progress bar: dev accuracy and loss, speed, the curves and what chance scores on this dev set."""
    held, train = curves.eval, curves.train
    cols = st.columns(3)
    if not held.empty and "acc" in held:
        first, last = metrics.row(held, 0), metrics.row(held, -1)
        cols[0].metric("Dev accuracy", f"{last.acc:.1%}", points(last.acc - first.acc),
                       help="On dev examples it never trains on; the change is since the first evaluation (step 0).")
        cols[1].metric("Dev loss", f"{last.loss:.3f}", f"{last.loss - first.loss:+.3f}",
                       delta_color="inverse")
    if not train.empty and "examples_per_s" in train:
        cols[2].metric("Examples / s", f"{train['examples_per_s'].tail(20).mean():,.0f}",
                       help="Training speed over the last 20 steps.")
    if train.empty and held.empty:
        st.info("The curves appear with the first evaluation (the process is loading the task and the model).")
        return
    chart_pair({run.name: curves}, "finetune.live")
    base = chance_of(run)
    st.caption("Thin lines: each training batch (noisy). Bold: the dev set, which it never trains on."
               + (f" Chance here: always answering \u201c{plain(base.label)}\u201d gets {base.share:.1%} of these "
                  f"{base.items:,} dev items, the accuracy to beat." if base is not None else ""))


def chart_pair(curves: dict, key: str, train: bool = True) -> None:
    left, right = st.columns(2)
    chart(ff.loss_curves(curves, train), f"{key}-loss", left, key=f"{key}.loss")
    chart(ff.accuracy_curves(curves, train), f"{key}-accuracy", right, key=f"{key}.acc")


ACTIVE_NOTE = ("This fine-tuned model is now the active model: Attention and Representations read it (it has no MLM "
               "head, so Mask & predict cannot).")
RUNS = RunPage(ft_runs.KIND, K.RUNS, vf.describe, live_body, ACTIVE_NOTE, named=True)


# --- Compare runs ------------------------------------------------------------------------------------
RUN_COLUMNS = {"started": st.column_config.DatetimeColumn(format="D MMM, HH:mm:ss")}


def compare_runs(all_runs: list[runs.RunInfo]) -> None:
    """The table of every fine-tuning run, and the dev accuracy and train loss of the chosen ones overlaid."""
    st.dataframe(percents(vf.run_rows(all_runs, curves_of), "dev accuracy"), hide_index=True, column_config=RUN_COLUMNS,
                 key="finetune.table")
    paths = {r.name: r.path for r in all_runs}
    chosen = RUNS.overlaid(all_runs, help="E.g. the same task from the pretrained model and from a random one of the "
                                          "same size.")
    if not chosen:
        return
    picked = [r for r in all_runs if r.name in chosen]
    legend = vf.legends(picked)
    curves = {legend[name]: curves_of(paths[name]) for name in chosen}
    left, right = st.columns(2)
    chart(ff.accuracy_curves(curves, train=False), "finetune-compare-accuracy", left, key="finetune.compare.acc")
    chart(ff.loss_curves(curves, held_out=False), "finetune-compare-loss", right, key="finetune.compare.loss")
    st.caption("Each colour is one run, on the same axes. Compare runs of one task: chance differs between tasks. "
               "Overlay a start from random weights, or one pretrained without NSP, on the same task to see what "
               "pretraining, or NSP, is worth there. What these runs show:")
    outcomes = [o for o in (outcome(r, legend[r.name]) for r in picked) if o is not None]
    st.markdown("\n".join(f"- {plain(note)}" for note in fd.compare_notes(outcomes)))  # labels, file names


def outcome(run: runs.RunInfo, legend: str) -> fd.Outcome | None:
    """The run's first and last dev accuracy against chance; None before its first evaluation."""
    held, base = curves_of(run.path).eval, chance_of(run)
    try:
        cfg = FinetuneConfig.from_dict(run.config)
    except (LabError, TypeError):
        return None
    if base is None or held.empty or "acc" not in held:
        return None
    first, last = metrics.row(held, 0), metrics.row(held, -1)
    return fd.Outcome(legend, cfg.source, vf.start_kind(cfg), (int(first.step), float(first.acc)),
                      (int(last.step), float(last.acc)), base)
