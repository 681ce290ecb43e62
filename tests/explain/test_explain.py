"""explain/ on its own (no transformers): Spearman and ranks against pandas, rollout and flow against their
definitions, the deletion curves against a naive loop, the sentences written from the numbers, the target word's
errors, and an explanation that leaves the shared model as it found it (no hooks, no gradients, same flags) and
gives the same numbers on the fast and the textbook path."""

from __future__ import annotations

import copy

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bertviz_lab.errors import InputError
from bertviz_lab.explain import checks, methods
from bertviz_lab.explain.report import METHODS
from bertviz_lab.explain.score import frozen
from bertviz_lab.views import inputs
from bertviz_lab.views.why.ask import Ask
from bertviz_lab.views.why.explanation import TITLES, deletion_for, target_id, why

TEXT = "the cat sat on the [MASK] , and the dog sat on the rug ."


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread


@pytest.fixture
def explained(tiny_model, tiny_tokenizer):
    return why(tiny_model, tiny_tokenizer, inputs.encode(tiny_tokenizer, tiny_model, TEXT))


# Spearman and ranks

small_ints = st.lists(st.integers(0, 4), min_size=3, max_size=12)  # few values: many ties


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_spearman_is_pandas_spearman_ties_and_constants_included(data):
    a = data.draw(small_ints)
    b = data.draw(st.lists(st.integers(0, 4), min_size=len(a), max_size=len(a)))
    theirs = pd.DataFrame({"a": a, "b": b}).corr(method="spearman").loc["a", "b"]  # Series.corr's needs scipy
    ours = checks.spearman(np.array(a), np.array(b))
    if np.isnan(theirs):
        assert ours is None
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)
    np.testing.assert_array_equal(checks.ranks(np.array(a, float)), pd.Series(a).rank(method="average"))


def test_spearman_of_a_constant_or_of_two_tokens_is_none():
    assert checks.spearman(np.ones(5), np.arange(5)) is None
    assert checks.spearman(np.arange(5), np.full(5, 0.3)) is None
    assert checks.spearman(np.array([1.0, 2.0]), np.array([2.0, 1.0])) is None
    assert checks.spearman(np.array([1.0, 2.0, 3.0]), np.array([30.0, 20.0, 10.0])) == pytest.approx(-1)
    np.testing.assert_array_equal(checks.ranks(np.array([3.0, 1.0, 2.0, 2.0])), [4, 1, 2.5, 2.5])


def test_agreement_is_over_the_movable_tokens_only():
    values = {"a": np.array([9.0, 1, 2, 3, -9]), "b": np.array([-9.0, 1, 2, 3, 9]), "c": np.array([0.0, 3, 2, 1, 0])}
    rho = checks.agreement(values, np.array([1, 2, 3]))
    assert rho["a"]["b"] == pytest.approx(1) and rho["a"]["c"] == pytest.approx(-1) and rho["b"]["a"] == rho["a"]["b"]
    assert checks.agreement(values, np.arange(5))["a"]["b"] < 1  # the ends disagree


# Rollout and flow

def attentions(seed: int, L: int, H: int, T: int) -> np.ndarray:
    """(L, H, T, T) random rows that sum to 1."""
    scores = np.random.default_rng(seed).normal(size=(L, H, T, T)) * 2
    weights = np.exp(scores)
    return weights / weights.sum(-1, keepdims=True)


def test_rollout_rows_sum_to_one_and_identity_attention_rolls_out_to_the_identity():
    A = attentions(0, 3, 4, 7)
    for position in range(7):
        assert methods.rollout(A, position).sum() == pytest.approx(1)
        assert (methods.rollout(A, position) > 0).all()
    np.testing.assert_allclose(methods.residual_mixing(A).sum(-1), 1)
    identity = np.broadcast_to(np.eye(7), (3, 4, 7, 7))
    for position in range(7):
        np.testing.assert_array_equal(methods.rollout(identity, position), np.eye(7)[position])
    uniform = np.full((1, 2, 4, 4), 0.25)  # one layer: half the row stays, half spreads evenly
    np.testing.assert_allclose(methods.rollout(uniform, 1), [0.125, 0.625, 0.125, 0.125])


