"""Run records read as they grow (pretrain/records.py) and kept under their caps: a refresh reads only the
new lines, a replaced or shrunk file is read again, a file a hostile user left is read in bounded memory,
the writer thins train records and snapshots, and a frame of another model shape is never drawn."""

import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from bertviz_lab import files
from bertviz_lab.metrics import CHECKPOINT, EVAL, TRAIN
from bertviz_lab.pretrain import checkpoints, records, snapshots
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.views.timelapse import history as vt
from bertviz_lab.views.timelapse.frames import Frame
from tests.helpers.paths import ROOT
from tests.helpers.timelapse import raw

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
HOSTILE = 200 * 10**6  # the largest file a hostile user can leave in a run folder
BOUND = 100 * 2**20  # peak traced memory allowed to read it


def train(step: int) -> dict:
    return {"kind": "train", "step": step, "mlm_loss": 7.6497, "mlm_acc": 0.0, "lr": 1.4e-05, "grad_norm": 3.7,
            "tokens_per_s": 6815.76, "elapsed": 0.71, "nsp_loss": 0.70, "nsp_acc": 0.47}


def lines(*items: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in items)


def fill(path: Path, line: bytes, size: int) -> None:
    """`size` bytes of `line` repeated, written a megabyte at a time."""
    block = line * max(1, 2**20 // len(line))
    with open(path, "wb") as out:
        for _ in range(size // len(block)):
            out.write(block)


def evenly_spaced(steps: list[int]) -> int:
    """The stride of thinned train steps: multiples of it without a hole, then every step since the last
    thinning (the first of them the last step of that thinning, kept as it was)."""
    tail = len(steps) - 1
    while tail > 0 and steps[tail - 1] == steps[tail] - 1:
        tail -= 1
    stride = steps[1] - steps[0]
    assert steps[:tail] == list(range(stride, steps[tail - 1] + 1, stride)), steps
    return stride


def hostile_note(name: str, size: int, cap: int) -> str:
    assert size > records.SLACK * cap
    return (f"{name} holds more than a run writes ({files.too_big(size, cap)}), so the records that begin in its "
            f"first {files.describe_bytes(size - records.SLACK * cap)} were not read.")


def peak_of(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_refresh_reads_only_the_lines_appended_since_and_waits_for_a_half_written_one(tmp_path):
    path = tmp_path / records.METRICS
    path.write_text(lines(*map(train, range(1, 101))))
    log = records.MetricsLog(path)
    log.refresh()
    assert len(log.records) == 100 and log.bytes_read == path.stat().st_size == log.offset
    before, more, half = log.offset, lines(train(101), {"kind": "eval", "step": 101, "mlm_loss": 3.0}), '{"kind": "tr'
    with open(path, "a") as out:
        out.write(more + half)  # the trainer is half-way through a line
    log.refresh()
    assert log.bytes_read == len(more + half) and [r["step"] for r in log.records[-2:]] == [101, 101]
    assert log.offset == before + len(more)  # the half line is read again next time, whole
    with open(path, "a") as out:
        out.write('ain", "step": 102}\n')
    log.refresh()
    assert log.records[-1] == {"kind": "train", "step": 102} and len(log.records) == 103
    assert log.bytes_read == len('{"kind": "train", "step": 102}\n') and log.offset == path.stat().st_size
    log.refresh()
    assert log.bytes_read == 0 and len(log.records) == 103  # nothing new, nothing read


def test_a_file_replaced_shrunk_or_rewritten_in_place_is_read_again_from_the_start(tmp_path):
    path = tmp_path / records.METRICS
    path.write_text(lines(*map(train, range(1, 11))))
    log = records.MetricsLog(path)
    log.refresh()
    records.keep_until(path, 4)  # a resume: records past the checkpoint's step go (a new file, renamed over)
    log.refresh()
    assert [r["step"] for r in log.records] == [1, 2, 3, 4]
    with open(path, "r+") as f:  # shrunk in place
        f.truncate(len(lines(train(1))))
    log.refresh()
    assert [r["step"] for r in log.records] == [1]
    path.write_text(lines(*map(train, range(50, 60))))  # the same inode, longer, other bytes before the offset
    log.refresh()
    assert [r["step"] for r in log.records] == list(range(50, 60))
    path.unlink()
    log.refresh()
    assert log.records == [] and records.read_metrics(tmp_path) == []


def test_a_200_mb_metrics_file_is_read_in_bounded_memory_from_its_last_cap(tmp_path):
    line = (json.dumps(train(7)) + "\n").encode()
    fill(tmp_path / records.METRICS, line, HOSTILE)
    log, peak = peak_of(lambda: records.metrics_log(tmp_path))
    assert peak < BOUND, f"{peak / 2**20:.0f} MiB"
    assert log.bytes_read <= records.SLACK * records.METRICS_CAP and 0 < len(log.records) <= records.MAX_RECORDS
    size = (tmp_path / records.METRICS).stat().st_size
    assert records.metrics_note(tmp_path).startswith(hostile_note(records.METRICS, size, records.METRICS_CAP))
    with open(tmp_path / records.METRICS, "a") as out:
        out.write(lines(train(8), train(9)))
    assert records.metrics_log(tmp_path).bytes_read == 2 * len(line)  # a refresh reads the two new lines only
    assert [r["step"] for r in records.read_metrics(tmp_path, TRAIN)[-3:]] == [7, 8, 9]


def test_a_reader_keeps_max_records_every_evaluation_and_train_records_spread(tmp_path):
    path = tmp_path / records.METRICS
    path.write_text(lines(*(r for s in range(1, 2001) for r in (
        [train(s), {"kind": "eval", "step": s, "mlm_loss": 2.0}] if s % 100 == 0 else [train(s)]))))
    log = records.MetricsLog(path, max_records=500)
    log.refresh()
    kinds = [r["kind"] for r in log.records]
    assert len(log.records) <= 500 and kinds.count(EVAL) == 20 and log.thinned > 0
    steps = [r["step"] for r in log.records if r["kind"] == TRAIN]
    assert steps[-1] == 2000 and evenly_spaced(steps) >= 4
    assert "train records were left out" in log.notes()


def test_the_writer_thins_train_records_and_keeps_every_eval_and_checkpoint_under_its_cap(tmp_path):
    path, cap = tmp_path / records.METRICS, 40_000
    out = records.CappedFile(path, cap, lambda p: records.shrink_metrics(p, cap))
    largest = 0
    for step in range(1, 3001):
        out.write(train(step))
        if step % 50 == 0:
            out.write({"kind": "eval", "step": step, "mlm_loss": 2.0})
        if step % 500 == 0:
            out.write({"kind": "checkpoint", "step": step, "path": f"checkpoints/step-{step:06d}"})
        largest = max(largest, path.stat().st_size)
    out.close()
    assert largest <= cap + 300  # one line past the cap at most, then thinned
    kept = records.read_metrics(tmp_path)
    assert [r["step"] for r in kept if r["kind"] == EVAL] == list(range(50, 3001, 50))
    assert [r["step"] for r in kept if r["kind"] == CHECKPOINT] == list(range(500, 3001, 500))
    steps = [r["step"] for r in kept if r["kind"] == TRAIN]
    assert len(steps) >= 40 and steps[-1] == 3000 and evenly_spaced(steps) >= 32


def test_the_writer_keeps_the_series_and_the_last_snapshot_under_max_frames(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "MAX_FRAMES", 16)
    path = tmp_path / snapshots.FILE
    out = records.CappedFile(path, snapshots.MAX_FILE_BYTES, snapshots.shrink, max_lines=snapshots.MAX_FRAMES)
    saved = sorted({*[0, 1, 2, 5, 10, 20, 50, 100, 200, 500], *range(0, 1001, 10)})
    for step in saved:
        out.write(raw(step, [0.5, 0.5]))
    out.close()
    kept = [r["step"] for r in snapshots.read(path)]
    assert len(kept) <= 16 and kept[-1] == 1000
    assert {0, 1, 2, 5, 10, 20, 50, 100, 200, 500} <= set(kept)


ONE_LAYER = "1 layer × 2 heads, inputs of 32 tokens at most"


@pytest.fixture
def one_layer_run(tmp_path):
    """A run folder whose run.json says 1 layer x 2 heads, inputs of 32 tokens."""
    run = tmp_path / "one-layer"
    run.mkdir()
    config = TrainConfig(layers=1, heads=2, hidden=32, seq_len=32)
    (run / "run.json").write_text(json.dumps({"kind": "pretrain", "config": config.to_dict()}))
    return run


def test_a_frame_of_another_model_shape_is_left_out_with_one_note(one_layer_run):
    four_layers = {**raw(5, [0.2, 0.3]), "layers": 4}
    four_layers["probes"][0]["attention"] = [four_layers["probes"][0]["attention"][0]] * 4
    four_layers["roles"] = {role: [scores[0]] * 4 for role, scores in four_layers["roles"].items()}
    assert Frame.of(four_layers) is not None  # consistent in itself: only the run's shape tells it is not this run's
    (one_layer_run / snapshots.FILE).write_text(lines(raw(0, [0.1, 0.1]), four_layers, raw(10, [0.3, 0.4])))
    lapse = vt.from_run(one_layer_run)
    assert lapse.steps == [0, 10] and lapse.shape == (1, 2)
    assert lapse.note == f"Snapshots not shown: 1 does not fit the run's model ({ONE_LAYER})."
    (one_layer_run / snapshots.FILE).write_text(lines(four_layers))  # a 4-layer history in a 1-layer run's folder
    lapse = vt.from_run(one_layer_run)
    assert lapse.frames == []
    assert lapse.note == f"This run's snapshots cannot be shown: 1 does not fit the run's model ({ONE_LAYER})."


def test_a_200_mb_snapshots_file_is_read_in_bounded_memory(tmp_path):
    run = tmp_path / "mini"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"kind": "pretrain", "config": TrainConfig.from_dict(
        json.loads((SHIPPED / "model_card.json").read_text())["train_config"]).to_dict()}))
    line = (SHIPPED / vt.HISTORY / snapshots.FILE).read_bytes().split(b"\n", 1)[0] + b"\n"
    start = snapshots.STEP.match(line).end() - 1
    with open(run / snapshots.FILE, "wb") as out:
        for step in range(HOSTILE // len(line)):
            out.write(b'{"kind": "snapshot", "step": %d' % step + line[start:])
    shape = vt._shape(run / "run.json", of_run=True)
    (frames, note, refused), peak = peak_of(lambda: snapshots.load(run / snapshots.FILE, shape, Frame.of))
    assert peak < BOUND, f"{peak / 2**20:.0f} MiB"
    assert 0 < len(frames) <= snapshots.MAX_FRAMES and frames[-1].step == HOSTILE // len(line) - 1
    size = (run / snapshots.FILE).stat().st_size
    assert note.startswith(hostile_note(snapshots.FILE, size, snapshots.MAX_FILE_BYTES)) and refused == ""
    assert "were left out: at most 128 (67.1 MB) are read" in note
    os.truncate(run / snapshots.FILE, 1000)  # what is left is one half-written line
    assert snapshots.load(run / snapshots.FILE, shape, Frame.of)[0] == []


SERIES = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]


