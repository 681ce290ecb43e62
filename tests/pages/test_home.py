"""The app's one page list and its sections: the menu (in the sidebar, and at the top in projector view) and Home's
"Where to start" show the same sections in the same order; with a model that cannot guess words Home links only
the pages that work without an MLM head."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit
import torch

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.ui.shell.router import HOME, PAGES, by_section
from tests.helpers.lab import app_test, open_page
from tests.helpers.paths import ROOT

HOME_PAGE = ROOT / "app.py"  # Home is the default page; its links resolve only under the router
NEED_A_GUESS = {"Mask & predict", "Why this guess?", "Where is the answer made?", "Losses step by step"}


def linked(at) -> list[str]:
    """The labels of the page links Home drew, in order."""
    return [e.proto.label for e in at.get("page_link")]


def headings(at) -> list[str]:
    """The section headings Home drew under "Where to start", in order."""
    return [m.value.removeprefix("##### ") for m in at.markdown if m.value.startswith("##### ")]


def test_the_page_list_is_every_page_file_and_the_menu_reads_it():
    assert sorted(p.path for p in PAGES) == sorted(f"pages/{f.name}" for f in (ROOT / "pages").glob("*.py"))
    assert all(p.blurb for p in PAGES if p is not HOME)


def test_every_page_is_in_one_section_and_the_sections_keep_the_lists_order():
    sections = by_section()
    assert list(sections) == ["Start", "Read a sentence", "Explain a guess", "Across a corpus", "Train"]
    assert [p for pages in sections.values() for p in pages] == list(PAGES)  # each section's pages together, once
    assert all(pages for pages in sections.values()) and HOME in sections["Start"]
    part = PAGES[3:1:-1]  # a part of the list, in another order: grouped in its own order
    assert list(by_section(part).items()) == [(p.section, [p]) for p in part] and part[0].section != part[1].section


def menus(monkeypatch, projector: bool) -> list:
    """The arguments of each st.navigation call app.py made while drawing Home (in projector view or not)."""
    calls, navigation = [], streamlit.navigation

    def recorded(pages, **options):
        calls.append((pages, options))
        return navigation(pages, **options)

    monkeypatch.setattr(streamlit, "navigation", recorded)
    at = app_test(HOME_PAGE, timeout=120)
    if projector:
        at.query_params["projector"] = "1"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return calls


@pytest.mark.parametrize("projector, position", [(False, "sidebar"), (True, "top")])
def test_the_menu_is_the_routers_sections_in_order(monkeypatch, projector, position):
    (menu, options), = menus(monkeypatch, projector)
    assert options["position"] == position  # top: a dropdown per section
    assert list(menu) == list(by_section())
    assert {s: [(p.title, p.url_path) for p in pages] for s, pages in menu.items()} == \
        {s: [(p.title, "" if p is HOME else Path(p.path).stem) for p in pages] for s, pages in by_section().items()}


def test_home_links_every_page_with_a_model_that_has_every_head():
    at = open_page(HOME_PAGE)
    assert linked(at) == [p.title for p in PAGES if p is not HOME]
    assert headings(at) == list(by_section())  # the menu's sections, Start without Home
    assert {"Lesson", "Why this guess?", "Syntax across a corpus"} <= set(linked(at))
    assert not any("need" in c.value and "MLM" in c.value for c in at.caption)


@pytest.mark.parametrize("heads, left_out", [
    ({"mlm_head": False, "nsp_head": False}, NEED_A_GUESS),  # a bare BertModel
    ({"mlm_head": False, "nsp_head": False, "rtd_head": True}, {"Losses step by step"}),  # ELECTRA's discriminator
])
def test_home_sends_a_model_without_an_mlm_head_only_where_it_works(tmp_path, tiny_config, tiny_tokenizer,
                                                                   heads, left_out):
    torch.manual_seed(0)
    folder = save_checkpoint(BertForPreTraining(tiny_config, **heads), tiny_tokenizer, tmp_path / "headless")
    at = open_page(HOME_PAGE, folder)
    assert linked(at) == [p.title for p in PAGES if p is not HOME and p.title not in left_out]
    assert headings(at) == list(dict.fromkeys(p.section for p in PAGES if p.title in linked(at)))  # empty ones left out
    note = next(c.value for c in at.caption if "masked-language-model (MLM) head" in c.value)
    assert all(title in note for title in left_out)
    assert ("needs" if len(left_out) == 1 else "need") + " a masked-language-model (MLM) head" in note
