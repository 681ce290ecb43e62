"""A head's identity: its layer and its place in the layer, both counted from 0 (like the code), written "L2 H1".

The head switch, the lesson's head picker, the charts' labels and hovers and the shared links all name a head
this way, so `HeadId` writes the name and reads it back in one place. A leaf: no torch, nothing of the package.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

PATTERN = re.compile(r"L(\d{1,4}) H(\d{1,4})", re.ASCII)  # "L2 H1"; four digits each: far past any model here


@dataclass(frozen=True, order=True)
class HeadId:
    layer: int
    head: int

    def __post_init__(self):
        for name in ("layer", "head"):  # numpy's integers (an argmax's) become ints; 1.5 or "1": TypeError
            value = operator.index(getattr(self, name))
            if value < 0:
                raise ValueError(f"a head's {name} is counted from 0, not {value}")
            object.__setattr__(self, name, value)

    def __str__(self) -> str:
        return f"L{self.layer} H{self.head}"

    @property
    def in_words(self) -> str:
        """'layer 2 head 1': the name in a sentence or a table."""
        return f"layer {self.layer} head {self.head}"

    @classmethod
    def parse(cls, name: str) -> HeadId:
        """The head a name like "L2 H1" names; ValueError (the reason, for a link's note) for anything else."""
        match = PATTERN.fullmatch(name) if isinstance(name, str) else None
        if match is None:
            raise ValueError("is not a head like L0 H1")
        return cls(int(match[1]), int(match[2]))

    @classmethod
    def every(cls, layers: int, heads: int) -> list[HeadId]:
        """Every head of a model of this shape, layer by layer: L0 H0, L0 H1, ..., L1 H0, ..."""
        return [cls(layer, head) for layer in range(layers) for head in range(heads)]