def test_the_writer_keeps_step_0_and_the_series_through_shrinks_at_its_byte_cap(tmp_path):
    path, line = tmp_path / snapshots.FILE, len(json.dumps(raw(1000, [0.5, 0.5]))) + 1
    cap, shrinks = 40 * line, []  # the byte cap, well under the frame cap: each shrink keeps about 20 frames

    def shrink(p):
        shrinks.append(p.stat().st_size)
        snapshots.shrink(p, cap)

    out = records.CappedFile(path, cap, shrink, max_lines=snapshots.MAX_FRAMES)
    for step in sorted({*SERIES, *range(0, 3001, 10)}):
        out.write(raw(step, [0.5, 0.5]))
    out.close()
    assert len(shrinks) >= 10 and all(size <= cap + line for size in shrinks)  # a line past the cap, each time
    kept = [r["step"] for r in snapshots.read(path)]
    assert set(SERIES) <= set(kept) and kept[-1] == 3000


def test_a_resume_and_a_copy_keep_the_earliest_snapshots_of_a_file_above_its_cap(tmp_path):
    path, line = tmp_path / snapshots.FILE, len(json.dumps(raw(1000, [0.5, 0.5]))) + 1
    path.write_text(lines(*(raw(step, [0.5, 0.5]) for step in range(200))))  # an old run's: 5 caps
    cap = 40 * line
    assert path.stat().st_size > records.SLACK * cap
    assert snapshots.copy(path, tmp_path / "copy.jsonl", cap) > 0
    assert {0, 1, 2, 5, 10, 20, 50, 100, 199} <= {r["step"] for r in snapshots.read(tmp_path / "copy.jsonl")}
    snapshots.keep_until(path, 150, cap)
    assert [json.loads(text)["step"] for text in path.read_text().splitlines()] == list(range(151))


