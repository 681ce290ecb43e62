"""The feed-forward page's sentence and neuron sections (ui/neurons/sections.py): a top context drawn with its firing
token marked and every token shown as typed (a corpus is the learner's text: no link, image or HTML comes through),
and the discriminator's words on the family note."""

from __future__ import annotations

import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.ui.neurons import sections as ui_neurons
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.shell.text import WORD_JOINER, plain
from tests.helpers.family_models import build
from tests.helpers.figure_data import shown

PAYLOADS = ["[Click](https://evil.example/phish)", "<img src=https://evil.example/x.png>", "**bold**"]


def test_a_context_marks_its_firing_token_and_shows_the_others_as_typed():
    line = ui_neurons.context_line(("[CLS]", "the", "dogs", "were", "happy", "[SEP]"), 3, 2.25)
    assert line.startswith("- `2.250` ") and line.count(":orange-background[") == 1
    assert shown(line) == "- `2.250` the dogs :orange-background[**were**] happy"  # no framing tokens


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("position", [0, 1])
def test_typed_markup_in_a_context_is_escaped_whether_it_fires_or_not(payload, position):
    line = ui_neurons.context_line(("[CLS]", payload, "cat", "[SEP]"), position + 1, 1.0)
    assert plain(payload) in line and payload not in line  # every markup character escaped (ui/shell/text.py)
    assert payload in shown(line).replace(WORD_JOINER, "")  # as typed once the escapes are read


def test_the_family_note_names_the_discriminators_guess_only_for_a_discriminator(tmp_path):
    assert ui_neurons.family_words(cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")) is None
    build("electra-discriminator", tmp_path / "electra")
    words = ui_neurons.family_words(load_checkpoint(tmp_path / "electra"))
    assert words.startswith("This is a discriminator") and "replaced-token logit" in words
