"""Hostile checkpoint folders: each is refused with one line, before the model or its weights are allocated."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertviz_lab import files
from bertviz_lab.bert import checkpoint
from bertviz_lab.bert.card import card_facts, markdown_safe
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.config import MAY_BE_ZERO, SIZE_LIMITS
from bertviz_lab.cli import main
from bertviz_lab.errors import CheckpointError
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")


@pytest.fixture
def no_allocation(monkeypatch):
    """Fail the test if the model is built or the weights are read: a refusal must come first."""
    def forbidden(*args, **kwargs):
        raise AssertionError("allocated before refusing")

    monkeypatch.setattr(checkpoint, "BertForPreTraining", forbidden)
    monkeypatch.setattr(checkpoint, "load_file", forbidden)
    monkeypatch.setattr(checkpoint.torch, "load", forbidden)


def refused(folder, match: str) -> str:
    with pytest.raises(CheckpointError, match=match) as caught:
        load_checkpoint(folder)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message
    return message


def set_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **changes}))


# --- config.json ---------------------------------------------------------------------------------

def test_a_config_of_a_trillion_parameters_is_refused_before_anything_is_built(tiny_checkpoint, no_allocation):
    set_config(tiny_checkpoint, hidden_size=2**20, intermediate_size=2**22, num_hidden_layers=1000)
    refused(tiny_checkpoint, "hidden_size must be a whole number from 1 to 4,096, got 1048576")


def test_a_400_digit_integer_is_one_line(tiny_checkpoint, no_allocation):
    text = (tiny_checkpoint / "config.json").read_text().replace('"vocab_size": 100', '"vocab_size": 1' + "0" * 399)
    (tiny_checkpoint / "config.json").write_text(text)
    message = refused(tiny_checkpoint, "vocab_size must be a whole number")
    assert "a 400-digit number" in message and "0000000000" not in message


@pytest.mark.parametrize("name", list(SIZE_LIMITS))
def test_every_size_field_has_an_upper_bound(tiny_checkpoint, no_allocation, name):
    family = {"model_type": "electra"} if name == "embedding_size" else {}  # BERT has no embedding_size
    set_config(tiny_checkpoint, **family, **{name: SIZE_LIMITS[name] + 1})
    refused(tiny_checkpoint, f"{name} must be a whole number from {int(name not in MAY_BE_ZERO)} to "
                             f"{SIZE_LIMITS[name]:,}")


@pytest.mark.parametrize("raw, match", [
    ('"num_hidden_layers": true', "num_hidden_layers must be a whole number.*got True"),
    ('"num_hidden_layers": 2.0', "num_hidden_layers must be a whole number.*got 2.0"),
    ('"layer_norm_eps": NaN', "layer_norm_eps must be a finite number.*got nan"),
    ('"layer_norm_eps": Infinity', "layer_norm_eps must be a finite number.*got inf"),
    ('"layer_norm_eps": 0', "layer_norm_eps must be a finite number in \\(0, 1\\]"),
    ('"initializer_range": -1e400', "initializer_range must be a finite number"),
    ('"hidden_dropout_prob": "0.1"', "hidden_dropout_prob must be a finite number.*got '0.1'"),
    ('"pad_token_id": 100', "pad_token_id must be a token id below vocab_size \\(100\\)"),
    ('"pad_token_id": -1', "pad_token_id must be a token id"),
    ('"hidden_act": "swish"', "hidden_act must be one of gelu"),
    ('"hidden_act": ["gelu"]', r"hidden_act must be one of .*got \['gelu'\]"),
    ('"model_type": {"a": 1}', "model_type must name a model family, got a dict"),
])
def test_every_field_is_type_checked(tiny_checkpoint, no_allocation, raw, match):
    cfg = json.loads((tiny_checkpoint / "config.json").read_text())
    key = raw.split('"')[1]
    cfg.pop(key, None)
    (tiny_checkpoint / "config.json").write_text(json.dumps(cfg)[:-1] + ", " + raw + "}")
    refused(tiny_checkpoint, "config.json: " + match)


def test_a_model_larger_than_free_memory_is_refused_before_it_is_built(tiny_checkpoint, no_allocation, monkeypatch):
    monkeypatch.setattr(files, "free_memory_bytes", lambda: 50_000_000)
    set_config(tiny_checkpoint, vocab_size=30522, hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
               intermediate_size=3072, max_position_embeddings=512)  # BERT-Base: 110 M parameters
    refused(tiny_checkpoint, r"the model in tiny needs about 88\d.\d MB of memory; this machine has 50 MB free")


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "model_card.json"])
def test_json_files_over_4_mb_are_not_read(tiny_checkpoint, no_allocation, name):
    with open(tiny_checkpoint / name, "wb") as f:
        f.truncate(5 << 20)  # sparse: 5 MB that cost nothing to write
    refused(tiny_checkpoint, rf"{name} is 5.2 MB; the limit is 4.2 MB")


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "model_card.json"])
def test_deeply_nested_json_is_one_line(tiny_checkpoint, name):
    (tiny_checkpoint / name).write_text("[" * 200_000 + "]" * 200_000)
    refused(tiny_checkpoint, f"{name} is nested too deeply")


@pytest.mark.parametrize("name", ["config.json", "vocab.txt", "tokenizer_config.json", "model_card.json",
                                  "model.safetensors"])
@pytest.mark.parametrize("kind, match", [
    ("fifo", "not a regular file"), ("folder", "is a folder, not a file"), ("device", "not a regular file"),
    ("proc", "system file"),
])
def test_devices_fifos_folders_and_proc_files_are_refused(tiny_checkpoint, name, kind, match):
    target = tiny_checkpoint / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)  # opening it would block forever
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to("/dev/zero" if kind == "device" else "/proc/self/status")
    refused(tiny_checkpoint, match)


# --- tokenizer files --------------------------------------------------------------------------------

def test_a_vocab_over_50_mb_is_not_read(tiny_checkpoint, monkeypatch):
    def no_vocab_reads(path, *args):  # the size check must refuse before vocab.txt is opened
        assert Path(path).name != "vocab.txt"
        return open(path, *args)

    monkeypatch.setattr(files, "open", no_vocab_reads, raising=False)
    with open(tiny_checkpoint / "vocab.txt", "r+b") as f:
        f.truncate(51 << 20)
    refused(tiny_checkpoint, r"vocabulary file vocab.txt is 53.5 MB; the limit is 52.4 MB")


def test_a_vocab_longer_than_the_model_is_refused_before_the_tokenizer_is_built(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(checkpoint.WordPieceTokenizer, "from_vocab", None)
    with open(tiny_checkpoint / "vocab.txt", "a") as f:
        f.write("".join(f"extra{i}\n" for i in range(500)))
    refused(tiny_checkpoint, "vocab.txt lists 600 tokens but the model has room for 100")


def test_a_binary_vocab_is_one_line(tiny_checkpoint):
    (tiny_checkpoint / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\x00junk\n")
    refused(tiny_checkpoint, "vocab.txt is not UTF-8 text")


# --- paths ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, match", [
    ("x" * 5000, "5,000 characters long"),
    ("models/bert\x00base", "control characters"),
    ("checkpoints/bert\nbase", "control characters"),
    ("~no_such_user_4242/bert", "home folder that does not exist"),
    ("/tmp/" + "a" * 300, "cannot open the model folder"),  # one name over 255 bytes
    ("/proc/self", "system folder"),
    ("/dev", "system folder"),
    ("", "is empty"),
    (42, "must be text, got int"),
    (None, "must be text, got NoneType"),
])
def test_odd_paths_are_one_line(path, match):
    refused(path, match)


def test_a_file_instead_of_a_folder(tiny_checkpoint):
    refused(tiny_checkpoint / "vocab.txt", "it is a file, not a folder")


# --- model.safetensors ------------------------------------------------------------------------------

def header_of(folder: Path) -> tuple[dict, bytes]:
    data = (folder / "model.safetensors").read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + length]), data[8 + length:]


def write_safetensors(folder: Path, header: dict, body: bytes) -> None:
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def lie(folder: Path, key: str, **fields) -> None:
    header, body = header_of(folder)
    header[key] = {**header[key], **fields}
    write_safetensors(folder, header, body)


WORDS = "bert.embeddings.word_embeddings.weight"
SAFETENSORS_CASES = {
    "empty": (lambda p: (p / "model.safetensors").write_bytes(b""), "model.safetensors is empty"),
    "shorter than a header": (lambda p: (p / "model.safetensors").write_bytes(b"\x10\x00"),
                              r"header length \(missing\) does not fit the file \(2 bytes\)"),
    "length past the end": (lambda p: (p / "model.safetensors").write_bytes(struct.pack("<Q", 2**63) + b"{}"),
                            r"header length \(9,223,372,036,854,775,808 bytes\) does not fit the file \(10 bytes\)"),
    "header not json": (lambda p: (p / "model.safetensors").write_bytes(struct.pack("<Q", 4) + b"\xff{[x"),
                        "the header of model.safetensors is not valid JSON"),
    "header a list": (lambda p: write_safetensors(p, [], b""), "the header of model.safetensors is not a JSON object"),
    "data cut short": (lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:-100]),
                       "corrupt or truncated: tensor .* ends at byte .* of the data, which holds"),
    "offsets past the end": (lambda p: lie(p, WORDS, data_offsets=[0, 10**15]),
                             "lies: tensor 'bert.embeddings.word_embeddings.weight' .* its offsets span "
                             "1,000,000,000,000,000"),
    "absurd shape": (lambda p: lie(p, WORDS, shape=[10**12, 10**6]),
                     "lies: tensor 'bert.embeddings.word_embeddings.weight' of 2 dimensions and dtype F32 needs "
                     "4,000,000,000,000,000,000 bytes, its offsets span 12,800"),
    "negative shape": (lambda p: lie(p, WORDS, shape=[-100, 32]), r"has an invalid shape \[-100, 32\]"),
    "unsupported dtype": (lambda p: lie(p, WORDS, dtype="F8_E4M3"), "has dtype 'F8_E4M3', which this lab cannot load"),
    "dtype not a string": (lambda p: lie(p, WORDS, dtype=["F32"]), r"has dtype \['F32'\]"),
    "bool offsets": (lambda p: lie(p, WORDS, data_offsets=[True, 12800]), r"invalid data offsets \[True, 12800\]"),
    "entry not an object": (lambda p: write_safetensors(p, {**header_of(p)[0], WORDS: 7}, header_of(p)[1]),
                            "is not described by a JSON object"),
    "trailing bytes": (lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes() + b"x"),
                       "holds 1 byte after its last tensor that its header does not account for"),
    "integer weights": (lambda p: lie(p, WORDS, dtype="I32"), "bert.embeddings.word_embeddings.weight is not a "
                                                              "floating-point tensor"),
    "shapes from another config": (lambda p: set_config(p, hidden_size=64), "do not match config.json"),
    "far larger than the config": (lambda p: os.truncate(p / "model.safetensors", 1 << 30),
                                   "model.safetensors is 1.1 GB, but the weights config.json describes take 99.2 kB: the file "
                                   "belongs to another model"),
}


@pytest.mark.parametrize("case", list(SAFETENSORS_CASES))
def test_a_hostile_safetensors_file_is_refused_from_its_header(tiny_checkpoint, no_allocation, case):
    breaker, match = SAFETENSORS_CASES[case]
    breaker(tiny_checkpoint)
    refused(tiny_checkpoint, match)


# --- pytorch_model.bin ------------------------------------------------------------------------------

def make_bin(folder: Path, legacy: bool = False) -> Path:
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=not legacy)
    return folder / "pytorch_model.bin"


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("case, breaker, match", [
    ("empty", lambda p: p.write_bytes(b""), "pytorch_model.bin is empty"),
    ("truncated zip", cut, "pytorch_model.bin is truncated or corrupt"),
    ("not torch at all", lambda p: p.write_bytes(b"hello, world"), "pytorch_model.bin is not a PyTorch weights file"),
])
def test_a_broken_pytorch_bin_is_refused_before_torch_reads_it(tiny_checkpoint, no_allocation, case, breaker,
                                                               match):
    breaker(make_bin(tiny_checkpoint))
    refused(tiny_checkpoint, match)


def test_a_truncated_legacy_pytorch_bin_is_one_line(tiny_checkpoint):
    cut(make_bin(tiny_checkpoint, legacy=True))
    refused(tiny_checkpoint, "pytorch_model.bin could not be loaded safely")


def test_a_pytorch_bin_of_a_list_is_one_line(tiny_checkpoint):
    path = make_bin(tiny_checkpoint)
    torch.save([torch.zeros(3)], path)
    refused(tiny_checkpoint, "does not hold a dictionary of named tensors")


# --- the model card ---------------------------------------------------------------------------------

HOSTILE_CARD = {"corpus": "**bold** <img src=x onerror=alert(1)> :red[x] :smile:", "steps": "5000",
                "held_out": {"mlm_top1": "high", "mlm_top5": float("nan"), "nsp_acc": 0.5}}


def test_card_facts_skip_missing_and_wrongly_typed_keys():
    assert card_facts(HOSTILE_CARD) == ["trained on the **bold** <img src=x onerror=alert(1)> :red[x] :smile: "
                                        "for ? steps", "next-sentence accuracy 50%"]
    assert card_facts({"corpus": "wiki", "steps": 10**400, "held_out": ["x"]}) == ["trained on the wiki for ? steps"]
    assert card_facts({"corpus": 7, "held_out": {"mlm_top1": True, "mlm_top5": 0.9}}) == []
    assert card_facts({"corpus": "a\nb\x1b[31m\u202e", "steps": 5}) == ["trained on the a b [31m for 5 steps"]
    assert card_facts(["not", "a", "dict"]) == [] and card_facts({}) == []
    assert card_facts({"autocast": "bf16"}) == ["trained under bf16 autocast"]
    assert card_facts({"autocast": "off"}) == ["trained in fp32"] and card_facts({"autocast": "<b>x"}) == []
    assert card_facts({"held_out": {"mlm_top1": 0.7185, "mlm_top5": 0.8415}}) == [
        "held-out masked-word accuracy 72% (top-1), 84% (top-5)"]
    assert card_facts({"fine_tuned_on": "coherence", "steps": 200, "started": "from x"}) == [
        "fine-tuned on coherence for 200 steps, from x"]
    assert card_facts({"fine_tuned_on": "a\n:smile:", "steps": "7", "started": ["x"]}) == [
        "fine-tuned on a :smile: for ? steps"]


@pytest.mark.parametrize("text, safe", [
    ("trained on the built-in small world (generated stories) for 5,000 steps", True),
    ("held-out masked-word accuracy 72% (top-1), 84% (top-5)", True),
    ("heads: MLM + NSP", True), ("bertviz-mini", True),
    ("**bold**", False), ("<img src=x>", False), ("a :smile: b", False), ("x :red[y]", False), ("a -> b", False),
    ("a -- b", False), ("see www.example.com", False), ("1. item", False), ("- item", False), ("$x$", False),
    ("my_corpus", True), ("_my_corpus_", False), ("my__corpus", False), ("a\nb", False), ("[link](javascript:x)", False), ("", False),
])
def test_markdown_safe_lets_through_only_text_that_shows_as_written(text, safe):
    assert markdown_safe(text) is safe


def test_a_card_that_is_not_an_object_loads_as_no_card(tiny_checkpoint):
    (tiny_checkpoint / "model_card.json").write_text('["x"]')
    assert load_checkpoint(tiny_checkpoint).card == {}


def test_home_shows_a_hostile_card_and_folder_name_as_plain_text(tiny_checkpoint):
    folder = tiny_checkpoint.rename(tiny_checkpoint.parent / "**model** :smile:")
    (folder / "model_card.json").write_text(json.dumps({**HOSTILE_CARD, "held_out": "all good"}))
    at = app_test(APP).run()
    at.text_input(key="model.custom").set_value(str(folder)).run()
    at.button(key="model.load").click().run()
    assert not at.exception and not at.sidebar.error
    assert at.subheader[0].value == "Active model"
    texts = [t.value for t in at.text]
    assert "**model** :smile:" in texts
    assert "trained on the **bold** <img src=x onerror=alert(1)> :red[x] :smile: for ? steps" in texts
    markdown = [m.value for m in (*at.caption, *at.markdown, *at.subheader)]
    assert not any("<img" in m or "**" in m or ":smile:" in m for m in markdown)
    assert any(m.startswith("reads up to 64 tokens · heads: MLM + NSP") for m in markdown)


def test_the_cli_answers_a_hostile_folder_with_one_line(tiny_checkpoint, capsys):
    set_config(tiny_checkpoint, num_hidden_layers=10**400)
    assert main(["info", "--checkpoint", str(tiny_checkpoint)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "num_hidden_layers must be a whole number from 1 to 64, got a 401-digit number" in err
