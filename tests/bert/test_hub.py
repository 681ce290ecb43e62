"""Models from the Hugging Face Hub (bert/hub.py) with no network at all: a cache laid out as huggingface_hub
lays it out, a stand-in Hub on 127.0.0.1 (tests/helpers/hub_server.py) for downloads, then the CLI and the app on top."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import time
from pathlib import Path

import huggingface_hub.constants as hf_constants
import pytest
import torch
import transformers

from bertviz_lab.bert import hub
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.cli import main
from bertviz_lab.errors import CheckpointError
from bertviz_lab import classroom
from bertviz_lab.ui.shell import models
from tests.bert.test_checkpoint import assert_same_outputs, hf_model
from tests.helpers.cli import run_cli
from tests.helpers.hub_server import FakeHub
from tests.helpers.lab import vocab_of_size
from tests.test_classroom import app, as_visitor, rooms, type_folder  # noqa: F401 (rooms: a fixture)

REPO = "lab-tests/bert-tiny"
CFG = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=64)
NEEDED = ["config.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "model.safetensors"]
NEVER = ("pytorch_model.bin", "flax_model.msgpack", "tf_model.h5", "README.md")  # in the repo, never needed
CAT = "the cat sat on the [MASK] ."


@pytest.fixture(scope="module")
def tiny_hf():
    return hf_model(CFG, transformers.BertForMaskedLM)


@pytest.fixture(scope="module")
def repo_files(tiny_hf, tmp_path_factory) -> dict[str, bytes]:
    """A Hub repo as transformers writes one, with the big files of other frameworks beside it."""
    folder = tmp_path_factory.mktemp("repo")
    tiny_hf.save_pretrained(folder)
    WordPieceTokenizer.from_vocab(vocab_of_size(CFG.vocab_size)).save(folder)
    found = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert set(found) == set(NEEDED)
    weights = io.BytesIO()
    torch.save(tiny_hf.state_dict(), weights)
    return {**found, "pytorch_model.bin": weights.getvalue(), "flax_model.msgpack": os.urandom(300_000),
            "tf_model.h5": os.urandom(300_000), "README.md": b"# a tiny BERT\n"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache of this test's own; offline still (conftest)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"


@pytest.fixture
def server(monkeypatch, repo_files):
    """The stand-in Hub serving REPO, and the environment pointed at it, online."""
    with FakeHub({REPO: dict(repo_files)}) as fake:
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # conftest set the library's own copy
        monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 16 << 10)  # several reports per file
        yield fake


def populate(cache: Path, repo_id: str, files: dict[str, bytes], ref: bool = True) -> Path:
    """`files` in the cache as huggingface_hub lays them out; the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = FakeHub.commit(repo_id)
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        (snapshot / name).symlink_to(Path("../../blobs") / blob)
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(commit)
    return snapshot


def without(files: dict[str, bytes], *names: str) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k not in names}


# --- Ids and the cache --------------------------------------------------------------------------------
def test_hub_ids_follow_the_hubs_rules():
    for text in ["bert-base-uncased", "org/name", "google/bert_uncased_L-2_H-128_A-2", "a", "x" * 96, "A.b_c-9/d"]:
        assert hub.looks_like_hub_id(text), text
    for text in ["", " ", "org/name/extra", "../../etc", "..", ".", "/etc", "~", "~/x", "a--b", "a..b", "-a", "a-",
                 ".a", "a.", "org/", "/name", "x" * 97, "a b", "a\x00b", "naïve", "org//x", "name.git",
                 "org/name\n", None, 7]:
        assert not hub.looks_like_hub_id(text), text


