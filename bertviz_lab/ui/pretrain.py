"""Widget groups of the Pretrain live page: the new-run form, the run picker, the live panel
(a fragment that refreshes itself while the run trains) and the table of past runs.

Runs live on disk (`bertviz_lab.pretrain.runs`), so every tab and every new session sees the
same ones; the session only remembers which run it is looking at. What is shown (ETA, run
descriptions, the form's values as a TrainConfig) comes from `bertviz_lab.views.pretrain`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab.bert.config import PRESET_SHAPES
from bertviz_lab.bert.device import DEVICE_CHOICES
from bertviz_lab.errors import LabError
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import training as figs
from bertviz_lab.figures.attention import attention_heatmap
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.pretrain import config as limits
from bertviz_lab.pretrain import records, runs
from bertviz_lab.pretrain.config import PRECISIONS
from bertviz_lab.ui import classroom, state
from bertviz_lab.ui.models import shown, try_load
from bertviz_lab.ui.state import Model
from bertviz_lab.ui.state import Pretrain as K
from bertviz_lab.ui.tables import number, percents, points
from bertviz_lab.ui.widgets import chart
from bertviz_lab.views import pretrain as vp
from bertviz_lab.views import probe
from bertviz_lab.views.predict import candidate_rows

REFRESH_S = 1.5  # the live panel's refresh interval while a run trains
BADGE = {"starting": ("blue", ":material/hourglass_top:"), "running": ("blue", ":material/play_arrow:"),
         "finished": ("green", ":material/check_circle:"), "stopped": ("orange", ":material/stop_circle:"),
         "diverged": ("red", ":material/trending_up:"), "failed": ("red", ":material/error:"),
         "unreadable": ("gray", ":material/help:")}
STEP = {"lr": 1e-4, "weight_decay": 0.01, "mask_rate": 0.01, "grad_clip": 0.5, "dropout": 0.05}  # of the float inputs
FORM_KEYS = (K.CORPUS_KIND, K.PASTE, K.PRESET, *K.FORM.values(), K.NSP, K.DEVICE, K.NAME, K.RANDOM_TOKENS,
             K.PRECISION)  # the form's widgets but the file uploader (whose value cannot be set)
ADVANCED = ("dropout", "eval_every", "eval_batches", "checkpoint_every", "threads", "grad_clip", "grad_accum",
            "vocab_size")


# --- The form --------------------------------------------------------------------------------
def _number(where, name: str) -> None:
    label, kind, help_ = vp.FIELDS[name]
    key, top = K.FORM[name], limits.upper_bound(name)  # the browser refuses a value past the bound at once
    if kind == "shape":  # no value=: the session holds it (FORM_KEYS), so it outlives a visit to another page
        where.number_input(label, step=1, max_value=top, key=key.name, help=help_, placeholder="preset's")
    elif kind == "int":
        where.number_input(label, step=1, max_value=top, key=key.name, help=help_)
    else:
        where.number_input(label, step=STEP[name], format=kind, key=key.name, help=help_)


def run_form(active: int) -> runs.RunInfo | None:
    """The new-run form; on a valid submit it starts the run (in the background) and returns it.
    In classroom mode a visitor may start one only while fewer than `classroom.max_runs()` train."""
    who, cap = classroom.visitor_id(), None if classroom.is_owner() else classroom.max_runs()
    allowed = cap is None or vp.start_allowed(active, who, cap)
    if not allowed:
        st.warning(vp.cap_note(active, cap), icon=":material/group:")
    saved = state.get(K.SAVED)  # Streamlit drops the widgets' values while another page is open
    for key in FORM_KEYS:
        state.setdefault(key, saved.get(key.name, key.default))
    kind = st.radio("Training text", list(vp.CORPUS), format_func=vp.CORPUS.get, horizontal=True,
                    key=K.CORPUS_KIND.name)
    with st.form("pretrain.form", border=False):
        if kind == "upload":
            st.file_uploader("Your text file (UTF-8 .txt, at least 20 sentences)", type=["txt"], key=K.UPLOAD.name)
        elif kind == "paste":
            st.text_area("Your text (at least 20 sentences and 200 words)", key=K.PASTE.name, height=150)
        cols = st.columns(4)
        cols[0].selectbox("Size preset", list(PRESET_SHAPES), key=K.PRESET.name, format_func=vp.preset_label)
        for col, name in zip(cols[1:], ("layers", "heads", "hidden")):
            _number(col, name)
        for row in (("steps", "batch_size", "seq_len", "lr"), ("warmup", "weight_decay", "mask_rate", "seed")):
            for col, name in zip(st.columns(4), row):
                _number(col, name)
        cols = st.columns(4)
        cols[0].toggle("NSP task", key=K.NSP.name,
                       help="Next-sentence prediction. Off: the model learns from masked words alone (the ablation).")
        cols[1].selectbox("Device", DEVICE_CHOICES, key=K.DEVICE.name)
        cols[2].text_input("Run name (optional)", key=K.NAME.name, placeholder="run-date-time")
        cols[3].selectbox("Random tokens", list(vp.RANDOM_TOKENS), key=K.RANDOM_TOKENS.name,
                          help=vp.RANDOM_TOKEN_HELP)
        with st.expander("Advanced"):
            for i, col in enumerate(st.columns(3) + st.columns(3) + st.columns(3)):  # 8 numbers and Precision
                if i < len(ADVANCED):
                    _number(col, ADVANCED[i])
                elif i == len(ADVANCED):
                    col.selectbox("Precision", PRECISIONS, key=K.PRECISION.name)
        submitted = st.form_submit_button("Start training", type="primary", key=K.START.name,
                                          icon=":material/play_arrow:", disabled=not allowed)
    state.put(K.SAVED, {key.name: state.get(key) for key in FORM_KEYS})
    if not submitted:
        return None
    try:
        return vp.start_run(form_config(kind), state.get(K.NAME).strip() or None, who, cap)
    except LabError as exc:
        st.error(shown(vp.explain(exc)))
        return None


def form_config(kind: str) -> vp.NewRun:
    """The form's values, read from the session, as a validated new run (see `views.pretrain.form_config`)."""
    values = {name: state.get(key) for name, key in K.FORM.items()}
    values.update(preset=state.get(K.PRESET), nsp=bool(state.get(K.NSP)), device=state.get(K.DEVICE),
                  precision=state.get(K.PRECISION), random_tokens=state.get(K.RANDOM_TOKENS))
    if kind == "upload":
        upload = state.get(K.UPLOAD)
        return vp.form_config(values, kind, None if upload is None else upload.getvalue(),
                              "" if upload is None else upload.name)
    return vp.form_config(values, kind, state.get(K.PASTE) if kind == "paste" else None)


