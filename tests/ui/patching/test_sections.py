"""The patching page's words about its runs (ui/patching/sections.py): what F is and where it is read, and which
answer and foil it uses, typed or picked by default, read from the prepared runs."""

from __future__ import annotations

from bertviz_lab.ui.patching import sections as ui_patching
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.figure_data import shown

CLEAN, CORRUPT = "the children in the park [MASK] happy .", "the child in the park [MASK] happy ."


def prepared(**ask) -> vpa.Patching:
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    return vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(CLEAN, **ask))


def test_the_score_line_names_the_metric_and_the_mask():
    patching = prepared(corrupt=CORRUPT, answer="were", foil="was")
    assert shown(ui_patching.score_line(patching)) == "**F = logit(were) - logit(was)** at '[MASK]' (token 6)."
    assert shown(ui_patching.used(patching)) == "Answer **were** (typed), foil **was** (typed)."


def test_empty_boxes_say_which_defaults_were_used():
    patching = prepared(corrupt=CORRUPT)
    assert shown(ui_patching.used(patching)) == (
        f"Answer **{patching.answer}** (the clean run's top guess), foil **{patching.foil}** (the corrupted run's "
        "top guess other than the answer).")
    noised = prepared(noise=True, noised=(2,), draws=2, answer="were")
    assert "foil **" + noised.foil + "** (the clean run's next guess)" in shown(ui_patching.used(noised))
