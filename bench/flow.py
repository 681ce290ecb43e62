"""Attention flow's maximum flows: ours (explain/flow.py, Dinic's algorithm block by block on the layered graph)
against networkx's preflow-push on one residual network, the way the lab computed it before, in one process on the
same attention weights: the shipped model at 13 and 64 tokens, a random BERT-base at 32 and 64. Prints the median
seconds of each, their ratio (above 1: ours is faster) and the largest difference of the values.

    .venv/bin/python -m bench.flow [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.explain import methods
from bertviz_lab.explain.score import Score, frozen
from bertviz_lab.views import inputs

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "bertviz-mini"
BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072)


def networkx_flow(A: np.ndarray, position: int) -> np.ndarray:
    """The lab's attention flow before explain/flow.py: networkx's preflow-push, one residual network for every
    source."""
    import networkx as nx
    from networkx.algorithms.flow import build_residual_network, preflow_push

    mixed = methods.residual_mixing(A)
    L, T = mixed.shape[0], mixed.shape[-1]
    graph = nx.DiGraph()
    graph.add_nodes_from((0, j) for j in range(T))
    graph.add_node((L, position))
    for layer in range(1, L + 1):
        for i in range(T) if layer < L else (position,):
            graph.add_edges_from(((layer - 1, j), (layer, i), {"capacity": float(mixed[layer - 1, i, j])})
                                 for j in range(T) if mixed[layer - 1, i, j] > 0)
    residual = build_residual_network(graph, "capacity")
    return np.array([preflow_push(graph, (0, j), (L, position), residual=residual, value_only=True)
                     .graph["flow_value"] for j in range(T)])


def weights(model, ids: list[int], position: int, mask_id: int, pad_id: int) -> np.ndarray:
    """The attention weights (L, H, T, T) of one input, as the explanation reads them."""
    T = len(ids)
    case = methods.Case(frozen(model), torch.tensor([ids]), torch.zeros(1, T, dtype=torch.long),
                        Score(position, 5, None, 0), np.array([True] + [False] * (T - 2) + [True]), mask_id, pad_id)
    return methods.weights(methods.trace(case))


def cases() -> dict[str, tuple[np.ndarray, int]]:
    ckpt = load_checkpoint(SHIPPED)
    found = {}
    for text in ("the cat sat on the [MASK] because it was tired .", "the [MASK] " + "dog " * 61):
        ids = inputs.encode(ckpt.tokenizer, ckpt.model, text).ids
        position = ids.index(ckpt.tokenizer.mask_id)
        found[f"shipped model, {len(ids)} tokens"] = (weights(ckpt.model, ids, position, ckpt.tokenizer.mask_id,
                                                              ckpt.tokenizer.pad_id), position)
    torch.manual_seed(0)
    base = BertForPreTraining(BASE).eval()
    for T in (32, 64):
        ids = [101, *range(1000, 1000 + T - 2), 102]
        ids[T // 2] = 103
        found[f"random BERT-base, {T} tokens"] = (weights(base, ids, T // 2, 103, 0), T // 2)
    return found


def median_s(fn: Callable[..., np.ndarray], args: tuple, rounds: int) -> tuple[float, np.ndarray]:
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    for name, (A, position) in cases().items():
        theirs, old = median_s(networkx_flow, (A, position), args.rounds)
        ours, new = median_s(methods.flow, (A, position), args.rounds)
        print(f"{name:<28} networkx {theirs:6.2f} s  ours {ours:6.2f} s  ratio {theirs / ours:5.1f}  "
              f"largest difference {np.abs(old - new).max():.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
