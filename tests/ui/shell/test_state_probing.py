"""The "Probing, carefully" tab's session keys (ui/shell/state_probing.py): the Syntax page's own, one each, opening on
the first task and on number for the amnesic probe, and the tab's choices a link carries (ui/shell/links.py) read back
into their keys, a task or hidden state out of range refused by its reader."""

from __future__ import annotations

import pytest

from bertviz_lab.probing.records import TASKS
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_probing import Careful


def test_the_keys_are_the_syntax_pages_and_open_on_a_task_each():
    keys = [v for v in vars(Careful).values() if isinstance(v, Key)]
    assert all(k.name.startswith("syntax.careful.") for k in keys) and len({k.name for k in keys}) == len(keys)
    assert Careful.TASK.default == TASKS[0] and Careful.AMNESIC_TASK.default == "number"
    assert Careful.AMNESIC_LAYER.default is None and Careful.RUN not in Careful.INPUTS  # a button is never in a link


def test_a_link_carries_the_tabs_choices_and_refuses_what_is_not_one():
    params = {p.key: p for p in links.PAGES["syntax"]}
    assert set(Careful.INPUTS) <= set(params)
    assert params[Careful.TASK].read("dep") == "dep" and params[Careful.AMNESIC_LAYER].read("2") == 2
    for key, bad in ((Careful.TASK, "srl"), (Careful.AMNESIC_TASK, "<b>"), (Careful.AMNESIC_LAYER, "-1")):
        with pytest.raises(ValueError):
            params[key].read(bad)