def test_weight_is_read_while_another_session_refreshes_the_same_reader(tmp_path):
    path = tmp_path / snapshots.FILE
    path.write_text(lines(*({"kind": "snapshot", "step": s, "layers": 1, "heads": 1, "probes": [], "roles": {}}
                            for s in range(200))))
    errors, stop, current = [], threading.Event(), [None]

    def weigh():  # what records.cached does for every cached reader, without the readers' locks
        while not stop.is_set():
            try:
                if current[0] is not None:
                    current[0].weight()
            except Exception as error:  # noqa: BLE001 - the failure this test looks for
                errors.append(repr(error))
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    thread = threading.Thread(target=weigh)
    thread.start()
    try:
        end = time.monotonic() + 0.5
        while time.monotonic() < end and not errors:
            current[0] = snapshots.SnapshotLog(path, max_frames=150)
            current[0].frames()  # the index grows line by line while `weigh` reads the weight
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    log = current[0]
    assert errors == [] and log.weight() == sum(n for o, n in log.index.values() if o in log.parsed) > 0
    metrics = records.MetricsLog(tmp_path / records.METRICS, max_records=500)
    (tmp_path / records.METRICS).write_text(lines(*map(train, range(1, 2000))))
    metrics.refresh()
    assert metrics.weight() == records.RECORD_BYTES * len(metrics.records) > 0


