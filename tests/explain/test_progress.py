"""Issue 52, the explanation's cost: every method reports as it goes (the first report comes before the first
method's answer, attention flow one per source), attention flow's own solver gives networkx's maximum flows, the
causal check's averaging over tied orders is bounded, and its cost is estimated in seconds from the explanation's
own runs of the model."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
import torch

from bertviz_lab.explain import checks, methods
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat sat on the [MASK] , and the dog sat on the rug ."


def networkx_flow(A: np.ndarray, position: int) -> np.ndarray:
    """Abnar & Zuidema's definition as networkx solves it: every edge, a fresh graph per source."""
    mixed = methods.residual_mixing(A)
    L, T = mixed.shape[0], mixed.shape[-1]
    graph = nx.DiGraph()
    graph.add_nodes_from((0, j) for j in range(T))
    for layer in range(1, L + 1):
        graph.add_weighted_edges_from((((layer - 1, j), (layer, i), float(mixed[layer - 1, i, j]))
                                       for i in range(T) for j in range(T) if mixed[layer - 1, i, j] > 0),
                                      weight="capacity")
    graph.add_node((L, position))
    return np.array([nx.maximum_flow_value(graph.copy(), (0, j), (L, position)) for j in range(T)])


@pytest.mark.parametrize("seed", range(12))
def test_flow_is_networkx_max_flow_on_random_layered_graphs(seed):
    """Random depths, widths and peakedness (sharp attention saturates some paths and starves others)."""
    rng = np.random.default_rng(seed)
    L, H, T = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(2, 14))
    scores = rng.normal(size=(L, H, T, T)) * rng.choice([0.5, 2.0, 6.0])
    A = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    position = int(rng.integers(T))
    np.testing.assert_allclose(methods.flow(A, position), networkx_flow(A, position), rtol=0, atol=1e-9)


def test_flow_reports_as_it_goes():
    A = np.exp(np.random.default_rng(0).normal(size=(3, 2, 9, 9)))
    A /= A.sum(-1, keepdims=True)
    reports = []
    methods.flow(A, 4, progress=lambda done, what: reports.append((done, what)))
    inside = [done for done, what in reports if what == "attention flow" and 0 < done < 1]
    assert len(inside) >= 3 and inside == sorted(inside)


def test_progress_is_reported_before_the_first_method_answers(tiny_model, tiny_tokenizer, monkeypatch):
    events = []
    for name in ("attention", "rollout", "flow", "value_norm", "gradients"):
        real = getattr(methods, name)

        def answered(*args, _real=real, _name=name, **kwargs):
            result = _real(*args, **kwargs)
            events.append(("answer", _name))
            return result

        monkeypatch.setattr(methods, name, answered)
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TEXT)
    vw.why(tiny_model, tiny_tokenizer, encoding, progress=lambda done, what: events.append(("report", done, what)))
    first_answer = next(i for i, e in enumerate(events) if e[0] == "answer")
    assert any(e[0] == "report" and e[1] < 1 for e in events[:first_answer])
    reported = {e[2] for e in events if e[0] == "report"}
    assert {"attention flow", "gradients", "integrated gradients", "occlusion"} <= reported


class CountingScore:
    """A stand-in for explain.score.Score: p = 0.5 + 0.5 masked . w / T, linear in which tokens are masked (so the
    mean over a tied group's orders is known exactly), and every row it is asked for is counted (one row: one input
    run through the model)."""

    follows = "p(target)"

    def __init__(self, position: int, mask_id: int):
        self.position, self.mask_id, self.rows = position, mask_id, 0

    def followed(self, model, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        self.rows += ids.shape[0]
        return 0.5 + 0.5 * (ids == self.mask_id).double() @ self.w(ids.shape[1]) / ids.shape[1]

    @staticmethod
    def w(T: int) -> torch.Tensor:
        return torch.linspace(-1, 1, T, dtype=torch.float64)


def tied_case(n: int) -> methods.Case:
    ids = torch.arange(5, 5 + n + 2)[None]  # [CLS]-like first, the explained position last
    special = np.zeros(n + 2, bool)
    special[0] = True
    return methods.Case(None, ids, torch.zeros_like(ids), CountingScore(n + 1, 1), special, 1, 0)


def test_the_check_on_tied_scores_costs_about_what_an_untied_one_does():
    """Every method ties every token (all-zero scores: flow saturating, a method blind to the sentence): the curve
    averages over the group's orders, at most (TIE_DRAWS + 2) inputs a token for the group, shared by every method
    that ties it, on top of what the orders themselves need (before: 64 a token and size, for each method)."""
    n = 40
    case = tied_case(n)
    tied = {name: np.zeros(n + 2) for name in ("attention", "rollout", "flow", "occlusion")}
    result = checks.deletion(case, tied)
    orders = len(tied) + checks.RANDOM_ORDERS
    assert case.score.rows <= orders * n + (checks.TIE_DRAWS + 2) * n
    assert all(result.tied(name) == n for name in tied)
    T, group = n + 2, list(result.positions)
    exact = 0.5 + 0.5 * np.arange(n + 1) * CountingScore.w(T).numpy()[group].mean() / T  # the mean over every order
    assert not result.exact["flow"]  # sampled: 40 tokens have too many subsets of most sizes
    np.testing.assert_allclose(result.curves["flow"], exact, atol=0.04)
    np.testing.assert_array_equal(result.curves["flow"], result.curves["occlusion"])  # the same draws, shared


def test_the_causal_checks_estimate_is_its_inputs_times_the_measured_seconds_of_one(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TEXT)
    result = vw.why(tiny_model, tiny_tokenizer, encoding)
    inputs_needed = vw.deletion_inputs(result)
    assert inputs_needed >= len(result.explanation.movable) * (len(vw.TITLES) + checks.RANDOM_ORDERS) // 4
    e = result.explanation
    slower = replace(result, explanation=replace(e, seconds={**e.seconds, "occlusion": 1000 * e.seconds["occlusion"]}))
    assert vw.deletion_seconds(slower) == pytest.approx(1000 * vw.deletion_seconds(result), rel=1e-9)
    assert vw.deletion_seconds(result) == pytest.approx(
        inputs_needed * e.seconds["occlusion"] / len(e.movable), rel=1e-9)
