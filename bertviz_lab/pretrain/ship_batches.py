"""Write the classroom preset's training batches where the lab ships them (checkpoints/batches/): run it after a
change to the story world, the tokenizer or the masking, which names another file (tests/pretrain/test_batch_cache.py says
when). It makes the batches with the trainer (loop.py) and packs and saves them as any run keeps its own
(batch_cache.py); it lives apart from both so that the cache imports no trainer.

    python -m bertviz_lab.pretrain.ship_batches
"""

from __future__ import annotations

from pathlib import Path

from bertviz_lab.files import SHIPPED
from bertviz_lab.pretrain import batch_cache
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer


def ship() -> Path:
    """Write the classroom preset's batches (seed 0, its 600 steps) where the lab ships them; returns the file."""
    trainer = Trainer(TrainConfig(device="cpu"))
    path = SHIPPED / "batches" / trainer.batch_file_name()
    make = trainer.batches()
    batch_cache.save(path, [batch_cache.pack([make(i)], trainer.cfg.seq_len) for i in range(trainer.cfg.steps)],
                     compressed=True)
    for old in path.parent.glob("batches-*.npz"):  # files of an older code: no run would ever name them again
        if old != path:
            old.unlink()
    path.chmod(0o644)
    return path


if __name__ == "__main__":
    print(ship())
