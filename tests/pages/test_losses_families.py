"""Losses step by step names, for each family's own tokenizer, the tokens a 10% random replacement can be and the
ones it never is, under both `random_tokens` settings, and the masking rule itself agrees with the sentence."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert import masking
from bertviz_lab.bert.checkpoint import load_checkpoint
from tests.helpers.family_models import build
from tests.helpers.lab import open_page
from tests.helpers.paths import ROOT

PAGE = ROOT / "pages" / "losses.py"
MEMBERS = ["bert", "distilbert", "roberta", "electra-generator", "albert"]  # every family with an MLM head
BERT_ONLY = {"[PAD]", "[UNK]"}  # BERT's spelling: named for another family only if its tokenizer has them


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    _, tokenizer = build(request.param, folder)
    return folder, set(tokenizer.all_special_tokens)  # the family's own special tokens, as transformers says


def drawn(ckpt, random_tokens: str) -> set[str]:
    """Every token the rule put where it replaced with a random token, over many draws."""
    tok = ckpt.tokenizer
    ids = torch.tensor([tok.cls_id] + list(range(5, 45)) + [tok.sep_id])
    ids = ids.clamp(max=tok.vocab_size - 1).repeat(400, 1)
    result = masking.mask_tokens(ids, special_ids=tok.special_ids, vocab_size=tok.vocab_size, mask_id=tok.mask_id,
                                 generator=torch.Generator().manual_seed(0), mask_rate=0.99, mask_prob=0.0,
                                 random_prob=1.0, random_tokens=random_tokens)
    return {tok.id_to_token(i) for i in result.input_ids[result.actions == masking.ACTION_RANDOM].tolist()}


def caption(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Active:")).replace("\\", "")


def test_the_page_names_this_familys_specials_as_drawn_or_never_drawn(member):
    folder, specials = member
    assert len(specials) == 5
    at = open_page(PAGE, folder, losses__all=True)
    shown = caption(at)
    assert "every token can be drawn" in shown and all(t in shown for t in specials), shown
    assert not [t for t in BERT_ONLY - specials if t in shown]
    steps = "\n".join(t.value for t in at.text)
    assert "every token can be drawn" in steps and all(t in steps for t in specials)

    at.radio(key="losses.random_tokens").set_value("wordpieces").run()
    assert not at.exception
    shown = caption(at)
    never = shown.split("tokenizer: ")[1].split(" are never drawn")[0]
    assert sorted(never.replace(" and ", ", ").split(", ")) == sorted(specials), shown
    assert not [t for t in BERT_ONLY - specials if t in shown]
    assert "are never drawn" in "\n".join(t.value for t in at.text)


def test_the_rule_draws_what_the_page_says(member):
    folder, specials = member
    ckpt = load_checkpoint(folder)
    assert specials <= drawn(ckpt, "vocabulary")  # the whole vocabulary: every special can come up
    assert not specials & drawn(ckpt, "wordpieces")  # never one of them
