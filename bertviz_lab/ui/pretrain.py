"""Widget groups of the Pretrain live page: the new-run form, the run picker, the live panel
(a fragment that refreshes itself while the run trains) and the table of past runs.

Runs live on disk (`bertviz_lab.pretrain.runs`), so every tab and every new session sees the
same ones; the session only remembers which run it is looking at.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from bertviz_lab import atomic
from bertviz_lab.bert.config import PRESET_SHAPES
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available
from bertviz_lab.corpus import documents_from_text, read_text_file
from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import training as figs
from bertviz_lab.figures.attention import attention_heatmap, export_config
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.pretrain import runs
from bertviz_lab.pretrain.config import PRECISIONS, TrainConfig
from bertviz_lab.ui.models import PATH_KEY, try_load
from bertviz_lab.views import probe

REFRESH_S = 1.5  # the live panel's refresh interval while a run trains
RUN_KEY, SELECTED, WATCHING = "pretrain.run", "pretrain.selected", "pretrain.watching"
DEFAULTS = TrainConfig()
CORPUS = {"builtin": "Built-in story world", "upload": "Upload a .txt file", "paste": "Paste text"}
BADGE = {"starting": ("blue", ":material/hourglass_top:"), "running": ("blue", ":material/play_arrow:"),
         "finished": ("green", ":material/check_circle:"), "stopped": ("orange", ":material/stop_circle:"),
         "diverged": ("red", ":material/trending_up:"), "failed": ("red", ":material/error:")}
# Form fields: (TrainConfig field, label, kind, help); kinds: int, float format, or "shape" (empty = preset's).
FIELDS = {
    "layers": ("Layers", "shape", "Empty: the preset's number of encoder layers."),
    "heads": ("Heads", "shape", "Attention heads per layer; they must divide the hidden size."),
    "hidden": ("Hidden size", "shape", "Width of every token vector (the FFN is 4× wider)."),
    "steps": ("Steps", "int", "Optimizer steps to train."),
    "batch_size": ("Batch size", "int", "Sentence pairs per step."),
    "seq_len": ("Sequence length", "int", "Longest input in tokens (8 to 512)."),
    "lr": ("Learning rate", "%.5f", "Peak AdamW learning rate, reached after the warmup."),
    "warmup": ("Warmup steps", "int", "Steps of linear warmup from 0 to the peak rate."),
    "weight_decay": ("Weight decay", "%.3f", "AdamW decay (not on biases and LayerNorm)."),
    "mask_rate": ("Mask rate", "%.2f", "Share of tokens to predict (BERT: 0.15), each 80/10/10."),
    "seed": ("Seed", "int", "Same seed and settings on the CPU: the same curves."),
    "eval_every": ("Evaluate every", "int", "Steps between held-out evaluations."),
    "eval_batches": ("Held-out batches", "int", "Batches per held-out evaluation."),
    "checkpoint_every": ("Checkpoint every", "int", "Steps between checkpoints (the probe reads the newest)."),
    "threads": ("CPU threads", "int", "0 = all cores but one, so the app stays responsive."),
    "grad_clip": ("Gradient clip", "%.2f", "Largest global gradient norm; 0 = off."),
    "grad_accum": ("Gradient accumulation", "int", "Micro-batches per optimizer step."),
    "vocab_size": ("Vocabulary size", "int", "WordPiece size when training on your own text."),
}
LABELS = {**{name: label for name, (label, _, _) in FIELDS.items()}, "preset": "Size preset", "corpus":
          "Training text", "device": "Device", "precision": "Precision", "nsp": "NSP", "run": "Run name"}


# --- The form --------------------------------------------------------------------------------
def _number(where, name: str) -> None:
    label, kind, help_ = FIELDS[name]
    key = f"pretrain.{name}"
    if kind == "shape":
        where.number_input(label, value=None, step=1, key=key, help=help_, placeholder="preset's")
    elif kind == "int":
        where.number_input(label, value=getattr(DEFAULTS, name), step=1, key=key, help=help_)
    else:
        step = {"lr": 1e-4, "weight_decay": 0.01, "mask_rate": 0.01, "grad_clip": 0.5}[name]
        where.number_input(label, value=float(getattr(DEFAULTS, name)), step=step, format=kind, key=key, help=help_)


def explain(exc: Exception) -> str:
    """The error with the form label of the field it names in front, e.g. 'Steps: steps must be ...'."""
    field = str(exc).split(" ", 1)[0]
    return f"**{LABELS[field]}**: {exc}" if field in LABELS else str(exc)


def run_form() -> runs.RunInfo | None:
    """The new-run form; on a valid submit it starts the run (in the background) and returns it."""
    kind = st.radio("Training text", list(CORPUS), format_func=CORPUS.get, horizontal=True,
                    key="pretrain.corpus_kind")
    with st.form("pretrain.form", border=False):
        if kind == "upload":
            st.file_uploader("Your text file (UTF-8 .txt, at least 20 sentences)", type=["txt"], key="pretrain.upload")
        elif kind == "paste":
            st.text_area("Your text (at least 20 sentences and 200 words)", key="pretrain.paste", height=150)
        cols = st.columns(4)
        cols[0].selectbox("Size preset", list(PRESET_SHAPES), key="pretrain.preset", format_func=_preset_label)
        for col, name in zip(cols[1:], ("layers", "heads", "hidden")):
            _number(col, name)
        for row in (("steps", "batch_size", "seq_len", "lr"), ("warmup", "weight_decay", "mask_rate", "seed")):
            for col, name in zip(st.columns(4), row):
                _number(col, name)
        cols = st.columns(4)
        cols[0].toggle("NSP task", value=True, key="pretrain.nsp",
                       help="Next-sentence prediction. Off: the model learns from masked words alone (the ablation).")
        cols[1].selectbox("Device", DEVICE_CHOICES, key="pretrain.device")
        cols[2].text_input("Run name (optional)", key="pretrain.name", placeholder="run-date-time")
        with st.expander("Advanced"):
            names = ("eval_every", "eval_batches", "checkpoint_every", "threads", "grad_clip", "grad_accum",
                     "vocab_size")
            for i, col in enumerate(st.columns(4) + st.columns(4)):
                if i < len(names):
                    _number(col, names[i])
                else:
                    col.selectbox("Precision", PRECISIONS, key="pretrain.precision")
        submitted = st.form_submit_button("Start training", type="primary", key="pretrain.start",
                                          icon=":material/play_arrow:")
    if not submitted:
        return None
    try:
        return runs.start(form_config(kind), st.session_state.get("pretrain.name", "").strip() or None)
    except LabError as exc:
        st.error(explain(exc))
        return None


def _preset_label(name: str) -> str:
    layers, hidden, heads = PRESET_SHAPES[name]
    return f"{name} ({layers}×{hidden}, {heads} heads)"


def form_config(kind: str) -> TrainConfig:
    """A validated TrainConfig from the form's values; raises ConfigError/InputError naming the field."""
    state = st.session_state
    values = {name: state.get(f"pretrain.{name}") for name in FIELDS}
    values.update(preset=state["pretrain.preset"], nsp=bool(state["pretrain.nsp"]),
                  device=state["pretrain.device"], precision=state.get("pretrain.precision", "auto"))
    values = {k: (int(v) if isinstance(v, float) and FIELDS.get(k, ("", ""))[1] in ("int", "shape")
                  and v.is_integer() else v) for k, v in values.items()}
    cfg = TrainConfig(**values)
    if cfg.device == "cuda" and not cuda_available():
        raise ConfigError("device cuda: this machine has no CUDA GPU; choose auto or cpu")
    if kind == "upload":
        upload = state.get("pretrain.upload")
        if upload is None:
            raise InputError("corpus: choose a .txt file to upload first")
        text = _checked(lambda: read_text_file(upload.getvalue()), f"the file {upload.name}")
    elif kind == "paste":
        text = _checked(lambda: state.get("pretrain.paste") or "", "the pasted text")
    else:
        return cfg
    return dataclasses.replace(cfg, corpus=str(save_text(text)))


