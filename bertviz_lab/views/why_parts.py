"""Parts of a Why-this-guess answer the page redraws without running every method again.

`views.why.why` runs all eight methods for one attention layer and head; a learner who picks another layer or
head changes only the attention strip (and the agreement row it takes part in). `attention_weights` reads every
weight once from the explained input, and `with_attention` swaps the strip for any layer and head: the same
numbers `why(..., layer=, head=)` would give, without the gradients, integrated gradients and occlusion again.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bertviz_lab.explain import methods as m
from bertviz_lab.views.why import Why


def attention_weights(result: Why) -> np.ndarray:
    """Every attention weight of the explained input, (L, H, T, T) float64: one traced forward."""
    return m.weights(m.trace(result.case))


def with_attention(result: Why, weights: np.ndarray, layer: int, head: int | None) -> Why:
    """`result` with its attention strip read from `weights` (`attention_weights`) at `layer` (0-based) and
    `head` (None: the mean over heads)."""
    e = result.explanation
    values = {**e.values, "attention": m.attention(weights, result.position, layer, head)}
    return replace(result, explanation=replace(e, values=values, layer=layer % weights.shape[0], head=head))
