"""The fine-tuning loop and its runs: starting weights, a linear probe, batches, resume, background runs."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import ConfigError
from bertviz_lab.finetune import loop as ft_loop
from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import FineTuner, builtin_tokenizer, word_labels
from bertviz_lab.finetune.tasks import PAIR, TOKEN, Example, Task
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import checkpoints, runs
from tests.helpers.runs import wait

TINY = dict(task="acceptability", scratch="tiny", layers=1, hidden=32, heads=2, seq_len=32, batch_size=8, steps=6,
            lr=3e-3, warmup=1, eval_every=2, checkpoint_every=2, device="cpu", threads=1)
TIMING = ("examples_per_s", "elapsed")


def pair_task(n=40) -> Task:
    def example(i):
        return Example(f"the cat sat on the mat {i % 7} .", f"it was {'tired' if i % 2 else 'happy'} .",
                       label="tired" if i % 2 else "happy")
    return Task("toy", PAIR, ("happy", "tired"), "toy pairs", tuple(example(i) for i in range(n)),
                tuple(example(i) for i in range(n, n + 8)))


def token_task() -> Task:
    words = "anna saw a cat in paris on monday .".split()
    tags = ("PER", "O", "O", "ANIMAL", "O", "PLACE", "O", "TIME", "O")
    example = Example(" ".join(words), tags=tags)
    return Task("toy-tags", TOKEN, ("O", "PER", "ANIMAL", "PLACE", "TIME"), "toy tags", (example,) * 16, (example,) * 4)


def comparable(records):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records if r["kind"] in (TRAIN, EVAL)]


@pytest.fixture
def pretrained(tmp_path):
    """A tiny pretraining checkpoint with the built-in vocabulary (with and without NSP's pooler)."""
    def make(nsp: bool):
        cfg = BertConfig(vocab_size=builtin_tokenizer().vocab_size, hidden_size=32, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
        torch.manual_seed(1)
        model = BertForPreTraining(cfg, nsp_head=nsp, pooler=nsp)
        return save_checkpoint(model, builtin_tokenizer(), tmp_path / f"pre-{nsp}"), model
    return make


def test_a_checkpoint_start_copies_the_encoder_and_a_missing_pooler_stays_random(pretrained):
    folder, model = pretrained(nsp=True)
    tuner = FineTuner(FinetuneConfig(checkpoint=str(folder), **{k: v for k, v in TINY.items() if k not in
                                                                ("scratch", "layers", "hidden", "heads")}),
                      task=pair_task())
    ours = tuner.model.bert.state_dict()
    for key, value in model.bert.state_dict().items():
        torch.testing.assert_close(ours[key], value, rtol=0, atol=0)
    folder, model = pretrained(nsp=False)  # pretrained without NSP: no pooler to copy
    cfg = FinetuneConfig(task="coherence", checkpoint=str(folder), seq_len=32, device="cpu", threads=1)
    tuner = FineTuner(cfg, task=pair_task())
    torch.testing.assert_close(tuner.model.bert.embeddings.word_embeddings.weight,
                               model.bert.embeddings.word_embeddings.weight, rtol=0, atol=0)
    assert tuner.model.bert.pooler is not None and tuner.model.bert.pooler.dense.weight.std() > 0


def test_seq_len_past_the_models_positions_is_refused(pretrained):
    folder, _ = pretrained(nsp=True)
    with pytest.raises(ConfigError, match="seq_len .64. is longer than the model's 32 positions"):
        FineTuner(FinetuneConfig(task="coherence", checkpoint=str(folder), seq_len=64, device="cpu"), task=pair_task())


def test_a_linear_probe_trains_the_classifier_alone():
    tuner = FineTuner(FinetuneConfig(**TINY, freeze_encoder=True), task=pair_task())
    encoder = {k: v.clone() for k, v in tuner.model.bert.state_dict().items()}
    head = tuner.model.classifier.weight.clone()
    records = list(tuner.run())
    assert records[-1]["status"] == "finished"
    for key, value in tuner.model.bert.state_dict().items():
        torch.testing.assert_close(value, encoder[key], rtol=0, atol=0)
    assert not torch.equal(tuner.model.classifier.weight, head)


def test_full_fine_tuning_learns_a_pair_task_the_dev_set_tells():
    tuner = FineTuner(FinetuneConfig(**{**TINY, "steps": 60, "eval_every": 60, "warmup": 3}), task=pair_task())
    records = list(tuner.run())
    evals = [r for r in records if r["kind"] == EVAL]
    assert [e["step"] for e in evals] == [0, 60]
    assert evals[0]["acc"] <= 0.75 and evals[-1]["acc"] == 1.0  # "tired" vs "happy" needs sentence B


def test_batches_are_a_pure_function_of_seed_and_step_across_epochs():
    a = FineTuner(FinetuneConfig(**TINY), task=pair_task(20))
    b = FineTuner(FinetuneConfig(**TINY), task=pair_task(20))
    seen = [a.rows(step) for step in range(5)]  # 40 rows: two epochs of 20
    assert seen == [b.rows(step) for step in range(5)]
    assert sorted(sum(seen[:2], []) + seen[2][:4]) == list(range(20))  # each epoch shows every example once
    assert seen[0] != FineTuner(FinetuneConfig(**{**TINY, "seed": 1}), task=pair_task(20)).rows(0)


def test_word_labels_tag_the_first_piece_of_each_word():
    tokenizer = builtin_tokenizer()
    text = "anna saw zxq ."  # zxq is not a word of the small world: letter pieces
    encoding = tokenizer.encode(text)
    labels = word_labels(encoding, text, [1, 0, 2, 0])
    assert encoding.tokens[:5] == ["[CLS]", "anna", "saw", "z", "##x"]
    assert labels == [IGNORE_INDEX, 1, 0, 2, IGNORE_INDEX, IGNORE_INDEX, 0, IGNORE_INDEX]


def test_a_token_task_fine_tunes_and_saves_a_token_classifier(tmp_path):
    tuner = FineTuner(FinetuneConfig(**{**TINY, "steps": 4}), run_dir=tmp_path / "run", task=token_task())
    assert list(tuner.run())[-1]["status"] == "finished"
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-000004")
    assert isinstance(ckpt.model, BertClassifier) and ckpt.model.level == TOKEN
    assert ckpt.model.labels == ("O", "PER", "ANIMAL", "PLACE", "TIME") and ckpt.card["fine_tuned_on"] == "toy-tags"


def test_a_run_stopped_midway_resumes_to_the_same_weights_and_records(tmp_path):
    cfg = FinetuneConfig(**TINY)
    whole = FineTuner(cfg, run_dir=tmp_path / "whole", task=pair_task())
    expected = comparable(list(whole.run()))
    first = FineTuner(cfg, run_dir=tmp_path / "split", task=pair_task())
    records = []
    for record in first.run():
        records.append(record)
        if record["kind"] == TRAIN and record["step"] == 3:
            first.stop_requested = True  # saves step 3 (between the step-2 and step-4 checkpoints)
    assert records[-1]["status"] == "stopped" and records[-1]["step"] == 3
    loads = []

    def counting(path):
        loads.append(path)
        return load_checkpoint(path)

    with mock.patch.object(ft_loop, "load_checkpoint", counting), mock.patch.object(checkpoints, "load_checkpoint",
                                                                                 counting):
        second = FineTuner(cfg, run_dir=tmp_path / "split", resume=True)  # the task comes from task.json
    assert second.step == 3 and second.task == pair_task()
    assert [p.name for p in loads] == ["step-000003"]  # the checkpoint it resumes from, read once
    rest = list(second.run())
    assert rest[-1]["status"] == "finished"
    assert comparable(records) + comparable(rest) == expected
    for key, value in whole.model.state_dict().items():
        torch.testing.assert_close(second.model.state_dict()[key], value, rtol=0, atol=1e-6)


def test_a_background_run_is_a_finetune_run_that_stops_and_resumes(tmp_path):
    cfg = FinetuneConfig(**{**TINY, "steps": 400, "eval_every": 100, "checkpoint_every": 50,
                                                  "eval_examples": 16})
    info = ft_runs.start(cfg, "ft", root=tmp_path)
    assert info.kind == "finetune" and runs.read(info.path).config["task"] == "acceptability"
    wait(info.path, lambda i: i.step >= 5 and i.status == "running")
    assert runs.stop(info.path, timeout=60)
    stopped = wait(info.path)
    assert stopped.status == "stopped" and stopped.resumable, stopped.message
    assert [r.name for r in ft_runs.list_runs(tmp_path)] == ["ft"] and runs.list_runs(tmp_path, kind="pretrain") == []
    runs.resume(info.path)
    done = wait(info.path, timeout=240)
    assert done.status == "finished", done.message
    steps = [r["step"] for r in runs.read_metrics(info.path, kind=TRAIN)]
    assert steps == list(range(1, 401))  # no step lost or repeated across the stop
    assert isinstance(load_checkpoint(done.checkpoint).model, BertClassifier)