def _checked(read, what: str) -> str:
    """The text `read()` returns, if it is usable for training; else an InputError naming the corpus."""
    try:
        text = read()
        documents_from_text(text)
    except InputError as exc:
        raise InputError(f"corpus ({what}): {exc}") from None
    return text


def save_text(text: str) -> Path:
    """Keep the user's text under the runs folder (named by its hash) so the run can read it."""
    path = runs.runs_root() / "uploads" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
    return path


# --- Which run -------------------------------------------------------------------------------
def pick_run(all_runs: list[runs.RunInfo], started: runs.RunInfo | None) -> runs.RunInfo | None:
    """The run shown: the one just started, else the session's choice, else the newest active one."""
    names = {r.name: r for r in all_runs}
    if started is not None:
        st.session_state[RUN_KEY] = started.name
    elif st.session_state.get(RUN_KEY) not in names:
        remembered = st.session_state.get(SELECTED)
        newest = next((r for r in all_runs if r.active), all_runs[0])
        st.session_state[RUN_KEY] = remembered if remembered in names else newest.name
    name = st.selectbox("Run", list(names), key=RUN_KEY)  # its status is in the live panel, which stays current
    st.session_state[SELECTED] = name
    return names[name]


# --- The live panel --------------------------------------------------------------------------
@st.cache_data(max_entries=64, show_spinner=False)
def _curves(run_dir: str, mtime_ns: int) -> figs.Curves:
    return figs.Curves.from_records(runs.read_metrics(run_dir, "train"), runs.read_metrics(run_dir, "eval"))


