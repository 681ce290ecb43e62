"""The app shell: home renders the shipped model's card; the sidebar picks models and devices safely."""


from streamlit.testing.v1 import AppTest

from bertviz_lab.ui.shell import models
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")


def app() -> AppTest:
    return app_test(APP).run()


def test_home_renders_the_default_model_card():
    at = app()
    assert not at.exception
    assert at.title[0].value == "bertviz_lab"
    assert at.subheader[0].value == "Active model: bertviz-mini"
    assert [m.label for m in at.metric] == ["Layers", "Heads per layer", "Hidden size", "Parameters", "Vocabulary"]
    assert at.metric[0].value == "4" and "next-sentence accuracy" in at.caption[0].value
    assert at.selectbox(key="model.choice").value == "bertviz-mini (shipped)"


def test_a_broken_folder_keeps_the_previous_model(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    at = app()
    at.text_input(key="model.custom").set_value(str(tmp_path)).run()
    at.button(key="model.load").click().run()
    assert not at.exception
    assert any("not valid JSON" in e.value for e in at.sidebar.error)
    assert at.subheader[0].value == "Active model: bertviz-mini"


def test_a_missing_folder_says_so(tmp_path):
    at = app()
    at.text_input(key="model.custom").set_value(str(tmp_path / "nope")).run()
    at.button(key="model.load").click().run()
    assert any("no model folder" in e.value for e in at.sidebar.error)


def test_loading_a_valid_folder_switches_the_model(tiny_checkpoint):
    at = app()
    at.text_input(key="model.custom").set_value(str(tiny_checkpoint)).run()
    at.button(key="model.load").click().run()
    assert not at.exception and not at.sidebar.error
    assert at.subheader[0].value == "Active model: tiny"
    assert at.metric[0].value == "2"


def test_cuda_without_a_gpu_falls_back_with_a_note(monkeypatch):
    monkeypatch.setattr(models, "cuda_available", lambda: False)  # a machine without a GPU, wherever this runs
    at = app()
    at.radio(key="model.device").set_value("cuda").run()
    assert not at.exception
    assert any("running on the CPU" in w.value for w in at.sidebar.warning)
