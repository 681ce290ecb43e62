"""Relations by head (Clark et al. 2019) against a reference computed here from `transformers` alone: its own
tokenizer's word ids and its eager attentions (output_attentions=True), word attention, argmaxes and counts by
plain loops, for random BERT and RoBERTa checkpoints; the offset baseline by loops too. Then word attention on a
hand-made map, each word's tokens for WordPiece, byte-level BPE and SentencePiece, and the sentences the model
cannot read."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.encode import read_corpus
from bertviz_lab.syntax.relations import ALL, relations_by_head
from bertviz_lab.syntax.words import word_attention, word_groups, word_vectors
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

UPOS = {"the": "DET", "a": "DET", ".": "PUNCT", "!": "PUNCT", "on": "ADP", "to": "ADP", "by": "ADP", "i": "PRON",
        "he": "PRON", "she": "PRON", "it": "PRON", "they": "PRON", "was": "AUX", "did": "AUX", "not": "PART",
        "and": "CCONJ", "because": "SCONJ", "delicious": "ADJ", "tired": "ADJ", "natural": "ADJ"}
VERBS = {"sat", "went", "deposit", "love", "played", "cross", "rain", "rains", "playing"}
# (words, heads (1-based, 0 = root), relations): projective, hand-parsed; words from family_models' vocabularies,
# some split into pieces (play ##ed, dog ##s, un ##believ ##able; most words in RoBERTa's small BPE).
PARSES = [
    ("the cat sat on the mat .", (2, 3, 0, 6, 6, 3, 3), "det nsubj root case det obl punct"),
    ("the dogs played by the river bank .", (2, 3, 0, 7, 7, 7, 3, 3), "det nsubj root case det compound obl punct"),
    ("i went to the bank to deposit money .", (2, 0, 5, 5, 2, 7, 2, 7, 2),
     "nsubj root case det obl mark advcl obj punct"),
    ("she was tired because it did not rain .", (3, 3, 0, 8, 8, 8, 8, 3, 3),
     "nsubj cop root mark nsubj aux advmod advcl punct"),
    ("the animal did not cross the street .", (2, 5, 5, 5, 0, 7, 5, 5), "det nsubj aux advmod root det obj punct"),
    ("they love delicious food !", (2, 0, 4, 2, 2), "nsubj root amod obj punct"),
    ("he sat on the rug and played .", (2, 0, 5, 5, 2, 7, 2, 2), "nsubj root case det obl cc conj punct"),
    ("the cat the dog love was tired .", (2, 7, 4, 5, 2, 7, 0, 7), "det nsubj det nsubj acl:relcl cop root punct"),
    ("natural language processing was unbelievable .", (3, 3, 5, 5, 0, 5),
     "amod compound nsubj cop root punct"),
    ("a dog sat by the river playing .", (2, 3, 0, 6, 6, 3, 3, 3), "det nsubj root case det obl:tmod xcomp punct"),
    ("it rains .", (2, 0, 2), "nsubj root punct"),
    ("it did not rain .", (4, 4, 4, 0, 4), "expl aux advmod root punct"),  # expl: best offset +3, the last one
]


def tree(text: str, heads: tuple[int, ...], relations: str) -> Tree:
    words = tuple(text.split())
    upos = tuple(UPOS.get(w, "VERB" if w in VERBS else "NOUN") for w in words)
    return Tree(words, tuple(h - 1 for h in heads), tuple(relations.split()), upos)


TREES = [tree(*p) for p in PARSES]


@pytest.fixture(scope="module", params=["bert", "roberta"])
def member(request, tmp_path_factory):
    torch.manual_seed(0)  # build() seeds only the biases' noise: the weights' init is ours to seed
    folder = tmp_path_factory.mktemp(request.param)
    hf, _ = build(request.param, folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)  # the fast one: its word ids align the pieces
    return hf, tok, load_checkpoint(folder)


def reference_attention(hf, tok, words: tuple[str, ...]) -> list[list[list[list[float]]]]:
    """[layer][head][i][j] word attention from transformers' own tokenizer and eager attentions, by loops:
    the mean over word i's pieces of the sum over word j's pieces."""
    enc = tok(" ".join(words), return_tensors="pt")
    with torch.no_grad():
        attentions = hf(input_ids=enc["input_ids"], output_attentions=True).attentions  # L x (1, H, T, T)
    pieces = [[] for _ in words]
    for position, word in enumerate(enc.word_ids()):
        if word is not None:
            pieces[word].append(position)
    out = []
    for layer in attentions:
        a = layer[0].double().tolist()
        out.append([[[sum(sum(a[h][p][q] for q in pieces[j]) for p in pieces[i]) / len(pieces[i])
                      for j in range(len(words))] for i in range(len(words))] for h in range(len(a))])
    return out


def argmax_other(values: list[float], skip: int) -> int:
    best = None
    for j, v in enumerate(values):
        if j != skip and (best is None or v > values[best]):
            best = j
    return best


def reference_scores(hf, tok, trees: list[Tree]) -> dict[tuple[str, int, int, int], float]:
    """(relation, direction, layer, head) -> accuracy, by loops over sentences, words, layers and heads."""
    right, seen = {}, {}
    for t in trees:
        attn = reference_attention(hf, tok, t.words)
        for layer, heads in enumerate(attn):
            for h, a in enumerate(heads):
                for i, gold in enumerate(t.heads):
                    if gold < 0:
                        continue
                    W = len(t.words)
                    guesses = (argmax_other(a[i], i), argmax_other([a[j][i] for j in range(W)], i))
                    for d, guess in enumerate(guesses):
                        for rel in (t.base_relation(i), ALL):
                            key = (rel, d, layer, h)
                            seen[key] = seen.get(key, 0) + 1
                            right[key] = right.get(key, 0) + (guess == gold)
    return {key: right[key] / seen[key] for key in seen}


def reference_baseline(trees: list[Tree]) -> dict[str, tuple[int, float]]:
    out = {}
    for rel in {t.base_relation(i) for t in trees for i in range(len(t)) if t.heads[i] >= 0} | {ALL}:
        best = None
        longest = max(len(t) for t in trees)
        for offset in (o for o in range(1 - longest, longest) if o):  # every offset, leftmost first
            hits = total = 0
            for t in trees:
                for i, gold in enumerate(t.heads):
                    if gold >= 0 and rel in (ALL, t.base_relation(i)):
                        total += 1
                        hits += 0 <= i + offset < len(t) and i + offset == gold
            if best is None or hits / total > best[1]:
                best = (offset, hits / total)
        out[rel] = best
    return out


def test_relation_accuracy_matches_transformers(member):
    hf, tok, ckpt = member
    found = relations_by_head(read_corpus(ckpt.model, ckpt.tokenizer, TREES, batch_size=4), TREES)
    expected = reference_scores(hf, tok, TREES)
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    assert found.accuracy.shape == (len(found.relations), 2, L, H)
    assert {key[0] for key in expected} == set(found.relations)
    for (rel, d, layer, h), accuracy in expected.items():
        assert found.accuracy[found.relations.index(rel), d, layer, h] == pytest.approx(accuracy, abs=1e-6), \
            (rel, d, layer, h)
    baseline = reference_baseline(TREES)
    assert {r: o for r, (o, _) in found.baseline.items()} == {r: o for r, (o, _) in baseline.items()}
    assert {r: a for r, (_, a) in found.baseline.items()} == pytest.approx({r: a for r, (_, a) in baseline.items()},
                                                                          abs=1e-6)
    assert found.relations[0] == ALL and list(found.counts[1:]) == sorted(found.counts[1:], reverse=True)
    assert found.counts[0] == sum(len(t) - 1 for t in TREES) and "acl" in found.relations  # acl:relcl -> acl
    assert found.baseline["expl"] == (3, 1.0)
    assert len({float(a) for a in found.accuracy.ravel()}) > 3  # the heads differ: the check could fail


def test_best_head_and_its_examples(member):
    _, _, ckpt = member
    found = relations_by_head(read_corpus(ckpt.model, ckpt.tokenizer, TREES), TREES, examples=3)
    for rel in found.relations:
        for d in (0, 1):
            (layer, head), accuracy = found.best(rel, d)
            assert accuracy == found.accuracy[found.relations.index(rel), d].max()
            hits, misses = found.hits[rel, d], found.misses[rel, d]
            right = round(accuracy * found.counts[found.relations.index(rel)])
            assert (len(hits), len(misses)) == (min(3, right), min(3, found.counts[found.relations.index(rel)] - right))
            for example in hits + misses:
                t = TREES[example.sentence]
                assert t.heads[example.dependent] == example.head
                assert (example.predicted == example.head) == (example in hits)
                assert rel in (ALL, t.base_relation(example.dependent))
    assert found.best("det", "dependent → head") == found.best("det", 0)
    with pytest.raises(InputError, match="relation"):
        found.best("nmod", 0)


def test_word_attention_averages_rows_and_sums_columns():
    rng = np.random.default_rng(0)
    weights = rng.random((1, 1, 5, 5)).astype(np.float32)  # [CLS] a b1 b2 [SEP]
    w = weights[0, 0]
    out = word_attention(weights, [(1,), (2, 3)])[0, 0]
    assert out.shape == (2, 2) and out.dtype == np.float32
    assert out[0, 0] == pytest.approx(w[1, 1])
    assert out[0, 1] == pytest.approx(w[1, 2] + w[1, 3])  # to a split word: the sum over its pieces
    assert out[1, 0] == pytest.approx((w[2, 1] + w[3, 1]) / 2)  # from it: the mean over its pieces
    assert out[1, 1] == pytest.approx((w[2, 2] + w[2, 3] + w[3, 2] + w[3, 3]) / 2)
    hidden = rng.random((3, 5, 4)).astype(np.float32)
    assert word_vectors(hidden, [(1,), (2, 3)])[:, 1] == pytest.approx((hidden[:, 2] + hidden[:, 3]) / 2)


@pytest.mark.parametrize("name", ["bert", "roberta", "xlm-roberta", "albert"])
def test_word_groups_for_every_kind_of_tokenizer(name, tmp_path):
    build(name, tmp_path)
    tokenizer = load_checkpoint(tmp_path).tokenizer
    words = ("The", "cats", "played", "on", "the", "rug", ",", "Über", "unbelievable", "?")
    encoding = tokenizer.encode(" ".join(words))
    groups = word_groups(tokenizer, encoding, words)
    firsts = [i for i, s in enumerate(encoding.sequence_ids) if s == 0]
    assert sorted(p for g in groups for p in g) == firsts  # every token of the text in exactly one word
    assert all(list(g) == list(range(g[0], g[-1] + 1)) for g in groups)  # a word's pieces side by side
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    assert any(len(g) > 1 for g in groups)
    for word, group in zip(words, groups):
        spelled = tokenizer.decode([encoding.ids[p] for p in group]).strip().replace("##", "")
        if tokenizer.unk_token not in spelled:
            assert spelled in (word, word.lower(), word.lower().replace("ü", "u")), (word, spelled)
    if name == "bert":
        assert groups[2] == (3, 4)  # play ##ed
    if name == "xlm-roberta":  # "on" is a lone ▁ then "on": the space marker is the word's
        assert [encoding.tokens[p] for p in groups[3]] == ["▁", "on"]


def test_sentences_the_model_cannot_read(member):
    _, _, ckpt = member
    long = Tree(("the",) * 45 + (".",), (45,) * 45 + (-1,), ("det",) * 45 + ("root",), ("DET",) * 45 + ("PUNCT",))
    with pytest.raises(InputError, match=r"sentence 2: the sentence is 4\d tokens long; this model reads at most 40"):
        read_corpus(ckpt.model, ckpt.tokenizer, [TREES[0], long])
    with pytest.raises(InputError, match="sentence 1: .*has no words"):
        read_corpus(ckpt.model, ckpt.tokenizer, [[]])
    encoding = ckpt.tokenizer.encode("the cat sat", max_length=3)
    with pytest.raises(InputError, match="tokens long"):
        word_groups(ckpt.tokenizer, encoding, ("the", "cat", "sat"))