def full_graph_flow(A: np.ndarray, position: int) -> np.ndarray:
    """Every edge of every layer (no pruning, a fresh graph per source), networkx's default algorithm."""
    mixed = methods.residual_mixing(A)
    L, T = mixed.shape[0], mixed.shape[-1]
    graph = nx.DiGraph()
    for layer in range(1, L + 1):
        graph.add_weighted_edges_from((((layer - 1, j), (layer, i), float(mixed[layer - 1, i, j]))
                                       for i in range(T) for j in range(T)), weight="capacity")
    return np.array([nx.maximum_flow_value(graph.copy(), (0, j), (L, position)) for j in range(T)])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**16), L=st.integers(1, 3), H=st.integers(1, 3), T=st.integers(2, 6), data=st.data())
def test_flow_is_at_most_one_and_equals_networkx_on_the_full_graph(seed, L, H, T, data):
    position = data.draw(st.integers(0, T - 1))
    A = attentions(seed, L, H, T)
    ours = methods.flow(A, position)
    assert ours.shape == (T,) and (ours > 0).all() and (ours <= 1 + 1e-9).all()
    np.testing.assert_allclose(ours, full_graph_flow(A, position), rtol=0, atol=1e-9)


def test_flow_with_identity_attention_reaches_only_from_the_token_itself():
    identity = np.broadcast_to(np.eye(5), (2, 2, 5, 5))
    np.testing.assert_allclose(methods.flow(identity, 3), np.eye(5)[3])


# Deletion curves

def naive_p(case, removed) -> float:
    """p(target) with `removed` masked, or with a contrast sigmoid(logit(target) - logit(contrast)), from the
    logits of the model's own forward (not through Score)."""
    ids = case.ids.clone()
    ids[0, list(removed)] = case.mask_id
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[0, case.score.position] = True
    with torch.no_grad():
        logits = case.model(ids, case.segments, masked_positions=where).mlm_logits[0].double()
    if case.score.contrast is not None:
        return float(torch.sigmoid(logits[case.score.target] - logits[case.score.contrast]))
    return float(logits[: case.score.vocab_size or len(logits)].softmax(-1)[case.score.target])


def naive_curve(case, removal) -> np.ndarray:
    """The curve after masking the first k of `removal`, one forward per k; `removal` in tied groups: inside a
    group, the mean over every subset of the size reached (the mean over the group's orders)."""
    import itertools

    curve, before = [naive_p(case, [])], []
    for group in removal:
        group = (int(group),) if np.ndim(group) == 0 else group
        for size in range(1, len(group) + 1):
            curve.append(np.mean([naive_p(case, [*before, *c]) for c in itertools.combinations(group, size)]))
        before += list(group)
    return np.array(curve)


def test_deletion_curves_start_at_p_and_equal_a_naive_loop(explained):
    result = deletion_for(explained)
    movable = explained.explanation.movable
    assert result.positions == tuple(movable) and len(movable) >= 10
    assert set(result.curves) == set(METHODS) and result.random_curves.shape == (checks.RANDOM_ORDERS, len(movable) + 1)
    for name, curve in result.curves.items():
        values = explained.explanation.values[name]
        order = [p for group in result.orders[name] for p in group]
        assert sorted(order) == list(movable) and (np.diff(values[order]) <= 1e-9).all()  # most important first
        assert curve[0] == pytest.approx(explained.explanation.prob, abs=1e-6)
        np.testing.assert_allclose(curve, naive_curve(explained.case, result.orders[name]), rtol=0, atol=1e-6,
                                   err_msg=name)
        assert result.aopc[name] == pytest.approx(np.mean(curve[0] - curve))
    rng = np.random.default_rng(checks.RANDOM_SEED)
    for curve in result.random_curves:
        np.testing.assert_allclose(curve, naive_curve(explained.case, tuple(rng.permutation(movable))), atol=1e-6)
    assert len({tuple(np.round(c, 9)) for c in result.random_curves}) > 1


def test_the_random_orders_are_seeded(explained):
    once, again = deletion_for(explained), deletion_for(explained)
    np.testing.assert_array_equal(once.random_curves, again.random_curves)
    other = deletion_for(explained, seed=1)
    assert not np.array_equal(other.random_curves, once.random_curves)
    np.testing.assert_array_equal(deletion_for(explained, random_orders=3).random_curves, once.random_curves[:3])


