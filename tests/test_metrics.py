"""bertviz_lab/metrics.py: one record, one name per idea, for pretraining and fine-tuning; runs written before it (a
dialect per loop, written here by hand as the old writers wrote them) read as the same numbers and draw the same."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bertviz_lab import metrics
from bertviz_lab.figures import finetune as ff
from bertviz_lab.figures import training as ftr
from bertviz_lab.metrics import EVAL, TRAIN, Metrics
from bertviz_lab.pretrain import records
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.views.pretrain import live as vp
from bertviz_lab.views.timelapse import history as vt
from tests.helpers.training import small

# What pretrain/loop.py wrote before metrics.Metrics (a run with NSP): a checkpoint, the step-0 evaluation, a step.
OLD_PRETRAINING = [
    {"kind": "checkpoint", "step": 0, "path": "checkpoints/step-000000"},
    {"kind": "eval", "step": 0, "mlm_loss": 7.71, "mlm_top1": 0.0, "mlm_top5": 0.01, "nsp_loss": 0.69, "nsp_acc": 0.5},
    {"kind": "train", "step": 1, "mlm_loss": 7.6497, "mlm_acc": 0.0, "lr": 1.4e-05, "grad_norm": 3.7,
     "tokens_per_s": 6815.76, "elapsed": 0.71, "nsp_loss": 0.7, "nsp_acc": 0.47},
    {"kind": "eval", "step": 1, "mlm_loss": 7.5, "mlm_top1": 0.02, "mlm_top5": 0.09, "nsp_loss": 0.68, "nsp_acc": 0.55},
]
PRETRAINING = [  # the same numbers as the loop writes them now
    Metrics(EVAL, 0, loss=7.71, acc=0.0, top5=0.01, nsp_loss=0.69, nsp_acc=0.5),
    Metrics(TRAIN, 1, loss=7.6497, acc=0.0, nsp_loss=0.7, nsp_acc=0.47, lr=1.4e-05, grad_norm=3.7,
            tokens_per_s=6815.76, elapsed=0.71),
    Metrics(EVAL, 1, loss=7.5, acc=0.02, top5=0.09, nsp_loss=0.68, nsp_acc=0.55),
]
# What finetune/loop.py wrote before it: train records already said loss and acc, its evaluations dev_loss, dev_acc.
OLD_FINETUNING = [
    {"kind": "eval", "step": 0, "dev_loss": 0.74, "dev_acc": 0.45},
    {"kind": "train", "step": 1, "loss": 0.71, "acc": 0.5, "lr": 2e-05, "grad_norm": 1.2, "examples_per_s": 310.0,
     "elapsed": 0.1},
    {"kind": "checkpoint", "step": 1, "path": "checkpoints/step-000001"},
    {"kind": "eval", "step": 1, "dev_loss": 0.52, "dev_acc": 0.8},
]
FINETUNING = [
    Metrics(EVAL, 0, loss=0.74, acc=0.45),
    Metrics(TRAIN, 1, loss=0.71, acc=0.5, lr=2e-05, grad_norm=1.2, examples_per_s=310.0, elapsed=0.1),
    Metrics(EVAL, 1, loss=0.52, acc=0.8),
]


def run_folder(path, written: list) -> str:
    """A run folder whose metrics.jsonl holds these records, one JSON line each (dicts as they are, Metrics as the
    loops write them)."""
    path.mkdir()
    lines = [json.dumps(r if isinstance(r, dict) else r.record()) for r in written]
    (path / records.METRICS).write_text("".join(line + "\n" for line in lines))
    return str(path)


def typed(run_dir) -> list[Metrics]:
    read = records.read_metrics(run_dir)
    return sorted(metrics.curve(read, TRAIN) + metrics.curve(read, EVAL), key=lambda m: (m.step, m.kind))


def sorted_by_step(written: list[Metrics]) -> list[Metrics]:
    return sorted(written, key=lambda m: (m.step, m.kind))


@pytest.mark.parametrize(("old", "new"), [(OLD_PRETRAINING, PRETRAINING), (OLD_FINETUNING, FINETUNING)],
                         ids=["pretraining", "fine-tuning"])
def test_an_old_metrics_file_reads_as_the_same_numbers_under_todays_names(tmp_path, old, new):
    before, now = run_folder(tmp_path / "old", old), run_folder(tmp_path / "new", new)
    assert typed(before) == typed(now) == sorted_by_step(new)
    assert records.read_metrics(before) == old  # the file itself is read as it was written: nothing rewritten
    for kind in (TRAIN, EVAL):  # the page's quick table is the typed records' table
        pd.testing.assert_frame_equal(metrics.table(old, kind), metrics.frame(metrics.curve(old, kind)))
    for kind in ("train", "eval"):
        pd.testing.assert_frame_equal(getattr(vp.read_curves(before), kind), getattr(vp.read_curves(now), kind))


def test_an_old_pretraining_run_draws_and_reads_on_the_page_as_a_new_one(tmp_path):
    before, now = (vp.read_curves(run_folder(tmp_path / name, written))
                   for name, written in (("old", OLD_PRETRAINING), ("new", PRETRAINING)))
    for chart in (ftr.loss_curves, ftr.accuracy_curves, ftr.lr_curve, ftr.throughput_curve):
        assert chart({"run": before}).to_plotly_json() == chart({"run": now}).to_plotly_json()
    accuracy = ftr.accuracy_curves({"run": before})
    assert {t.name: list(t.y) for t in accuracy.data} == {"train": [0.0], "held-out": [0.0, 0.02],
                                                            "top-5": [0.01, 0.09]}
    assert [list(t.y) for t in ftr.loss_curves({"run": before}, "nsp").data] == [[0.7], [0.69, 0.68]]
    last = metrics.row(before.eval, -1)
    assert (last.step, last.loss, last.acc, last.top5, last.nsp_acc) == (1, 7.5, 0.02, 0.09, 0.55)
    assert isinstance(last.step, int) and last.lr is None  # Python's numbers; what an evaluation lacks is None


def test_an_old_fine_tuning_run_draws_as_a_new_one(tmp_path):
    before, now = (vp.read_curves(run_folder(tmp_path / name, written))
                   for name, written in (("old", OLD_FINETUNING), ("new", FINETUNING)))
    for chart in (ff.loss_curves, ff.accuracy_curves):
        assert chart({"run": before}).to_plotly_json() == chart({"run": now}).to_plotly_json()
    assert {t.name: list(t.y) for t in ff.accuracy_curves({"run": before}).data} == {"train": [0.5],
                                                                                      "held-out": [0.45, 0.8]}


def test_a_resumed_old_run_holds_both_names_of_an_idea_and_reads_as_one_column(tmp_path):
    resumed = OLD_PRETRAINING + [r.record() for r in PRETRAINING if r.step == 1]  # steps 0-1 old, then again new
    resumed[-1]["step"] = resumed[-2]["step"] = 2
    for kind in (TRAIN, EVAL):
        table = metrics.table(resumed, kind)
        pd.testing.assert_frame_equal(table, metrics.frame(metrics.curve(resumed, kind)))
        assert "mlm_loss" not in table and table["loss"].notna().all() and table["acc"].notna().all()
    assert vp.read_curves(run_folder(tmp_path / "run", resumed)).eval["top5"].tolist() == [0.01, 0.09, 0.09]


def test_a_shipped_models_history_in_the_old_names_gives_the_time_lapse_its_loss(tmp_path):
    folder = tmp_path / "model" / vt.HISTORY
    folder.parent.mkdir()
    run_folder(folder, OLD_PRETRAINING)
    lapse = vt.from_history(folder.parent)
    assert lapse.eval["loss"].tolist() == [7.71, 7.5] and lapse.train["loss"].tolist() == [7.6497]


def test_a_record_round_trips_and_only_its_fields_are_kept():
    for record in PRETRAINING + FINETUNING:
        assert Metrics.of(record.record()) == record
        assert list(record.record())[:2] == ["kind", "step"]  # how every record line begins
    assert PRETRAINING[0].record() == {"kind": "eval", "step": 0, "loss": 7.71, "acc": 0.0, "top5": 0.01,
                                       "nsp_loss": 0.69, "nsp_acc": 0.5}  # nothing unset is written
    assert Metrics.of({"kind": "eval", "step": 3, "pairs": 24, "loss": 1.0}) == Metrics(EVAL, 3, loss=1.0)
    with pytest.raises(TypeError):
        Metrics.of({"kind": "train", "loss": 1.0})  # no step: not a point on a curve
    assert metrics.curve([{"kind": "train", "loss": 1.0}, {"kind": "checkpoint", "step": 2},
                          {"kind": "train", "step": 2, "mlm_loss": 1.5}], TRAIN) == [Metrics(TRAIN, 2, loss=1.5)]


def test_a_frame_holds_only_the_fields_some_record_sets_and_gives_its_rows_back():
    table = metrics.frame(PRETRAINING[:1] + PRETRAINING[2:])
    assert list(table.columns) == ["kind", "step", "loss", "acc", "top5", "nsp_loss", "nsp_acc"]
    assert metrics.row(table, 0) == PRETRAINING[0] and metrics.row(table, -1) == PRETRAINING[2]
    assert metrics.frame([]).empty
    mixed = metrics.frame([Metrics(EVAL, 0, loss=2.0), Metrics(EVAL, 5, loss=1.0, acc=0.5)])
    first = metrics.row(mixed, 0)  # an empty cell stays NaN, as a diverged run's NaN loss does
    assert (first.kind, first.step, first.loss) == (EVAL, 0, 2.0) and math.isnan(first.acc) and first.lr is None
    diverged = metrics.row(metrics.table([{"kind": EVAL, "step": 9, "loss": float("nan"), "acc": 0.0}], EVAL), -1)
    assert f"{diverged.loss:.3f}" == "nan"  # what the live panel and the time-lapse caption print


def test_the_pretraining_loop_writes_every_number_under_a_field_of_the_record():
    written = [r for r in Trainer(small(steps=2, eval_every=1)).run() if r["kind"] in (TRAIN, EVAL)]
    assert [r["kind"] for r in written] == [EVAL, TRAIN, EVAL, TRAIN, EVAL]
    assert all(Metrics.of(r).record() == r for r in written)  # no key a reader would drop
    assert all(set(r).isdisjoint(metrics.OLD_NAMES) for r in written)
