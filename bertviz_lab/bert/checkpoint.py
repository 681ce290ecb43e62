"""Checkpoints in the Hugging Face layout: config.json, model.safetensors, vocab.txt.

`load_checkpoint` opens folders written here or by `transformers`' `save_pretrained`
(BertForPreTraining, BertForMaskedLM, BertModel), old-style `pytorch_model.bin`
through `torch.load(weights_only=True)`, and nothing that needs unpickling of
arbitrary objects. A folder is anything a user types, so every file is checked before
it is read and the model's memory before it is allocated: the config's size fields are
bounded, the weights' bytes are estimated from the config and compared with free memory,
and a safetensors header is checked against the file and the config before a byte of
tensor data is read. Every problem is a `CheckpointError` with one clear line.

`config_of` and `model_from_state` are the two steps a folder shares with a `transformers` model already in
memory (bert/in_memory.py): the config through the family's translation, the weights through the same renaming
and checks.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertviz_lab import atomic, files
from bertviz_lab.bert.classifier import BertClassifier, saved_head
from bertviz_lab.bert.config import BertConfig, show
from bertviz_lab.bert.device import to_device
from bertviz_lab.bert.family import FAMILIES, Family, family_of
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.errors import CheckpointError, ConfigError

CARD_FILE = "model_card.json"  # our addition: how the model was trained and how well it does
SAFETENSORS, PYTORCH_BIN = "model.safetensors", "pytorch_model.bin"
# Bytes per element of the safetensors dtypes a BERT checkpoint may hold (weights, position ids).
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit
EXTRA_WEIGHT_BYTES = 64 << 20  # heads we ignore and buffers a real file may carry besides our weights
# A model may have more rows of word embeddings than its tokenizer has tokens: rows no token reads, added so that the
# matrix multiplies fast (transformers' resize_token_embeddings(pad_to_multiple_of=8 or 64), Megatron's multiple of
# 128: 30,592 rows for BERT's 30,522 tokens). Fewer than PADDING extra rows and a row count that is a multiple of 8
# are that padding and go unsaid; anything else is probably another model's tokenizer (more tokens than rows is
# refused where each tokenizer is read), opened, but said wherever the model is shown, since its guesses are then
# ranked among the tokenizer's tokens only.
PADDING = 128


@dataclass
class Checkpoint:
    model: BertForPreTraining
    tokenizer: WordPieceTokenizer
    path: Path | None  # the folder it was read from; None for a model read from memory (bert/in_memory.py)
    card: dict = field(default_factory=dict)  # model_card.json if present
    ignored_keys: list[str] = field(default_factory=list)  # weights of heads we do not use

    @property
    def config(self) -> BertConfig:
        return self.model.config

    @property
    def family(self) -> Family:
        return FAMILIES[self.config.family]

    @property
    def vocab_warning(self) -> str | None:
        """One sentence to show beside the model when its tokenizer leaves rows of word embeddings unread."""
        return vocab_warning(self.tokenizer.vocab_size, self.config.vocab_size)


def vocab_warning(tokens: int, rows: int) -> str | None:
    """What to say about a tokenizer of `tokens` tokens on a model of `rows` rows, or None for padding (PADDING)."""
    if tokens >= rows or (rows - tokens < PADDING and rows % 8 == 0):
        return None
    return (f"This tokenizer has {tokens:,} tokens but the model has {rows:,} rows of word embeddings, so it may "
            f"belong to another model: guesses are ranked among its {tokens:,} tokens only.")


def save_checkpoint(model: BertForPreTraining, tokenizer: WordPieceTokenizer, directory,
                    card: dict | None = None) -> Path:
    """Write the model, its tokenizer and an optional model card; each file atomically."""
    if model.config.family != "bert":  # its weights carry BERT's names here: saved, they would not load as it
        raise CheckpointError(f"this lab saves BERT checkpoints only, and this is a {model.config.family} model")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic.write_json(directory / "config.json", model.hf_config())
    tokenizer.save(directory)
    if card is not None:
        atomic.write_json(directory / CARD_FILE, card)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    with atomic.atomic_path(directory / SAFETENSORS) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    return directory


def load_checkpoint(directory, device: str | torch.device = "cpu") -> Checkpoint:
    """The model, tokenizer and card in `directory`, each file checked before it is read."""
    directory = _folder(directory)
    raw, config, family = _read_config(directory)
    weights, size = _weights_file(directory, config)
    # The model's fp32 weights, plus the state dict they are loaded from (at least as large).
    files.check_memory(4 * config.num_parameters() + max(4 * config.num_parameters(), size),
                       f"the model in {directory.name}", CheckpointError)
    if weights.name == SAFETENSORS:  # names, shapes and dtypes, before a byte of tensor data is read
        _check_entries(config, _normalize_keys(_safetensors_entries(weights, size), family))
    tokenizer = from_dir(directory, max_tokens=config.vocab_size, specials=family.specials,
                                            prefer_json=family.prefer_json)
    card = files.read_json(directory / CARD_FILE, error=CheckpointError) if _exists(directory / CARD_FILE) else {}
    model, ignored = model_from_state(raw, config, family, _read_weights(weights))
    model = to_device(model, device, f"the model in {directory.name}").eval()
    return Checkpoint(model, tokenizer, directory, card if isinstance(card, dict) else {}, ignored)


def config_of(raw: object, what: str = "config.json") -> tuple[BertConfig, Family]:
    """The BertConfig and the family of a config as `transformers` writes it (`what` names it in errors)."""
    try:
        family = family_of(raw)
        if raw.get("is_decoder") is True or raw.get("add_cross_attention") is True:
            raise ConfigError("this model is set up as a decoder (is_decoder or add_cross_attention): each token sees "
                              "only the tokens before it, not BERT's attention both ways; this lab reads encoders only")
        return family.config(raw), family
    except ConfigError as exc:
        raise CheckpointError(f"{what}: {exc}") from None


def model_from_state(raw: dict, config: BertConfig, family: Family,
                     state: dict[str, torch.Tensor]) -> tuple[BertForPreTraining, list[str]]:
    """This lab's model of `config` holding the weights of `state`, named as `family` names them (a folder's
    weights file, or a `transformers` model's state_dict in memory): names and shapes checked against the
    config, values checked finite. Returns the model (on the CPU, in fp32) and the keys of heads it ignores."""
    state = _normalize_keys(state, family)
    entries = {k: (tuple(v.shape), v.is_floating_point()) for k, v in state.items()}
    heads = _check_entries(config, entries)
    head = saved_head(raw, config.hidden_size, entries, heads) if family.name == "bert" else None
    model = (BertClassifier(config, *head) if head is not None else
             BertForPreTraining(config, mlm_head=heads["mlm"], nsp_head=heads["nsp"], pooler=heads["pooler"],
                                rtd_head=heads["rtd"]))
    return model, _load_state(model, state)


def _exists(path: Path) -> bool:
    return os.path.lexists(path)  # True for a FIFO, a device or a dangling link: the readers refuse those


def _folder(directory) -> Path:
    folder = files.check_path(directory, "model folder", CheckpointError)
    try:
        info = folder.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise CheckpointError(f"no model folder at {folder}") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot open the model folder {folder}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CheckpointError(f"no model folder at {folder}: it is a file, not a folder")
    if files.in_system_folder(folder.resolve()):
        raise CheckpointError(f"{folder} is a system folder, not a model folder")
    return folder


def _read_config(directory: Path) -> tuple[dict, BertConfig, Family]:
    """config.json as read (its labels live there), as a BertConfig, and the family it names."""
    path = directory / "config.json"
    if not _exists(path):
        raise CheckpointError(f"{directory} has no config.json: not a Hugging Face model folder")
    raw = files.read_json(path, error=CheckpointError)
    return raw, *config_of(raw)


def _weights_file(directory: Path, config: BertConfig) -> tuple[Path, int]:
    """The weights file and its size, refused if empty or far larger than the config's weights."""
    name = next((n for n in (SAFETENSORS, PYTORCH_BIN) if _exists(directory / n)), None)
    if name is None:
        raise CheckpointError(f"{directory} has no {SAFETENSORS} or {PYTORCH_BIN}")
    expected = 4 * config.num_parameters()
    limit = 2 * expected + EXTRA_WEIGHT_BYTES  # room for fp64 weights or an untied decoder copy
    path = files.regular_file(directory / name, "weights file", 1 << 62, CheckpointError)
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"{name} is empty")
    if size > limit:
        raise CheckpointError(f"{name} is {files.describe_bytes(size)}, but the weights config.json describes take "
                              f"{files.describe_bytes(expected)}: the file belongs to another model")
    return path, size