# --- Which run -------------------------------------------------------------------------------
def pick_run(all_runs: list[runs.RunInfo], started: runs.RunInfo | None) -> runs.RunInfo:
    """The run shown: the one just started, else the session's choice, else the newest active one."""
    names = {r.name: r for r in all_runs}
    if started is not None:
        state.put(K.RUN, started.name)
    state.keep_valid(K.RUN, names)
    remembered = state.get(K.SELECTED)
    newest = next((r for r in all_runs if r.active), all_runs[0])
    state.setdefault(K.RUN, remembered if remembered in names else newest.name)
    name = st.selectbox("Run", list(names), key=K.RUN.name)  # its status is in the live panel, which stays current
    state.put(K.SELECTED, name)
    return names[name]


# --- The live panel --------------------------------------------------------------------------
@st.cache_data(max_entries=64, show_spinner=False)
def _curves(run_dir: str, version: tuple) -> figs.Curves:
    return vp.read_curves(run_dir)


def curves_of(run_dir: Path) -> figs.Curves:
    """The run's curves, built again only when its metrics file grew or was replaced (and then only the new
    lines are read: the reader keeps its place in the file)."""
    version = vp.metrics_version(run_dir)
    return figs.Curves() if version is None else _curves(str(run_dir), version)


def live_panel(run: runs.RunInfo) -> None:
    """Status, progress, curves and probe of one run; redrawn every REFRESH_S seconds while it trains."""
    state.put(K.WATCHING, run.active)
    st.fragment(run_every=REFRESH_S if run.active else None)(_live)(str(run.path))