def made_deletion(curves: dict[str, list[float]], random: list[list[float]]) -> checks.Deletion:
    """Curves of 4 points, each held at its last value for MIN_TESTED - 3 more removals (enough tokens for a test)."""
    pad = checks.MIN_TESTED - 3
    curves = {m: [*c, *[c[-1]] * pad] for m, c in curves.items()}
    random = [[*r, *[r[-1]] * pad] for r in random]
    n = len(random[0]) - 1
    return checks.Deletion(tuple(range(1, n + 1)), {m: tuple((i,) for i in range(1, n + 1)) for m in curves},
                           {m: np.array(c) for m, c in curves.items()}, np.array(random))


def test_beats_random_means_above_every_random_order():
    random = [[0.8, 0.7, 0.6, 0.5], [0.8, 0.6, 0.5, 0.4], [0.8, 0.8, 0.7, 0.3]]
    result = made_deletion({"occlusion": [0.8, 0.2, 0.1, 0.0], "attention": [0.8, 0.8, 0.8, 0.4],
                            "rollout": [0.8, 0.6, 0.5, 0.4]}, random)  # rollout ties the best random order
    assert result.aopc["occlusion"] == pytest.approx((0 + 0.6 + 0.7 + 0.8 + 0.8 + 0.8) / 6)
    assert result.beats_random("occlusion") and not result.beats_random("attention")
    assert not result.beats_random("rollout") and result.verdict("rollout") == "ties"
    assert result.verdict("occlusion") == "beats" and result.verdict("attention") == "below"


# The sentences say what the numbers say

def parts(sentence: str) -> tuple[str, str]:
    """(what the sentence lists as agreeing beyond chance, what as disagreeing)."""
    agree = sentence.split("Ranking the words alike beyond chance")[1].split("Ranking them")[0] \
        if "Ranking the words alike beyond chance" in sentence else ""
    disagree = sentence.split("Ranking them differently")[1].split("No ρ")[0] \
        if "Ranking them differently" in sentence else ""
    return agree, disagree


@pytest.mark.parametrize("agrees, differs", [("gradient", "attention"), ("attention", "gradient")])
def test_the_agreement_sentence_names_the_methods_the_numbers_name(agrees, differs):
    rho = {"occlusion": {"occlusion": 1.0, agrees: 0.9, differs: -0.3, "rollout": 0.35, "flow": None}}
    p = {agrees: 0.001, differs: 0.4, "rollout": 0.3, "flow": None}
    sentence = checks.agreement_sentence(rho, TITLES, p, 12)
    agree, disagree = parts(sentence)
    assert f"{TITLES[agrees]} (ρ = 0.90, p = 1.0e-03)" in agree and TITLES[differs] not in agree
    assert f"{TITLES[differs]} (ρ = -0.30, p = 0.4)" in disagree and TITLES[agrees] not in disagree
    assert "over 12 removable tokens" in sentence and "noisy" not in sentence
    assert "rollout" not in agree + disagree  # 0.35: neither
    assert f"{TITLES[agrees]} agrees most (ρ = 0.90, p = 1.0e-03)" in sentence and f"{TITLES[differs]} least" in sentence
    assert "No ρ for attention flow" in sentence
    assert "occlusion (ρ" not in sentence  # not compared with itself


def test_the_agreement_sentence_without_numbers_says_so():
    sentence = checks.agreement_sentence({"occlusion": {"occlusion": None, "gradient": None}}, TITLES,
                                         {"gradient": None}, 2)
    assert sentence.startswith("Too few words")


@pytest.mark.parametrize("fast, slow", [("occlusion", "attention"), ("attention", "occlusion")])
def test_the_deletion_sentence_names_the_methods_that_beat_random(fast, slow):
    random = [[0.8, 0.7, 0.6, 0.5], [0.8, 0.6, 0.5, 0.4]]
    result = made_deletion({fast: [0.8, 0.2, 0.1, 0.0], slow: [0.8, 0.8, 0.8, 0.4]}, random)
    sentence = checks.deletion_sentence(result, TITLES)
    winners, losers = sentence.split("Not:")
    assert winners.startswith("Faster than all 2 random orders")
    assert f"{TITLES[fast]} ({result.aopc[fast]:.3f})" in winners and TITLES[slow] not in winners.split("):")[-1]
    assert f"{TITLES[slow]} ({result.aopc[slow]:.3f})" in losers
    nobody = checks.deletion_sentence(made_deletion({slow: [0.8, 0.8, 0.8, 0.4]}, random), TITLES)
    assert nobody.startswith("On this sentence no method") and f"Best: {TITLES[slow]}, AOPC 0.200" in nobody  # (0.4 x 3) / 6


