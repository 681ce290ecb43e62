"""Training batches kept on disk per seed (pretrain/batch_cache.py, supply.py): the next run reads them, and
a file that does not match what the code makes, or is damaged or hostile, is set aside."""

import numpy as np
import pytest
import torch

from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import batch_cache
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.data import Batch
from bertviz_lab.pretrain.loop import Trainer

TIMING = ("tokens_per_s", "elapsed")


@pytest.fixture(autouse=True)
def own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(batch_cache.CACHE_ENV, str(tmp_path / "batches"))
    return tmp_path / "batches"


def small(**changes) -> TrainConfig:
    base = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=10, lr=5e-3,
                warmup=3, eval_every=5, eval_batches=1, checkpoint_every=5, device="cpu", threads=1, seed=3)
    return TrainConfig(**{**base, **changes})


def run(cfg, made=None):
    """A run's train and eval records (timings left out); `made` collects the indices it made itself."""
    trainer = Trainer(cfg)
    if made is not None:
        make = trainer.batches

        def counting(stream=0):
            inner = make(stream)
            return lambda i: made.append(i) or inner(i) if stream == 0 else inner(i)
        trainer.batches = counting
    return [{k: v for k, v in r.items() if k not in TIMING} for r in trainer.run() if r["kind"] in (TRAIN, EVAL)]


def the_file(folder):
    files = list(folder.glob("batches-*.npz"))
    assert len(files) == 1
    return files[0]


def test_the_second_run_reads_the_first_runs_batches_and_gives_the_same_records(own_folder):
    made = []
    first = run(small(), made)
    assert made == list(range(10))
    path = the_file(own_folder)
    again = []
    assert run(small(), again) == first
    assert sorted(again) == [0, 4, 9]  # only the three it checks the file with: the first, middle and last
    assert the_file(own_folder) == path  # nothing new to write


def test_a_longer_run_reads_what_is_kept_then_makes_and_keeps_the_rest(own_folder):
    run(small())
    made = []
    longer = run(small(steps=14), made)
    assert sorted(set(made)) == [0, 4, 9, 10, 11, 12, 13]  # checks of the 10 kept, then the 4 new
    assert len(np.load(the_file(own_folder))["tokens"]) == 14
    assert longer == run(small(steps=14), []) and longer[:2] == run(small(steps=10))[:2]


def test_a_file_that_another_version_of_the_code_made_is_set_aside_and_rewritten(own_folder):
    first = run(small())
    path = the_file(own_folder)
    arrays = dict(np.load(path))
    arrays["ids"][4, 0, 1] = (arrays["ids"][4, 0, 1] + 1) % 50  # batch 4 (the middle one) differs
    np.savez(path, **arrays)
    made = []
    assert run(small(), made) == first
    assert sorted(set(made)) == list(range(10))  # every batch made afresh ...
    assert np.load(path)["ids"][4, 0, 1] != arrays["ids"][4, 0, 1]  # ... and the file written anew


@pytest.mark.parametrize("damage", ["garbage", "pickle", "out_of_range", "wrong_shape", "empty", "no_rows", "segments",
                                    "nsp", "tokens", "bomb"])
def test_a_damaged_or_hostile_file_is_never_trusted(own_folder, damage, monkeypatch):
    first = run(small())
    path = the_file(own_folder)
    arrays = dict(np.load(path))
    if damage == "garbage":
        path.write_bytes(b"PK\x03\x04 not a zip at all")
    elif damage == "pickle":  # an object array needs unpickling: refused, never run
        np.savez(path, **{**arrays, "ids": np.array([{"a": 1}], dtype=object)})
    elif damage == "out_of_range":
        arrays["ids"][7, 0, 0] = 32_000  # an id past the vocabulary, in a batch the checks do not make
        np.savez(path, **arrays)
    elif damage == "wrong_shape":
        np.savez(path, **{**arrays, "lengths": arrays["lengths"][:, :3]})
    elif damage == "empty":
        np.savez(path, **{k: v[:0] for k, v in arrays.items()})
    elif damage == "no_rows":  # batches of no sequences
        np.savez(path, **{k: v[:, :0] if v.ndim > 1 else v for k, v in arrays.items()})
    elif damage in ("segments", "nsp", "tokens"):  # a value no batch has, in a batch the checks do not make
        field, value = dict(segments=("segments", 7), nsp=("nsp", -1), tokens=("tokens", 1))[damage]
        arrays[field].reshape(len(arrays[field]), -1)[7, 0] = value  # batch 7's first entry
        np.savez(path, **arrays)
    else:  # more than it could hold once unpacked
        monkeypatch.setattr(batch_cache, "MAX_BYTES", 1000)
    made = []
    assert run(small(), made) == first
    assert sorted(set(made)) == list(range(10))


