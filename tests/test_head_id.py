"""bertviz_lab/head_id.py: a head's name, "L2 H1", written and read back in one place."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.head_id import HeadId
from bertviz_lab.views.attention import explorer as av


def test_every_head_of_a_model_round_trips_through_its_name():
    heads = HeadId.every(12, 12)
    assert len(set(heads)) == 144 and heads[:3] == [HeadId(0, 0), HeadId(0, 1), HeadId(0, 2)] and heads == sorted(heads)
    assert all(HeadId.parse(str(head)) == head for head in heads)
    assert str(HeadId(2, 11)) == "L2 H11" and HeadId(2, 11).in_words == "layer 2 head 11"
    assert av.head_names(2, 2) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]  # the head switch's options


@pytest.mark.parametrize("name", ["", "L2H1", "L2  H1", "l2 h1", "L2 h1", "H1 L2", "L-1 H0", "L2 H1 ", " L2 H1",
                                  "L2 H1x", "L2.0 H1", "L12345 H0", "L0 H12345", "layer 2 head 1", "L２ H1", None, 21])
def test_a_malformed_name_is_refused_with_the_reason_a_link_gives(name):
    with pytest.raises(ValueError, match="^is not a head like L0 H1$"):
        HeadId.parse(name)


def test_a_head_is_counted_from_zero_in_whole_numbers():
    assert HeadId(np.int64(3), np.intp(1)) == HeadId(3, 1) and type(HeadId(np.int64(3), 1).layer) is int  # an argmax
    with pytest.raises(ValueError, match="counted from 0"):
        HeadId(-1, 0)
    with pytest.raises(TypeError):
        HeadId(1.5, 0)
    with pytest.raises(TypeError):
        HeadId("1", 0)
