"""What the tests use to run the lab: on the CPU, with no GPU visible to what they start, pages opened in AppTest, a
tiny vocabulary. Moved here from tests/conftest.py, which uses them too."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS


WORDS = ("the a cat cats dog sat on mat rug bank river money deposit went to i it was tired animal "
         "did not cross street because . , ? ! rain city food delicious love natural language processing "
         "play ##ing ##ed ##s un ##believ ##able and he she they").split()

# Where the tests run the lab: the CPU. The lab's own default device is "auto" (the sidebar's picker, the CLI's
# --device, a run's config), which is CUDA on a machine with a GPU; the tests' expected numbers are computed on the
# CPU, at tolerances (and bit-for-bit comparisons of two runs) that only hold on one device. So every page a test
# opens has the picker on the CPU (app_test, open_page), every lab command a test starts sees no GPU (no_gpu_env,
# installed_env, tests/browser/harness.py's server), in-process CLI calls, trainers and runs are given `--device cpu`
# / device="cpu", and lab code with no device to choose runs as on a machine without a GPU (without_a_gpu).
# tests/gpu/test_cuda.py runs the lab on a GPU on purpose, naming the device itself.
TEST_DEVICE = "cpu"

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # a child process's torch then sees no CUDA GPU: "auto" is the CPU


def app_test(script, timeout: int = 60, device: str = TEST_DEVICE):
    """AppTest.from_file(script) with the sidebar's device picker ("model.device") set to `device`, not run yet."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(script), default_timeout=timeout)
    at.session_state["model.device"] = device
    return at


def no_gpu_env(**extra: str) -> dict[str, str]:
    """This process's environment for a command a test starts (a CLI run, a server), with no GPU visible to it
    (NO_GPU); `extra` added."""
    import os

    return {**os.environ, **NO_GPU, **extra}


def hide_gpu_from_children(mp: pytest.MonkeyPatch) -> None:
    """For a test whose lab code starts processes itself (a server bench.classroom_load starts, a run a page starts
    with no device to choose): NO_GPU in this process's environment, undone with `mp`, which those children inherit.
    This process's own torch has counted its GPUs first, so that its view of them does not change."""
    torch.cuda.is_available()  # CUDA reads CUDA_VISIBLE_DEVICES once, at its first use in a process
    for name, value in NO_GPU.items():
        mp.setenv(name, value)


def without_a_gpu(mp: pytest.MonkeyPatch) -> None:
    """The machine as a test of lab code with no device to choose (the Fine-tune page starts its runs on "auto")
    means it: no GPU, for this process (torch.cuda.is_available() False, undone with `mp`) and for the processes
    it starts (hide_gpu_from_children). Both, or this process could place a run on a GPU its child cannot see."""
    hide_gpu_from_children(mp)
    mp.setattr(torch.cuda, "is_available", lambda: False)


def open_page(script, folder=None, timeout: int = 120, **session):
    """An AppTest of `script` run once on the model in `folder` (None: the default model), with `session`'s keys
    set first ("." written "__"; the device picker on the CPU unless `model__device` says otherwise), checked to
    have raised nothing."""
    at = app_test(script, timeout)
    if folder is not None:
        at.session_state["model.path"] = str(folder)
    for key, value in session.items():
        at.session_state[key.replace("__", ".")] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def vocab_of_size(n: int) -> list[str]:
    """Specials, then real words, then filler tokens up to n entries."""
    tokens = list(SPECIAL_TOKENS) + [w for w in WORDS if w not in SPECIAL_TOKENS]
    return tokens + [f"tok{i}" for i in range(n - len(tokens))]


def installed_env(installed, folder, **extra: str) -> dict[str, str]:
    """This process's environment for a child that sees only the installed copy of the lab (no BERTVIZ_ settings,
    no other PYTHONPATH) and no GPU (NO_GPU), its user data folder under `folder`; `extra` added."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTVIZ_") and k != "PYTHONPATH"}
    return {**env, **NO_GPU, "PYTHONPATH": str(installed), "XDG_DATA_HOME": str(folder / "data"), **extra}
