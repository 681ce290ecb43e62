"""What the Pretrain live page shows, without Streamlit: the new-run form (`FORM`, each field described once,
see views/forms.py) and how its values become a validated TrainConfig, a run's progress line and ETA, its
one-line description, its curves read from metrics.jsonl, the table of all runs, and who may control which run.

Every error a form value can cause names its field (`explain` puts the form's label in front),
so the page refuses a run with a sentence instead of starting a process that would crash.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bertviz_lab import atomic, metrics
from bertviz_lab.bert.config import PRESET_SHAPES, RANDOM_TOKENS
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available
from bertviz_lab.corpus import documents_from_text, read_text_file
from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.figures.training import Curves
from bertviz_lab.pretrain import records, resources, runs
from bertviz_lab.pretrain.config import PRECISIONS, TrainConfig, upper_bound
from bertviz_lab.pretrain.config import warmup_then_decay
from bertviz_lab.views import forms

DEFAULTS = TrainConfig()
CORPUS = {"builtin": "Built-in story world", "upload": "Upload a .txt file", "paste": "Paste text"}
RANDOM_TOKEN_HELP = ("Where the 10% random replacements come from: " + "; ".join(
    f"{name} = {meaning}" for name, meaning in RANDOM_TOKENS.items()) + ". Runs saved before this setting "
    "existed used wordpieces.")


# --- The form --------------------------------------------------------------------------------
def preset_label(name: str) -> str:
    layers, hidden, heads = PRESET_SHAPES[name]
    return f"{name} ({layers}×{hidden}, {heads} heads)"


def _whole(name: str, label: str, help_: str, grid: str = forms.MAIN) -> forms.Field:
    return forms.whole(name, label, help_, getattr(DEFAULTS, name), high=upper_bound(name), grid=grid)


def _shape(name: str, label: str, help_: str) -> forms.Field:
    return forms.shape(name, label, help_, high=upper_bound(name))


def _decimal(name: str, label: str, help_: str, step: float, format_: str, grid: str = forms.MAIN) -> forms.Field:
    return forms.decimal(name, label, help_, getattr(DEFAULTS, name), step=step, format=format_, grid=grid)


ADVANCED = "advanced"
# The new-run form: four fields a row, then the advanced ones three a row, folded. Every field but the run's
# name is a TrainConfig field; the browser refuses a whole number past its bound (pretrain.config) at once.
FORM = forms.Form((forms.Grid(forms.MAIN, 4), forms.Grid(ADVANCED, 3, fold="Advanced")), (
    forms.choice("preset", "Size preset", {name: preset_label(name) for name in PRESET_SHAPES}, DEFAULTS.preset),
    _shape("layers", "Layers", "Empty: the preset's number of encoder layers."),
    _shape("heads", "Heads", "Attention heads per layer; they must divide the hidden size."),
    _shape("hidden", "Hidden size", "Width of every token vector (the FFN is 4× wider)."),
    _whole("steps", "Steps", "Optimizer steps to train."),
    _whole("batch_size", "Batch size", "Sentence pairs per step."),
    _whole("seq_len", "Sequence length", "Longest input in tokens (8 to 512)."),
    _decimal("lr", "Learning rate", "Peak AdamW learning rate, reached after the warmup.", 1e-4, "%.5f"),
    _whole("warmup", "Warmup steps", "Steps of linear warmup from 0 to the peak rate."),
    _decimal("weight_decay", "Weight decay", "AdamW decay (not on biases and LayerNorm).", 0.01, "%.3f"),
    _decimal("mask_rate", "Mask rate", "Chance each token is picked to predict (BERT: 0.15); at least one per "
             "example; the picked ones 80/10/10.", 0.01, "%.2f"),
    _whole("seed", "Seed", "Same seed and settings on the CPU: the same curves."),
    forms.toggle("nsp", "NSP task", DEFAULTS.nsp,
                 help="Next-sentence prediction. Off: the model learns from masked words alone (the ablation)."),
    forms.choice("device", "Device", DEVICE_CHOICES, DEFAULTS.device),
    forms.text("name", "Run name (optional)", placeholder="run-date-time"),
    forms.choice("random_tokens", "Random tokens", tuple(RANDOM_TOKENS), DEFAULTS.random_tokens,
                 help=RANDOM_TOKEN_HELP),
    _decimal("dropout", "Dropout", "Share of activations and attention weights zeroed while training (BERT: 0.1). "
             "The built-in text is generated fresh for every batch (its sentences do recur), so the classroom preset "
             "uses 0, which learns faster.", 0.05, "%.2f", ADVANCED),
    _whole("eval_every", "Evaluate every", "Steps between held-out evaluations.", ADVANCED),
    _whole("eval_batches", "Held-out batches", "Batches per held-out evaluation.", ADVANCED),
    _whole("checkpoint_every", "Checkpoint every", "Steps between checkpoints (the probe reads the newest).", ADVANCED),
    _whole("threads", "CPU threads", "0 = every core no other program is using, looked at each second: the app stays responsive.", ADVANCED),
    _decimal("grad_clip", "Gradient clip", "Largest global gradient norm; 0 = off.", 0.5, "%.2f", ADVANCED),
    _whole("grad_accum", "Gradient accumulation", "Micro-batches per optimizer step.", ADVANCED),
    _whole("vocab_size", "Vocabulary size", "WordPiece size when training on your own text.", ADVANCED),
    forms.choice("precision", "Precision", PRECISIONS, DEFAULTS.precision, grid=ADVANCED),
))
# The label an error's field gets in front (`explain`): the form's own, and the few that read shorter there.
LABELS = {**FORM.labels(), "nsp": "NSP", "run": "Run name", "corpus": "Training text"}


def explain(exc: Exception) -> str:
    """The error with the form label of the field it names in front, e.g. '**Steps**: steps must be ...'."""
    field = str(exc).split(" ", 1)[0].rstrip(":")  # "steps must be ...", "corpus: choose a file ..."
    return f"**{LABELS[field]}**: {exc}" if field in LABELS else str(exc)


@dataclass(frozen=True)
class NewRun:
    """A validated new-run form: the config, and the user's text, which `start_run` writes where
    config.corpus points only when the run starts (so a refused form leaves no file behind)."""
    config: TrainConfig
    text: str | None = None


def form_config(values: dict, corpus: str = "builtin", text: str | bytes | None = None,
                filename: str = "") -> NewRun:
    """A validated new run from the form's values; raises ConfigError/InputError naming the field.

    values: TrainConfig field -> form value (number inputs give floats; whole ones become ints).
    corpus: a key of CORPUS. text: the pasted str, or the uploaded file's bytes (None: no file yet).
    """
    cfg = TrainConfig(**FORM.typed(values))
    if cfg.device == "cuda" and not cuda_available():
        raise ConfigError("device cuda: this machine has no CUDA GPU; choose auto or cpu")
    resources.check_resources(cfg, resources.place(cfg.device))  # before any text is kept: refused now if it cannot fit
    if corpus == "builtin":
        return NewRun(cfg)
    text = training_text(corpus, text, filename)
    return NewRun(dataclasses.replace(cfg, corpus=str(upload_path(text))), text)


def training_text(corpus: str, text: str | bytes | None, filename: str = "") -> str:
    """The uploaded or pasted text, if it is usable for training; else an InputError naming the corpus."""
    if corpus == "upload" and text is None:
        raise InputError("corpus: choose a .txt file to upload first")
    what = f"the file {filename}" if corpus == "upload" else "the pasted text"
    try:
        text = read_text_file(text) if corpus == "upload" else (text or "")
        documents_from_text(text)
    except InputError as exc:
        raise InputError(f"corpus ({what}): {exc}") from None
    return text


def upload_path(text: str) -> Path:
    """Where the user's text is kept for its run: under the runs folder, named by its hash."""
    return runs.runs_root() / runs.UPLOADS / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"


