"""Widget groups of the Fine-tune page: the new-run form, the run picker, the live panel (a fragment that
refreshes itself while the run trains), Stop / Resume / Delete / Use this model, and the overlay of runs.

Runs live on disk and are started, stopped and deleted by the run machinery (`finetune.runs`,
`pretrain.runs`), exactly as on the Pretrain live page; what is shown comes from `views.finetune`.
The chosen run's results (dev set, Try it, before and after) are in `ui/finetune_results.py`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.figures import finetune as figs
from bertviz_lab.finetune import tasks
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.pretrain import runs
from bertviz_lab.ui import classroom, state
from bertviz_lab.ui import pretrain as shared
from bertviz_lab.ui.finetune_results import chance_of
from bertviz_lab.ui.models import shown
from bertviz_lab.ui.pretrain import REFRESH_S, curves_of
from bertviz_lab.ui.state import SHIPPED
from bertviz_lab.ui.state import Finetune as K
from bertviz_lab.ui.tables import percents, points
from bertviz_lab.ui.widgets import chart, plain
from bertviz_lab.views import finetune as vf
from bertviz_lab.views import finetune_dev as fd
from bertviz_lab.views import pretrain as vp

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
LR_STEP = 1e-5


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
        st.error(_upload_error(exc))
        return None, raw, str(exc)
    labels = ", ".join(task.labels[:8]) + ("…" if len(task.labels) > 8 else "")
    st.success(f"{plain(upload.name)}: {tasks.KIND_NAMES[task.kind]}, {len(task.labels)} labels ({plain(labels)}), "
               f"{len(task.train):,} training and {len(task.dev):,} dev rows.", icon=":material/check:")
    st.table(vf.example_rows(task).style.hide(axis="index"))  # wraps: text and text_b fit any width
    return task, raw, None


def _upload_error(exc: LabError) -> str:
    """'**CSV file**: ' and why, as plain text: the reason quotes the file's name, header cells and labels."""
    reason = shown(str(exc)).removeprefix("data:").lstrip()
    return f"**{vf.LABELS['data']}**: {plain(reason)}"


def _number(where, name: str) -> None:
    label, help_ = vf.FIELDS[name]
    key = K.FORM[name]  # no value=: the session holds it (FORM_KEYS), so it outlives a visit to another page
    if name == "lr":
        where.number_input(label, step=LR_STEP, format="%.5f", key=key.name, help=help_)
    else:
        where.number_input(label, step=1, key=key.name, help=help_)


FORM_KEYS = (K.TASK, K.WEIGHTS, K.MODE, K.START, *K.FORM.values(), K.NAME)  # the form's widgets but the uploader


def restore_form() -> None:
    """The form's values as the learner left them (Streamlit drops a widget's value while another page is open)."""
    saved = state.get(K.SAVED)
    for key in FORM_KEYS:
        value = saved.get(key.name, key.default)
        if value is not None:  # Start from: None would empty the box; its first choice is the default
            state.setdefault(key, value)


def class_demo() -> None:
    """The "Class demo settings" button: the default task from the shipped model it was measured on, pretrained,
    every weight, the demo's numbers."""
    for key in (K.TASK, K.WEIGHTS, K.MODE):
        state.put(key, key.default)
    shipped = Path(state.Model.PATH.default).resolve()
    for start in vf.starting_points(SHIPPED):
        if Path(start.checkpoint).resolve() == shipped:
            state.put(K.START, start.label)
    for name, value in vf.CLASS_DEMO.items():
        state.put(K.FORM[name], value)


def run_form(active: int) -> runs.RunInfo | None:
    """The new-run form; on a valid submit it starts the run (in the background) and returns it.
    In classroom mode a visitor may start one only while fewer than `classroom.max_runs()` train."""
    who, cap = classroom.visitor_id(), None if classroom.is_owner() else classroom.max_runs()
    allowed = cap is None or vp.start_allowed(active, who, cap)
    if not allowed:
        st.warning(vp.cap_note(active, cap), icon=":material/group:")
    restore_form()
    st.button(f"Class demo settings ({vf.CLASS_DEMO['steps']} steps)", key=K.DEMO.name, icon=":material/timer:",
              on_click=class_demo, help=vf.CLASS_DEMO_HELP)
    name = st.radio("Task", list(TASK_NAMES), format_func=TASK_NAMES.get, horizontal=True, key=K.TASK.name)
    task, raw, error = task_picker(name)
    starts = {s.label: s for s in vf.starting_points(SHIPPED)}
    if not starts:
        st.warning("No model to start from: the shipped checkpoints are missing and no pretraining run has a "
                   "checkpoint yet.")
    state.keep_valid(K.START, starts)
    with st.form("finetune.form", border=False):
        cols = st.columns([3, 3, 2])
        cols[0].selectbox("Start from", list(starts), key=K.START.name,
                          help="A shipped model or a pretraining run's latest checkpoint (Pretrain live).")
        cols[1].radio("Weights", list(vf.WEIGHTS), format_func=vf.WEIGHTS.get, key=K.WEIGHTS.name,
                      help="Random: the same shape without pretraining, to see what pretraining is worth.")
        cols[2].radio("Train", list(vf.MODES), format_func=vf.MODES.get, key=K.MODE.name,
                      help="Full fine-tuning updates every weight; a linear probe trains the classifier alone "
                           "on the frozen encoder's vectors.")
        for col, field in zip(st.columns(5), vf.FIELDS):
            _number(col, field)
        st.columns(5)[0].text_input("Run name (optional)", key=K.NAME.name, placeholder="finetune-date-time")
        submitted = st.form_submit_button("Start fine-tuning", type="primary", key=K.GO.name,
                                          icon=":material/play_arrow:", disabled=not allowed or not starts)
    state.put(K.SAVED, {key.name: state.get(key) for key in FORM_KEYS})
    if not submitted or error is not None:  # a broken CSV: its one message is shown above
        return None
    try:
        if name == CSV and task is None:
            raise InputError(vf.NO_CSV)
        if state.get(K.START) not in starts:  # deleted while the form was open
            raise ConfigError("checkpoint: choose a model to start from")
        config = vf.form_config({f: state.get(k) for f, k in K.FORM.items()}, starts[state.get(K.START)],
                                state.get(K.WEIGHTS), state.get(K.MODE), task="" if name == CSV else name,
                                data=str(vf.upload_path(raw, state.get(K.UPLOAD).name)) if name == CSV else "")
        return vf.start_run(config, raw, state.get(K.NAME).strip() or None, who, cap)
    except LabError as exc:
        st.error(shown(vf.explain(exc)))
        return None