def test_a_resumed_run_reads_the_file_but_does_not_write_one(own_folder, tmp_path):
    run_dir = tmp_path / "run"
    trainer = Trainer(small(steps=6), run_dir)
    list(trainer.run())
    kept = len(np.load(the_file(own_folder))["tokens"])
    resumed = Trainer(small(steps=10), run_dir, resume=True)
    list(resumed.run())
    assert len(np.load(the_file(own_folder))["tokens"]) == kept == 6  # begun at step 6: nothing from 0 to keep


def test_only_the_built_in_corpus_and_runs_that_fit_are_kept(own_folder, tmp_path):
    corpus = tmp_path / "mine.txt"
    corpus.write_text("\n\n".join(f"the dog {i} ran home . the cat sat ." for i in range(40)))
    run(small(corpus=str(corpus), vocab_size=200))
    assert not own_folder.exists() or not list(own_folder.glob("*.npz"))
    assert batch_cache.fits(600, 128, 32) and not batch_cache.fits(100_000, 256, 512)


def test_the_oldest_files_go_past_the_cap(own_folder, monkeypatch):
    monkeypatch.setattr(batch_cache, "MAX_FILES", 2)
    for seed in (1, 2, 3):
        run(small(seed=seed, steps=2))
    assert len(list(own_folder.glob("batches-*.npz"))) == 2


def test_packing_keeps_padding_and_a_missing_nsp_exactly():
    ids = torch.tensor([[2, 5, 6, 8, 3], [2, 7, 3, 0, 0]])  # padded to the longest, as collate pads
    batch = Batch(ids, torch.zeros_like(ids), (ids != 0).long(), torch.full_like(ids, -100), None, 7)
    back = batch_cache.unpack(batch_cache.pack([batch], seq_len=8), 0)
    assert torch.equal(back.input_ids, ids) and torch.equal(back.attention_mask, batch.attention_mask)
    assert back.nsp_labels is None and back.tokens == 7 and back.input_ids.dtype == torch.long


def test_the_train_command_keeps_its_batches(own_folder, tmp_path):
    """The command reads records up to the one that ends the run and asks for no more: the batches are
    written before that record."""
    from bertviz_lab.pretrain import process

    assert process.execute(tmp_path / "run", small(steps=4), resume=False, command=["train"]) == 0
    assert len(np.load(the_file(own_folder))["tokens"]) == 4


def test_the_shipped_file_holds_the_classroom_presets_batches_as_the_code_makes_them(own_folder):
    """Fails after a change to the story world, the tokenizer or the masking: then runs make their batches
    themselves (slower, not wrong). Write the file anew: python -m bertviz_lab.pretrain.ship_batches"""
    trainer = Trainer(TrainConfig(device="cpu", threads=1))
    path = batch_cache.find(trainer.batch_file_name())
    assert path is not None and path.parent == batch_cache.SHIPPED / "batches"
    make, steps = trainer.batches(), trainer.cfg.steps
    arrays = batch_cache.load(path, make, 0, steps, seq_len=trainer.cfg.seq_len, batch_size=trainer.cfg.batch_size,
                              vocab_size=trainer.tokenizer.vocab_size)
    assert arrays is not None and len(arrays["tokens"]) == steps
    for i in range(1, steps, 37):
        assert batch_cache._same(batch_cache.unpack(arrays, i), make(i)), i


def test_a_machines_first_run_of_the_preset_reads_the_shipped_batches(own_folder):
    made = []
    cfg = TrainConfig(device="cpu", threads=1, steps=8, eval_every=4, eval_batches=1)
    trainer = Trainer(cfg)
    inner = trainer.batches
    trainer.batches = lambda stream=0: (lambda i: made.append(i) or inner(stream)(i)) if stream == 0 else inner(stream)
    list(trainer.run())
    assert sorted(made) == [0, 3, 7]  # the checks only
    assert not own_folder.exists() or not list(own_folder.glob("*.npz"))  # nothing new to keep


def test_any_change_to_the_code_batches_come_from_names_another_file(monkeypatch):
    """A file outlives no change to the story world, data.py, the masking or the tokenizer (nor to torch's or
    tokenizers' version): the key holds a hash of them."""
    settings = dict(seed=0, rank=0, vocabulary=["a", "b"], batch_size=8)
    before = batch_cache.key(**settings)
    assert batch_cache.key(**settings) == before
    assert batch_cache.key(**{**settings, "seed": 1}) != before
    monkeypatch.setattr(batch_cache, "code", lambda: "another story world")
    assert batch_cache.key(**settings) != before
