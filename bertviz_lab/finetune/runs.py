"""Fine-tuning runs in the background: checked here, then started, stopped, resumed and deleted by the
pretraining run machinery (`pretrain/runs.py`), which tells the two kinds apart by run.json's "kind".

    python -m bertviz_lab finetune --run-dir RUNS/NAME ...   is what `start` launches
"""

from __future__ import annotations

from pathlib import Path

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import ConfigError
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import FineTuner, builtin_tokenizer, check_family
from bertviz_lab.pretrain import runs
from bertviz_lab.pretrain.process import OWNER, Job
from bertviz_lab.pretrain.resources import check_fits, place, run_gpu

FINETUNE = Job("finetune", "finetune", FinetuneConfig, FineTuner)
KIND = FINETUNE.kind


def check(cfg: FinetuneConfig, placed: int | None = None) -> None:
    """Fail now, with one sentence, if the run cannot start: its data, its starting model, this machine's memory."""
    ft_data.task_of(cfg)  # the CSV is read and checked (a built-in task is made once and cached)
    if cfg.checkpoint:
        model_cfg = load_checkpoint(cfg.checkpoint).config
        check_family(model_cfg)
    else:
        model_cfg = cfg.scratch_config(builtin_tokenizer().vocab_size)
    if cfg.seq_len > model_cfg.max_position_embeddings:
        raise ConfigError(f"seq_len ({cfg.seq_len}) is longer than the model's {model_cfg.max_position_embeddings} "
                          "positions; lower it")
    gpu = run_gpu(cfg.device, placed)  # on a GPU, its free memory; on the CPU, this machine's
    check_fits(memory_bytes(model_cfg, cfg, fused_attention=gpu is not None), gpu)


def memory_bytes(model_cfg, cfg: FinetuneConfig, fused_attention: bool = False) -> int:
    """A generous estimate of one fine-tuning step's peak: weights, gradients and AdamW moments (16 bytes
    a parameter), and fp32 activations for one batch (see pretrain/resources.estimate_memory: on a GPU,
    `fused_attention`, no T x T matrices)."""
    d, ff, h, L = (model_cfg.hidden_size, model_cfg.intermediate_size, model_cfg.num_attention_heads,
                   model_cfg.num_hidden_layers)
    tokens, T = cfg.batch_size * cfg.seq_len, cfg.seq_len
    activations = tokens * ((L + 1) * (10 * d + 2 * ff + (0 if fused_attention else 3 * h * T)) + 4 * d)
    return 16 * model_cfg.num_parameters(mlm=False, nsp=False) + 4 * activations


def start(cfg: FinetuneConfig, name: str | None = None, root: Path | None = None, started_by: str = OWNER,
          max_active: int | None = None) -> runs.RunInfo:
    """Check the run, then launch it in the background (see `pretrain.runs.launch_new`), on the GPU with the most
    free memory when there are several (`resources.place`)."""
    placed = place(cfg.device)
    check(cfg, placed)
    return runs.launch_new(KIND, cfg.to_dict(), ["finetune", *cfg.cli_args()], cfg.steps, name, root, started_by,
                           max_active, placed)


def list_runs(root: Path | None = None) -> list[runs.RunInfo]:
    return runs.list_runs(root, kind=KIND)
