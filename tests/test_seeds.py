"""The seed texts are named by their subject wherever a page quotes one (bertviz_lab/seeds.py), never as a bare
"seed 000" that means nothing to a reader."""

from __future__ import annotations

import re

import pytest

from bertviz_lab import seeds
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

BARE = re.compile(r"(?<!seed text )\bseeds? 00\d", re.IGNORECASE)  # "Seed 002's batch", "seed 000" unnamed
SEED_FOLDER = ROOT.parent / "shared" / "seeds"  # the documents themselves, where this checkout has them


def shown(at) -> list[str]:
    """Every sentence, label and column name the page drew."""
    words = [e.value for kind in ("title", "caption", "markdown", "text", "info", "warning", "subheader")
             for e in getattr(at, kind)]
    words += [t.label for t in at.tabs] + [m.label for m in at.metric]
    words += [o for g in at.get("button_group") for o in getattr(g, "options", [])]
    words += [str(c) for df in at.dataframe for c in df.value.columns]
    return words


def test_cite_names_the_text_and_its_number():
    assert seeds.cite("000") == "the worked forward pass (seed text 000)"
    assert seeds.cite("001", start=True) == "The academic manual (seed text 001)"
    assert seeds.cite("004", parens=False) == "the mathematical formulation, seed text 004"
    assert set(seeds.NAMES) == {"000", "001", "002", "003", "004"}


@pytest.mark.skipif(not SEED_FOLDER.is_dir(), reason="the seed documents are not in this checkout")
def test_every_seed_document_has_a_name():
    numbers = {p.name[:3] for p in SEED_FOLDER.glob("[0-9][0-9][0-9]_*.txt")}
    assert numbers == set(seeds.NAMES)


@pytest.mark.parametrize("page, tab, expected", [
    ("worked", None, ["the worked forward pass (seed text 000)", "the academic manual (seed text 001)"]),
    ("representations", "Same word, different contexts", ["The BERT tutorial (seed text 002)"]),
    ("representations", "Nearest neighbours", ["The academic manual (seed text 001), exercise 2"]),
    ("representations", "Shapes and padding", ["The batch of the BERT tutorial (seed text 002)"]),
])
def test_pages_name_the_seed_texts_they_quote(page, tab, expected):
    at = app_test(ROOT / "pages" / f"{page}.py", 120)
    if tab:
        at.session_state["repr.tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    words = shown(at)
    assert not [w for w in words if BARE.search(w)]
    for name in expected:
        assert any(name in w for w in words), name