def start_run(new: NewRun, name: str | None, started_by: str = runs.OWNER, max_active: int | None = None
              ) -> runs.RunInfo:
    """Write the user's text (if any) and start the run; if the run does not start, the text goes again."""
    path = Path(new.config.corpus)
    fresh = new.text is not None and not path.exists()  # else a run that trains on it wrote it
    if fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, new.text)
    try:
        return runs.start(new.config, name, started_by=started_by, max_active=max_active)
    except BaseException:
        if fresh:
            runs.drop_upload(path.parent.parent, str(path))  # unless a run started meanwhile trains on it
        raise


# --- Who may do what (classroom mode) ----------------------------------------------------------
def can_control(run: runs.RunInfo, who: str) -> bool:
    """Whether `who` (runs.OWNER or "visitor <address>") may stop, resume or delete `run`:
    the machine's owner any run, a visitor only the runs it started."""
    return who == runs.OWNER or run.started_by == who


def start_allowed(active: int, who: str, cap: int) -> bool:
    """Whether `who` may start a run while `active` runs train: the owner always, a visitor below the cap."""
    return who == runs.OWNER or active < cap


def control_note(run: runs.RunInfo) -> str:
    """Why a visitor sees no Stop, Resume or Delete for this run."""
    if run.started_by == runs.OWNER:
        return "Started by this machine's owner: only the owner can stop, resume or delete it."
    return (f"Started by {run.started_by or 'someone else'}: only they or this machine's owner can stop, "
            "resume or delete it.")