# --- Which run, live ---------------------------------------------------------------------------------
def pick_run(all_runs: list[runs.RunInfo], started: runs.RunInfo | None) -> runs.RunInfo:
    """The run shown: the one just started, else the session's choice, else the newest active one."""
    names = {r.name: r for r in all_runs}
    if started is not None:
        state.put(K.RUN, started.name)
    state.keep_valid(K.RUN, names)
    remembered = state.get(K.SELECTED)
    newest = next((r for r in all_runs if r.active), all_runs[0])
    state.setdefault(K.RUN, remembered if remembered in names else newest.name)
    name = st.selectbox("Run", list(names), key=K.RUN.name,
                        format_func=lambda n: f"{n} · {vf.describe(names[n].config)}")
    state.put(K.SELECTED, name)
    return names[name]


def live_panel(run: runs.RunInfo) -> None:
    """Status, progress and curves of one run; redrawn every REFRESH_S seconds while it trains."""
    state.put(K.WATCHING, run.active)
    st.fragment(run_every=REFRESH_S if run.active else None)(_live)(str(run.path))


def _live(run_dir: str) -> None:
    run = runs.read(run_dir)
    if state.get(K.WATCHING) and not run.active:
        state.put(K.WATCHING, False)
        st.rerun()  # the whole page: the results, the run table and "Use this model" change too
    curves = curves_of(run.path)
    shared.status_row(run, K, vf.describe)
    st.progress(min(1.0, run.step / max(run.total_steps, 1)), text=vp.progress_text(run, curves.train))
    held, train = curves.eval, curves.train
    cols = st.columns(3)
    if not held.empty and "dev_acc" in held:
        first, last = held.iloc[0], held.iloc[-1]
        cols[0].metric("Dev accuracy", f"{last['dev_acc']:.1%}", points(last["dev_acc"] - first["dev_acc"]),
                       help="On dev examples it never trains on; the change is since the first evaluation (step 0).")
        cols[1].metric("Dev loss", f"{last['dev_loss']:.3f}", f"{last['dev_loss'] - first['dev_loss']:+.3f}",
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
    chart(figs.loss_curves(curves, train), f"{key}-loss", left, key=f"{key}.loss")
    chart(figs.accuracy_curves(curves, train), f"{key}-accuracy", right, key=f"{key}.acc")


# --- Stop, resume, delete, use ------------------------------------------------------------------------
def notice() -> None:
    shared.notice(K)


def run_actions(run: runs.RunInfo) -> None:
    """Use this model, Resume and Delete, as on the Pretrain page."""
    shared.run_actions(run, K, "This fine-tuned model is now the active model: Attention and Representations read "
                               "it (it has no MLM head, so Mask & predict cannot).")


# --- Compare runs ------------------------------------------------------------------------------------
RUN_COLUMNS = {"started": st.column_config.DatetimeColumn(format="D MMM, HH:mm:ss")}


def compare_runs(all_runs: list[runs.RunInfo]) -> None:
    """The table of every fine-tuning run, and the dev accuracy and train loss of the chosen ones overlaid."""
    st.dataframe(percents(vf.run_rows(all_runs, curves_of), "dev accuracy"), hide_index=True, column_config=RUN_COLUMNS,
                 key="finetune.table")
    paths = {r.name: r.path for r in all_runs}
    state.keep_valid(K.COMPARE, paths)
    chosen = st.multiselect("Overlay runs", list(paths), key=K.COMPARE.name, placeholder="pick two or more runs",
                            help="E.g. the same task from the pretrained model and from a random one of the same size.")
    if not chosen:
        return
    picked = [r for r in all_runs if r.name in chosen]
    legend = vf.legends(picked)
    curves = {legend[name]: curves_of(paths[name]) for name in chosen}
    left, right = st.columns(2)
    chart(figs.accuracy_curves(curves, train=False), "finetune-compare-accuracy", left, key="finetune.compare.acc")
    chart(figs.loss_curves(curves, held_out=False), "finetune-compare-loss", right, key="finetune.compare.loss")
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
    if base is None or held.empty or "dev_acc" not in held:
        return None
    first, last = held.iloc[0], held.iloc[-1]
    return fd.Outcome(legend, cfg.source, vf.start_kind(cfg), (int(first["step"]), float(first["dev_acc"])),
                      (int(last["step"]), float(last["dev_acc"])), base)