def curves_of(run_dir: Path) -> figs.Curves:
    try:
        mtime = (Path(run_dir) / "metrics.jsonl").stat().st_mtime_ns
    except OSError:
        return figs.Curves()
    return _curves(str(run_dir), mtime)


def live_panel(run: runs.RunInfo) -> None:
    """Status, progress, curves and probe of one run; redrawn every REFRESH_S seconds while it trains."""
    st.session_state[WATCHING] = run.active
    st.fragment(run_every=REFRESH_S if run.active else None)(_live)(str(run.path))


def _live(run_dir: str) -> None:
    run = runs.read(run_dir)
    if st.session_state.get(WATCHING) and not run.active:
        st.session_state[WATCHING] = False
        st.rerun()  # the whole page: the run table and the "Use this model" button change too
    curves = curves_of(run.path)
    status_row(run)
    st.progress(min(1.0, run.step / max(run.total_steps, 1)), text=progress_text(run, curves.train))
    nsp = run.config.get("nsp", True)
    metric_row(curves, nsp)
    if curves.train.empty:
        st.info("The curves appear with the first training steps (the process is loading the corpus and model).")
    else:
        chart_grid({run.name: curves}, key="pretrain.live", nsp=nsp)
    probe_panel(run)


def status_row(run: runs.RunInfo) -> None:
    color, icon = BADGE.get(run.status, ("gray", None))
    left, right = st.columns([5, 1], vertical_alignment="center")
    with left:
        st.badge(run.status, color=color, icon=icon)
        st.caption(f"**{run.name}** · {describe(run.config)} · {run.message}")
    if run.active:
        right.button("Stop", key="pretrain.stop", icon=":material/stop:", on_click=runs.stop, args=(run.path,),
                     help="Saves a checkpoint and stops; the run can be resumed later.", width="stretch")


def progress_text(run: runs.RunInfo, train: pd.DataFrame) -> str:
    text = f"step {run.step:,} / {run.total_steps:,}"
    eta = eta_seconds(train, run.total_steps)
    if run.active and eta is not None:
        text += f" · about {_duration(eta)} left"
    elif run.active and train.empty:
        text += " · preparing the corpus and the model"
    elif not train.empty and "elapsed" in train:
        text += f" · trained for {_duration(float(train['elapsed'].iloc[-1]))}"
    return text


