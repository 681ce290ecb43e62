"""What a learner asks of Why this guess?: one record, `Ask`, that the page, the notebook and the `attribute` command
build from their own inputs and hand to `views.why.explanation.why`.

It says which guess to explain (the `mask`-th [MASK] and its `target` word, against a `contrast` word; for ELECTRA's
discriminator the token at `position`), which attention the attention strip shows (`layer`, `head`) and how
(`top_k` guesses listed, `ig_steps` for integrated gradients). Building one checks what can be checked without the
model: whole numbers where numbers go, words as text. What depends on the model and the text (a layer it has, a
[MASK] the text holds, a word of its vocabulary) `why` checks, in the words of the model it runs.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

from bertviz_lab.errors import InputError
from bertviz_lab.explain.methods import IG_STEPS


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class Ask:
    """The guess asked about and how it is shown. "" for `target`: the model's top guess; "" for `contrast`: none
    (None reads as "" for both)."""

    mask: int = 0  # which [MASK], from 0
    target: str = ""
    contrast: str = ""
    position: int | None = None  # ELECTRA's discriminator: the token explained (None: the first word)
    layer: int = -1  # the attention strip's layer, from 0 (negative: from the last)
    head: int | None = None  # and its head (None: the mean over heads)
    top_k: int = 5  # guesses listed at the explained [MASK]
    ig_steps: int = IG_STEPS  # integrated gradients' steps

    def __post_init__(self) -> None:
        for name in ("target", "contrast"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, "")
        for name in ("mask", "layer", "top_k", "ig_steps"):
            if not _whole(getattr(self, name)):
                raise InputError(f"{name} must be a whole number, got {getattr(self, name)!r}")
        for name in ("position", "head"):
            if getattr(self, name) is not None and not _whole(getattr(self, name)):
                raise InputError(f"{name} must be a whole number or None, got {getattr(self, name)!r}")
        for name in ("target", "contrast"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"the {name} must be a word (text), not {type(getattr(self, name)).__name__}")
        if self.mask < 0:
            raise InputError(f"there is no [MASK] #{self.mask + 1}: the masks are counted from 0")
        if self.ig_steps < 1:
            raise InputError(f"ig_steps must be at least 1, got {self.ig_steps}")

    @property
    def explained(self) -> Ask:
        """What one run of every method answers: this guess with the attention strip at its default (the last layer,
        the mean over heads). Every other strip is then a lookup (`explanation.with_attention`), so a page or a
        notebook keeps one explanation per `explained` and shows any layer and head from it."""
        return replace(self, layer=-1, head=None)