def _safetensors_entries(path: Path, size: int) -> dict[str, tuple[tuple[int, ...], bool]]:
    """name -> (shape, floating point) from the header, after checking it describes this very file."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else None
        if length is None or not 2 <= length <= min(size - 8, MAX_HEADER_BYTES):
            raise CheckpointError(f"{SAFETENSORS} is truncated or corrupt: its header length "
                                  f"({'missing' if length is None else f'{length:,} bytes'}) does not fit "
                                  f"the file ({size:,} bytes)")
        raw = f.read(length)
    header = files.parse_json(raw, f"the header of {SAFETENSORS}", CheckpointError)
    if not isinstance(header, dict):
        raise CheckpointError(f"the header of {SAFETENSORS} is not a JSON object")
    header.pop("__metadata__", None)
    data_bytes, end, entries = size - 8 - length, 0, {}
    for name, info in sorted(header.items(), key=lambda item: _begin(item[1])):
        shape, dtype, (begin, stop) = _entry(name, info)
        if stop > data_bytes:
            raise CheckpointError(f"{SAFETENSORS} is corrupt or truncated: tensor {show(name)} ends at byte "
                                  f"{stop:,} of the data, which holds {data_bytes:,}")
        if begin != end:
            raise CheckpointError(f"the header of {SAFETENSORS} is corrupt: the tensors do not tile the data "
                                  f"(a gap or overlap at byte {min(begin, end):,})")
        entries[name], end = (shape, dtype.startswith(("F", "BF"))), stop
    if end != data_bytes:
        extra = data_bytes - end
        raise CheckpointError(f"{SAFETENSORS} holds {extra:,} byte{'s' * (extra != 1)} after its last tensor "
                              "that its header does not account for")
    return entries


def _begin(info) -> int:
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    ok = isinstance(offsets, list) and offsets and isinstance(offsets[0], int) and not isinstance(offsets[0], bool)
    return offsets[0] if ok else -1  # malformed entries first, so _entry names them


def _entry(name: str, info) -> tuple[tuple[int, ...], str, tuple[int, int]]:
    """(shape, dtype, offsets) of one header entry, every field type- and size-checked."""
    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    tensor = f"tensor {show(name)}"
    what = f"{tensor} in the header of {SAFETENSORS}"
    if not isinstance(info, dict):
        raise CheckpointError(f"{what} is not described by a JSON object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise CheckpointError(f"{what} has dtype {show(dtype)}, which this lab cannot load "
                              f"(it reads {', '.join(DTYPE_BYTES)})")
    if not isinstance(shape, list) or len(shape) > 8 or not all(whole(n) for n in shape):
        raise CheckpointError(f"{what} has an invalid shape {show(shape)}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(whole(n) for n in offsets)
            and offsets[0] <= offsets[1]):
        raise CheckpointError(f"{what} has invalid data offsets {show(offsets)}")
    needed, span = math.prod(shape) * DTYPE_BYTES[dtype], offsets[1] - offsets[0]
    if needed != span:
        raise CheckpointError(f"the header of {SAFETENSORS} lies: {tensor} of {len(shape)} dimensions and dtype "
                              f"{dtype} needs {needed:,} bytes, its offsets span {span:,}")
    return tuple(shape), dtype, (offsets[0], offsets[1])


def _check_entries(config: BertConfig, found: dict) -> dict[str, bool]:
    """The heads to build, after checking `found` (key -> (shape, float)) holds every tensor they need."""
    heads = dict(mlm="cls.predictions.transform.dense.weight" in found,
                 nsp="cls.seq_relationship.weight" in found and "bert.pooler.dense.weight" in found,
                 pooler="bert.pooler.dense.weight" in found, rtd="cls.discriminator.dense.weight" in found)
    expected = config.weight_shapes(**heads)
    missing = [k for k in expected if k not in found]
    if missing:
        raise CheckpointError(f"the weights lack {len(missing)} tensors the config needs, e.g. {missing[0]}")
    for key, implied in expected.items():
        shape, is_float = found[key]
        if tuple(shape) != implied:
            raise CheckpointError(f"weights do not match config.json: {key} has shape {tuple(shape)}, "
                                  f"the config implies {implied}")
        if not is_float:
            raise CheckpointError(f"{key} is not a floating-point tensor")
    return heads


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    if path.name == SAFETENSORS:
        try:
            return load_file(str(path), device="cpu")
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"{SAFETENSORS} is corrupt or truncated ({str(exc)[:200]})") from None
    _check_bin(path)
    try:  # weights_only: tensors and plain containers only, never arbitrary objects
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError,
            TypeError, IndexError, KeyError, MemoryError) as exc:
        raise CheckpointError(f"{PYTORCH_BIN} could not be loaded safely: it is corrupt or holds "
                              f"more than tensors ({(str(exc).splitlines() or [''])[0][:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise CheckpointError(f"{PYTORCH_BIN} does not hold a dictionary of named tensors")
    return state


def _check_bin(path: Path) -> None:
    """Refuse a pytorch_model.bin that is not a whole torch.save file before torch reads it."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic.startswith(b"PK"):  # torch.save's zip format: the directory at its end must be there
        try:
            with zipfile.ZipFile(path) as archive:
                claimed = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise CheckpointError(f"{PYTORCH_BIN} is truncated or corrupt ({exc})") from None
        if claimed > 2 * path.stat().st_size + EXTRA_WEIGHT_BYTES:
            raise CheckpointError(f"{PYTORCH_BIN} claims {files.describe_bytes(claimed)} of contents in a "
                                  f"{files.describe_bytes(path.stat().st_size)} file: it is corrupt")
    elif not magic.startswith(b"\x80"):  # the legacy format starts with a pickle
        raise CheckpointError(f"{PYTORCH_BIN} is not a PyTorch weights file")


