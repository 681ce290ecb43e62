"""What the Fine-tune page and the `classify` command show, as plain records.

`classify` runs a fine-tuned checkpoint on a sentence (or a pair): class probabilities for a
sequence head, one row of tag probabilities per token for a token head (`word_tags`: one per word).
Also here: a run's one-line description, the models a run may start from, and the new-run form (`FORM`,
described once: views/forms.py) with its values as a validated FinetuneConfig (the learner's CSV checked first).
The dev-set evaluation and the before/after picture are in `views/finetune/dev.py`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open

from bertviz_lab import atomic, files, metrics
from bertviz_lab.bert.checkpoint import CARD_FILE, SAFETENSORS
from bertviz_lab.bert.classifier import TOKEN, BertClassifier
from bertviz_lab.bert.config import PRESET_SHAPES
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import InputError, LabError
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.tasks import O_TAG, PAIR, Example, Task
from bertviz_lab.pretrain import runs
from bertviz_lab.views import forms, inputs


@dataclass(frozen=True)
class Classification:
    labels: tuple[str, ...]  # the classifier's classes, in logit order
    tokens: list[str]  # the input's tokens, the frame tokens ([CLS] and [SEP]; RoBERTa's <s> and </s>) included
    logits: np.ndarray  # (C,) for a sequence head; (N, C) for a token head, one row per token of `rows`
    probs: np.ndarray  # softmax of logits, same shape
    rows: list[int]  # token head: the positions (in `tokens`) of the rows; [] for a sequence head

    @property
    def token_level(self) -> bool:
        return bool(self.rows)

    def best(self) -> str | list[str]:
        """The predicted label (sequence head), or one per row (token head)."""
        top = self.probs.argmax(-1)
        return [self.labels[i] for i in top] if self.token_level else self.labels[int(top)]


def require_classifier(model) -> BertClassifier:
    if not isinstance(model, BertClassifier):
        raise InputError(f"this checkpoint is a {model.architecture}, not a fine-tuned classifier: fine-tune it "
                         "first (python -m bertviz_lab finetune, or the Fine-tune page)")
    return model


@torch.no_grad()
def classify(model: BertClassifier, tokenizer: WordPieceTokenizer, text: str, text_b: str | None = None) -> Classification:
    """The classifier's output for one input; a text too long for the model is an InputError."""
    model = require_classifier(model)
    if text_b is not None and not text_b.strip():
        text_b = None  # an empty second box means "one sentence"
    if not isinstance(text, str) or not text.strip():
        raise InputError("the text is empty")
    if text_b is not None and model.level == TOKEN:
        raise InputError("this model tags the words of one sentence; give one text, not a pair")
    encoding = inputs.encode(tokenizer, model, text, text_b, allow_truncation=False)
    device = next(model.parameters()).device
    model.eval()
    logits = model.classify(torch.tensor([encoding.ids], device=device),
                            torch.tensor([encoding.segment_ids], device=device))[0].float()  # (C,) or (T, C)
    # A tag per token of the text: the tokenizer's own frame tokens are left out, whatever it calls them.
    rows = [i for i, frame in enumerate(encoding.special_mask) if not frame] if model.level == TOKEN else []
    if rows:
        logits = logits[rows]
    return Classification(model.labels, encoding.tokens, logits.cpu().numpy(),
                          torch.softmax(logits, -1).cpu().numpy(), rows)


def word_tags(model: BertClassifier, tokenizer: WordPieceTokenizer, text: str) -> pd.DataFrame:
    """A token head's answer per word, read (as it was trained) at each word's first piece: columns word,
    tag, probability (of that tag), then p(TAG) for every tag (named so no tag can clash with the others)."""
    result = classify(model, tokenizer, text)
    encoding = inputs.encode(tokenizer, model, text, allow_truncation=False)
    row_of = {position: i for i, position in enumerate(result.rows)}
    rows, seen = [], set()
    for position, word in enumerate(encoding.word_ids):
        if word is None or word in seen or position not in row_of:
            continue
        seen.add(word)
        probs = result.probs[row_of[position]]
        start, end = encoding.offsets[position][0], max(o[1] for o, w in zip(encoding.offsets, encoding.word_ids)
                                                         if w == word)
        best = int(probs.argmax())
        rows.append({"word": text[start:end], "tag": result.labels[best], "probability": float(probs[best]),
                     **{f"p({label})": float(p) for label, p in zip(result.labels, probs)}})
    return pd.DataFrame(rows)


