"""The Pretrain page in AppTest: open it, fill its form, start a run and wait for it. Moved here from
tests/pages/test_pretrain.py, which uses them too."""

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bertviz_lab.pretrain import runs
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT


PAGE = str(ROOT / "pages" / "pretrain.py")

# On the CPU (the form's Device, and --device of the CLI run it is compared with): "auto" would train on a GPU
# where there is one, whose kernels do not promise the same numbers twice.
TINY = dict(preset="tiny", hidden=32, heads=2, layers=2, steps=20, batch_size=8, seq_len=32, eval_every=5, threads=1,
            device="cpu")

CHOICES = ("preset", "device")  # the form's select boxes; the other fields of TINY are number inputs


def page() -> AppTest:
    return app_test(PAGE).run()


def fill(at: AppTest, **values) -> AppTest:
    for name, value in values.items():
        widget = at.selectbox(key=f"pretrain.{name}") if name in CHOICES else at.number_input(key=f"pretrain.{name}")
        widget.set_value(value)
    return at


def submit(at: AppTest, device: str = "cpu") -> AppTest:
    """Submit the form with its Device set to `device`: the run it starts, and the memory check before, are the
    CPU's unless a test says otherwise (the form's own default, "auto", is a GPU where there is one). Set here, as
    a form's values reach the page only with the submit that sends them."""
    at.selectbox(key="pretrain.device").set_value(device)
    return at.button(key="pretrain.start").click().run()


def wait_done(run_dir: Path, timeout: float = 90) -> runs.RunInfo:
    deadline = time.time() + timeout
    while runs.read(run_dir).active and time.time() < deadline:
        time.sleep(0.2)
    return runs.read(run_dir)
