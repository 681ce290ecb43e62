"""A run's history: checkpoints on the 1-2-5 series, a snapshot of the probe set at each, resume across them."""

import json

import numpy as np
import pytest

from bertviz_lab.corpus import SEED_SENTENCES, vocabulary
from bertviz_lab.corpus.probes import PROBES, SYNTACTIC_ROLES, WORD_GROUPS
from bertviz_lab.metrics import CHECKPOINT, EVAL, SNAPSHOT, TRAIN
from bertviz_lab.pretrain import checkpoints, process, records, snapshots
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.head_roles import POSITIONAL_ROLES
from bertviz_lab.pretrain.loop import Trainer

SMALL = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=25, lr=5e-3,
             warmup=3, eval_every=10, eval_batches=1, checkpoint_every=10, device="cpu", threads=1)


def test_the_series_is_one_two_five_and_nothing_else():
    assert checkpoints.series(5000) == [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    assert checkpoints.series(0) == [0] and checkpoints.series(49) == [0, 1, 2, 5, 10, 20]
    on = [s for s in range(100_001) if checkpoints.on_series(s)]
    assert on == checkpoints.series(100_000)
    assert not any(checkpoints.on_series(s) for s in (-1, 3, 4, 15, 25, 30, 150, 250, 300, 1001))


def test_every_probe_is_in_the_story_world_and_its_links_point_at_words():
    vocab = set(vocabulary())
    seeds = {p.text.replace(" .", ".") for p in PROBES} & set(SEED_SENTENCES)
    assert len(seeds) >= 2  # the cat on the mat, the tired animal
    for probe in PROBES:
        words = probe.words
        assert set(words) - {"."} <= vocab, probe.text
        assert "[MASK]" in probe.masked().split() and probe.masked().split().count("[MASK]") == 1
        for role, links in probe.links.items():
            assert role in SYNTACTIC_ROLES and links
            for a, b in links:
                assert 0 <= a < len(words) and 0 <= b < len(words) and a != b
        for a, _ in probe.links.get("det_noun", ()):
            assert words[a] in ("the", "a", "an")
        for a, _ in probe.links.get("pronoun_referent", ()):
            assert words[a] in ("it", "he", "she", "they")
    assert all(set(group) <= vocab for group in WORD_GROUPS.values())


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """25 steps, a checkpoint every 10: saves at 0, 1, 2, 5, 10, 20 (the series) and 25 (the last)."""
    run_dir = tmp_path_factory.mktemp("runs") / "history"
    assert process.execute(run_dir, TrainConfig(**SMALL), resume=False, command=["train"]) == 0
    return run_dir


def test_a_run_keeps_the_series_and_the_newest_two_and_only_those_resume(finished_run):
    kept = checkpoints.kept(finished_run)
    assert [step for step, _ in kept] == [0, 1, 2, 5, 10, 20, 25]
    with_state = [step for step, folder in kept if (folder / checkpoints.STATE_FILE).exists()]
    assert with_state == [20, 25]  # the older series folders keep their weights only
    assert checkpoints.latest(finished_run).name == "step-000025"
    saved = [r["step"] for r in records.read_metrics(finished_run, "checkpoint")]
    assert saved == [0, 1, 2, 5, 10, 20, 25]


def test_the_series_stays_under_its_cap(tmp_path, monkeypatch):
    one = None
    run_dir = tmp_path / "capped"
    trainer = Trainer(TrainConfig(**{**SMALL, "steps": 12}), run_dir)
    for record in trainer.run():
        if record["kind"] == CHECKPOINT and one is None:
            one = checkpoints._size(checkpoints.latest(run_dir))
            monkeypatch.setattr(checkpoints, "SERIES_CAP_BYTES", int(2.5 * one))
    # saved 0, 1, 2, 5, 10, 12; the newest two (10, 12) always stay; of the older series two fit the cap
    assert [step for step, _ in checkpoints.kept(run_dir)] == [0, 1, 10, 12]


def test_each_checkpoint_step_has_one_snapshot_of_the_probe_set(finished_run):
    frames = snapshots.read(finished_run / snapshots.FILE)
    assert [r["step"] for r in frames] == [0, 1, 2, 5, 10, 20, 25]
    record = frames[-1]
    assert record["layers"] == 2 and record["heads"] == 2
    assert [p["text"] for p in record["probes"]] == [p.text for p in PROBES]
    for probe in record["probes"]:
        attention = np.array(probe["attention"])
        T = len(probe["tokens"])
        assert attention.shape == (2, 2, T, T)
        np.testing.assert_allclose(attention.sum(-1), 1, atol=5e-4)  # softmax rows, rounded to 4 decimals
        assert len(probe["top"]) == snapshots.TOP_K
        assert probe["top"][0][1] >= probe["top"][-1][1] > 0
    assert set(record["roles"]) == set(POSITIONAL_ROLES) | set(SYNTACTIC_ROLES)
    assert all(np.array(s).shape == (2, 2) for s in record["roles"].values())
    words = record["words"]
    assert len(words["words"]) == len(words["xy"]) == len(words["groups"]) >= 20
    assert 0 < words["explained"] <= 1
    # the snapshot holds what a checkpoint of that step shows: the same model, the same numbers
    from bertviz_lab.bert.checkpoint import load_checkpoint
    ckpt = load_checkpoint(checkpoints.latest(finished_run))
    again = snapshots.take(ckpt.model, ckpt.tokenizer, 25)
    assert json.dumps(again["roles"]) == json.dumps(record["roles"])
    assert again["probes"][0]["top"] == record["probes"][0]["top"]
    # the model learns: step 0's guesses differ from step 25's
    assert frames[0]["probes"][0]["top"] != record["probes"][0]["top"]
    metrics = records.read_metrics(finished_run)
    assert not any(r.get("kind") == SNAPSHOT for r in metrics)  # snapshots stay out of the metrics file


class _StopsAtThree(Trainer):
    def train_step(self):
        record = super().train_step()
        self.stop_requested = self.step >= 3
        return record


def test_a_resume_across_a_snapshot_step_keeps_one_history(tmp_path, finished_run):
    run_dir = tmp_path / "resumed"
    job = process.Job("pretrain", "train", TrainConfig, _StopsAtThree)
    assert process.execute(run_dir, TrainConfig(**SMALL), resume=False, command=["train"], job=job) == 0
    assert [r["step"] for r in snapshots.read(run_dir / snapshots.FILE)] == [0, 1, 2, 3]  # 3: the stop's save
    with open(run_dir / snapshots.FILE, "a") as out:  # a crashed run's record past its checkpoint
        out.write(json.dumps({"kind": "snapshot", "step": 9, "probes": [], "roles": {}}) + "\n")
        out.write("{half a line\n")
    assert process.execute(run_dir, None, resume=True, command=["train", "--resume"]) == 0
    frames = snapshots.read(run_dir / snapshots.FILE)
    assert [r["step"] for r in frames] == [0, 1, 2, 3, 5, 10, 20, 25]
    # the resumed run is the uninterrupted one: the same snapshots at the same steps
    straight = {r["step"]: r for r in snapshots.read(finished_run / snapshots.FILE)}
    for record in frames:
        if record["step"] in straight:
            for role, scores in record["roles"].items():
                np.testing.assert_allclose(scores, straight[record["step"]]["roles"][role], atol=2e-4)
    assert [step for step, _ in checkpoints.kept(run_dir)] == [0, 1, 2, 5, 10, 20, 25]


def test_a_model_too_short_for_every_probe_takes_no_snapshot():
    trainer = Trainer(TrainConfig(**{**SMALL, "seq_len": 8}))
    assert trainer.snapshot() is None


def test_read_skips_what_is_not_a_snapshot(tmp_path):
    path = tmp_path / snapshots.FILE
    good = {"kind": "snapshot", "step": 4, "probes": [], "roles": {}}
    path.write_text("\n".join([json.dumps(good), "[1, 2]", json.dumps({**good, "step": "4"}), "nul\x00",
                               json.dumps({**good, "step": True}), json.dumps({**good, "kind": "train"}),
                               json.dumps({**good, "step": 2}), json.dumps({**good, "step": 4, "layers": 9})]))
    frames = snapshots.read(path)
    assert [r["step"] for r in frames] == [2, 4] and "layers" not in frames[1]  # the last line is half-written
    with open(path, "a") as out:
        out.write("\n")  # ... until its newline comes
    frames = snapshots.read(path)
    assert [r["step"] for r in frames] == [2, 4] and frames[1]["layers"] == 9
    assert snapshots.read(tmp_path / "missing.jsonl") == [] and snapshots.read(tmp_path) == []


def test_publish_ships_the_history_with_the_model(finished_run, tmp_path):
    from bertviz_lab.pretrain.publish import HISTORY, TRAIN_EVERY, publish
    from bertviz_lab.views.timelapse import history as vt

    publish(finished_run, tmp_path / "shipped", eval_batches=1)
    history = tmp_path / "shipped" / HISTORY
    assert snapshots.read(history / snapshots.FILE) == snapshots.read(finished_run / snapshots.FILE)
    train = records.read_metrics(history, TRAIN)
    assert [r["step"] for r in train] == list(range(TRAIN_EVERY, 26, TRAIN_EVERY))
    assert records.read_metrics(history, EVAL) == records.read_metrics(finished_run, EVAL)
    lapse = vt.from_history(tmp_path / "shipped")
    assert lapse.steps == [0, 1, 2, 5, 10, 20, 25] and lapse.shape == (2, 2) and len(lapse.eval) == 4
    assert not (history / "syntax.jsonl").exists()  # the run measured no syntax


def test_publish_ships_the_syntax_measured_at_the_checkpoints(finished_run, tmp_path):
    from bertviz_lab.pretrain.publish import HISTORY, SYNTAX_FILE, publish

    (finished_run / SYNTAX_FILE).write_text('{"kind": "settings"}\n', encoding="utf-8")
    try:
        publish(finished_run, tmp_path / "shipped", eval_batches=1)
    finally:
        (finished_run / SYNTAX_FILE).unlink()
    assert (tmp_path / "shipped" / HISTORY / SYNTAX_FILE).read_text(encoding="utf-8") == '{"kind": "settings"}\n'


def test_a_snapshot_records_what_uniform_attention_would_score(finished_run):
    record = snapshots.read(finished_run / snapshots.FILE)[-1]
    uniform = np.mean([1 / len(p["tokens"]) for p in record["probes"]])
    assert set(record["chance"]) == set(record["roles"])
    for role in POSITIONAL_ROLES:  # each word token gives 1/T to every position: to the previous one too
        assert abs(record["chance"][role] - uniform) < 1e-4
    assert all(0 < v < 0.2 for v in record["chance"].values())