def cap_note(active: int, cap: int) -> str:
    return (f"{active} runs are training and this classroom server allows {cap} at once: wait for one to "
            "finish, or ask the teacher.")


# --- One run ---------------------------------------------------------------------------------
def describe(config: dict) -> str:
    """'tiny 2×128 (2 heads), built-in text, NSP on, random tokens: whole vocabulary, seed 0' from a run's
    saved config (one saved before random_tokens existed used word pieces)."""
    if not config:
        return "settings unknown"
    try:
        cfg = TrainConfig.from_dict(config)
        shape = cfg.model_config(vocab_size=100)
    except (LabError, TypeError, ValueError):
        return "settings unknown"
    corpus = "built-in text" if cfg.corpus == "builtin" else f"text {Path(cfg.corpus).name}"
    return (f"{cfg.preset} {shape.num_hidden_layers}×{shape.hidden_size} ({shape.num_attention_heads} heads), "
            f"{corpus}, NSP {'on' if cfg.nsp else 'off'}, random tokens: "
            f"{'whole vocabulary' if cfg.random_tokens == 'vocabulary' else 'word pieces'}, seed {cfg.seed}")


AUTOCAST_WORDS = {"bf16": "bf16 autocast (matrix products in bfloat16; weights, their updates and the losses in fp32)",
                  "fp16": "fp16 autocast with a loss scaler (weights and their updates in fp32)",
                  "off": "fp32"}


def arithmetic_note(run: runs.RunInfo) -> str | None:
    """'Trains on cpu in bf16 autocast (...); precision setting: auto.' from the run's status, None until the
    trainer has said (and for runs from before it did)."""
    words = AUTOCAST_WORDS.get(run.autocast)
    if not run.device or not words:
        return None
    setting = run.config.get("precision", "auto")
    picked = (" (auto takes bf16 on a CPU only where bf16 matrix products measured faster than fp32 here)"
              if setting == "auto" and run.device == "cpu" else "")
    verb = "Trains" if run.active else "Trained"
    return f"{verb} on {run.device} in {words}; precision setting: {setting}{picked}."


