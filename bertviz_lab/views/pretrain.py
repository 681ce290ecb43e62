"""What the Pretrain live page shows, without Streamlit: the new-run form's fields and how its
values become a validated TrainConfig, a run's progress line and ETA, its one-line description,
its curves read from metrics.jsonl, the table of all runs, and who may control which run.

Every error a form value can cause names its field (`explain` puts the form's label in front),
so the page refuses a run with a sentence instead of starting a process that would crash.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bertviz_lab import atomic
from bertviz_lab.bert.config import PRESET_SHAPES, RANDOM_TOKENS
from bertviz_lab.bert.device import cuda_available
from bertviz_lab.corpus import documents_from_text, read_text_file
from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.figures.training import Curves
from bertviz_lab.pretrain import records, resources, runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import warmup_then_decay

DEFAULTS = TrainConfig()
CORPUS = {"builtin": "Built-in story world", "upload": "Upload a .txt file", "paste": "Paste text"}
# Number fields of the form: TrainConfig field -> (label, kind, help); a kind is "int", a float
# format such as "%.5f", or "shape" (empty = the preset's value).
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
    "mask_rate": ("Mask rate", "%.2f", "Chance each token is picked to predict (BERT: 0.15); at least one per "
                  "example; the picked ones 80/10/10."),
    "seed": ("Seed", "int", "Same seed and settings on the CPU: the same curves."),
    "dropout": ("Dropout", "%.2f", "Share of activations and attention weights zeroed while training (BERT: "
                "0.1). The built-in text is generated fresh for every batch (its sentences do recur), so the "
                "classroom preset uses 0, which learns faster."),
    "eval_every": ("Evaluate every", "int", "Steps between held-out evaluations."),
    "eval_batches": ("Held-out batches", "int", "Batches per held-out evaluation."),
    "checkpoint_every": ("Checkpoint every", "int", "Steps between checkpoints (the probe reads the newest)."),
    "threads": ("CPU threads", "int", "0 = all cores but one, so the app stays responsive."),
    "grad_clip": ("Gradient clip", "%.2f", "Largest global gradient norm; 0 = off."),
    "grad_accum": ("Gradient accumulation", "int", "Micro-batches per optimizer step."),
    "vocab_size": ("Vocabulary size", "int", "WordPiece size when training on your own text."),
}
LABELS = {**{name: label for name, (label, _, _) in FIELDS.items()}, "preset": "Size preset", "corpus":
          "Training text", "device": "Device", "precision": "Precision", "nsp": "NSP", "run": "Run name",
          "random_tokens": "Random tokens"}
RANDOM_TOKEN_HELP = ("Where the 10% random replacements come from: " + "; ".join(
    f"{name} = {meaning}" for name, meaning in RANDOM_TOKENS.items()) + ". Runs saved before this setting "
    "existed used wordpieces.")


# --- The form --------------------------------------------------------------------------------
def field_default(name: str) -> int | float | None:
    """What a number field shows before it is edited: empty for shape fields, else TrainConfig's default."""
    kind = FIELDS[name][1]
    if kind == "shape":
        return None
    return getattr(DEFAULTS, name) if kind == "int" else float(getattr(DEFAULTS, name))


def preset_label(name: str) -> str:
    layers, hidden, heads = PRESET_SHAPES[name]
    return f"{name} ({layers}×{hidden}, {heads} heads)"


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
    cfg = TrainConfig(**{name: _typed(name, value) for name, value in values.items()})
    if cfg.device == "cuda" and not cuda_available():
        raise ConfigError("device cuda: this machine has no CUDA GPU; choose auto or cpu")
    resources.check_resources(cfg)  # before any text is kept: a run that cannot fit is refused now
    if corpus == "builtin":
        return NewRun(cfg)
    text = training_text(corpus, text, filename)
    return NewRun(dataclasses.replace(cfg, corpus=str(upload_path(text))), text)


def _typed(name: str, value):
    whole = name in FIELDS and FIELDS[name][1] in ("int", "shape")
    return int(value) if whole and isinstance(value, float) and value.is_integer() else value


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
    """The run's training and held-out records as two DataFrames."""
    return Curves.from_records(records.read_metrics(run_dir, "train"), records.read_metrics(run_dir, "eval"))


# --- All runs --------------------------------------------------------------------------------
def run_rows(all_runs: list[runs.RunInfo], curves_of: Callable[[Path], Curves] = read_curves) -> pd.DataFrame:
    """One row per run: status, progress, its last held-out metrics and its settings."""
    rows = []
    for run in all_runs:
        held = curves_of(run.path).eval
        last = held.iloc[-1] if not held.empty else {}
        rows.append({"run": run.name, "status": run.status, "steps": f"{run.step:,} / {run.total_steps:,}",
                     "NSP": "on" if run.config.get("nsp", True) else "off",
                     "held-out MLM loss": last.get("mlm_loss"), "top-1": last.get("mlm_top1"),
                     "top-5": last.get("mlm_top5"), "NSP acc": last.get("nsp_acc"),
                     "settings": run.message if run.status == runs.UNREADABLE else describe(run.config),
                     "started by": run.started_by,
                     "started": datetime.datetime.fromtimestamp(run.created) if run.created else None})
    return pd.DataFrame(rows)