def test_a_cached_snapshot_opens_offline_with_the_logits_of_transformers(cache, repo_files, tiny_hf):
    snapshot = populate(cache, REPO, repo_files)
    assert hub.offline() and hub.cache_dir() == cache
    assert hub.cached_models() == [REPO]
    assert hub.fetch(REPO) == snapshot  # no server anywhere: HF_ENDPOINT points where nothing listens
    assert hub.repo_id_of(snapshot) == REPO and hub.repo_id_of(cache) is None
    assert_same_outputs(load_checkpoint(snapshot).model, tiny_hf, CFG.vocab_size)


def test_the_cache_is_read_where_the_environment_says_at_each_call(tmp_path, monkeypatch, repo_files):
    populate(tmp_path / "home" / "hub", REPO, repo_files)
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.cached_models() == [REPO]
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    assert hub.cached_models() == [] and hub.cached_folder(REPO) is None


def test_only_whole_snapshots_are_listed(cache, repo_files):
    populate(cache, REPO, repo_files)
    populate(cache, "org/no-weights", without(repo_files, "model.safetensors", "pytorch_model.bin"))
    populate(cache, "org/no-tokenizer", without(repo_files, "vocab.txt"))
    populate(cache, "org/no-config", without(repo_files, "config.json"))
    populate(cache, "org/by-commit", repo_files, ref=False)  # downloaded by commit: no refs/main
    lost = populate(cache, "org/blob-gone", without(repo_files, "pytorch_model.bin"))
    (lost / "model.safetensors").resolve().unlink()  # a dangling link
    (cache / "datasets--org--data").mkdir()
    (cache / "models--a--b--c").mkdir()  # no repo id has three parts
    assert hub.cached_models() == sorted([REPO, "org/by-commit"])
    assert hub.cached_folder("org/blob-gone") is None and hub.cached_folder("org/no-weights") is None


def test_an_uncached_id_offline_and_anything_not_an_id_are_one_sentence():
    with pytest.raises(CheckpointError) as err:
        hub.fetch("nobody/nothing")
    assert str(err.value) == ("nobody/nothing is not in the Hugging Face cache and the Hub cannot be reached "
                              "(offline); open it once while online")
    for text in ["../../etc", "", "x" * 5000, "a b", "org/name/x", "a\nb"]:
        with pytest.raises(CheckpointError, match="is not a Hugging Face Hub id") as err:
            hub.fetch(text)
        assert "\n" not in str(err.value) and len(str(err.value)) < 200


def test_an_unreachable_hub_is_one_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # online, with HF_ENDPOINT where nothing listens (conftest)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"^nobody/nothing is not in the Hugging Face cache and the Hub "
                                              r"cannot be reached \(.+\); check the connection") as err:
        hub.fetch("nobody/nothing")
    assert "\n" not in str(err.value) and time.monotonic() - start < 5


# --- Downloads from the stand-in Hub ------------------------------------------------------------------
def test_a_download_fetches_only_what_a_model_needs_and_opens_offline_after(server, cache, repo_files, tiny_hf,
                                                                            monkeypatch):
    reports = []
    folder = hub.fetch(REPO, progress=lambda *report: reports.append(report))
    assert server.downloaded() == NEEDED  # safetensors rather than the .bin; the weights last
    assert not [path for _, path in server.log if path.endswith(NEVER)]  # not even asked about
    total = sum(len(repo_files[name]) for name in NEEDED)
    done = [d for d, _, _ in reports]
    assert done == sorted(set(done)) and {t for _, t, _ in reports} == {total}
    assert reports[-1] == (total, total, "model.safetensors")
    assert sum(name == "model.safetensors" for _, _, name in reports) > 3  # bytes as they arrive
    assert hub.cached_models() == [REPO] and (folder / "model.safetensors").read_bytes() == repo_files[
        "model.safetensors"]
    server.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.fetch(REPO) == folder
    assert_same_outputs(load_checkpoint(folder).model, tiny_hf, CFG.vocab_size)


def test_a_repo_with_only_the_bin_gets_the_bin(server, repo_files, tiny_hf):
    server.repos[REPO] = without(repo_files, "model.safetensors")
    folder = hub.fetch(REPO)
    assert server.downloaded() == [*NEEDED[:-1], "pytorch_model.bin"]
    assert_same_outputs(load_checkpoint(folder).model, tiny_hf, CFG.vocab_size)