def first_fitting(examples, tokenizer: WordPieceTokenizer, positions: int, tries: int = 50) -> Example | None:
    """The first of `examples` (among the first `tries`) the model reads whole: a default for "Try it"."""
    for example in examples[:tries]:
        if not tokenizer.encode(example.text, example.text_b, max_length=positions).truncated:
            return example
    return examples[0] if examples else None


# --- Runs: what they are called ---------------------------------------------------------------------
MODES = {"full": "full fine-tuning", "probe": "linear probe"}
WEIGHTS = {"pretrained": "its pretrained weights", "random": "random weights of the same size (no pretraining)"}


def describe(config: dict) -> str:
    """'coherence · from bertviz-mini · full fine-tuning' from a run's saved settings."""
    try:
        cfg = FinetuneConfig.from_dict(config)
    except (LabError, TypeError, ValueError):
        return "settings unknown"
    return f"{cfg.source} · {start_text(cfg)} · {MODES['probe' if cfg.freeze_encoder else 'full']}"


def start_text(cfg: FinetuneConfig) -> str:
    if cfg.checkpoint:
        return f"from {checkpoint_name(cfg.checkpoint)}"
    layers, hidden, _ = PRESET_SHAPES[cfg.scratch]
    return f"from scratch ({cfg.layers or layers}×{cfg.hidden or hidden})"


def checkpoint_name(folder) -> str:
    """'bertviz-mini', or 'run-x step 900 (no NSP)' for a pretraining run's checkpoint."""
    folder = Path(folder)
    run = folder.parent.parent
    if _in_run(folder):
        step = folder.name.rsplit("-", 1)[-1].lstrip("0") or "0"
        name = f"{run.name} step {step}"
    else:
        name = folder.name
    return name + (" (no NSP)" if checkpoint_nsp(folder) is False else "")


def _in_run(folder: Path) -> bool:
    return folder.parent.name == "checkpoints" and (folder.parent.parent / "run.json").is_file()


def checkpoint_nsp(folder) -> bool | None:
    """Whether the pretraining that made this checkpoint had NSP, as its run or model card recorded it
    (None: not recorded, e.g. a Hub folder)."""
    folder = Path(folder)
    if _in_run(folder):
        return _nsp(folder.parent.parent / "run.json", "config")
    return _nsp(folder / CARD_FILE, "train_config")


def checkpoint_parts(folder) -> tuple[bool, bool] | None:
    """(has a pooler, has an NSP head) by the weight names in the folder's model.safetensors header, without loading
    a weight; None when there is no readable safetensors file (then load the model to know)."""
    try:
        with safe_open(str(Path(folder) / SAFETENSORS), framework="pt") as weights:
            names = list(weights.keys())
    except Exception:  # noqa: BLE001 (a missing, cut or hostile file: the caller falls back to loading the model)
        return None
    return (any(n.endswith("pooler.dense.weight") for n in names),
            any(n.endswith("seq_relationship.weight") for n in names))


RANDOM, WITH_NSP, NO_NSP, PRETRAINED = "random", "pretrained with NSP", "pretrained without NSP", "pretrained"


def start_kind(cfg: FinetuneConfig) -> str:
    """How a run started: RANDOM weights, or pretrained WITH_NSP, NO_NSP, or (not recorded) PRETRAINED."""
    if not cfg.checkpoint:
        return RANDOM
    return {True: WITH_NSP, False: NO_NSP, None: PRETRAINED}[checkpoint_nsp(cfg.checkpoint)]


def _nsp(path: Path, key: str) -> bool | None:
    """Whether the pretraining settings recorded in `path` (run.json or a model card) had NSP on."""
    try:
        nsp = files.read_json(path)[key].get("nsp")
    except (LabError, OSError, KeyError, TypeError, AttributeError):
        return None
    return nsp if isinstance(nsp, bool) else None


