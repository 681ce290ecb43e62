"""Training settings have both bounds, refuse NaN and infinity, and say so in one sentence; a run's
memory is estimated (and checked against a measurement) before it starts; a corpus path is a
readable UTF-8 text file of sentences under the size cap, never /proc, /dev, a FIFO or binary data."""

from __future__ import annotations

import ctypes
import gc
import json
import math
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bertviz_lab import files
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.pretrain import config, resources
from bertviz_lab.pretrain.config import FLOAT_RULES, INT_LIMITS, SHAPE_LIMITS, TrainConfig
from bertviz_lab.pretrain.corpus_setup import build_corpus
from bertviz_lab.pretrain.loop import Trainer
from tests.helpers.paths import ROOT

SENTENCE = "The small dog ran to the river bank and barked at the quiet old boat."


# --- Bounds -----------------------------------------------------------------------------------
def refused(field: str, **settings_) -> str:
    """The one-sentence message for settings that must be refused; it starts with the field's name."""
    with pytest.raises(ConfigError) as caught:
        TrainConfig(**settings_)
    message = str(caught.value)
    assert message.startswith(field + " ") and "\n" not in message and len(message) < 200, message
    return message


@pytest.mark.parametrize("name", list(INT_LIMITS))
def test_every_whole_number_setting_has_a_lower_and_an_upper_bound(name):
    low, high = INT_LIMITS[name]
    assert getattr(TrainConfig(**{name: low}), name) == low
    assert getattr(TrainConfig(**{name: high}), name) == high
    assert f"{high:,}" in refused(name, **{name: high + 1})
    assert f"{low:,}" in refused(name, **{name: low - 1})


@pytest.mark.parametrize("name, others", [("layers", {}), ("heads", {"hidden": 1024}), ("hidden", {"heads": 1})])
def test_the_model_shape_is_bounded_by_bert_large(name, others):
    low, high = SHAPE_LIMITS[name]
    assert getattr(TrainConfig(**{**others, name: high}), name) == high
    assert getattr(TrainConfig(**{"heads": 1, **others, name: low}), name) == low
    assert "BERT-Large" in refused(name, **{**others, name: high + 1})
    refused(name, **{**others, name: 0})
    assert TrainConfig(**{name: None}).model_config(100) == TrainConfig().model_config(100)  # the preset's


def test_a_classroom_machine_cannot_be_asked_for_a_million_wide_model():
    assert "1,024" in refused("hidden", hidden=10**6, heads=1)
    refused("heads", hidden=100, heads=3)  # the preset check still names the run's field


def test_threads_are_bounded_by_this_machines_cores(monkeypatch):
    monkeypatch.setattr(config.os, "cpu_count", lambda: 2)
    assert TrainConfig(threads=2).threads == 2 and TrainConfig(threads=0).threads == 0  # 0 = auto
    assert "2 (this machine's cores)" in refused("threads", threads=3)
    refused("threads", threads=-1)


def test_a_run_recorded_on_a_bigger_machine_resumes_on_a_smaller_one(monkeypatch):
    recorded = {**TrainConfig().to_dict(), "threads": 16}  # run.json written on a 16-core machine
    monkeypatch.setattr(config.os, "cpu_count", lambda: 2)
    resumed = TrainConfig.from_dict(recorded)
    assert resumed.threads == 2 and resumed == TrainConfig(threads=2)  # the rest exactly as recorded
    assert TrainConfig.from_dict({**recorded, "threads": 0}).threads == 0
    with pytest.raises(ConfigError, match="threads"):
        TrainConfig(**recorded)  # a new run is still refused


def test_dropout_reaches_the_model_and_an_old_run_resumes_with_the_dropout_it_trained_with():
    assert TrainConfig().dropout == 0.0  # the classroom preset: the text is drawn fresh for every batch
    shape = TrainConfig(dropout=0.25).model_config(100)
    assert shape.hidden_dropout_prob == shape.attention_probs_dropout_prob == 0.25
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "dropout"}  # a run.json from before
    assert TrainConfig.from_dict(old).dropout == config.LEGACY_DROPOUT == 0.1
    assert TrainConfig.from_dict({**old, "dropout": 0.0}).dropout == 0.0
    for bad in (-0.1, 1.0, 2):
        with pytest.raises(ConfigError, match=r"^dropout must be a finite number in \[0, 1\)"):
            TrainConfig(dropout=bad)


