"""The outlier dimensions of the LayerNorms (Kovaleva et al. 2021): per layer, the dimensions of largest gain and
bias, and the held-out masked-LM loss with the two that stand out most zeroed in every LayerNorm, against two random
dimensions (`draws` seeded draws), on story-world sentences from a generator seed no training stream uses
(neurons.outliers.held_out)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.outliers import OutlierTest, Outliers, outlier_dims, outlier_test
from bertviz_lab.neurons.outliers import held_out as story_held_out

HELD_OUT = 200  # held-out sentences the loss is measured on (about 1,000 masked tokens)
DRAWS = 20
NO_LOSS = ("this model has no masked-language-model head (ELECTRA's discriminator), so there is no masked-LM loss "
           "to measure: the outlying weights are shown without the test")

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class OutliersView:
    outliers: Outliers
    gamma: np.ndarray  # (L, d) each layer's output LayerNorm gain
    beta: np.ndarray  # (L, d) ... and bias
    test: OutlierTest | None  # None: the model has no MLM head
    sentences: int  # held-out sentences read (0 without a test)
    no_head: str = ""  # why there is no loss test ("" : there is one)

    @property
    def dims(self) -> tuple[int, int]:
        return self.outliers.dims


def held_out(n: int = HELD_OUT) -> list[str]:
    """Story-world sentences for the loss test (neurons.outliers.held_out: a generator seed of their own)."""
    return story_held_out(n)


def outliers_view(ckpt: Checkpoint, sentences: Sequence[str] | None = None, draws: int = DRAWS,
                  progress: Progress | None = None, seed: int = 0) -> OutliersView:
    """The outlier dimensions and the loss test on `sentences` (None: `held_out()`)."""
    model = ckpt.model
    if sentences is not None and not [s for s in sentences if isinstance(s, str) and s.strip()]:
        raise InputError("there are no sentences to measure the loss on: give at least one")
    norms = [layer.output.LayerNorm for layer in model.bert.encoder.layer]
    gamma = np.stack([n.weight.detach().double().cpu().numpy() for n in norms])  # (L, d)
    beta = np.stack([n.bias.detach().double().cpu().numpy() for n in norms])
    found = outlier_dims(model)
    if not model.has_mlm:
        return OutliersView(found, gamma, beta, None, 0, NO_LOSS)
    texts = held_out() if sentences is None else [s for s in sentences if isinstance(s, str) and s.strip()]
    test = outlier_test(model, ckpt.tokenizer, texts, found.dims, draws, seed, progress)
    return OutliersView(found, gamma, beta, test, len(texts))
