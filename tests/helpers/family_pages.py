"""The pages every family's model opens. Moved here from tests/pages/test_families.py, which uses them too."""

from __future__ import annotations

from tests.helpers.paths import ROOT


PAGES = ROOT / "pages"