def _normalize_keys(state: dict, family: Family = FAMILIES["bert"]) -> dict:
    """Map the family's weight names onto BERT's (for BERT itself: BertModel keys without the `bert.`
    prefix and TF-era gamma/beta names)."""
    out = {family.rename(key): value for key, value in state.items()}
    # The decoder is tied to the word embeddings here; older files store a copy and
    # sometimes keep the MLM bias under the decoder's name.
    decoder_bias = out.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None and "cls.predictions.bias" not in out:
        out["cls.predictions.bias"] = decoder_bias
    out.pop("cls.predictions.decoder.weight", None)
    out.pop("bert.embeddings.position_ids", None)
    out.pop("bert.embeddings.token_type_ids", None)  # a buffer of zeros some families save
    return out


def _load_state(model: BertForPreTraining, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy weights in after checking their values (names and shapes: `_check_entries`)."""
    # Shared layers (ALBERT) are stored once, as layer 0, and listed under every layer's name here.
    stored = {k: re.sub(r"^bert\.encoder\.layer\.\d+\.", "bert.encoder.layer.0.", k)
              if model.config.shared_layers else k for k in model.state_dict()}
    for key in set(stored.values()):
        if not torch.isfinite(state[key]).all():
            raise CheckpointError(f"{key} contains NaN or infinite values")
    model.load_state_dict({k: state[source].float() for k, source in stored.items()})
    return sorted(k for k in state if k not in set(stored.values()))