# --- The new-run form ---------------------------------------------------------------------------------
DEFAULTS = {f.name: f.default for f in fields(FinetuneConfig)}
# The form under the task: where to start and how (a row of three), the numbers (five a row), the run's name.
# Start from's options are the models found when the page draws it (`starting_points`).
FORM = forms.Form((forms.Grid("start", (3, 3, 2)), forms.Grid("numbers", 5), forms.Grid("name", 5)), (
    forms.choice("start", "Start from", None, grid="start",
                 help="The active model, a shipped model, or a pretraining run's latest checkpoint (Pretrain live)."),
    forms.choice("weights", "Weights", WEIGHTS, "pretrained", radio=True, grid="start",
                 help="Random: the same shape without pretraining, to see what pretraining is worth."),
    forms.choice("mode", "Train", MODES, "full", radio=True, grid="start",
                 help="Full fine-tuning updates every weight; a linear probe trains the classifier alone on the frozen "
                      "encoder's vectors."),
    forms.whole("steps", "Steps", "Optimizer steps (each one batch of training examples).", DEFAULTS["steps"],
                grid="numbers"),
    forms.decimal("lr", "Learning rate", "Peak AdamW learning rate, after a short warmup; decays to 0.",
                  DEFAULTS["lr"], step=1e-5, format="%.5f", grid="numbers"),
    forms.whole("batch_size", "Batch size", "Training examples per step.", DEFAULTS["batch_size"], grid="numbers"),
    forms.whole("seed", "Seed", "The classifier's random start and the order of the examples.", DEFAULTS["seed"],
                grid="numbers"),
    forms.text("name", "Run name (optional)", placeholder="finetune-date-time", grid="name"),
))
# The class demo: the form's defaults but 60 steps. The default task (coherence) from the shipped bertviz-mini: its
# time and dev accuracy (which CLASS_DEMO_HELP quotes) measured by python -m bertviz_lab finetune --task coherence
# --from checkpoints/bertviz-mini --steps 60; figures in docs/benchmarks.md, "The class demo's fine-tuning".
CLASS_DEMO = {**{f.name: f.default for f in FORM.numbers}, "steps": 60}
CLASS_DEMO_HELP = ("The form's defaults with 60 steps, from the shipped model: the default task trained in 23 to 45 s "
                   "on 2 busy CPU cores when measured, to 89% dev accuracy. Larger models take longer.")
LABELS = {**FORM.labels(FORM.numbers), "task": "Task", "data": "CSV file",
          "checkpoint": "Starting point", "scratch": "Starting point", "seq_len": "Starting point"}


@dataclass(frozen=True)
class Start:
    """A model to fine-tune: a shipped checkpoint or a pretraining run's, with the shape a random twin needs."""
    label: str
    checkpoint: str  # its folder
    layers: int
    heads: int
    hidden: int
    positions: int  # max_position_embeddings: the longest input it reads


def starting_points(shipped: Path, root: Path | None = None, active: tuple[Path, object] | None = None) -> list[Start]:
    """The active model (`active`: its folder and config, its shape as the lab reads it, whatever the family's keys)
    unless it is one of the others, then the shipped checkpoints, then every pretraining run's latest (newest first)."""
    found = []
    for folder in sorted(shipped.iterdir()) if shipped.is_dir() else []:
        found.append(_start(folder, f"{checkpoint_name(folder)} (shipped)"))
    for run in runs.list_runs(root, kind="pretrain"):
        if run.status != runs.UNREADABLE and run.checkpoint is not None:
            note = f", {run.status}" if run.active else ""
            found.append(_start(run.checkpoint, f"run {checkpoint_name(run.checkpoint)}{note}"))
    found = [start for start in found if start is not None]
    if active is not None and all(Path(s.checkpoint).resolve() != Path(active[0]).resolve() for s in found):
        (folder, cfg), name = active, checkpoint_name(active[0])
        found.insert(0, Start(f"{name} (the active model)", str(folder), cfg.num_hidden_layers,
                              cfg.num_attention_heads, cfg.hidden_size, cfg.max_position_embeddings))
    return found


def _start(folder: Path, label: str) -> Start | None:
    try:
        raw = files.read_json(folder / "config.json")
        shape = [raw[k] for k in ("num_hidden_layers", "num_attention_heads", "hidden_size",
                                  "max_position_embeddings")]
    except (LabError, OSError, KeyError, TypeError):
        return None  # not a model folder: not offered
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in shape):
        return None
    return Start(label, str(folder), *shape)