def _live(run_dir: str) -> None:
    run = runs.read(run_dir)
    if state.get(K.WATCHING) and not run.active:
        state.put(K.WATCHING, False)
        st.rerun()  # the whole page: the run table and the "Use this model" button change too
    curves = curves_of(run.path)
    status_row(run)
    if note := vp.warmup_note(run.config):
        st.warning(note, icon=":material/trending_flat:")
    st.progress(min(1.0, run.step / max(run.total_steps, 1)), text=vp.progress_text(run, curves.train))
    nsp = run.config.get("nsp", True)
    metric_row(curves, nsp)
    if curves.train.empty:
        st.info("The curves appear with the first training steps (the process is loading the corpus and model).")
    else:
        chart_grid({run.name: curves}, key="pretrain.live", nsp=nsp)
    if note := records.metrics_note(run.path):
        st.caption(note)
    probe_panel(run)


def status_row(run: runs.RunInfo, keys=K, describe=vp.describe) -> None:
    """The run's status badge, name, settings and last message, and Stop while it trains (for whoever may).
    keys, describe: the Fine-tune page's session keys and its summary of a fine-tuning run's settings."""
    color, icon = BADGE.get(run.status, ("gray", None))
    left, right = st.columns([5, 1], vertical_alignment="center")
    with left:
        st.badge(run.status, color=color, icon=icon)
        st.caption(f"**{run.name}** · {describe(run.config)} · {run.message}")
    if run.active and vp.can_control(run, classroom.visitor_id()):
        right.button("Stop", key=keys.STOP.name, icon=":material/stop:", on_click=act,
                     args=("stop", str(run.path), keys),
                     help="Saves a checkpoint and stops; the run can be resumed later.", width="stretch")
    elif run.active:
        right.caption(vp.control_note(run))


def metric_row(curves: figs.Curves, nsp: bool) -> None:
    held, train = curves.eval, curves.train
    cols = st.columns(4)
    if not held.empty:
        first, last = held.iloc[0], held.iloc[-1]
        cols[0].metric("Held-out MLM loss", f"{last['mlm_loss']:.3f}", f"{last['mlm_loss'] - first['mlm_loss']:+.3f}",
                       delta_color="inverse", help="Change since the first evaluation (before training).")
        cols[1].metric("Held-out top-1", f"{last['mlm_top1']:.1%}", points(last["mlm_top1"] - first["mlm_top1"]),
                       help=f"Masked words guessed right at the first try; top-5: {last['mlm_top5']:.1%}.")
        if nsp and "nsp_acc" in held:
            cols[2].metric("Held-out NSP acc.", f"{last['nsp_acc']:.1%}", points(last["nsp_acc"] - first["nsp_acc"]))
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


def chart_grid(curves: dict[str, figs.Curves], key: str, train: bool = True, nsp: bool = True) -> None:
    """Loss and accuracy for MLM and NSP, then learning rate and speed (with train curves only)."""
    pairs = [(figs.loss_curves(curves, "mlm", train), figs.loss_curves(curves, "nsp", train)),
             (figs.accuracy_curves(curves, "mlm", train), figs.accuracy_curves(curves, "nsp", train))]
    if train:
        pairs.append((figs.lr_curve(curves), figs.throughput_curve(curves)))
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
        st.info(result.message)
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


