"""`PatchAsk` checks what a learner typed once, with one sentence for each mistake, and keeps what is right."""

from __future__ import annotations

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.views.patching.ask import DRAWS, MAX_DRAWS, NOISE_SCALE, PatchAsk

CLEAN, CORRUPT = "the keys to the cabinet [MASK] here .", "the key to the cabinet [MASK] here ."


def test_defaults_and_normalised_fields():
    ask = PatchAsk(CLEAN, CORRUPT, answer=None, noised=[2, 1])
    assert (ask.answer, ask.foil, ask.draws, ask.scale, ask.seed, ask.position) == ("", "", DRAWS, NOISE_SCALE, 0,
                                                                                    None)
    assert ask.noised == (2, 1) and isinstance(ask.noised, tuple)
    assert PatchAsk(CLEAN, noise=True, noised=(1,)).corrupt == ""


@pytest.mark.parametrize("kwargs,words", [
    (dict(clean="  "), "clean sentence is empty"),
    (dict(clean=CLEAN, corrupt=""), "corrupted sentence is empty"),
    (dict(clean=CLEAN, corrupt=3), "corrupt must be text, not int"),
    (dict(clean=CLEAN, corrupt=CORRUPT, draws=0), f"whole number from 1 to {MAX_DRAWS}"),
    (dict(clean=CLEAN, corrupt=CORRUPT, draws=MAX_DRAWS + 1), f"whole number from 1 to {MAX_DRAWS}"),
    (dict(clean=CLEAN, corrupt=CORRUPT, draws=2.5), "noise draws must be a whole number"),
    (dict(clean=CLEAN, corrupt=CORRUPT, draws=True), "noise draws must be a whole number"),
    (dict(clean=CLEAN, corrupt=CORRUPT, seed="1"), "seed must be a whole number"),
    (dict(clean=CLEAN, corrupt=CORRUPT, scale=0), "noise scale must be a number above 0"),
    (dict(clean=CLEAN, corrupt=CORRUPT, scale=101), "at most 100"),
    (dict(clean=CLEAN, corrupt=CORRUPT, scale="3"), "noise scale must be a number"),
    (dict(clean=CLEAN, corrupt=CORRUPT, position=1.5), "position must be a whole number"),
    (dict(clean=CLEAN, noise=True, noised=("a",)), "tokens to noise must be token positions"),
])
def test_each_mistake_is_one_sentence(kwargs, words):
    with pytest.raises(InputError) as caught:
        PatchAsk(**kwargs)
    message = str(caught.value)
    assert words in message and "\n" not in message and "Traceback" not in message


def test_right_values_at_the_edges_pass():
    assert PatchAsk(CLEAN, CORRUPT, draws=MAX_DRAWS, scale=100, seed=-3, position=0).draws == MAX_DRAWS
    assert PatchAsk(CLEAN, noise=True, draws=1, scale=0.01).scale == 0.01
