"""What a learner asks of "Where is the answer made?": one record, `PatchAsk`, that the page, `nb.patch` and the
`patch` command build from their own inputs and hand to `views.patching.runs.prepare`.

Two sentences of one length in tokens, the clean one with a [MASK] (the corrupted one with its [MASK] at the same
place), or one sentence and noise on some of its tokens. The answer and the foil: the words whose logit difference
is the score ("" : the clean run's top guess, and the corrupted run's top guess other than the answer).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from bertviz_lab.errors import InputError

NOISE_SCALE = 3.0  # Meng et al.: Gaussian noise of 3 times the word vectors' standard deviation
DRAWS = 10  # noise draws averaged
MAX_DRAWS = 50


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class PatchAsk:
    clean: str
    corrupt: str = ""  # "" with noise
    answer: str = ""  # "" : the clean run's top guess at the [MASK]
    foil: str = ""  # "" : the corrupted run's top guess that is not the answer
    noise: bool = False  # corrupt by noise on the clean run's word vectors instead of (or beside) a typed sentence
    noised: tuple[int, ...] = ()  # token positions to noise; () : the tokens where `corrupt` differs from `clean`
    draws: int = DRAWS
    seed: int = 0
    scale: float = NOISE_SCALE
    position: int | None = None  # ELECTRA's discriminator: the token scored (None: the first that differs)

    def __post_init__(self) -> None:
        for name in ("clean", "corrupt", "answer", "foil"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, "")
            elif not isinstance(value, str):
                raise InputError(f"the {name} must be text, not {type(value).__name__}")
        if not self.clean.strip():
            raise InputError("the clean sentence is empty: type a sentence with a [MASK] where the answer goes")
        if not self.noise and not self.corrupt.strip():
            raise InputError("the corrupted sentence is empty: type the clean sentence with one word changed "
                             "(the same number of tokens), or corrupt it with noise")
        if not _whole(self.draws) or not 1 <= self.draws <= MAX_DRAWS:
            raise InputError(f"the number of noise draws must be a whole number from 1 to {MAX_DRAWS}, "
                             f"got {self.draws!r}")
        if not _whole(self.seed):
            raise InputError(f"the seed must be a whole number, got {self.seed!r}")
        if isinstance(self.scale, bool) or not isinstance(self.scale, numbers.Real) or not 0 < self.scale <= 100:
            raise InputError(f"the noise scale must be a number above 0 and at most 100, got {self.scale!r}")
        if self.position is not None and not _whole(self.position):
            raise InputError(f"the position must be a whole number, got {self.position!r}")
        if not all(_whole(i) for i in self.noised):
            raise InputError("the tokens to noise must be token positions (whole numbers)")
        object.__setattr__(self, "noised", tuple(self.noised))