# --- Finished runs: use, resume, delete ------------------------------------------------------
def act(action: str, run_dir: str, keys=K) -> None:
    """A Stop, Resume or Delete button's callback. Who may act is checked again here, on the run as it
    is now; a refusal (say, a second click while the run is starting) is kept to show as one line.
    keys: the page's session keys (this page's, or the Fine-tune page's, which shares these actions)."""
    K = keys  # noqa: N806
    run = runs.read(run_dir)
    state.forget(K.CONFIRM)
    if not vp.can_control(run, classroom.visitor_id()):
        state.put(K.NOTICE, vp.control_note(run))
        return
    try:
        {"stop": runs.stop, "resume": runs.resume, "delete": runs.delete}[action](run.path)
    except LabError as exc:
        state.put(K.NOTICE, str(exc))


def notice(keys=K) -> None:
    """The last refusal of a Stop, Resume or Delete, once."""
    K = keys  # noqa: N806
    if state.get(K.NOTICE):
        st.warning(state.get(K.NOTICE), icon=":material/block:")
        state.forget(K.NOTICE)


ACTIVE_NOTE = "This run's model is now the active model: open Mask & predict or Attention to explore it."


def run_actions(run: runs.RunInfo, keys=K, active_note: str = ACTIVE_NOTE) -> None:
    """Use this model (finished or stopped), Resume (stopped, failed or diverged, with a checkpoint) and
    Delete (with a confirmation) for a run that is not training; visitors see these on their own runs only.
    keys, active_note: the Fine-tune page's, where it draws these for a fine-tuning run."""
    K = keys  # noqa: N806
    if run.active:
        return
    mine = vp.can_control(run, classroom.visitor_id())
    left, right = st.columns([1, 3], vertical_alignment="center")
    if run.status in ("finished", "stopped") and run.checkpoint is not None:
        path = str(run.checkpoint)
        left.button("Use this model", key=K.USE.name, type="primary", icon=":material/model_training:",
                    on_click=try_load, args=(path,))
        if state.get(Model.PATH) == path:
            right.success(active_note)
        else:
            right.caption(f"Makes {run.checkpoint.name} of {run.name} the active model of every page "
                          "(it is in the sidebar's picker too).")
    if not mine:
        st.caption(vp.control_note(run))
        return
    if run.resumable:
        help_ = ("Continues from its last good checkpoint, "
                 f"{run.checkpoint.name}" + (" (with the same settings the loss may explode again)."
                                             if run.status == "diverged" else "."))
        left.button("Resume", key=K.RESUME.name, icon=":material/play_arrow:", on_click=act,
                    args=("resume", str(run.path), K), help=help_)
    if state.get(K.CONFIRM) != run.name:
        left.button("Delete run", key=K.DELETE.name, icon=":material/delete:", on_click=state.put,
                    args=(K.CONFIRM, run.name))
        return
    st.warning(f"Delete run {run.name}? This removes its checkpoints.", icon=":material/delete:")
    yes, no, _ = st.columns([1, 1, 4])
    yes.button("Delete", key=K.DELETE_YES.name, type="primary", on_click=act, args=("delete", str(run.path), K))
    no.button("Cancel", key=K.DELETE_NO.name, on_click=state.forget, args=(K.CONFIRM,))


# --- The table of runs -----------------------------------------------------------------------
RUN_COLUMNS = {"held-out MLM loss": number("%.3f"),
               "started": st.column_config.DatetimeColumn(format="D MMM, HH:mm:ss")}


def compare_runs(all_runs: list[runs.RunInfo]) -> None:
    """The table of every run and held-out curves of the chosen ones on shared axes."""
    st.dataframe(percents(vp.run_rows(all_runs, curves_of), "top-1", "top-5", "NSP acc"), hide_index=True,
                 column_config=RUN_COLUMNS, key="pretrain.table")
    paths = {r.name: r.path for r in all_runs}
    state.keep_valid(K.COMPARE, paths)
    chosen = st.multiselect("Overlay runs", list(paths), key=K.COMPARE.name, placeholder="pick two or more runs",
                            help="E.g. the same settings with and without NSP: held-out curves on shared axes.")
    if chosen:
        chart_grid({name: curves_of(paths[name]) for name in chosen}, key="pretrain.compare",
                   train=False, nsp=any(r.config.get("nsp", True) for r in all_runs if r.name in chosen))