def explain(exc: Exception) -> str:
    """The error with the form's label of the field it names in front: '**Steps**: steps must be ...'."""
    text = str(exc)
    field = text.split(" ", 1)[0].rstrip(":")
    if field not in LABELS:
        return text
    return f"**{LABELS[field]}**: {text.removeprefix(field + ':').lstrip()}"


def form_config(values: dict, start: Start, weights: str = "pretrained", mode: str = "full", task: str = "",
                data: str = "", device: str = "auto") -> FinetuneConfig:
    """A validated FinetuneConfig from the form: values holds its numbers (steps, lr, batch_size and seed; number
    inputs give floats, whole ones become ints). weights "random": a model of start's shape from scratch. device:
    where the run trains (the page passes the sidebar's)."""
    numbers = FORM.typed(values)
    seq_len = min(DEFAULTS["seq_len"], start.positions)
    where = (dict(checkpoint=start.checkpoint) if weights == "pretrained" else
             dict(scratch="tiny", layers=start.layers, heads=start.heads, hidden=start.hidden))
    return FinetuneConfig(task=task, data=data, seq_len=seq_len, freeze_encoder=mode == "probe", device=device,
                          **where, **numbers)


NO_CSV = "data: choose a CSV file to upload first"


def read_upload(raw: bytes | None, name: str) -> Task:
    """The learner's CSV checked (data.parse_csv) before anything is saved; InputError naming the file."""
    if raw is None:
        raise InputError(NO_CSV)
    try:
        return ft_data.parse_csv(raw, name)
    except InputError as exc:
        raise InputError(f"data: {exc}") from None


def upload_path(raw: bytes, name: str = "data.csv") -> Path:
    """Where an uploaded CSV is kept for its runs: under the runs folder, named by the file's own name (what
    run descriptions show) and its hash (the same bytes are kept once)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(name).stem).strip("-")[:40] or "data"
    return runs.runs_root() / runs.UPLOADS / f"{stem}-{hashlib.sha256(raw).hexdigest()[:12]}.csv"


def start_run(cfg: FinetuneConfig, csv: bytes | None = None, name: str | None = None, started_by: str = runs.OWNER,
              max_active: int | None = None) -> runs.RunInfo:
    """Save the uploaded CSV (if any) where cfg.data points, then start the run; a refused run leaves no file."""
    path = Path(cfg.data) if cfg.data else None
    fresh = csv is not None and path is not None and not path.exists()
    if fresh:
        with atomic.atomic_path(path) as tmp:
            tmp.write_bytes(csv)
    try:
        return ft_runs.start(cfg, name, started_by=started_by, max_active=max_active)
    except BaseException:
        if fresh:
            path.unlink(missing_ok=True)
        raise


def example_rows(task: Task, n: int = 4) -> pd.DataFrame:
    """A few training examples as a table: text (text_b) and label, or the words with their tags."""
    rows = []
    for e in task.train[:n]:
        if task.kind == TOKEN:
            rows.append({"words [tag]": " ".join(w if t == O_TAG else f"{w} [{t}]"
                                                 for w, t in zip(e.text.split(" "), e.tags))})
        else:
            rows.append({"text": e.text, **({"text_b": e.text_b} if task.kind == PAIR else {}), "label": e.label})
    return pd.DataFrame(rows)


def run_rows(all_runs: list[runs.RunInfo], curves_of) -> pd.DataFrame:
    """One row per fine-tuning run: status, progress, what it learned from where, its last dev accuracy."""
    rows = []
    for run in all_runs:
        held = curves_of(run.path).eval
        rows.append({"run": run.name, "status": run.status, "steps": f"{run.step:,} / {run.total_steps:,}",
                     "dev accuracy": metrics.row(held, -1).acc if not held.empty else None,
                     "settings": run.message if run.status == runs.UNREADABLE else describe(run.config),
                     "started by": run.started_by,
                     "started": dt.datetime.fromtimestamp(run.created) if run.created else None})
    return pd.DataFrame(rows)


def legends(all_runs: list[runs.RunInfo]) -> dict[str, str]:
    """Run name -> its legend in an overlay: its description, with the run's name when two read the same."""
    described = {run.name: describe(run.config) for run in all_runs}
    counts = pd.Series(list(described.values())).value_counts()
    return {name: text if counts[text] == 1 else f"{text} ({name})" for name, text in described.items()}
