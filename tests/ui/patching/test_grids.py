"""The patching page's grids (ui/patching/ui_patch_grids.py): every view names its grids, a check reads passed or failed,
and a heatmap's title says what was patched and which way."""

from __future__ import annotations

import numpy as np

from bertviz_lab.explain.patch_grids import GRIDS, Grid
from bertviz_lab.ui.patching import grids as ui_patch_grids
from bertviz_lab.ui.shell.state_patching import VIEWS
from bertviz_lab.views.patching.reading import Check


def test_every_view_draws_known_grids_and_every_grid_is_offered():
    assert set(ui_patch_grids.KINDS) == set(VIEWS) == set(ui_patch_grids.VIEW_TITLES)
    assert sorted(k for kinds in ui_patch_grids.KINDS.values() for k in kinds) == sorted(GRIDS)


def test_a_check_reads_passed_or_failed_with_its_detail():
    ok = ui_patch_grids.check_line(Check("nothing patched gives the target run's score", True, "off by 1e-06"))
    bad = ui_patch_grids.check_line(Check("nothing patched gives the target run's score", False, "off by 0.3"))
    assert ok.startswith("- :green[") and "**passed**" in ok and ok.endswith("off by 1e\\-06.")
    assert bad.startswith("- :red[") and "**failed**" in bad and "Nothing patched" in bad


def test_a_title_says_what_was_patched_and_which_way():
    zeros = np.zeros((3, 4))
    qkv = Grid("qkv", "noise", zeros, zeros, ["query", "key", "value"], zeros[0], 0.0, (1, 2))
    assert ui_patch_grids.title(qkv) == "Head 2.3's query, key and value, by position · corrupted into clean (noising)"
