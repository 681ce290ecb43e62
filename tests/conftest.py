"""Shared fixtures: tiny configs, a tiny vocabulary and checkpoints the tests create."""

from __future__ import annotations

import pytest
import torch
from streamlit.runtime.media_file_manager import MediaFileManager

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from tests.helpers.lab import vocab_of_size
from tests.helpers.paths import ROOT


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
    download overrides these for a stand-in server (tests/helpers/hub_server.py)."""
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
def neuron_cache_in_a_temporary_folder(tmp_path_factory):
    """The neurons' indexes (neurons/index.py) are kept in a temporary folder, not the checkout's cache/: in the
    environment, so the commands tests start inherit it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTVIZ_NEURON_CACHE", str(tmp_path_factory.mktemp("neuron-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def runs_on_fixed_threads():
    """Runs on threads 0 take a fixed number of threads (pretrain/threads.py's BERTVIZ_THREADS: one, what 0 gave on
    these 2-core machines before it watched the load), not whatever cores the machine has free: a test compares
    two runs bit for bit, and the thread count changes the last bits. In the environment, so the commands tests
    start inherit it; tests/pretrain/test_threads.py unsets it to test watching the machine."""
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

    dist = tmp_path_factory.mktemp("dist")
    root = ROOT
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