def eta_seconds(train: pd.DataFrame, total_steps: int, window: int = 50) -> float | None:
    """Seconds left at the speed of the last `window` steps (None until there are two)."""
    if len(train) < 2 or "elapsed" not in train:
        return None
    recent = train.tail(window)
    steps, seconds = recent["step"].iloc[-1] - recent["step"].iloc[0], recent["elapsed"].iloc[-1] - recent["elapsed"].iloc[0]
    if steps <= 0 or seconds <= 0:
        return None
    return max(0.0, (total_steps - recent["step"].iloc[-1]) * seconds / steps)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def metric_row(curves: figs.Curves, nsp: bool) -> None:
    held, train = curves.eval, curves.train
    cols = st.columns(4)
    if not held.empty:
        first, last = held.iloc[0], held.iloc[-1]
        cols[0].metric("Held-out MLM loss", f"{last['mlm_loss']:.3f}", f"{last['mlm_loss'] - first['mlm_loss']:+.3f}",
                       delta_color="inverse", help="Change since the first evaluation (before training).")
        cols[1].metric("Held-out top-1", f"{last['mlm_top1']:.1%}", f"{last['mlm_top1'] - first['mlm_top1']:+.1%}",
                       help=f"Masked words guessed right at the first try; top-5: {last['mlm_top5']:.1%}.")
        if nsp and "nsp_acc" in held:
            cols[2].metric("Held-out NSP acc.", f"{last['nsp_acc']:.1%}", f"{last['nsp_acc'] - first['nsp_acc']:+.1%}")
        else:
            cols[2].metric("NSP", "off")
    if not train.empty and "tokens_per_s" in train:
        cols[3].metric("Tokens / s", f"{train['tokens_per_s'].tail(20).mean():,.0f}",
                       help="Training speed over the last 20 steps.")


def chart_grid(curves: dict[str, figs.Curves], key: str, train: bool = True, nsp: bool = True) -> None:
    """Loss and accuracy for MLM and NSP, then learning rate and speed (with train curves only)."""
    pairs = [(figs.loss_curves(curves, "mlm", train), figs.loss_curves(curves, "nsp", train)),
             (figs.accuracy_curves(curves, "mlm", train), figs.accuracy_curves(curves, "nsp", train))]
    if train:
        pairs.append((figs.lr_curve(curves), figs.throughput_curve(curves)))
        st.caption("Thin lines: each training batch (noisy). Bold: held-out text the model never trains on. "
                   "Losses are in nats; guessing uniformly over the vocabulary scores ln(vocabulary size).")
    for row, (left, right) in enumerate(pairs):
        a, b = st.columns(2)
        a.plotly_chart(left, key=f"{key}.{row}a", theme=None, config=export_config(f"{key}-{row}a"))
        if row < 2 and not nsp:
            b.info("NSP is off for this run: only masked words are learned.")
        else:
            b.plotly_chart(right, key=f"{key}.{row}b", theme=None, config=export_config(f"{key}-{row}b"))


def probe_panel(run: runs.RunInfo) -> None:
    st.subheader("Watch it learn: a probe sentence")
    cols = st.columns([4, 1, 1])
    text = cols[0].text_input("Probe sentence", probe.DEFAULT_SENTENCE, key="pretrain.probe")
    result = probe.probe_run(run.path, text)
    if not result.ok:
        st.info(result.message)
        return
    L, H = result.attention.shape[:2]
    for name, n in (("pretrain.layer", L), ("pretrain.head", H)):
        if st.session_state.get(name, 0) >= n:
            del st.session_state[name]
    layer = cols[1].selectbox("Layer", range(L), key="pretrain.layer")
    head = cols[2].selectbox("Head", range(H), key="pretrain.head")
    st.caption(f"Read by the newest checkpoint, step {result.step:,}; it changes as training writes new ones."
               + (f" {result.message}" if result.message else ""))
    left, right = st.columns([1, 2])
    for i, mask in enumerate(result.predictions[:2]):
        rows = [{"token": c.token, "probability": c.prob, "logit": c.logit} for c in mask.candidates]
        left.plotly_chart(prediction_bars(rows, f"[MASK] #{i + 1}: top guesses"),
                          key=f"pretrain.guess.{i}", theme=None)
    labels = token_labels(result.tokens)
    right.plotly_chart(attention_heatmap(result.attention[layer, head], labels, labels,
                                         f"Layer {layer} · head {head} · step {result.step:,}"),
                       key="pretrain.heatmap", theme=None, config=export_config(f"probe_L{layer}_H{head}"))


