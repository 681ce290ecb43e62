"""The academic manual's worked example (seed text 001, section 8), redone exactly: one-hot attention with identity
weights.

Q, K and V are the embeddings themselves, so every step can be checked by hand; the seed
skips BERT's 1/√d scaling, so each figure is computed both ways and compared with its print.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bertviz_lab.errors import InputError
from bertviz_lab.seeds import cite
from bertviz_lab.views.worked.forward_pass import MAX_MAGNITUDE, Printed, decimals, softmax_table, within_rounding

SEED001_TOKENS = ("The", "cat", "sat")
SEED001_EMBEDDINGS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
SEED001_QUERY = 1  # the seed counts from 1 and says "position 2": "cat"
# As printed in seed text 001, section 8 (softmax over [0, 1, 0], no 1/√d scaling; the output equals the weights).
SEED001_PRINTED = Printed(cite("001", parens=False), {"weight": ("0.2447", "0.5106", "0.2447"),
                                       "output": ("0.2447", "0.5106", "0.2447")}, {})


# --- One-hot attention with identity weights (seed text 001, section 8) ---------------------------------------
@dataclass(frozen=True)
class TinyAttention:
    tokens: list[str]
    q: np.ndarray  # (d,) the query's row: with W_Q = I it is the query token's embedding
    k: np.ndarray  # (N, d) keys = embeddings
    v: np.ndarray  # (N, d) values = embeddings
    scale: float  # 1/√d when scaled, else 1
    table: pd.DataFrame  # key, q·k, score (= q·k × scale), exp(score), weight
    output: np.ndarray  # (d,) Σ weight × v

    @property
    def weights(self) -> np.ndarray:
        return self.table["weight"].to_numpy()


def embedding_matrix(frame: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """An edited table with a 'token' column and one column per dimension -> (tokens, (N, d) embeddings)."""
    tokens = [str(t).strip() if t is not None and not pd.isna(t) else "" for t in frame["token"]]
    if any(not t for t in tokens):
        raise InputError("Every row needs a token name.")
    values = frame.drop(columns="token").apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        raise InputError("Every cell of the embedding matrix needs a number.")
    if np.abs(values).max(initial=0.0) > MAX_MAGNITUDE:
        raise InputError("Use embedding values between -1,000,000 and 1,000,000.")
    return tokens, values


def one_hot_attention(embeddings: pd.DataFrame, query_index: int, scale: bool) -> TinyAttention:
    """Single-head attention with W_Q = W_K = W_V = I: Q, K, V are the embeddings themselves.

    embeddings: a 'token' column and d number columns. Scores are q·k, divided by √d when `scale`
    (as BERT does; seed text 001 does not), then softmax, then the output is Σ weight × v.
    """
    tokens, e = embedding_matrix(embeddings)  # (N, d)
    if not 0 <= query_index < len(tokens):
        raise InputError(f"The query position must be between 0 and {len(tokens) - 1}.")
    q, k, v = e[query_index], e, e
    factor = 1 / math.sqrt(e.shape[1]) if scale else 1.0
    dots = k @ q  # (N,)
    steps = softmax_table(tokens, dots * factor)
    table = pd.DataFrame({"key": tokens, "q·k": dots, "score": dots * factor,
                          steps.exp_column: steps.table[steps.exp_column], "weight": steps.table["weight"]})
    return TinyAttention(tokens, q, k, v, factor, table, steps.table["weight"].to_numpy() @ v)


def scaling_side_by_side(embeddings: pd.DataFrame, query_index: int,
                         printed: Printed | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per key: q·k, weight without scaling, q·k/√d, weight with it (and the printed weights when given);
    plus the output vector both ways, one row per dimension."""
    plain, scaled = (one_hot_attention(embeddings, query_index, s) for s in (False, True))
    d = len(plain.q)
    table = pd.DataFrame({"key": plain.tokens, "q·k": plain.table["q·k"], "weight (no scaling)": plain.weights,
                          f"q·k / √{d}": scaled.table["score"], f"weight (÷ √{d})": scaled.weights})
    if printed is not None:
        figures = printed.per_token["weight"]
        table[f"weight (as printed in {printed.source})"] = [float(f) for f in figures]
    output = pd.DataFrame({"dimension": [f"dim {i}" for i in range(d)], "output (no scaling)": plain.output,
                           f"output (÷ √{d})": scaled.output})
    if printed is not None:
        output[f"output (as printed in {printed.source})"] = [float(f) for f in printed.per_token["output"]]
    return table, output


def one_hot_checks(embeddings: pd.DataFrame, query_index: int, printed: Printed) -> pd.DataFrame:
    """Each printed weight and output component next to the exact value without and with 1/√d."""
    plain, scaled = (one_hot_attention(embeddings, query_index, s) for s in (False, True))
    d = len(plain.q)
    rows = []
    for kind, a, b in (("weight", plain.weights, scaled.weights), ("output", plain.output, scaled.output)):
        names = plain.tokens if kind == "weight" else [f"dim {i}" for i in range(d)]
        for name, p, x, y in zip(names, printed.per_token[kind], a, b):
            n = decimals(p)
            if within_rounding(x, p):
                text = "✓ exact value, rounded"
            elif within_rounding(y, p):
                text = f"✓ exact value with ÷ √{d}, rounded"
            else:
                text = f"✗ should be {x:.{n}f}; with ÷ √{d}, {y:.{n}f}"
            rows.append({"figure": f"{kind} {name}", "as printed": p, "exact (no scaling)": x,
                         f"exact (÷ √{d})": y, "within rounding?": within_rounding(x, p), "which is right": text})
    return pd.DataFrame(rows)
