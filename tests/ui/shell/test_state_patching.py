"""The patching page's session keys (ui/shell/state_patching.py): named for their page, one each, opening on a
built-in pair, and every input a link carries (ui/shell/links.py) read back into its own key."""

from __future__ import annotations

from bertviz_lab.corpus.minimal_pairs import PAIRS
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell.state import Key
from bertviz_lab.ui.shell.state_patching import DEFAULT_PAIR, Patch


def test_the_keys_are_the_pages_own_and_open_on_a_built_in_pair():
    keys = [v for v in vars(Patch).values() if isinstance(v, Key)]
    assert all(k.name.startswith("patch.") for k in keys) and len({k.name for k in keys}) == len(keys)
    assert DEFAULT_PAIR in PAIRS and Patch.PAIR.default == DEFAULT_PAIR.key
    assert (Patch.CLEAN.default, Patch.CORRUPT.default) == (DEFAULT_PAIR.clean, DEFAULT_PAIR.corrupt)


def test_a_link_carries_every_input_and_reads_each_value_back():
    params = {p.key: p for p in links.PAGES["patching"]}
    assert set(params) == set(Patch.INPUTS)
    assert params[Patch.GRID].read("heads") == "heads" and params[Patch.DRAWS].read("3") == 3
    for param, bad in ((Patch.GRID, "everything"), (Patch.DIRECTION, "sideways"), (Patch.DRAWS, "51")):
        try:
            params[param].read(bad)
        except ValueError:
            continue
        raise AssertionError(f"{param.name} read {bad!r}")
