"""The feed-forward page's guess sections (ui/neurons/guess.py): which models have no guess to look behind (neither an
MLM head nor ELECTRA's replaced-token head: ui/neurons/sections.py's `no_guess`, which both sections say), said in a
sentence that names why and what to do; and the method picker's labels."""

from __future__ import annotations

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.ui.neurons import guess as ui_neurons_guess
from bertviz_lab.ui.neurons import sections as ui_neurons
from tests.helpers.family_models import build


def test_only_a_model_with_neither_head_has_no_guess(tmp_path, tiny_checkpoint, headless_checkpoint):
    assert ui_neurons.no_guess(load_checkpoint(tiny_checkpoint)) == ""
    build("electra-discriminator", tmp_path / "electra")
    assert ui_neurons.no_guess(load_checkpoint(tmp_path / "electra")) == ""  # its replaced-token logit
    said = ui_neurons.no_guess(load_checkpoint(headless_checkpoint))
    assert said.startswith("This model has no masked-language-model (MLM) head: ")
    assert said.endswith("so it makes no guess for its neurons to move. Pick another model in the sidebar.")


def test_the_method_labels_name_every_method_the_ask_takes():
    from bertviz_lab.views.neurons.ask import METHODS

    assert set(ui_neurons_guess.METHOD_LABELS) == set(METHODS)
