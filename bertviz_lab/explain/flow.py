"""The maximum flow of attention flow (Abnar & Zuidema, 2020), solved on the layered graph itself.

The graph: a node per (layer, token), an edge from (l - 1, j) to (l, i) of capacity A'_l[i, j]; the flow from
input token j to the explained position at the top. Every edge joins two neighbouring layers, so the graph is a
stack of dense T x T blocks, and every augmenting path climbs and descends those blocks. Dinic's algorithm (1970)
fits it: each phase finds the shortest augmenting paths by a breadth-first search over the residual capacities,
and saturates all of them at once with a blocking flow found by waves (Karzanov 1974; Tarjan 1984): push every
node's excess forward, one level at a time, greedily along its edges; a node that cannot pass its excess on is
blocked and returns it down the edges it came by, and the waves repeat until no excess is left. Every step is a
numpy operation on a block of nodes, not a Python step per edge. Against networkx's preflow-push on one residual
network (what the lab used before), in one process: many times faster on the shipped model at 64 tokens, a few
times on a random BERT-base at 64 and about as fast at 32, with the same values to 1e-15 (measured by python -m
bench.flow; figures in docs/benchmarks.md, "Why this guess: speed"; tests/explain/test_progress.py checks them
against networkx to 1e-9). Capacities are at most 1; residuals and excesses below EPS count as 0, so a flow is exact
to about EPS times the number of nodes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

EPS = 1e-14  # a residual capacity or excess below this is 0 (capacities are at most 1)


def capacities(mixed: np.ndarray, position: int) -> np.ndarray:
    """(V, V) capacities of the graph without its source row: node 0 is the source (filled per source by
    `max_flow`), then layers 1..L-1 of T nodes each, the sink last. mixed: (L, T, T), A' per layer."""
    L, T = mixed.shape[0], mixed.shape[-1]
    V = 2 + (L - 1) * T
    C = np.zeros((V, V))
    for layer in range(1, L - 1):  # from layer `layer` to layer + 1: C[(l, j), (l + 1, i)] = A'_{l+1}[i, j]
        rows, cols = _nodes(layer, T), _nodes(layer + 1, T)
        C[np.ix_(rows, cols)] = mixed[layer].T
    if L > 1:
        C[_nodes(L - 1, T), V - 1] = mixed[L - 1, position]  # into the explained position at the top
    return C


def _nodes(layer: int, T: int) -> np.ndarray:
    return 1 + (layer - 1) * T + np.arange(T)


def max_flows(mixed: np.ndarray, position: int, progress: Callable[[float], None] | None = None) -> np.ndarray:
    """(T,) the maximum flow from each input token to `position` at the top layer."""
    L, T = mixed.shape[0], mixed.shape[-1]
    C = capacities(mixed, position)
    flows = np.empty(T)
    for source in range(T):
        R = C.copy()
        if L > 1:
            R[0, _nodes(1, T)] = mixed[0, :, source]
        else:
            R[0, -1] = mixed[0, position, source]
        out = R[0].copy()
        while _phase(R):
            pass
        flows[source] = float((out - R[0]).sum())
        if progress is not None:
            progress((source + 1) / T)
    return flows


def _levels(R: np.ndarray) -> list[np.ndarray] | None:
    """The level graph's node sets from the source (0) to the sink (V - 1), by breadth-first search over residuals
    above EPS, keeping only nodes on a shortest path to the sink; None when the sink is out of reach."""
    V = R.shape[0]
    seen = np.zeros(V, bool)
    seen[0] = True
    levels, frontier = [np.array([0])], np.array([0])
    while not seen[-1]:
        reach = (R[frontier] > EPS).any(0) & ~seen
        if not reach.any():
            return None
        frontier = np.flatnonzero(reach)
        seen[frontier] = True
        levels.append(frontier)
    levels[-1] = np.array([V - 1])
    for d in range(len(levels) - 2, 0, -1):  # only nodes with a level edge toward the sink
        levels[d] = levels[d][(R[levels[d][:, None], levels[d + 1]] > EPS).any(1)]
    return levels


def _phase(R: np.ndarray) -> bool:
    """One phase of Dinic's algorithm: a blocking flow in the level graph, written into the residuals R (u -> v
    down by what is pushed, v -> u up). False when no augmenting path is left."""
    levels = _levels(R)
    if levels is None:
        return False
    D = len(levels) - 1
    excess = np.zeros(R.shape[0])
    blocked = np.zeros(R.shape[0], bool)
    pushed = [np.zeros((len(levels[d]), len(levels[d + 1]))) for d in range(D)]  # this phase's flow per level edge
    excess[0] = np.inf  # the source saturates its level edges once, in the first wave, and never pushes again
    first = True
    while True:
        for d in range(0 if first else 1, D):  # forward wave
            _push(R, levels[d], levels[d + 1], excess, blocked, pushed[d], source=d == 0)
        first, excess[0] = False, 0.0
        left = excess > EPS
        left[-1] = False
        left &= ~blocked  # a blocked node holds no more than rounding here: it returned all it had, and gets nothing
        if not left.any():
            return True
        blocked |= left  # a node left with excess after the wave cannot pass it on: block it, send it back
        for d in range(D - 1, 0, -1):  # backward wave
            _return(R, levels[d - 1], levels[d], excess, blocked, pushed[d - 1])


def _greedy(amount: np.ndarray, room: np.ndarray) -> np.ndarray:
    """For each row, `amount` poured into `room` left to right: (n,) and (n, m) -> (n, m)."""
    before = np.cumsum(room, axis=1) - room
    return np.clip(amount[:, None] - before, 0.0, room)


def _push(R, lower, upper, excess, blocked, pushed, source: bool) -> None:
    """Each node of `lower` with excess pushes it greedily along its residual edges to unblocked `upper` nodes."""
    movers = excess[lower] > EPS
    if not movers.any():
        return
    rows = lower[movers]
    room = R[(rows[:, None], upper)] * ~blocked[upper]
    room[room <= EPS] = 0.0
    amount = room.sum(1) if source else excess[rows]
    sent = _greedy(amount, room)
    R[(rows[:, None], upper)] -= sent
    R[(upper[:, None], rows)] += sent.T
    pushed[movers] += sent
    excess[rows] -= sent.sum(1)
    excess[upper] += sent.sum(0)


def _return(R, lower, upper, excess, blocked, pushed) -> None:
    """Each blocked node of `upper` with excess sends it back down the edges this phase's flow came by."""
    back = blocked[upper] & (excess[upper] > EPS)
    if not back.any():
        return
    cols = upper[back]
    sent = _greedy(excess[cols], pushed[:, back].T).T  # (lower, cols)
    pushed[:, back] -= sent
    R[(lower[:, None], cols)] += sent
    R[(cols[:, None], lower)] -= sent.T
    excess[cols] -= sent.sum(0)
    excess[lower] += sent.sum(1)
