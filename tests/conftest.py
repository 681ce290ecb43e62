"""Shared fixtures: tiny configs, a tiny vocabulary and checkpoints the tests create."""

from __future__ import annotations

import pytest
import torch
from streamlit.runtime.media_file_manager import MediaFileManager

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

WORDS = ("the a cat cats dog sat on mat rug bank river money deposit went to i it was tired animal "
         "did not cross street because . , ? ! rain city food delicious love natural language processing "
         "play ##ing ##ed ##s un ##believ ##able and he she they").split()


# Where the tests run the lab: the CPU. The lab's own default device is "auto" (the sidebar's picker, the CLI's
# --device, a run's config), which is CUDA on a machine with a GPU; the tests' expected numbers are computed on the
# CPU, at tolerances (and bit-for-bit comparisons of two runs) that only hold on one device. So every page a test
# opens has the picker on the CPU (app_test, open_page), every lab command a test starts sees no GPU (no_gpu_env,
# installed_env, tests/browser/harness.py's server), in-process CLI calls, trainers and runs are given `--device cpu`
# / device="cpu", and lab code with no device to choose runs as on a machine without a GPU (without_a_gpu).
# tests/test_cuda.py runs the lab on a GPU on purpose, naming the device itself.
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


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny models (`pytestmark = pytest.mark.usefixtures("one_thread")`): a tiny
    model gains nothing from two, and on a busy 2-core machine two threads spin, many times slower than one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def no_hugging_face_network(tmp_path_factory):
    """No test reaches the Hugging Face Hub or the user's cache: offline, a cache in a temporary folder and an
    endpoint where nothing listens, in the environment (read by bertviz_lab at each call, and inherited by
    the commands tests start) and in huggingface_hub's own settings (read once, at import). A test of a
    download overrides these for a stand-in server (tests/hub_server.py)."""
    import huggingface_hub.constants as hf

    home = tmp_path_factory.mktemp("hf-home")
    nowhere = "http://127.0.0.1:9"  # the discard port: refused at once
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"HF_HUB_OFFLINE": "1", "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                            "HF_ENDPOINT": nowhere}.items():
            mp.setenv(name, value)
        for name in ("HF_TOKEN", "HF_TOKEN_PATH", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_CACHE"):
            mp.delenv(name, raising=False)
        # ENDPOINT and the URL template move together: hf_hub_url swaps a caller's endpoint in for ENDPOINT
        # only where the template starts with it, and would otherwise send the request to huggingface.co.
        for name, value in {"HF_HUB_OFFLINE": True, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                            "ENDPOINT": nowhere, "HUGGINGFACE_CO_URL_TEMPLATE": nowhere + "/{repo_id}/resolve/"
                            "{revision}/{filename}", "HF_TOKEN_PATH": str(home / "token")}.items():
            mp.setattr(hf, name, value)
        yield home


@pytest.fixture(scope="session", autouse=True)
def batch_cache_in_a_temporary_folder(tmp_path_factory):
    """Runs keep their training batches (pretrain/batch_cache.py) in a temporary folder, not the checkout's
    cache/: in the environment, so the commands tests start inherit it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTVIZ_BATCH_CACHE", str(tmp_path_factory.mktemp("batch-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def runs_on_fixed_threads():
    """Runs on threads 0 take a fixed number of threads (pretrain/threads.py's BERTVIZ_THREADS: one, what 0 gave on
    these 2-core machines before it watched the load), not whatever cores the machine has free: a test compares
    two runs bit for bit, and the thread count changes the last bits. In the environment, so the commands tests
    start inherit it; tests/test_threads.py unsets it to test watching the machine."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTVIZ_THREADS", "1")
        yield


@pytest.fixture
def tiny_config() -> BertConfig:
    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64)


@pytest.fixture
def tiny_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(vocab_of_size(100))


@pytest.fixture
def tiny_model(tiny_config) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(tiny_config).eval()


@pytest.fixture
def headless_checkpoint(tmp_path, tiny_config, tiny_tokenizer):
    """A tiny BERT saved without its MLM and NSP heads (a bare BertModel's folder)."""
    return save_checkpoint(BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False), tiny_tokenizer,
                           tmp_path / "bare")


@pytest.fixture
def tiny_checkpoint(tmp_path, tiny_model, tiny_tokenizer):
    return save_checkpoint(tiny_model, tiny_tokenizer, tmp_path / "tiny",
                           card={"corpus": "none (random init)", "steps": 0})


@pytest.fixture
def downloads(monkeypatch) -> dict:
    """deferred file id -> the callable a download button runs when clicked."""
    made, add = {}, MediaFileManager.add_deferred

    def record(self, data_callable, *args, **kwargs):
        file_id = add(self, data_callable, *args, **kwargs)
        made[file_id] = data_callable
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return made


@pytest.fixture
def runs_elsewhere(tmp_path, monkeypatch, tiny_model, tiny_tokenizer):
    """$BERTVIZ_RUNS in a folder outside the repository, holding run r1 with a checkpoint; returns that folder."""
    from bertviz_lab.files import ROOT

    runs_dir = tmp_path / "elsewhere"
    assert not runs_dir.is_relative_to(ROOT)
    folder = save_checkpoint(tiny_model, tiny_tokenizer, runs_dir / "r1" / "checkpoint", card={"steps": 0})
    monkeypatch.setenv("BERTVIZ_RUNS", str(runs_dir))
    return folder


@pytest.fixture(scope="session")
def shipped():
    """The shipped model (checkpoints/bertviz-mini) as the app loads it: the one read-only copy the pages share."""
    from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint

    return cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """The lab's wheel, built from this checkout with the test environment's hatchling (no download)."""
    import subprocess
    import sys
    from pathlib import Path

    dist = tmp_path_factory.mktemp("dist")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(dist), str(root)], check=True, timeout=300, capture_output=True)
    (built,) = dist.glob("bertviz_lab-*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory):
    """The wheel installed with `pip install --target` (its dependencies are this environment's): a folder to put on
    PYTHONPATH, from an empty working folder, for the lab as a user installs it."""
    import subprocess
    import sys

    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, timeout=300, capture_output=True)
    return target


def installed_env(installed, folder, **extra: str) -> dict[str, str]:
    """This process's environment for a child that sees only the installed copy of the lab (no BERTVIZ_ settings,
    no other PYTHONPATH) and no GPU (NO_GPU), its user data folder under `folder`; `extra` added."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTVIZ_") and k != "PYTHONPATH"}
    return {**env, **NO_GPU, "PYTHONPATH": str(installed), "XDG_DATA_HOME": str(folder / "data"), **extra}
