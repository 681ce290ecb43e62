"""What a training run measures, one name per idea: the `Metrics` record pretraining and fine-tuning both write.

A "train" record is one optimizer step; an "eval" record, the held-out set after that many steps (pretraining:
held-out stories, masked as in training; fine-tuning: the first dev examples). `loss` and `acc` are the run's own
objective whatever it trains: the MLM loss and top-1 accuracy over the masked tokens when pretraining, the
classifier's over its labels (or tagged words) when fine-tuning. The loops write these names in RUN/metrics.jsonl
(`Metrics.record`); runs written before them used one dialect per loop (`OLD_NAMES`: "mlm_top1" on pretraining's
evaluations, "dev_acc" on fine-tuning's, ...), which `Metrics.of`, `curve` and `table` read too, so a run on disk,
or a shipped model's history, reads as a new one does (the file itself is left as it was written). Charts get the
records as a DataFrame whose columns are the field names below (`frame`; `table` builds the same straight from a
file's records), and a row back as a record (`row`). A leaf: no torch, nothing of the package (figures import it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a table is built: a trainer, which only writes records, never loads pandas
    import pandas as pd

TRAIN, EVAL = "train", "eval"
# The other records the loops yield: a checkpoint written, pretraining's snapshot (pretrain/snapshots.py; it goes
# to snapshots.jsonl, not metrics.jsonl) and the last one, how the run ended. Every reader compares these names.
CHECKPOINT, SNAPSHOT, END = "checkpoint", "snapshot", "end"
# What runs wrote before one name per idea -> the field it is (pretraining train, its eval, fine-tuning's eval)
OLD_NAMES = {"mlm_loss": "loss", "mlm_acc": "acc", "mlm_top1": "acc", "mlm_top5": "top5",
             "dev_loss": "loss", "dev_acc": "acc"}


@dataclass(frozen=True)
class Metrics:
    kind: str  # TRAIN: one optimizer step; EVAL: the held-out (dev) set after `step` steps
    step: int  # optimizer steps done
    loss: float | None = None  # mean cross-entropy in nats: MLM over masked tokens, or the task's over its labels
    acc: float | None = None  # share of top guesses that are right (of masked tokens, examples or tagged words)
    top5: float | None = None  # pretraining's eval: share of masked tokens among the five best guesses
    nsp_loss: float | None = None  # pretraining with NSP: the IsNext/NotNext cross-entropy
    nsp_acc: float | None = None  # ... and the share of pairs told right
    lr: float | None = None  # train: the learning rate the step used
    grad_norm: float | None = None  # train: the gradient's L2 norm before clipping
    tokens_per_s: float | None = None  # pretraining's train: real (non-padding) tokens per second over the step
    examples_per_s: float | None = None  # fine-tuning's train: examples per second over the step
    elapsed: float | None = None  # train: seconds of training so far, every step of every resume

    def record(self) -> dict:
        """The JSON line's dict: kind, step and the measures that are set."""
        return {name: value for name in NAMES if (value := getattr(self, name)) is not None}

    @classmethod
    def of(cls, record: Mapping) -> Metrics:
        """A train or eval record (a dict, or a row of `frame`), by today's names or those of `OLD_NAMES`; a key
        that is no field is passed over. TypeError without kind or step."""
        return cls(**{name: value for key, value in record.items() if (name := OLD_NAMES.get(key, key)) in FIELDS})


NAMES = tuple(f.name for f in fields(Metrics))  # the record's keys and the columns of `frame`, in this order
FIELDS = frozenset(NAMES)


def curve(records: Iterable[Mapping], kind: str) -> list[Metrics]:
    """The records of one kind (TRAIN or EVAL) among a metrics file's (pretrain/records.py reads them), typed;
    the others (checkpoints, and a record without a step) are passed over."""
    return [Metrics.of(r) for r in records if r.get("kind") == kind and "step" in r]


def table(recorded: Iterable[Mapping], kind: str) -> pd.DataFrame:
    """`frame(curve(recorded, kind))`, built without a record object per line: a run keeps up to 50,000 records
    and its page redraws them every second or two (a sixth of the time; figures in docs/benchmarks.md, "Run
    records"). A resumed old run holds both names of an idea, a column each: they become one."""
    import pandas as pd

    chosen = pd.DataFrame([r for r in recorded if r.get("kind") == kind and "step" in r])
    for old, name in OLD_NAMES.items():
        if old in chosen:
            chosen[name] = chosen[name].fillna(chosen[old]) if name in chosen else chosen[old]
    return chosen[[name for name in NAMES if name in chosen]].copy()


def frame(records: Iterable[Metrics]) -> pd.DataFrame:
    """One row per record; a column per field that some record sets (an empty table when there are none)."""
    import pandas as pd

    rows = list(records)
    columns = {name: [getattr(r, name) for r in rows] for name in NAMES}
    return pd.DataFrame({name: values for name, values in columns.items()
                         if any(v is not None for v in values)})


def row(data: pd.DataFrame, i: int) -> Metrics:
    """Row i of a `frame` (-1: the last) as a record. An empty cell stays NaN, as the table has it: a run that
    diverged wrote NaN losses, and a page must show "nan" for them, not fail on None."""
    (cells,) = data.iloc[[i]].to_dict("records")  # numpy's numbers as Python's
    return Metrics.of(cells)