# The target word

@pytest.mark.parametrize("word, message", [
    ("", "the target word is empty"), ("   ", "the target word is empty"),
    ("unbelievable", "'unbelievable' is not a single token .* it reads as 3 pieces \\(un ##believ ##able\\)"),
    ("zebra", "'zebra' is not a single token of this model's vocabulary of 100\\. The target must be one token"),
    ("[MASK]", "'\\[MASK\\]' is not a single token"),
])
def test_a_target_that_is_not_one_word_is_one_clear_sentence(tiny_tokenizer, word, message):
    with pytest.raises(InputError, match=message):
        target_id(tiny_tokenizer, word)


def test_a_typed_word_is_found_as_the_vocabulary_writes_it(tiny_tokenizer):
    cat = tiny_tokenizer.token_to_id("cat")
    assert target_id(tiny_tokenizer, "cat") == target_id(tiny_tokenizer, " Cat ") == cat
    assert target_id(tiny_tokenizer, "##ing") == tiny_tokenizer.token_to_id("##ing")
    with pytest.raises(InputError, match="the contrast word is empty"):
        target_id(tiny_tokenizer, "", "contrast")


def test_a_contrast_that_is_the_target_is_an_input_error(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TEXT)
    with pytest.raises(InputError, match="the contrast word is the target itself"):
        why(tiny_model, tiny_tokenizer, encoding, Ask(target="cat", contrast="CAT"))
    top = why(tiny_model, tiny_tokenizer, encoding)
    with pytest.raises(InputError, match="the contrast word is the target itself"):
        why(tiny_model, tiny_tokenizer, encoding, Ask(contrast=top.target))


# The shared model is left as it was

def test_frozen_shares_the_weights_and_leaves_the_model_alone(tiny_model):
    tiny_model.train()
    twin = frozen(tiny_model)
    assert tiny_model.training and all(m.training for m in tiny_model.modules())
    assert all(p.requires_grad for p in tiny_model.parameters())
    assert not twin.training and not any(p.requires_grad for p in twin.parameters())
    ours, theirs = dict(tiny_model.named_parameters()), dict(twin.named_parameters())
    assert ours.keys() == theirs.keys()
    assert all(ours[k].data_ptr() == theirs[k].data_ptr() for k in ours)
    assert frozen(tiny_model) is twin
    tiny_model.fast = False
    assert frozen(tiny_model).fast is False


def no_hooks(model) -> bool:
    return not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks for m in model.modules())


def test_an_explanation_leaves_no_hooks_and_no_gradients(tiny_model, tiny_tokenizer):
    """Not even while it runs: other pages share the model, so Captum hooks a module made for the one call."""
    tiny_model.eval()
    flags = [p.requires_grad for p in tiny_model.parameters()]
    seen = []

    def progress(fraction, what):  # called from inside Captum's forwards, while its hooks are on
        seen.append((what, no_hooks(tiny_model) and no_hooks(frozen(tiny_model))))

    result = why(tiny_model, tiny_tokenizer, inputs.encode(tiny_tokenizer, tiny_model, TEXT), progress=progress)
    deletion_for(result, progress=progress)
    assert {"integrated gradients", "occlusion", "deletion curves"} <= {what for what, _ in seen}
    assert all(clean for _, clean in seen)
    assert not tiny_model.bert.embeddings.word_embeddings._forward_hooks
    assert no_hooks(tiny_model) and no_hooks(frozen(tiny_model))
    assert all(p.grad is None for p in tiny_model.parameters())
    assert [p.requires_grad for p in tiny_model.parameters()] == flags


def assert_same(a, b, rel: float):
    """Each method's values within `rel` of its largest value, or of the score F itself where that is larger:
    occlusion's values are differences of two F's, so float32 leaves them an error of F's last bits (3e-8 on an F of
    0.2, against occlusion values of 2e-4 on the tiny model), whichever summation order the thread count picks."""
    for name in METHODS:
        x, y = a.explanation.values[name], b.explanation.values[name]
        scale = max(np.abs(y).max(), abs(b.explanation.value), 1e-12)
        assert np.abs(x - y).max() <= rel * scale, name
    assert a.explanation.value == pytest.approx(b.explanation.value, abs=rel)


