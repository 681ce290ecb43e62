"""Where is the answer made? in AppTest, on the shipped model: the default pair's residual grid holds the numbers
`views.patching` gives for the same pair, with its sentences and its checks passed; a bad pair says one sentence and
draws nothing; a built-in pair, another grid, another direction, noise and a link each change what they should."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.corpus.minimal_pairs import by_key
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.shell.state_patching import DEFAULT_PAIR
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import app_test, open_page
from tests.helpers.patch_grids import assert_same_grid
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "patching.py")


def expected(ask: PatchAsk) -> vpa.Patching:
    """The two runs, recorded here independently of the page."""
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    return vpa.prepare(ckpt.model, ckpt.tokenizer, ask)


def heatmaps(at: AppTest) -> dict[str, dict]:
    """Each heatmap's trace, by its title."""
    return {f["layout"]["title"]["text"]: f["data"][0] for f in figures(at)}


def text(at: AppTest) -> str:
    return "\n".join(shown(m.value) for m in at.markdown)


DEFAULT = PatchAsk(DEFAULT_PAIR.clean, DEFAULT_PAIR.corrupt, DEFAULT_PAIR.answer, DEFAULT_PAIR.foil)


def test_the_default_pair_draws_its_residual_grid_sentences_and_passed_checks():
    at = open_page(PAGE)
    patching = expected(DEFAULT)
    resid = vpa.grid(patching, "resid", "denoise")
    assert not at.error
    ((name, heat),) = heatmaps(at).items()
    assert name.startswith("The residual stream, depth by position")
    drawn = assert_same_grid(patching, resid, array(heat["z"]), array(heat["customdata"]))
    assert heat["y"] == resid.rows and heat["x"][6] == "6 [MASK]"
    shown_text = text(at)
    for sentence in vpa_read.sentences(patching, drawn):
        assert sentence in shown_text
    checks = [line for m in at.markdown for line in m.value.splitlines() if "passed**]" in line or "failed**]" in line]
    assert len(checks) == len(vpa_read.checks(patching, resid)) == 4 and all("passed" in c for c in checks)
    assert "F = logit(were) - logit(was)** at '[MASK]' (token 6)" in shown_text
    assert "Answer **were** (typed), foil **was** (typed)" in shown_text
    assert [m.value for m in at.metric][:2] == [f"{patching.f_clean:.4f}", f"{patching.traced.p_clean:.4f}"]
    assert vpa_read.LIMITS in [m.value for m in at.markdown]
    assert len(at.dataframe) == 2  # each run's top guesses


@pytest.mark.parametrize(("clean", "corrupt", "says"), [
    ("the children in the park [MASK] happy .", "the child in the big park [MASK] happy .", "same length in tokens"),
    ("the children in the park were happy .", "the child in the park were happy .", "has no [MASK]"),
    ("the children in the park [MASK] happy .", "the children in the park [MASK] happy .", "are the same"),
])
def test_a_pair_that_cannot_be_patched_says_one_sentence_and_draws_nothing(clean, corrupt, says):
    at = open_page(PAGE, patch__clean=clean, patch__corrupt=corrupt)
    assert len(at.error) == 1 and says in shown(at.error[0].value), [e.value for e in at.error]
    assert not at.get("plotly_chart") and not at.metric


def test_a_built_in_pair_fills_the_boxes_and_runs():
    at = open_page(PAGE)
    pair = by_key("determiner")
    at.selectbox(key="patch.pair").set_value(pair.key).run()
    assert not at.exception and not at.error
    assert (at.text_input(key="patch.clean").value, at.text_input(key="patch.corrupt").value) == (pair.clean,
                                                                                                  pair.corrupt)
    assert f"Answer **{pair.answer}** (typed), foil **{pair.foil}** (typed)" in text(at)
    patching = expected(PatchAsk(pair.clean, pair.corrupt, pair.answer, pair.foil))
    (heat,) = heatmaps(at).values()
    assert_same_grid(patching, vpa.grid(patching, "resid", "denoise"), array(heat["z"]))


def test_the_other_grids_and_the_noising_direction():
    at = open_page(PAGE)
    at.segmented_control(key="patch.grid").set_value("blocks").run()
    assert [t.split(",")[0] for t in heatmaps(at)] == ["Attention blocks", "Feed-forward blocks"]
    at.segmented_control(key="patch.direction").set_value("noise").run()
    at.segmented_control(key="patch.grid").set_value("qkv").run()
    at.segmented_control(key="patch.layer").set_value(1).run()
    at.segmented_control(key="patch.head").set_value(2).run()
    ((name, heat),) = heatmaps(at).items()
    assert name == "Head 2.3's query, key and value, by position · corrupted into clean (noising)"
    patching = expected(DEFAULT)
    assert_same_grid(patching, vpa.grid(patching, "qkv", "noise", (1, 2)), array(heat["z"]))
    assert vpa_read.DIRECTION_WORDS["noise"][1:] in shown(" ".join(c.value for c in at.caption))
    checks = [line for m in at.markdown for line in m.value.splitlines() if "**]" in line]
    assert len(checks) == 4 and all("passed**]" in c for c in checks)  # the checks, on the noising grid


def test_noise_goes_on_the_tokens_that_differ_and_says_how_many_draws():
    at = open_page(PAGE)
    at.toggle(key="patch.noise").set_value(True).run()
    assert at.session_state["patch.noised"] == [2]  # "children" / "child"
    assert not at.error
    assert "Corrupted run (mean of 10 noise draws on tokens 2)" in text(at)
    at.slider(key="patch.draws").set_value(3).run()
    patching = expected(PatchAsk(DEFAULT_PAIR.clean, "", "were", "was", noise=True, noised=(2,), draws=3))
    (heat,) = heatmaps(at).values()
    assert_same_grid(patching, vpa.grid(patching, "resid", "denoise"), array(heat["z"]))


def test_a_link_restores_the_view_and_the_view_writes_it_back():
    pair = by_key("pronoun")
    query = {"clean": pair.clean, "corrupt": pair.corrupt, "answer": pair.answer, "foil": pair.foil,
             "grid": "heads", "direction": "noise"}
    at = app_test(ROOT / "app.py", 120)
    at.run()
    at.switch_page("pages/patching.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert {k: at.session_state[f"patch.{k}"] for k in query} == query
    ((name, heat),) = heatmaps(at).items()
    assert name.startswith("Every head's output, layer by head") and name.endswith("(noising)")
    patching = expected(PatchAsk(pair.clean, pair.corrupt, pair.answer, pair.foil))
    assert_same_grid(patching, vpa.grid(patching, "heads", "noise"), array(heat["z"]))
    assert {name: at.query_params[name] for name in query} == query