# --- Finished runs and the table of runs -----------------------------------------------------
def use_model_button(run: runs.RunInfo) -> None:
    if run.status not in ("finished", "stopped") or run.checkpoint is None:
        return
    path = str(run.checkpoint)
    left, right = st.columns([1, 3], vertical_alignment="center")
    left.button("Use this model", key="pretrain.use", type="primary", icon=":material/model_training:",
                on_click=try_load, args=(path,))
    if st.session_state.get(PATH_KEY) == path:
        right.success("This run's model is now the active model: open Mask & predict or Attention to explore it.")
    else:
        right.caption(f"Makes {run.checkpoint.name} of {run.name} the active model of every page "
                      "(it is in the sidebar's picker too).")
    if run.status == "stopped":
        left.button("Resume", key="pretrain.resume", icon=":material/play_arrow:", on_click=runs.resume,
                    args=(run.path,))


def describe(config: dict) -> str:
    """'tiny 2×128 (2 heads), built-in text, NSP on' from a run's saved config."""
    try:
        cfg = TrainConfig.from_dict(config)
        shape = cfg.model_config(vocab_size=100)
    except (LabError, TypeError):
        return "settings unknown"
    corpus = "built-in text" if cfg.corpus == "builtin" else f"text {Path(cfg.corpus).name}"
    return (f"{cfg.preset} {shape.num_hidden_layers}×{shape.hidden_size} ({shape.num_attention_heads} heads), "
            f"{corpus}, NSP {'on' if cfg.nsp else 'off'}, seed {cfg.seed}")


def run_rows(all_runs: list[runs.RunInfo]) -> pd.DataFrame:
    rows = []
    for run in all_runs:
        held = curves_of(run.path).eval
        last = held.iloc[-1] if not held.empty else {}
        rows.append({"run": run.name, "status": run.status, "steps": f"{run.step:,} / {run.total_steps:,}",
                     "NSP": "on" if run.config.get("nsp", True) else "off",
                     "held-out MLM loss": last.get("mlm_loss"), "top-1": last.get("mlm_top1"),
                     "top-5": last.get("mlm_top5"), "NSP acc": last.get("nsp_acc"),
                     "settings": describe(run.config),
                     "started": datetime.datetime.fromtimestamp(run.created) if run.created else None})
    return pd.DataFrame(rows)


RUN_COLUMNS = {"held-out MLM loss": st.column_config.NumberColumn(format="%.3f"),
               "top-1": st.column_config.NumberColumn(format="percent"),
               "top-5": st.column_config.NumberColumn(format="percent"),
               "NSP acc": st.column_config.NumberColumn(format="percent"),
               "started": st.column_config.DatetimeColumn(format="D MMM, HH:mm:ss")}


def compare_runs(all_runs: list[runs.RunInfo]) -> None:
    """The table of every run and held-out curves of the chosen ones on shared axes."""
    st.dataframe(run_rows(all_runs), hide_index=True, column_config=RUN_COLUMNS, key="pretrain.table")
    paths = {r.name: r.path for r in all_runs}
    st.session_state["pretrain.compare"] = [n for n in st.session_state.get("pretrain.compare", []) if n in paths]
    chosen = st.multiselect("Overlay runs", list(paths), key="pretrain.compare", placeholder="pick two or more runs",
                            help="E.g. the same settings with and without NSP: held-out curves on shared axes.")
    if chosen:
        chart_grid({name: curves_of(paths[name]) for name in chosen}, key="pretrain.compare",
                   train=False, nsp=any(r.config.get("nsp", True) for r in all_runs if r.name in chosen))