def warmup_note(config: dict) -> str | None:
    """What a warmup at least as long as the run does to the learning rate (a teacher's 60 steps under the
    classroom preset's 100 warmup steps), from the schedule the trainer uses; None when the run outlasts it."""
    steps, warmup = config.get("steps"), config.get("warmup")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (steps, warmup)) or not 0 < steps <= warmup:
        return None
    first, last = warmup_then_decay(0, warmup, steps), warmup_then_decay(steps - 1, warmup, steps)  # O(1): a refresh
    return (f"Warmup ({_steps(warmup)}) is as long as the run or longer ({_steps(steps)}): the whole run is warmup. "
            f"The learning rate climbs from {first:.1%} of its peak and reaches {last:.0%} of it only at the last "
            f"step, so it never decays. The classroom preset warms up for {DEFAULTS.warmup:,} of its "
            f"{DEFAULTS.steps:,} steps: for a shorter run, lower Warmup steps in proportion.")


def _steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


def eta_seconds(train: pd.DataFrame, total_steps: int, window: int = 50) -> float | None:
    """Seconds left at the speed of the last `window` steps (None until there are two)."""
    if len(train) < 2 or "elapsed" not in train:
        return None
    recent = train.tail(window)
    steps = recent["step"].iloc[-1] - recent["step"].iloc[0]
    seconds = recent["elapsed"].iloc[-1] - recent["elapsed"].iloc[0]
    if steps <= 0 or seconds <= 0:
        return None
    return max(0.0, (total_steps - recent["step"].iloc[-1]) * seconds / steps)


def duration(seconds: float) -> str:
    """'42 s' or '3 min 05 s'."""
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def progress_text(run: runs.RunInfo, train: pd.DataFrame) -> str:
    """'step 120 / 400 · about 1 min 10 s left' while training; how long it took once done."""
    text = f"step {run.step:,} / {run.total_steps:,}"
    eta = eta_seconds(train, run.total_steps)
    if run.active and eta is not None:
        text += f" · about {duration(eta)} left"
    elif run.active and train.empty:
        text += " · preparing the corpus and the model"
    elif not train.empty and "elapsed" in train:
        text += f" · trained for {duration(float(train['elapsed'].iloc[-1]))}"
    return text


def metrics_version(run_dir) -> tuple[int, int, int] | None:
    """Which metrics file, and how long, to key a cache of its curves (the file only grows, or is replaced
    whole); None before the run writes any. The records are read as they grow (pretrain/records.py)."""
    try:
        info = (Path(run_dir) / records.METRICS).stat()
    except OSError:
        return None
    return (*records.identity_of(info), info.st_size)


def read_curves(run_dir) -> Curves:
    """The run's training and held-out records as two DataFrames (`metrics.table`), whatever names the run wrote."""
    recorded = records.read_metrics(run_dir)
    return Curves(metrics.table(recorded, metrics.TRAIN), metrics.table(recorded, metrics.EVAL))


# --- All runs --------------------------------------------------------------------------------
def run_rows(all_runs: list[runs.RunInfo], curves_of: Callable[[Path], Curves] = read_curves) -> pd.DataFrame:
    """One row per run: status, progress, its last held-out metrics and its settings."""
    rows = []
    for run in all_runs:
        held = curves_of(run.path).eval
        last = metrics.row(held, -1) if not held.empty else metrics.Metrics(metrics.EVAL, 0)  # none yet: all None
        rows.append({"run": run.name, "status": run.status, "steps": f"{run.step:,} / {run.total_steps:,}",
                     "NSP": "on" if run.config.get("nsp", True) else "off",
                     "held-out MLM loss": last.loss, "top-1": last.acc, "top-5": last.top5, "NSP acc": last.nsp_acc,
                     "settings": run.message if run.status == runs.UNREADABLE else describe(run.config),
                     "started by": run.started_by,
                     "started": dt.datetime.fromtimestamp(run.created) if run.created else None})
    return pd.DataFrame(rows)
