"""Turn a run's last checkpoint into a shipped model with a measured model card.

    python -m bertviz_lab publish --run-dir runs/NAME --to checkpoints/NAME [--eval-batches 32]

Evaluates on the run's held-out split (more batches than during training), then
writes the Hugging Face files plus model_card.json (config, corpus, steps, time,
hardware, held-out MLM top-1/top-5 and NSP accuracy) into a temporary folder
that replaces the target in one rename. The run's history comes along in history/:
its snapshots (every one) and its curves (held-out records all, train records every
TRAIN_EVERY steps), so the Time-lapse page plays how the model learned without its checkpoints.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from pathlib import Path

import torch

from bertviz_lab import atomic, files
from bertviz_lab.bert.checkpoint import CARD_FILE, save_checkpoint
from bertviz_lab.errors import CheckpointError, LabError
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import checkpoints, snapshots
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.pretrain.records import read_metrics

HISTORY = "history"
# The model card's held-out names (bert/card.py reads them; shipped cards have them) for the fields of `Metrics`
CARD_NAMES = {"loss": "mlm_loss", "acc": "mlm_top1", "top5": "mlm_top5", "nsp_loss": "nsp_loss", "nsp_acc": "nsp_acc"}
SYNTAX_FILE = "syntax.jsonl"  # written by views/timelapse/syntax.py into a run folder
TRAIN_EVERY = 5  # train records kept in the history: one step in five (the curve looks the same)


def copy_history(run_dir: Path, folder: Path) -> None:
    """The run's snapshots and thinned curves into folder/history/ (nothing when the run has neither), and the
    syntax measured at its checkpoints (syntax.jsonl, the Time-lapse's "Syntax as it forms") when it has it."""
    curves = [r for r in read_metrics(run_dir) if r.get("kind") == EVAL
              or (r.get("kind") == TRAIN and r["step"] % TRAIN_EVERY == 0)]
    frames = snapshots.copy(run_dir / snapshots.FILE, folder / HISTORY / snapshots.FILE)  # line by line, as written
    if not frames and not curves:
        return
    if not frames:
        atomic.write_text(folder / HISTORY / snapshots.FILE, "")
    atomic.write_text(folder / HISTORY / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in curves))
    syntax = run_dir / SYNTAX_FILE
    if syntax.is_file() and syntax.stat().st_size <= files.MAX_TEXT_FILE_BYTES:
        atomic.write_text(folder / HISTORY / SYNTAX_FILE, syntax.read_text(encoding="utf-8", errors="replace"))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _trained_on(run_dir: Path) -> str:
    try:
        return json.loads((run_dir / "status.json").read_text()).get("device", "unknown")
    except (OSError, ValueError):
        return "unknown"


RUN_FACTS = ("cpu_threads", "autocast")  # what the run's own card says of how it trained, not the publisher's


def _run_facts(run_dir: Path) -> dict:
    """RUN_FACTS as the run's last checkpoint's card says them: the CPU threads it used (none on a GPU) and the
    autocast it trained under; a fact an older card lacks is left out."""
    folder = checkpoints.latest(run_dir)
    try:
        card = files.read_json(folder / CARD_FILE) if folder else {}
    except (LabError, OSError):
        card = {}
    card = card if isinstance(card, dict) else {}
    return {k: card[k] for k in RUN_FACTS if isinstance(card.get(k), str)}


def publish(run_dir, target, eval_batches: int = 32) -> dict:
    run_dir, target = Path(run_dir), Path(target)
    try:
        run = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{run_dir} is not a run folder ({exc})") from None
    cfg = TrainConfig.from_dict({**run["config"], "device": "cpu"})
    trainer = Trainer(cfg, run_dir, resume=True)
    held_out = trainer.evaluate(eval_batches)
    card = {
        **{k: v for k, v in trainer.card().items() if k not in RUN_FACTS},  # this process's, not the run's
        **_run_facts(run_dir),
        "held_out": {"batches": eval_batches, "pairs": eval_batches * cfg.batch_size,
                     **{CARD_NAMES[k]: round(v, 4) for k, v in held_out.record().items() if k in CARD_NAMES}},
        "hardware": f"{cpu_name()}, {f'{cfg.threads} threads' if cfg.threads else 'threads: every free core'}"
                    f" ({os.cpu_count()} cores), torch {torch.__version__}",
        "device": _trained_on(run_dir),
        # as the run was started (publishing itself always runs on CPU), every setting spelled out,
        # so a run from before a setting existed says what it used
        "train_config": {**TrainConfig.from_dict(run["config"]).to_dict(), "device": run["config"].get("device")},
        "command": " ".join(["python -m bertviz_lab", *run.get("command", [])]),
        "parameters": trainer.model.num_parameters(),
    }
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_checkpoint(trainer.model, trainer.tokenizer, tmp, card=card)
    copy_history(run_dir, tmp)
    old = target.with_name(f".{target.name}.old")
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)
    return card