def sharded(files):
    return {**without(files, "model.safetensors", "pytorch_model.bin"), "model.safetensors.index.json": b"{}",
            "model-00001-of-00002.safetensors": b"x", "model-00002-of-00002.safetensors": b"y"}


REFUSED = {
    "missing": (lambda hub_, files: None, "nobody/nothing",
                r"the Hugging Face Hub has no model nobody/nothing, or it is private .*; check the spelling"),
    "gated": (lambda hub_, files: hub_.gated.add(REPO), REPO, r"lab-tests/bert-tiny is gated on the Hugging Face Hub"),
    "sharded": (lambda hub_, files: hub_.repos.update({REPO: sharded(files)}), REPO,
                r"lab-tests/bert-tiny keeps its weights in shards \(model.safetensors.index.json\); sharded weights "
                r"are not supported, only a single model.safetensors or pytorch_model.bin"),
    "tf only": (lambda hub_, files: hub_.repos.update({REPO: without(files, "model.safetensors",
                                                                     "pytorch_model.bin")}), REPO,
                r"lab-tests/bert-tiny has no model.safetensors or pytorch_model.bin on the Hugging Face Hub"),
    "no config": (lambda hub_, files: hub_.repos.update({REPO: without(files, "config.json")}), REPO,
                  r"lab-tests/bert-tiny has no config.json"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_repo_that_cannot_be_opened_says_why_in_one_sentence(server, repo_files, case):
    change, repo_id, message = REFUSED[case]
    change(server, repo_files)
    with pytest.raises(CheckpointError) as err:
        hub.fetch(repo_id)
    assert re.match(message, str(err.value)) and "\n" not in str(err.value)
    assert hub.cached_models() == []
    if case != "gated":  # refused from the file list, before any file is asked for
        assert not [path for _, path in server.log if "/resolve/" in path]


def test_a_download_cut_midway_keeps_nothing_and_a_retry_fetches_the_rest(server, cache, repo_files, tiny_hf):
    size = len(repo_files["model.safetensors"])
    server.cut["model.safetensors"] = size // 2
    with pytest.raises(CheckpointError) as err:
        hub.fetch(REPO)
    assert re.fullmatch(r"the download of model\.safetensors stopped midway \(\d+(\.\d)? kB of "
                        r"\d+(\.\d)? kB arrived\); nothing was kept, try again", str(err.value)), str(err.value)
    assert hub.cached_models() == [] and hub.cached_folder(REPO) is None
    kept = [p for p in cache.rglob("*") if p.is_file() and not p.is_symlink() and "blobs" in p.parts]
    assert {p.read_bytes() for p in kept} < set(repo_files.values())  # whole files only: no partial weights
    assert server.downloaded() == [*NEEDED, "model.safetensors"]  # huggingface_hub tried to resume once
    server.cut.clear()
    folder = hub.fetch(REPO)
    assert server.downloaded()[len(NEEDED) + 1:] == ["model.safetensors"]  # the retry fetched only what was missing
    assert_same_outputs(load_checkpoint(folder).model, tiny_hf, CFG.vocab_size)


def test_a_server_that_restarts_the_file_forever_is_given_up_on(server, repo_files):
    server.cut["model.safetensors"] = len(repo_files["model.safetensors"]) // 2
    server.ignore_range = True  # each resume gets the whole file again, cut again
    start = time.monotonic()
    with pytest.raises(CheckpointError, match="^the download of model.safetensors stopped midway"):
        hub.fetch(REPO)
    assert time.monotonic() - start < 10 and hub.cached_models() == []
    assert 2 < server.downloaded().count("model.safetensors") <= 2 + hub.MAX_RESTARTS


# --- The command line ---------------------------------------------------------------------------------
def test_the_cli_opens_a_cached_hub_model_offline(cache, repo_files):
    snapshot = populate(cache, REPO, repo_files)
    done = run_cli("info", "--checkpoint", REPO, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == str(snapshot) and done.stderr == ""  # no progress bar: no download
    done = run_cli("predict", "--checkpoint", REPO, "--top-k", 3, CAT)
    assert done.returncode == 0, done.stderr
    assert "[MASK] #1 at token 6" in done.stdout and done.stdout.count("\n  ") == 3


def test_every_explore_command_takes_a_cached_hub_id(cache, repo_files, capsys):
    populate(cache, REPO, repo_files)
    assert main(["lens", "--checkpoint", REPO, "--device", "cpu", CAT, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["similarity", "--checkpoint", REPO, "--device", "cpu", "--word", "cat", "the cat sat .", "a cat ran .",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["heads", "--checkpoint", REPO, "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_the_cli_downloads_with_a_progress_bar(server, capsys):
    assert main(["info", "--checkpoint", REPO, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["layers"] == 2 and "model.safetensors" in captured.err and "100%" in captured.err
    assert server.downloaded() == NEEDED


def test_the_cli_says_an_unknown_id_offline_in_one_error_line(capsys):
    for command in (["info"], ["predict", CAT], ["heads"], ["classify", "a sentence"], ["lens", CAT],
                    ["similarity", "--word", "cat", "the cat sat .", "a cat ran ."]):
        name, *rest = command
        assert main([name, "--checkpoint", "nobody/nothing", *rest]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: nobody/nothing is not in the Hugging Face cache") and err.count("\n") == 1


# --- The app ------------------------------------------------------------------------------------------
def messages(at) -> list[str]:
    """The sidebar's errors as read: in the box, or below it as plain text (ui.models.plain_error)."""
    return [e.value for e in at.sidebar.error if not e.value.startswith("That did not work")] + [
        t.value for t in at.sidebar.text]


def expected_top5(tiny_hf, snapshot: Path) -> list[str]:
    tokenizer = load_checkpoint(snapshot).tokenizer
    encoding = tokenizer.encode(CAT)
    with torch.no_grad():
        logits = tiny_hf(input_ids=torch.tensor([encoding.ids])).logits[0, encoding.tokens.index("[MASK]")]
    return [tokenizer.id_to_token(int(i)) for i in logits.topk(5).indices]


def test_the_picker_lists_hub_models_and_opens_a_cached_one(cache, repo_files, tiny_hf):
    snapshot = populate(cache, REPO, repo_files)
    at = app()
    picker = at.selectbox(key="model.choice")
    assert f"{REPO} (Hub, cached)" in picker.options and "roberta-base (Hub, download ~500 MB)" in picker.options
    picker.select(f"{REPO} (Hub, cached)").run()
    assert not at.exception and not at.sidebar.error
    assert at.session_state["model.path"] == str(snapshot)
    at.switch_page("pages/predict.py").run()
    assert not at.exception
    assert at.dataframe[0].value["token"].tolist() == expected_top5(tiny_hf, snapshot)


def test_the_owner_picks_a_suggested_model_and_it_downloads_with_progress_and_opens(server, monkeypatch):
    monkeypatch.setattr(hub, "SUGGESTED", (hub.Suggestion(REPO, "a tiny test BERT", "100 kB"),))
    reports, fetch = [], hub.fetch
    monkeypatch.setattr(hub, "fetch", lambda repo_id, progress=None: fetch(
        repo_id, progress=lambda *report: (reports.append(report), progress(*report))))  # the app's own bar too
    at = app()
    at.selectbox(key="model.choice").select(f"{REPO} (Hub, download ~100 kB)").run()
    assert not at.exception and not at.sidebar.error
    assert at.session_state["model.path"] == str(hub.cached_folder(REPO))
    assert at.selectbox(key="model.choice").value == f"{REPO} (Hub, cached)"
    assert f"{REPO} (Hub, download ~100 kB)" not in at.selectbox(key="model.choice").options
    assert server.downloaded() == NEEDED and len(reports) > 3 and reports[-1][0] == reports[-1][1]
    assert not at.sidebar.get("progress")  # the bar is gone once the model is open


def test_the_owner_types_an_uncached_id_and_it_downloads_and_opens(server):
    at = app()
    assert [e.label for e in at.sidebar.expander] == [models.BOX, "Share this view"]
    type_folder(at, REPO)
    assert not at.exception and not at.sidebar.error
    assert at.session_state["model.path"] == str(hub.cached_folder(REPO))
    assert at.selectbox(key="model.choice").value == f"{REPO} (Hub, cached)"
    assert server.downloaded() == NEEDED
    type_folder(at, "nobody/nothing")
    assert messages(at) == [
        "Could not download nobody/nothing: the Hugging Face Hub has no model nobody/nothing, or it is private and "
        "this machine is not logged in; check the spelling"]
    assert at.session_state["model.path"] == str(hub.cached_folder(REPO))  # the model in use stays
    assert at.selectbox(key="model.choice").value == f"{REPO} (Hub, cached)"


@pytest.mark.parametrize("text, message", [
    ("", "Type the path of a model folder or a Hugging Face Hub id first."),
    ("not a model at all", "no model folder at not a model at all, and 'not a model at all' is not a Hugging Face "
                           "Hub id"),
    ("x" * 5000, "is 5,000 characters long"),
])
def test_the_owner_reads_a_clear_message_for_anything_else(text, message):
    at = type_folder(app(), text)
    assert not at.exception
    assert [m for m in messages(at) if message in m], messages(at)


@pytest.mark.parametrize("visitor", [False, True])
def test_the_box_reads_runs_as_the_runs_root_and_never_as_a_hub_id(visitor, server, monkeypatch, runs_elsewhere):
    folder, runs_dir = runs_elsewhere, runs_elsewhere.parents[1]
    if visitor:
        monkeypatch.setenv(classroom.CLASSROOM_ENV, "1")
        monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
        as_visitor(monkeypatch)
    at = type_folder(app(), "runs/r1/checkpoint")
    assert not at.exception and not at.sidebar.error
    assert Path(at.session_state["model.path"]).resolve() == folder.resolve()
    assert at.subheader[0].value == "Active model: checkpoint"
    type_folder(at, "runs/r2")  # shaped like a Hub id (org/name): still the runs root's r2, which is not there
    [message] = messages(at)
    assert message.startswith("Could not load runs/r2: no model folder at ") and "Hub" not in message, message
    assert (str(runs_dir) in message) != visitor  # a visitor reads no server path
    assert server.log == [] and Path(at.session_state["model.path"]).resolve() == folder.resolve()


@pytest.mark.usefixtures("rooms")  # classroom mode
def test_a_visitor_opens_cached_hub_models_but_never_starts_a_download(monkeypatch, server, cache, repo_files):
    snapshot = populate(cache, "org/cached", repo_files)
    as_visitor(monkeypatch)
    at = app()
    options = at.selectbox(key="model.choice").options
    assert "org/cached (Hub, cached)" in options and not [o for o in options if "(Hub, download" in o]
    type_folder(at, REPO)  # on the server, not in the cache
    assert messages(at) == [models.NOT_CACHED.format(REPO)] and server.log == []
    assert "model.path" not in at.session_state  # still the default model
    for text in ["../../etc", "a--b", "x" * 97, "/etc/passwd"]:  # not ids: folders, refused as ever
        type_folder(at, text)
        assert messages(at) == [classroom.REFUSAL], text
    at.selectbox(key="model.choice").select("org/cached (Hub, cached)").run()
    assert not at.exception and not at.sidebar.error and at.session_state["model.path"] == str(snapshot)
    assert server.log == []
