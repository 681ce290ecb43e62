"""What a learner asks of "Inside the feed-forward layer": one record, `NeuronAsk`, that the page, `nb.neurons` and
the `neurons` command build from their own inputs and hand to the views (sentence_view, neuron_view, behind_view).

Layers and neurons are counted from 0, as neurons.read.check_neuron says them. Whether they exist in the model is
checked by the views (the record does not know the model); everything else is checked here, one sentence each.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from bertviz_lab.errors import InputError

FACTORS = 4  # Ecco's default number of NMF factors for a sentence
TOP_K = 10  # neurons suppressed by the causal test, and shown in the top-neurons tables
DRAWS = 20  # random sets of neurons drawn by the causal test
MAX_K = 100
MAX_DRAWS = 100
MAX_FACTORS = 10  # neurons.factors.MAX_FACTORS
STEPS = 20  # integrated gradients' steps
METHODS = {"ig": "integrated gradients over the activation (Dai et al. 2022)",
           "grad": "activation × gradient"}


def whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class NeuronAsk:
    text: str  # a sentence, with or without a [MASK]
    layer: int | None = None  # None: the last layer
    neuron: int | None = None  # None: the most active neuron at `token` in `layer`
    token: int | None = None  # a token position; None: the first [MASK], else the first word
    factors: int = FACTORS
    answer: str = ""  # "" : the top guess at the [MASK]
    foil: str = ""  # "" : none (F is the answer's logit); else F = logit(answer) - logit(foil)
    k: int = TOP_K
    draws: int = DRAWS
    seed: int = 0
    method: str = "ig"  # "ig" | "grad"
    steps: int = STEPS

    def __post_init__(self) -> None:
        for name in ("text", "answer", "foil", "method"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, "" if name != "method" else "ig")
            elif not isinstance(value, str):
                raise InputError(f"the {name} must be text, not {type(value).__name__}")
        if not self.text.strip():
            raise InputError("the text is empty: type a sentence (with a [MASK] to ask which neurons a guess rests "
                             "on)")
        for name in ("layer", "neuron", "token"):
            value = getattr(self, name)
            if value is not None and (not whole(value) or value < 0):
                raise InputError(f"the {name} must be a whole number from 0, got {value!r}")
        if not whole(self.factors) or not 1 <= self.factors <= MAX_FACTORS:
            raise InputError(f"the number of factors must be a whole number from 1 to {MAX_FACTORS}, "
                             f"got {self.factors!r}")
        if not whole(self.k) or not 1 <= self.k <= MAX_K:
            raise InputError(f"the number of top neurons must be a whole number from 1 to {MAX_K}, got {self.k!r}")
        if not whole(self.draws) or not 1 <= self.draws <= MAX_DRAWS:
            raise InputError(f"the number of random draws must be a whole number from 1 to {MAX_DRAWS}, "
                             f"got {self.draws!r}")
        if not whole(self.seed):
            raise InputError(f"the seed must be a whole number, got {self.seed!r}")
        if not whole(self.steps) or not 1 <= self.steps <= 200:
            raise InputError(f"the number of integrated-gradient steps must be a whole number from 1 to 200, "
                             f"got {self.steps!r}")
        method = self.method.strip().lower()
        if method not in METHODS:
            raise InputError(f"no attribution method called {self.method!r}: pick ig (integrated gradients) or grad "
                             "(activation × gradient)")
        object.__setattr__(self, "method", method)
        if self.foil.strip() and self.foil.strip() == self.answer.strip():
            raise InputError("the foil is the answer itself: pick another word (F is logit(answer) - logit(foil))")
