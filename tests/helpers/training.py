"""A small training config, and a Trainer's records without their timings. Moved here from tests/pretrain/test_loop.py,
which uses them too."""

from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain.config import TrainConfig


TIMING = ("tokens_per_s", "elapsed")


def small(**changes) -> TrainConfig:
    base = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=30, lr=5e-3,
                warmup=3, eval_every=10, eval_batches=2, checkpoint_every=10, device="cpu", threads=1)
    return TrainConfig(**{**base, **changes})


def records(trainer, kinds=(TRAIN, EVAL)):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in trainer.run() if r["kind"] in kinds]
