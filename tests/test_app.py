"""The app shell renders the home page with the shipped model's card."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_home_renders_the_default_model_card():
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "bertviz_lab"
    assert at.subheader[0].value == "Active model: bertviz-mini"
    assert [m.label for m in at.metric] == ["Layers", "Heads", "Hidden size", "Parameters", "Vocabulary"]
    assert at.metric[0].value == "4"
