"""Issue 52, point 12: a layer, head or mask given as text in the notebook gets one sentence saying a whole number
is needed, the same in every call, not "layer '1' does not exist" for a layer that does."""

from __future__ import annotations

import pytest

import bertviz_lab.notebook as nb
from bertviz_lab.errors import InputError

TEXT = "the cat sat on the [MASK] ."


@pytest.fixture(scope="module")
def lab():
    return nb.load("bertviz-mini", device="cpu")


@pytest.mark.parametrize("call", [
    lambda lab: nb.why(lab, TEXT, layer="1"),
    lambda lab: nb.why(lab, TEXT, head="1"),
    lambda lab: nb.deletion(lab, TEXT, layer="1"),
    lambda lab: nb.attention(lab, TEXT, layer="1"),
    lambda lab: nb.softmax_steps(lab, TEXT, head="0"),
])
def test_a_number_given_as_text_says_a_whole_number_is_needed(lab, call):
    with pytest.raises(InputError) as raised:
        call(lab)
    said = str(raised.value)
    assert "whole number" in said and "does not exist" not in said and "'" in said and "\n" not in said
