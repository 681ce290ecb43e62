"""The CUDA suite's bodies (tests/gpu/test_cuda.py) run on the CPU, so a machine without a GPU keeps them working: the
same assertions, on the device every other test uses. On a GPU, `-m cuda` runs them there."""

import pytest

from tests.gpu.test_cuda import PAGES, finetune_step, page_on, parity, pretrain_and_resume

pytestmark = pytest.mark.usefixtures("one_thread")


def test_training_saving_and_resuming(tmp_path):
    pretrain_and_resume("cpu", tmp_path / "run")


def test_one_fine_tuning_step():
    finetune_step("cpu")


@pytest.mark.parametrize("name", ["bert-cased", "roberta"])
def test_parity_with_transformers(name, tmp_path):
    parity("cpu", name, tmp_path / name)


@pytest.mark.parametrize("page", [p for p in PAGES if p.stem in ("predict", "attention")], ids=lambda p: p.stem)
def test_a_page_asks_for_its_model_on_the_device(page, monkeypatch, tmp_path):
    page_on("cpu", page, monkeypatch, tmp_path / "runs")
