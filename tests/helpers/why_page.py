"""The Why-this-guess page in AppTest, opened on a model. Moved here from tests/pages/test_why.py, which uses them too."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.helpers.lab import open_page
from tests.helpers.paths import ROOT


PAGE = str(ROOT / "pages" / "why.py")


def page(folder: Path | None = None, **session) -> AppTest:
    """The page on the shipped model (or the one in `folder`); `session`: keys, "." written "__"."""
    return open_page(PAGE, folder, **session)