@pytest.mark.parametrize("name", list(FLOAT_RULES))
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400, "0.1", None, True])
def test_floats_refuse_nan_infinity_and_non_numbers(name, value):
    message = refused(name, **{name: value})
    assert "finite" in message
    assert ("401-digit" in message) == (type(value) is int and value > 10**300)


def test_whole_numbers_are_real_integers_and_a_huge_one_is_a_sentence_not_a_traceback():
    cfg = TrainConfig(steps=3.0, batch_size=8.0)  # number inputs give whole floats
    assert cfg.steps == 3 and type(cfg.steps) is int and type(cfg.batch_size) is int
    assert refused("steps", steps=3.5).endswith("got 3.5")
    assert refused("batch_size", batch_size=True).endswith("got True")
    assert refused("seed", seed="7").endswith("got '7'")
    assert refused("steps", steps=10**400).endswith("got a 401-digit number")
    assert refused("seed", seed=2**32).endswith("got 4294967296")
    assert TrainConfig(seed=2**32 - 1).seed == 2**32 - 1
    assert type(TrainConfig(lr=1).lr) is float


@pytest.mark.parametrize("field, value", [("preset", ["tiny"]), ("precision", {}), ("random_tokens", 3),
                                          ("device", "tpu"), ("device", None), ("nsp", "no"), ("corpus", "")])
def test_choices_and_flags_are_checked_before_they_are_used(field, value):
    refused(field, **{field: value})


@pytest.mark.parametrize("data, words", [
    (None, "JSON object"), ([1, 2], "JSON object"), ({"stepz": 5}, "unknown training setting 'stepz'"),
    ({"steps": None}, "steps"), ({"lr": "fast"}, "lr"), ({"layers": [1]}, "layers"), ({"x" * 10**4: 1}, "unknown"),
])
def test_from_dict_answers_any_json_with_a_config_error(data, words):
    with pytest.raises(ConfigError, match=words) as caught:
        TrainConfig.from_dict(data)
    assert len(str(caught.value)) < 200


# --- Memory -----------------------------------------------------------------------------------
@pytest.mark.parametrize("settings_", [dict(), dict(preset="mini", nsp=False), dict(hidden=64, heads=4, layers=3)])
def test_the_parameter_count_is_the_models(settings_):
    cfg = TrainConfig(**settings_)
    model_cfg = cfg.model_config(300)
    real = BertForPreTraining(model_cfg, nsp_head=cfg.nsp, pooler=cfg.nsp).num_parameters()
    assert model_cfg.num_parameters(mlm=True, nsp=cfg.nsp, pooler=cfg.nsp) == real
    assert resources.estimate_memory(cfg, 300) > resources.BYTES_PER_PARAMETER * real


def test_the_estimate_grows_with_the_batch_the_length_and_the_model():
    base = TrainConfig()
    estimate = lambda **c: resources.estimate_memory(TrainConfig(**c), 2000)  # noqa: E731
    assert estimate(batch_size=256) > estimate() and estimate(seq_len=128) > estimate()
    assert estimate(preset="mini") > estimate() and estimate(grad_accum=8) == estimate()  # per micro-batch
    assert resources.run_vocab_size(base) > 1000 and resources.run_vocab_size(TrainConfig(corpus="x.txt")) == 4000


