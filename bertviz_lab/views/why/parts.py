"""Parts of a Why-this-guess answer the page redraws without running every method again.

`views.why.why` runs all eight methods for one attention layer and head; a learner who picks another layer or
head changes only the attention strip (and the agreement row it takes part in). `with_attention` swaps the strip
for any layer and head, read from the weights the explanation kept: the same numbers `why(..., layer=, head=)`
would give, without another forward, the gradients, integrated gradients or occlusion.
"""

from __future__ import annotations

from dataclasses import replace

from bertviz_lab.explain import methods
from bertviz_lab.views.why.explanation import Why


def with_attention(result: Why, layer: int, head: int | None) -> Why:
    """`result` with its attention strip read from the weights its explanation already holds, at `layer` (0-based)
    and `head` (None: the mean over heads)."""
    e = result.explanation
    values = {**e.values, "attention": methods.attention(e.weights, result.position, layer, head)}
    return replace(result, explanation=replace(e, values=values, layer=layer % e.weights.shape[0], head=head))
