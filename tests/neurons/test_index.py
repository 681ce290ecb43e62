"""The neurons' top contexts over a corpus (neurons/index.py): equal to sorting every activation of the corpus, the
same whatever the batch size, made from one batch at a time, and kept on disk under the weights' hash."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.neurons import index as ni
from bertviz_lab.neurons.read import one_sentence
from tests.helpers.family_models import TEXTS, build
from tests.helpers.lab import vocab_of_size

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

CORPUS = ["the cat sat on the mat .", "the dog went to the river bank .", "i love food", "she sat",
          "they did not cross the street because it was raining and the city was tired .", "a cat",
          "he went to the bank to deposit money .", "the animal was tired", "natural language processing",
          "the cats sat on a rug and the dog sat on the mat ."]
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


def tiny(seed: int = 0, positions: int = 24) -> tuple[BertForPreTraining, WordPieceTokenizer]:
    """A random 2-layer model in float64 (its activations ranked as float32 all the same: no near-ties rounding
    could swap) and a tokenizer of the test words."""
    tokenizer = WordPieceTokenizer.from_vocab(vocab_of_size(100))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=48, max_position_embeddings=positions, initializer_range=0.3)
    return BertForPreTraining(cfg).double().eval(), tokenizer


def brute_force(model, tokenizer, sentences, k=ni.K):
    """Every counted activation of the corpus (L, tokens, N), sorted: the top k (value, sentence, position) of
    each neuron, and each neuron's mean."""
    found = {}  # (layer, neuron) -> [(-value, sentence, position)] over every counted token
    for s, text in enumerate(sentences):
        encoding = tokenizer.encode(text, max_length=model.config.max_tokens)
        acts = one_sentence(model, torch.tensor([encoding.ids]))  # L arrays (T, N)
        for layer, a in enumerate(acts):
            for t in (t for t, special in enumerate(encoding.special_mask) if not special):
                for n in range(a.shape[1]):
                    found.setdefault((layer, n), []).append((-np.float32(a[t, n]), s, t))
    L, N = model.config.num_hidden_layers, model.config.intermediate_size
    values, where = np.full((L, N, k), -np.inf, np.float32), np.full((L, N, k, 2), -1, np.int32)
    total, count = np.zeros((L, N)), np.zeros((L, N))
    for (layer, n), entries in found.items():
        total[layer, n], count[layer, n] = -sum(float(v) for v, _, _ in entries), len(entries)
        for slot, (v, s, t) in enumerate(sorted(entries)[:k]):
            values[layer, n, slot], where[layer, n, slot] = -v, (s, t)
    return values, where, total / count


@pytest.fixture(scope="module")
def subject():
    model, tokenizer = tiny()
    return model, tokenizer, ni.build(model, tokenizer, CORPUS, batch_size=4)


def test_the_top_contexts_and_means_are_those_of_every_activation_sorted(subject):
    model, tokenizer, index = subject
    values, where, mean = brute_force(model, tokenizer, CORPUS)
    np.testing.assert_array_equal(index.where, where)
    np.testing.assert_allclose(index.values, values, rtol=1e-6, atol=0)
    np.testing.assert_allclose(index.mean, mean, rtol=1e-9, atol=1e-12)
    encodings = [tokenizer.encode(s) for s in CORPUS]
    assert index.tokens == sum(len(e) - 2 for e in encodings)
    assert index.sentences == tuple(tuple(e.tokens) for e in encodings)
    assert index.values.shape == (2, 48, ni.K) and index.values.dtype == np.float32
    assert index.where.dtype == np.int32 and index.mean.dtype == np.float64


def test_the_batch_size_changes_nothing(subject):
    model, tokenizer, index = subject
    for batch_size in (1, 3, 32):
        other = ni.build(model, tokenizer, CORPUS, batch_size=batch_size)
        np.testing.assert_array_equal(other.where, index.where)
        np.testing.assert_allclose(other.values, index.values, rtol=1e-6, atol=0)
        np.testing.assert_allclose(other.mean, index.mean, rtol=1e-12, atol=1e-15)
        assert other.digest == index.digest and other.tokens == index.tokens


def test_only_one_batch_of_activations_is_ever_made(monkeypatch, subject):
    """Every activation tensor the build makes is one batch's (B <= batch_size); what it keeps is (L, N, K)."""
    model, tokenizer, index = subject
    shapes, merged = [], []
    made, update = ni._activations, ni.update
    monkeypatch.setattr(ni, "_activations", lambda *a: [shapes.append(tuple(x.shape)) or x for x in made(*a)])
    monkeypatch.setattr(ni, "update", lambda top, places, x, keys: merged.append(
        (tuple(top.shape), tuple(x.shape))) or update(top, places, x, keys))
    again = ni.build(model, tokenizer, CORPUS, batch_size=3)
    np.testing.assert_array_equal(again.where, index.where)
    longest = max(len(tokenizer.encode(s)) for s in CORPUS)
    assert len(shapes) == 2 * 4 and all(B <= 3 and T <= longest and N == 48 for B, T, N in shapes)  # 4 batches
    assert all(top == (48, ni.K) and C <= 3 * longest for top, (C, _) in merged)
    assert sum(C for _, (C, _) in merged) == 2 * index.tokens  # every counted token once per layer, no more


