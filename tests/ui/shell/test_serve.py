"""How `./lab.sh app` starts the server (bertviz_lab/ui/shell/serve.py): the default model loaded before the first
page asks, torch's OpenMP threads set for a server without leaking into what it starts, no file watcher."""

import logging
import os
import threading

import pytest

from bertviz_lab.errors import CheckpointError
from bertviz_lab.ui.shell import models
from bertviz_lab.ui.shell import serve
from bertviz_lab.ui.shell.state import Model
from tests.helpers.paths import ROOT


def test_openmp_settings_hold_while_torch_loads_and_leave_no_trace(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with serve.openmp_settings():
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ  # the training runs the app starts get the environment as it was


def test_a_users_own_openmp_setting_wins(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with serve.openmp_settings():
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_warming_up_loads_the_default_model_the_first_page_reads(monkeypatch):
    models.forget_models()
    warm = threading.Thread(target=serve.warm, name=serve.THREAD)
    warm.start()
    warm.join(timeout=300)

    def no_second_load(*args, **kwargs):
        raise AssertionError("the model was loaded again")

    monkeypatch.setattr(models, "load_checkpoint", no_second_load)
    ckpt = models.cached_checkpoint(Model.PATH.default, models.device_name(Model.DEVICE.default))
    assert ckpt.path.name == "bertviz-mini" and ckpt.model.has_mlm


def test_a_failed_warm_up_is_logged_and_left_to_the_page(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise CheckpointError("config.json: not valid JSON")

    monkeypatch.setattr(models, "cached_checkpoint", broken)
    with caplog.at_level(logging.WARNING, logger="bertviz_lab"):
        serve.warm()  # does not raise: the page loads the model itself and shows the error
    assert "warming up the default model failed" in caplog.text


def test_the_server_watches_no_files():
    """Streamlit's watcher follows app.py's folder recursively, .venv included: seconds of CPU at start."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