def test_a_run_too_big_for_this_machine_is_refused_and_the_classroom_default_passes(monkeypatch):
    monkeypatch.setattr(files, "free_memory_bytes", lambda: 24_000_000_000)  # this machine: 24 GB
    huge = TrainConfig(preset="base", batch_size=4096, seq_len=512, device="cpu")
    with pytest.raises(ConfigError, match=r"^this run needs about [\d.]+ GB of memory; this machine has 24 GB free"):
        resources.check_resources(huge)
    resources.check_resources(TrainConfig(device="cpu"))  # "auto" would count a GPU's memory where there is one
    resources.check_resources(TrainConfig(preset="base", batch_size=32, seq_len=128, device="cpu"))
    monkeypatch.setattr(files, "free_memory_bytes", lambda: 200_000_000)  # the process alone needs more
    with pytest.raises(ConfigError, match="lower the batch size"):
        resources.check_resources(TrainConfig(device="cpu"))
    monkeypatch.setattr(files, "free_memory_bytes", lambda: None)  # unknown: not refused
    resources.check_resources(huge)


def peak_growth(work):
    """Peak resident-memory growth while `work()` runs: RSS sampled every millisecond, after glibc has
    handed back the memory earlier tests freed (so that memory cannot be reused unseen)."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    process = psutil.Process()
    before = peak = process.memory_info().rss
    done = threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = work()
    finally:
        done.set()
        watcher.join()
    return peak - before, result


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_trim"), reason="needs glibc's malloc_trim")
def test_the_estimate_is_within_a_factor_of_two_of_the_measured_memory():
    # Building a Trainer and one train step of mini on 24 sequences of 32 tokens (the built-in stories
    # always fill 32, the estimate's T): about 100 MB, well above the noise. A tiny run first pays
    # the one-time costs (torch's optimizer imports, the corpus tables), which are not the run's.
    settings_ = dict(batch_size=24, seq_len=32, device="cpu", threads=1)
    Trainer(TrainConfig(**settings_, hidden=32, heads=2, layers=1)).train_step()
    cfg = TrainConfig(**settings_, preset="mini")

    def build_and_step() -> Trainer:
        trainer = Trainer(cfg)
        trainer.train_step()
        return trainer

    growth, trainer = peak_growth(build_and_step)
    assert trainer.batch(0).input_ids.shape == (24, 32)
    estimate = resources.estimate_memory(cfg, trainer.tokenizer.vocab_size)
    assert growth > 50_000_000
    assert 0.5 < growth / estimate < 2, (growth, estimate)


# --- The corpus file --------------------------------------------------------------------------
def corpus_error(path) -> str:
    with pytest.raises(InputError) as caught:
        resources.check_corpus(TrainConfig(corpus=str(path)))
    message = str(caught.value)
    assert message.startswith("corpus ") and "\n" not in message, message
    return message


def test_a_usable_text_file_passes_and_builtin_needs_no_file(tmp_path):
    good = tmp_path / "mine.txt"
    good.write_text(" ".join([SENTENCE] * 30), encoding="utf-8")
    resources.check_corpus(TrainConfig(corpus=str(good)))
    resources.check_corpus(TrainConfig())
    path, documents = resources.corpus_documents(good)
    assert path == good and sum(map(len, documents)) == 30


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert "not a regular file" in corpus_error(fifo)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/stdin", "/dev/null", "/proc/self/status", "/sys/power/state"])
def test_system_files_are_refused(path):
    assert corpus_error(path) == f"corpus file {path} is a system file, not one of yours"


@pytest.mark.parametrize("target, words", [("/dev/zero", "not a regular file"), ("/proc/self/status", "system file")])
def test_a_link_to_a_system_file_is_refused(tmp_path, target, words):
    link = tmp_path / "innocent.txt"
    link.symlink_to(target)
    assert words in corpus_error(link)


def test_dev_stdin_is_refused_even_when_it_leads_to_a_regular_file(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text(" ".join([SENTENCE] * 30), encoding="utf-8")
    check = ("from bertviz_lab.pretrain import resources\nfrom bertviz_lab.pretrain.config import TrainConfig\n"
             "try:\n    resources.check_corpus(TrainConfig(corpus='/dev/stdin'))\nexcept Exception as e:\n"
             "    print(e)\n")
    with open(text, "rb") as stdin:
        done = subprocess.run([sys.executable, "-c", check], stdin=stdin, capture_output=True, text=True, cwd=ROOT,
                              timeout=60)
    assert done.stdout.strip() == "corpus file /dev/stdin is a system file, not one of yours", done.stderr[-1000:]


def test_a_folder_is_refused(tmp_path):
    assert "is a folder" in corpus_error(tmp_path)


@pytest.mark.parametrize("content, words", [
    (b"\x7fELF\x02\x01\x01\x00\x00" * 100, "NUL bytes"),
    (("hello world. " * 100).encode("utf-16"), "UTF-16"),
    ("café au lait. ".encode("latin-1") * 100, "not UTF-8"),
    (b"", "empty"),
    (b"   \n\n  ", "only whitespace"),
    (b"Just one sentence here.", "at least 20 sentences"),
])
def test_text_that_is_not_a_corpus_is_refused(tmp_path, content, words):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    assert words in corpus_error(path) and corpus_error(path).startswith("corpus file bad.txt: ")


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(2 * MAX_TEXT_BYTES)  # sparse: takes no disk
    assert "the limit is" in corpus_error(big)
    with pytest.raises(InputError, match="the limit is"):  # the training process reads through the same cap
        build_corpus(TrainConfig(corpus=str(big)))


@pytest.mark.parametrize("path, words", [("missing.txt", "not found"), ("x" * 5000, "characters long"),
                                         ("a\x00b", "control characters"), ("~no_such_user_x/a.txt", "home folder")])
def test_paths_that_cannot_be_opened_are_refused(tmp_path, path, words):
    where = tmp_path / path if path == "missing.txt" else path
    assert words in corpus_error(where)


# --- Any settings at all ----------------------------------------------------------------------
FIELDS = [f for f in TrainConfig.__dataclass_fields__]
NUMBERS = (st.integers(-3, 5000) | st.sampled_from([0, 1, 2**32 - 1, 2**32, 10**7, 10**7 + 1, 4096, 4097, 10**400])
           | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([3.0, 3.5, 1e300, -0.0]))
VALUES = (NUMBERS | st.booleans() | st.none() | st.text(max_size=12)
          | st.sampled_from(["tiny", "base", "builtin", "cpu", "cuda:0", "bf16", "vocabulary", "wordpieces"])
          | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def within_bounds(cfg: TrainConfig) -> None:
    for name, (low, high) in INT_LIMITS.items():
        value = getattr(cfg, name)
        assert type(value) is int and low <= value <= high, (name, value)
    assert type(cfg.threads) is int and 0 <= cfg.threads <= config.max_threads()
    for name, (low, high) in SHAPE_LIMITS.items():
        value = getattr(cfg, name)
        assert value is None or (type(value) is int and low <= value <= high), (name, value)
    for name, (ok, _) in FLOAT_RULES.items():
        value = getattr(cfg, name)
        assert type(value) is float and math.isfinite(value) and ok(value), (name, value)
    assert cfg.preset in config.PRESET_SHAPES and cfg.precision in config.PRECISIONS
    assert cfg.random_tokens in config.RANDOM_TOKENS and type(cfg.nsp) is bool
    assert isinstance(cfg.corpus, str) and cfg.corpus.strip() and config.DEVICES.fullmatch(cfg.device)
    json.dumps(cfg.to_dict())  # what run.json records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6))
@example({"steps": 10**400})
@example({"lr": float("inf")})
@example({"grad_clip": float("inf")})
@example({"preset": []})  # unhashable: a TypeError before the check was first
@example({"steps": 1e300})
@example({"hidden": 1024, "heads": 64, "layers": 24})
def test_any_settings_give_a_config_within_bounds_or_a_config_error(values):
    try:
        cfg = TrainConfig(**values)
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    within_bounds(cfg)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), VALUES, max_size=6))
@example({"threads": 10**6})  # a run.json from a bigger machine: clamped, not refused
@example({"threads": True})
@example({"": 1})
def test_any_recorded_settings_give_a_config_within_bounds_or_a_config_error(data):
    try:
        cfg = TrainConfig.from_dict(data)
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    within_bounds(cfg)