def test_ties_go_to_the_earlier_sentence_whatever_the_batch_order():
    """Batches come in length order, not corpus order: a tie is still won by the smaller (sentence, position)."""
    top = torch.full((2, 3), -torch.inf)
    places = torch.full((2, 3), ni.PAD_KEY)
    key = lambda s, t: (s << ni.SHIFT) + t  # noqa: E731
    ni.update(top, places, torch.tensor([[1.0, 5.0]]), torch.tensor([key(7, 2)]))  # a later sentence first
    assert places[0].tolist() == [key(7, 2), ni.PAD_KEY, ni.PAD_KEY] and top[0, 1] == -torch.inf
    ni.update(top, places, torch.tensor([[1.0, 4.0], [2.0, 5.0], [1.0, 5.0]]),
              torch.tensor([key(2, 1), key(2, 3), key(3, 1)]))
    assert top.tolist() == [[2.0, 1.0, 1.0], [5.0, 5.0, 5.0]]
    assert places.tolist() == [[key(2, 3), key(2, 1), key(3, 1)], [key(2, 3), key(3, 1), key(7, 2)]]


def test_contexts_carry_the_sentence_to_highlight(subject):
    _, tokenizer, index = subject
    contexts = index.contexts(1, 7)
    assert len(contexts) == ni.K and [c.value for c in contexts] == sorted((c.value for c in contexts), reverse=True)
    for c, value in zip(contexts, index.values[1, 7]):
        assert c.tokens == tuple(tokenizer.encode(CORPUS[c.sentence]).tokens) and c.value == float(value)
        assert c.tokens[c.position] not in ("[CLS]", "[SEP]") and 0 < c.position < len(c.tokens) - 1
    assert len(index.contexts(0, 0, k=3)) == 3
    for layer, neuron in ((2, 0), (0, 48), (-1, 0), (True, 0)):
        with pytest.raises(InputError, match="does not exist"):
            index.contexts(layer, neuron)


def test_a_small_corpus_leaves_empty_places():
    model, tokenizer = tiny()
    index = ni.build(model, tokenizer, ["a cat"], k=5)  # two counted tokens
    assert (index.where[..., 2:, :] == -1).all() and np.isneginf(index.values[..., 2:]).all()
    assert (index.where[..., :2, 0] == 0).all() and len(index.contexts(0, 3)) == 2


def test_the_limits_are_one_sentence(monkeypatch):
    model, tokenizer = tiny(positions=12)
    for corpus, match in (([], "no sentences"), ("the cat", "a list of sentences"),
                          (["a"] * (ni.MAX_SENTENCES + 1), "20,000"), (["the cat", "  "], "sentence 2 "),
                          (["the cat", 3], "sentence 2 of the corpus is not text")):
        with pytest.raises(InputError, match=match):
            ni.build(model, tokenizer, corpus)
    with pytest.raises(InputError, match="batch_size"):
        ni.build(model, tokenizer, ["the cat"], batch_size=0)
    long = " ".join(["cat"] * 30)
    index = ni.build(model, tokenizer, ["the cat", long])  # cut to the model's 12 positions
    assert index.truncated == 1 and len(index.sentences[1]) == 12 and index.tokens == 2 + 10
    with torch.no_grad():
        model.bert.encoder.layer[0].intermediate.dense.weight[0, 0] = torch.nan
    with pytest.raises(InputError, match="not all finite"):
        ni.build(model, tokenizer, ["the cat"])


def test_progress_is_said_after_each_batch():
    model, tokenizer = tiny()
    said = []
    ni.build(model, tokenizer, CORPUS, batch_size=4, progress=lambda f, m: said.append((f, m)))
    assert said == [(0.4, "Reading sentence 4 of 10"), (0.8, "Reading sentence 8 of 10"),
                    (1.0, "Reading sentence 10 of 10")]


def test_the_digest_follows_the_weights():
    model, _ = tiny()
    digest = ni.weights_digest(model)
    assert ni.weights_digest(model) == digest and len(digest) == 64
    assert ni.weights_digest(tiny()[0]) == digest  # another object, the same weights
    assert ni.weights_digest(tiny(seed=1)[0]) != digest
    with torch.no_grad():
        model.bert.encoder.layer[1].output.dense.bias[3] += 1e-9  # in place: the memo sees its version move
    changed = ni.weights_digest(model)
    assert changed != digest
    assert ni.weights_digest(model.float()) != changed  # new tensors, another dtype


