"""Every page with each family's model: it opens, runs, and says what the family lacks instead of failing."""

from __future__ import annotations

from pathlib import Path

import pytest
from family_models import build
from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[1] / "pages"
MEMBERS = ["distilbert", "roberta", "xlm-roberta", "electra-generator", "electra-discriminator", "albert"]


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(request.param, folder)
    return request.param, folder


def page(name: str, folder: Path, sentence: str | None = None) -> AppTest:
    script = PAGES.parent / "app.py" if name == "home" else PAGES / f"{name}.py"  # Home is app.py's first page
    at = AppTest.from_file(str(script), default_timeout=120)
    at.session_state["model.path"] = str(folder)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def notes(at: AppTest) -> str:
    return " ".join(m.value for m in [*at.info, *at.warning, *at.error, *at.caption])


@pytest.mark.parametrize("name", ["home", "predict", "attention", "representations", "losses"])
def test_every_page_opens_with_each_family(member, name):
    family, folder = member
    at = page(name, folder)
    if name == "home":
        assert "has no NSP head" in notes(at) or "no NSP" in notes(at)
    if name == "attention":
        assert at.get("plotly_chart")  # attention is drawn for every family


def test_predict_fills_masks_or_flags_replaced_tokens(member):
    family, folder = member
    at = page("predict", folder)
    if family == "electra-discriminator":
        assert any(h.value == "Which tokens look replaced?" for h in at.subheader)
        assert "no MLM head" in notes(at) and at.get("plotly_chart")
    else:
        assert any(h.value.startswith("The guess") for h in at.subheader), notes(at)


def test_losses_says_why_there_is_no_nsp_term(member):
    family, folder = member
    at = page("losses", folder)
    text = notes(at)
    assert "no NSP head" in text or "no MLM head" in text, text
