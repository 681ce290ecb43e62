"""The Syntax page's "Probing, carefully" tab in AppTest, on the shipped model and the story world's smallest sample
(100 sentences): nothing runs before its button; the button runs the probes once for the class and the tab draws the
record's numbers (accuracy by hidden state, the expected layers, the mix, a task against its control, the codelength),
says the task too rare to probe once, and a change of task computes nothing again; the amnesic button removes number
at the middle hidden state and shows "Found by a probe" beside "Used by the model" with agreement by attractors. Your
own sentences get one sentence, and ELECTRA's discriminator (no masked-LM head) is said to have its guesses untested."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.probing.amnesic import default_layer
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, model_key
from bertviz_lab.ui.shell.state_probing import TAB
from bertviz_lab.ui.syntax.probing import PROBED, REMOVED
from bertviz_lab.views.syntax.amnesic import NO_MLM
from bertviz_lab.views.syntax.probing import NO_TREES, missing_sentences, order_sentence, selectivity_sentences
from tests.helpers.family_models import build
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import open_page
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = str(ROOT / "pages" / "syntax.py")
SENTENCES = 100  # the page's smallest sample of the story world


@pytest.fixture(scope="module", autouse=True)
def fresh():
    PROBED.clear()
    REMOVED.clear()
    yield
    PROBED.clear()
    REMOVED.clear()


def said(at: AppTest) -> str:
    return " ".join(shown(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.error, *at.warning])


def charts(at: AppTest) -> dict[str, list[dict]]:
    """Each chart's traces, by its title."""
    return {f["layout"]["title"]["text"]: f["data"] for f in figures(at)}


def trace(at: AppTest, title: str, name: str) -> np.ndarray:
    data = next(v for k, v in charts(at).items() if k.startswith(title))
    return array(next(t for t in data if t.get("name") == name)["y"])


def page(folder=None, **session) -> AppTest:
    return open_page(PAGE, folder, 300, syntax__tab=TAB, **session)


@pytest.fixture(scope="module")
def ran() -> AppTest:
    at = page(syntax__sentences=SENTENCES)
    assert not at.get("plotly_chart") and "Run the probes" in [b.label for b in at.button]
    assert f"Reads {SENTENCES} sentences with this model and with random weights" in said(at)
    at.button(key="syntax.careful.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def probing(at: AppTest):
    slot = PROBED.slot((model_key(shipped_ckpt()), ("story", SENTENCES)))
    assert slot.ready()
    return slot.start(None)[0].result


def shipped_ckpt():
    from bertviz_lab.ui.shell.models import cached_checkpoint

    return cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")


def test_the_button_runs_the_probes_and_every_section_draws_the_records_numbers(ran):
    p = probing(ran)
    text = said(ran)
    heads = [h.value for h in ran.subheader]
    assert heads[:4] == ["1 · Layer by layer", "2 · Control tasks: is it the vectors or the probe?",
                         "3 · Description length: how easily is it read?", "4 · Amnesic probing: found, but used?"]
    assert heads[-1] == "What a probe cannot prove"
    assert "coref" in p.missing and list(p.tasks) == ["pos", "dep", "number"]  # 100 sentences: too few pronouns
    for sentence in missing_sentences(p):
        assert text.count(sentence) == 1
    for task, name in (("pos", "part of speech"), ("dep", "dependency label"), ("number", "noun number")):
        np.testing.assert_array_equal(trace(ran, "The linear probe's accuracy", name), p.tasks[task].linear.accuracy)
    assert order_sentence(p) in text
    pos = p.tasks["pos"]
    np.testing.assert_array_equal(trace(ran, "Part of speech: task and control", "MLP probe, control task"),
                                  pos.mlp.control)
    np.testing.assert_allclose(trace(ran, "Online codelength of part of speech", "the task"), pos.codelength.online / 1000)
    for sentence in selectivity_sentences("pos", pos):
        assert sentence in text
    assert max(pos.linear.accuracy) > pos.majority + 0.3  # the shipped model reads part of speech


def test_a_change_of_task_draws_it_and_computes_nothing_again(ran):
    before = probing(ran)
    ran.selectbox(key="syntax.careful.task").set_value("number").run()
    assert not ran.exception
    assert probing(ran) is before  # the one result, read again
    np.testing.assert_array_equal(trace(ran, "Noun number: task and control", "linear probe, task"),
                                  before.tasks["number"].linear.accuracy)


def test_the_amnesic_button_shows_found_beside_used(ran):
    assert ran.selectbox(key="syntax.careful.amnesic_task").value == "number"
    assert ran.segmented_control(key="syntax.careful.amnesic_layer").value == default_layer(4) == 2
    ran.button(key="syntax.careful.remove").click().run()
    assert not ran.exception, [e.value for e in ran.exception]
    text = said(ran)
    assert "Found by a probe" in text and "Used by the model" in text
    assert "Iterative nullspace projection took" in text and "at hidden state 2" in text
    assert "masked-LM loss is" in text and ("found and used" in text or "not shown to be used" in text)
    assert "Agreement, right form above the wrong one" in text
    titles = list(charts(ran))
    assert any(t.startswith("Agreement by attractors") for t in titles)
    assert any(t.startswith("Masked-LM loss, ") for t in titles)


def test_your_own_sentences_get_one_sentence():
    at = page(syntax__source="own")
    assert NO_TREES in said(at) and not at.get("plotly_chart")


@pytest.fixture(scope="module")
def discriminator(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("electra") / "model"
    build("electra-discriminator", folder)
    return folder


def test_a_model_without_a_masked_lm_head_says_its_guesses_are_untested(discriminator):
    at = page(discriminator, syntax__sentences=SENTENCES)
    at.button(key="syntax.careful.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    tasks = at.selectbox(key="syntax.careful.amnesic_task").options
    at.selectbox(key="syntax.careful.amnesic_task").set_value(tasks[0]).run()
    at.button(key="syntax.careful.remove").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert NO_MLM in said(at) and not any(t.startswith("Masked-LM loss") for t in charts(at))