def same(a: ni.NeuronIndex, b: ni.NeuronIndex) -> None:
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.where, b.where)
    np.testing.assert_array_equal(a.mean, b.mean)
    assert (a.sentences, a.tokens, a.digest, a.weights, a.truncated) == (
        b.sentences, b.tokens, b.digest, b.weights, b.truncated)


def test_a_second_load_reads_the_file(monkeypatch, tmp_path):
    model, tokenizer = tiny()
    first = ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path)
    files = list(tmp_path.glob("neurons-*.npz"))
    assert [f.name for f in files] == [first.digest + ".npz"] and first.digest.endswith(f"-v{ni.FORMAT}-k12")
    monkeypatch.setattr(ni, "build", lambda *a, **k: pytest.fail("built again"))
    same(ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path), first)
    monkeypatch.setenv("BERTVIZ_NEURON_CACHE", str(tmp_path))  # the default folder is the setting's
    same(ni.load_or_build(model, tokenizer, CORPUS), first)


def test_changed_weights_or_sentences_are_built_anew(tmp_path):
    model, tokenizer = tiny()
    first = ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path)
    with torch.no_grad():
        model.bert.encoder.layer[0].intermediate.dense.weight.mul_(2)
    changed = ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path)
    assert changed.weights != first.weights and not np.array_equal(changed.values, first.values)
    fewer = ni.load_or_build(model, tokenizer, CORPUS[:-1], folder=tmp_path)
    assert len(fewer.sentences) == len(CORPUS) - 1
    assert len(list(tmp_path.glob("neurons-*.npz"))) == 3


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other shapes", "other numbers", "pickle"])
def test_a_damaged_file_is_built_anew(tmp_path, damage):
    model, tokenizer = tiny()
    first = ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path)
    path = tmp_path / (first.digest + ".npz")
    whole = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(whole[: len(whole) // 2])
    else:
        with np.load(path, allow_pickle=False) as f:
            arrays = dict(f)
        if damage == "other shapes":
            arrays["values"] = arrays["values"][:, :10]
        elif damage == "other numbers":  # sound shapes and ranges, but not what the model computes
            arrays["values"] = arrays["values"] * np.float32(2)
        else:
            arrays["words"] = np.array([object()] * len(arrays["words"]), dtype=object)
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    assert ni.load(path, model, tokenizer, CORPUS) is None
    same(ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path), first)
    assert ni.load(path, model, tokenizer, CORPUS) is not None  # written anew


def test_a_folder_that_cannot_be_written_still_gives_the_index(tmp_path):
    model, tokenizer = tiny()
    (tmp_path / "file.txt").write_text("not a folder")
    index = ni.load_or_build(model, tokenizer, CORPUS, folder=tmp_path / "file.txt" / "below")
    assert index.values.shape == (2, 48, ni.K) and not (tmp_path / "file.txt").is_dir()
    if not ROOT_USER:  # root writes into a read-only folder
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        ni.load_or_build(model, tokenizer, CORPUS, folder=locked)
        assert not list(locked.iterdir())


def test_the_oldest_files_go(monkeypatch, tmp_path):
    monkeypatch.setattr(ni, "MAX_FILES", 2)
    model, tokenizer = tiny()
    for n in (3, 4, 5):
        ni.load_or_build(model, tokenizer, CORPUS[:n], folder=tmp_path)
    names = {p.name for p in tmp_path.glob("neurons-*.npz")}
    assert len(names) == 2 and ni.build(model, tokenizer, CORPUS[:3]).digest + ".npz" not in names


def test_albert_ranks_each_depth_of_its_one_layer(tmp_path):
    """ALBERT's shared layer serves three depths: each depth has its own contexts, each equal to sorting that
    depth's activations."""
    torch.manual_seed(0)
    build("albert", tmp_path)
    ckpt = load_checkpoint(tmp_path)
    model = ckpt.model.double()
    assert model.bert.encoder.layer[1] is model.bert.encoder.layer[2]
    index = ni.build(model, ckpt.tokenizer, TEXTS[:6], batch_size=2)
    values, where, mean = brute_force(model, ckpt.tokenizer, TEXTS[:6])
    np.testing.assert_array_equal(index.where, where)
    np.testing.assert_allclose(index.mean, mean, rtol=1e-9, atol=1e-12)
    assert not np.array_equal(index.where[1], index.where[2]) and not np.allclose(index.mean[1], index.mean[2])
