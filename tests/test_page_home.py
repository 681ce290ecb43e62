"""Home's "Where to start": every page of the app's one page list, and with a model that cannot guess words only
the pages that work without an MLM head."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import open_page

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.ui.shell.router import HOME, PAGES

ROOT = Path(__file__).resolve().parents[1]
HOME_PAGE = ROOT / "app.py"  # Home is the default page; its links resolve only under the router
NEED_A_GUESS = {"Mask & predict", "Why this guess?", "Losses step by step"}


def linked(at) -> list[str]:
    """The labels of the page links Home drew, in order."""
    return [e.proto.label for e in at.get("page_link")]


def test_the_page_list_is_every_page_file_and_the_menu_reads_it():
    assert sorted(p.path for p in PAGES) == sorted(f"pages/{f.name}" for f in (ROOT / "pages").glob("*.py"))
    assert "PAGES = [st.Page(p.path, title=p.title, icon=p.icon, default=p is HOME) for p in ROUTER_PAGES]" in \
        (ROOT / "app.py").read_text(encoding="utf-8")
    assert all(p.blurb for p in PAGES if p is not HOME)


def test_home_links_every_page_with_a_model_that_has_every_head():
    at = open_page(HOME_PAGE)
    assert linked(at) == [p.title for p in PAGES if p is not HOME]
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
    note = next(c.value for c in at.caption if "masked-language-model (MLM) head" in c.value)
    assert all(title in note for title in left_out)
    assert ("needs" if len(left_out) == 1 else "need") + " a masked-language-model (MLM) head" in note