def test_the_fast_path_explains_as_the_textbook_path(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TEXT)
    fast = why(tiny_model, tiny_tokenizer, encoding, Ask(contrast="dog"))
    tiny_model.fast = False
    textbook = why(tiny_model, tiny_tokenizer, encoding, Ask(contrast="dog"))
    assert not textbook.case.model.fast
    assert_same(fast, textbook, 1e-5)


@pytest.mark.cuda  # on CUDA on purpose, as tests/gpu/test_cuda.py (-m cuda selects both)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_explanation_on_cuda_matches_the_cpu(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TEXT)
    on_cpu = why(tiny_model, tiny_tokenizer, encoding, Ask(contrast="dog"))
    on_cuda = why(copy.deepcopy(tiny_model).to("cuda"), tiny_tokenizer, encoding, Ask(contrast="dog"))
    assert on_cuda.case.ids.device.type == "cuda"
    assert_same(on_cuda, on_cpu, 1e-4)


def test_frozen_twin_follows_a_model_whose_weights_moved():
    """A model cast or moved after its twin was made gets a new twin on the new tensors (never the stale ones)."""
    from bertviz_lab.bert.config import BertConfig
    from bertviz_lab.bert.model import BertForPreTraining
    from bertviz_lab.explain.score import frozen

    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=32, max_position_embeddings=16))
    first = frozen(model)
    model.double()
    second = frozen(model)
    assert second is not first
    assert second.bert.embeddings.word_embeddings.weight.dtype == torch.float64
    assert second.bert.embeddings.word_embeddings.weight.data_ptr() == \
        model.bert.embeddings.word_embeddings.weight.data_ptr()
    assert frozen(model) is second


def test_a_text_longer_than_the_explained_maximum_is_refused_with_its_length(tiny_tokenizer):
    """Past views.why.MAX_TOKENS every method on every token would take minutes: an InputError that says how long
    the text is and what the limit is, before anything runs."""
    from bertviz_lab.bert.config import BertConfig
    from bertviz_lab.bert.model import BertForPreTraining
    from bertviz_lab.views.why import explanation as vw

    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=32, max_position_embeddings=256)).eval()
    words = " ".join(tiny_tokenizer.vocab[10:15] * 30)
    encoding = inputs.encode(tiny_tokenizer, model, f"{words} [MASK] .")
    assert len(encoding) > vw.MAX_TOKENS
    with pytest.raises(InputError, match=rf"{len(encoding)} tokens long; .* up to {vw.MAX_TOKENS} tokens"):
        vw.why(model, tiny_tokenizer, encoding)


def test_flow_keeps_a_source_whose_weights_all_underflowed():
    """One layer whose attention is the identity: A' = I, so every edge but the diagonal has capacity 0 (and is
    left out); every source still has a flow (1 from the position itself, 0 from the others), never a missing node."""
    from bertviz_lab.explain.methods import flow

    A = np.eye(4)[None, None]  # (L=1, H=1, T=4, T=4)
    np.testing.assert_array_equal(flow(A, 2), [0.0, 0.0, 1.0, 0.0])


def test_too_few_removable_tokens_give_no_verdict_against_random_orders():
    """With n < MIN_TESTED removable tokens the 20 random orders cover most of the n! orders, so no order could beat
    them all: beats_random is None (not False) and the sentence says why, with n! written out."""
    from bertviz_lab.explain.checks import MIN_TESTED, Deletion, deletion_sentence

    n = MIN_TESTED - 1
    curve = np.linspace(0.5, 0.1, n + 1)
    result = Deletion(tuple(range(1, n + 1)), {"occlusion": tuple((i,) for i in range(1, n + 1))}, {"occlusion": curve},
                      np.tile(curve[::-1], (20, 1)))
    assert not result.tested and result.beats_random("occlusion") is None
    assert "only 24 removal orders" in deletion_sentence(result, {"occlusion": "occlusion"}, "p(mat)")
    longer = Deletion(tuple(range(1, 6)), {"occlusion": tuple((i,) for i in range(1, 6))},
                      {"occlusion": np.linspace(0.5, 0.0, 6)},
                      np.tile(np.full(6, 0.5), (20, 1)))
    assert longer.tested and longer.beats_random("occlusion") is True
    assert "p(mat)" in deletion_sentence(Deletion(longer.positions, longer.orders, {"occlusion": np.full(6, 0.5)},
                                                  longer.random_curves), {"occlusion": "occlusion"}, "p(mat)")
