"""What the "Probing, carefully" tab says of an amnesic probe (views/syntax/amnesic.py), on hand-made records: a removal
that worked or not, a model whose guesses moved beyond every random projection or not (the other way does not count),
agreement that fell beyond twice the standard error or not, nothing to remove, and a model without a masked-LM head."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bertviz_lab.probing.records import Amnesic
from bertviz_lab.views.syntax import analysis as vs
from bertviz_lab.views.syntax.amnesic import (NO_MLM, agreement_rows, agreement_sentence, amnesic_table, notes,
                                              removal_sentence, use_sentences)


def amnesic(**changes) -> Amnesic:
    """An amnesic probe of number at hidden state 2 that worked and moved the loss beyond every random draw."""
    base = Amnesic("number", 2, 9, 9, 0.69, 0.91, 0.70, 0.90, 400, 1.70, 1.90, np.array([1.70, 1.72, 1.74, 1.71, 1.73]),
                   0.60, 0.50, np.array([0.60, 0.59, 0.60, 0.61, 0.58]), {0: 0.96, 1: 0.80, 2: 0.70, 3: 0.60},
                   {0: 0.94, 1: 0.60, 2: 0.50, 3: 0.45}, {0: 0.95, 1: 0.79, 2: 0.70, 3: 0.61},
                   {0: 100, 1: 100, 2: 100, 3: 100}, 5, 0)
    return replace(base, **changes)


def test_the_removal_is_said_to_work_only_near_the_majority():
    worked = removal_sentence(amnesic())
    assert "took 9 rounds to remove 9 directions at hidden state 2" in worked
    assert "falls from 91% to 70%; always guessing the commonest label gets 69%: what a linear probe can read of it " \
           "is gone" in worked and "leaves the probe at 90% (the mean of 5 draws)" in worked
    partial = removal_sentence(amnesic(probe_after=0.85))
    assert "still 16 points above it" in partial and "partial removal" in partial and "is gone" not in partial
    nothing = removal_sentence(amnesic(rank=0, iterations=0, probe_before=0.70))
    assert "no better than always guessing the commonest label (70% against 69%), so there was nothing to remove" \
           in nothing


def test_the_model_is_said_to_use_it_only_beyond_every_random_draw():
    used = use_sentences(amnesic())
    assert "1.700 nats with nothing removed and 1.900 with noun number removed" in used[0]
    assert "1.720 on average (1.700 to 1.740 over 5 draws)" in used[0]
    assert "Top-1 accuracy: 60.0%, 50.0% and 59.6% (58.0% to 61.0%)" in used[0]
    assert "moves the loss and the accuracy further than each of the 5 random draws" in used[1]
    assert "found and used" in used[1]
    unmoved = use_sentences(amnesic(loss_after=1.73, accuracy_after=0.59))
    assert "not shown to be used" in unmoved[1] and "found and used" not in unmoved[1]
    better = use_sentences(amnesic(loss_after=1.60, accuracy_after=0.62))  # beyond every draw, the other way
    assert "not shown to be used" in better[1]
    assert use_sentences(amnesic(masked=0)) == [NO_MLM]
    assert "cannot be tested where no probe finds it" in use_sentences(amnesic(rank=0))[0]


def test_agreement_is_said_to_fall_only_beyond_twice_the_standard_error():
    fell = agreement_sentence(amnesic())  # 1 attractor: 60% against 79%, 19 points; 2 se of 100 pairs: 10
    assert "1 attractor: 80% → 60% (random 79%)" in fell
    assert "With 2 attractors it falls 20 points below the random projections' mean" in fell
    assert "the model uses number for agreement" in fell
    held = agreement_sentence(amnesic(agreement_after={0: 0.94, 1: 0.75, 2: 0.65, 3: 0.55}))  # at most 6 points
    assert "not shown to be used for agreement" in held and "uses number" not in held
    ks, before, after, random, pairs = agreement_rows(amnesic(agreement_before={0: 0.9, 1: None, 2: 0.5, 3: 0.5}))
    assert ks == [0, 1, 2, 3] and np.isnan(before[1]) and pairs == [100] * 4
    table = amnesic_table(amnesic())
    assert table["measure"].tolist()[:3] == ["probe accuracy", "masked-LM loss (nats)", "masked-LM accuracy"]
    assert table.iloc[1]["random removed (mean)"] == pytest.approx(1.72)


def test_the_notes_leave_out_what_the_sentences_already_say():
    a = amnesic(note="this model has no masked-language-model head, so what the removal does cannot be measured; "
                     "3 sentences were left out")
    assert notes(a) == ["3 sentences were left out."]
    assert vs.layer_label(0) == "0 (embeddings)"  # the layers are named as the rest of the page names them
