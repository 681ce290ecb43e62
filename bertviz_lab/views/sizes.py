"""Sizes in the BERT family: the published shapes, and parameter counts computed from them.

The counts are the encoder with its pooler (Hugging Face's `BertModel` / `XLMRobertaModel`),
heads excluded, so models with different heads compare fairly; `encoder_parameters` derives
them from the shape, term by term, and the tests check it against a model built here.
The academic manual (seed text 001, section 6.3) gives XLM-R "Base" as d = 1024, L = 24, H = 16:
those are XLM-R Large's sizes. The table below has both, and `SEED001_CORRECTION` says so in words.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bertviz_lab.seeds import cite


@dataclass(frozen=True)
class Shape:
    name: str
    layers: int  # L
    hidden: int  # d
    heads: int  # H
    intermediate: int  # FFN inner width (4d in every model here)
    vocab: int
    positions: int  # position embeddings (XLM-R keeps 2 of its 514 for the padding offset: 512 usable)
    segments: int  # token-type embeddings (XLM-R has 1: it has no sentence A/B embedding)
    source: str

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _bert(name: str, layers: int, hidden: int, heads: int, source: str) -> Shape:
    return Shape(name, layers, hidden, heads, 4 * hidden, 30522, 512, 2, source)


def _xlmr(name: str, layers: int, hidden: int, heads: int) -> Shape:
    return Shape(name, layers, hidden, heads, 4 * hidden, 250002, 514, 1, "Conneau et al. 2020")


FAMILY = (
    _bert("BERT-Tiny", 2, 128, 2, "Turc et al. 2019"),
    _bert("BERT-Mini", 4, 256, 4, "Turc et al. 2019"),
    _bert("BERT-Small", 4, 512, 8, "Turc et al. 2019"),
    _bert("BERT-Medium", 8, 512, 8, "Turc et al. 2019"),
    _bert("BERT-Base", 12, 768, 12, "Devlin et al. 2019"),
    _bert("BERT-Large", 24, 1024, 16, "Devlin et al. 2019"),
    _xlmr("XLM-R Base", 12, 768, 12),
    _xlmr("XLM-R Large", 24, 1024, 16),
)

SEED001_CORRECTION = (f"{cite('001', start=True)}, section 6.3, lists XLM-R (Base) as d = 1024, L = 24, H = 16. Those are XLM-R "
                      "Large's sizes; XLM-R Base is d = 768, L = 12, H = 12, the same shape as BERT-Base with a "
                      "250,002-token vocabulary (Conneau et al. 2020).")


def encoder_parameters(shape: Shape) -> int:
    """Weights of embeddings + L encoder layers + pooler, counted from the shape."""
    d, ff = shape.hidden, shape.intermediate
    embeddings = (shape.vocab + shape.positions + shape.segments) * d + 2 * d  # three tables + LayerNorm
    attention = 4 * (d * d + d) + 2 * d  # W_Q, W_K, W_V, W_O with biases + LayerNorm
    ffn = (d * ff + ff) + (ff * d + d) + 2 * d  # W_1, W_2 with biases + LayerNorm
    pooler = d * d + d
    return embeddings + shape.layers * (attention + ffn) + pooler


def family_table(active: Shape | None = None) -> pd.DataFrame:
    """One row per model (the active one first when given): its shape and parameter count."""
    shapes = ([active] if active else []) + list(FAMILY)
    return pd.DataFrame([{"model": s.name, "layers L": s.layers, "hidden d": s.hidden, "heads H": s.heads,
                          "d_head = d / H": s.head_dim, "FFN width": s.intermediate, "vocabulary": s.vocab,
                          "parameters (encoder + pooler)": encoder_parameters(s), "source": s.source}
                         for s in shapes])