def test_a_file_just_past_its_cap_is_read_whole_and_one_far_past_it_says_what_was_not_read(tmp_path):
    path = tmp_path / records.METRICS
    one = len(lines(train(10)))
    path.write_text(lines(*map(train, range(10, 10 + records.METRICS_CAP // one + 1))))  # not yet thinned
    assert path.stat().st_size > records.METRICS_CAP
    assert records.metrics_note(tmp_path) == "" and records.read_metrics(tmp_path)[0]["step"] == 10
    log = records.MetricsLog(path, cap=1000)
    log.refresh()
    size = path.stat().st_size
    assert log.note == (f"metrics.jsonl holds more than a run writes ({files.describe_bytes(size)}; the limit is "
                        f"1 kB), so the records that begin in its first {files.describe_bytes(size - 2000)} were "
                        "not read.")
    snaps = tmp_path / snapshots.FILE
    snaps.write_text(lines(*(raw(step, [0.5, 0.5]) for step in range(41))))
    log = snapshots.SnapshotLog(snaps, cap=snaps.stat().st_size - 10)  # one frame past the cap: read whole
    assert log.frames()[0]["step"] == 0 and log.note == "" and log.offset == snaps.stat().st_size


def test_the_notes_count_each_record_once(tmp_path):
    path = tmp_path / records.METRICS
    path.write_text(lines(*(r for s in range(1, 301) for r in (train(s), {"kind": "eval", "step": s, "loss": 2.0}))))
    log = records.MetricsLog(path, max_records=200)  # the evaluations alone pass the target: they are thinned too
    log.refresh()
    assert log.thinned + log.thinned_other + len(log.records) == 600 and log.thinned_other > 0
    assert log.notes() == (f"{log.thinned:,} train records and {log.thinned_other:,} others (evaluations, "
                           f"checkpoints) were left out to keep {len(log.records):,}, evenly spread over the steps.")
    snaps = tmp_path / snapshots.FILE  # steps 1 and 2 are on the series, so they are chosen, but are not frames
    snaps.write_text(lines(raw(0, [0.5, 0.5]), {**raw(1, [0.5, 0.5]), "layers": 4}, {**raw(2, [0.5, 0.5]), "roles": []},
                           *(raw(s, [0.5, 0.5]) for s in range(3, 20))))
    log = snapshots.SnapshotLog(snaps, snapshots.Shape(1, 2, 32), max_frames=16)
    shown = [r["step"] for r in log.frames()]
    assert len(shown) == 14 and shown[0] == 0 and not {1, 2} & set(shown)
    assert log.notes() == ("4 of 20 snapshots were left out: at most 16 (67.1 MB) are read, the last, the 1-2-5 "
                           "series and the others evenly spread.")
    assert log.refused() == f"1 does not fit the run's model ({snapshots.Shape(1, 2, 32)}) and 1 cannot be read"


def test_a_shape_counts_in_the_singular_and_plural():
    assert str(snapshots.Shape(1, 1, 1)) == "1 layer × 1 head, inputs of 1 token at most"
    assert str(snapshots.Shape(12, 12, 512)) == "12 layers × 12 heads, inputs of 512 tokens at most"


@pytest.fixture
def two_checkpoints(monkeypatch):
    """A run whose checkpoints 0 and 5 give snapshots of a 1-layer, 2-head model (taken without a model)."""
    monkeypatch.setattr(checkpoints, "kept", lambda run_dir: [(0, run_dir), (5, run_dir)])
    monkeypatch.setattr(vt, "load_checkpoint", lambda folder: type("Checkpoint", (), {"model": 1, "tokenizer": 2}))
    monkeypatch.setattr(snapshots, "take", lambda model, tokenizer, step: raw(step, [0.5, 0.5]))


def test_a_run_whose_snapshots_cannot_be_shown_says_why_in_one_sentence(one_layer_run, two_checkpoints):
    instead = "its 2 kept checkpoints were read instead."
    assert vt.from_run(one_layer_run).note == f"This run has no snapshots; {instead}"
    four_layers = {**raw(5, [0.2, 0.3]), "layers": 4}
    (one_layer_run / snapshots.FILE).write_text(lines(four_layers, {**four_layers, "step": 6}))
    lapse = vt.from_run(one_layer_run)
    assert lapse.steps == [0, 5]
    assert lapse.note == f"This run's snapshots cannot be shown: 2 do not fit the run's model ({ONE_LAYER}); {instead}"
    (one_layer_run / "run.json").write_text("{not json")
    assert vt.from_run(one_layer_run).note == (
        f"This run's snapshots cannot be shown: the model settings in its run.json cannot be read; {instead}")


def test_a_model_whose_history_cannot_be_shown_says_why(tmp_path):
    (tmp_path / vt.HISTORY).mkdir()
    (tmp_path / vt.HISTORY / snapshots.FILE).write_text(lines(raw(0, [0.5, 0.5])))
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 1}))
    lapse = vt.from_history(tmp_path)
    assert lapse.frames == []
    assert lapse.note == "This model's snapshots cannot be shown: the model settings in its config.json cannot be read."
