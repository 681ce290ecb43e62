"""Checkpoints in the Hugging Face layout: config.json, model.safetensors, vocab.txt.

`load_checkpoint` opens folders written here or by `transformers`' `save_pretrained`
(BertForPreTraining, BertForMaskedLM, BertModel), old-style `pytorch_model.bin`
through `torch.load(weights_only=True)`, and nothing that needs unpickling of
arbitrary objects. Every problem is a `CheckpointError` with one clear line.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertviz_lab import atomic
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import CheckpointError, ConfigError

CARD_FILE = "model_card.json"  # our addition: how the model was trained and how well it does
MAX_JSON_BYTES = 1 << 20


@dataclass
class Checkpoint:
    model: BertForPreTraining
    tokenizer: WordPieceTokenizer
    path: Path
    card: dict = field(default_factory=dict)  # model_card.json if present
    ignored_keys: list[str] = field(default_factory=list)  # weights of heads we do not use

    @property
    def config(self) -> BertConfig:
        return self.model.config


def save_checkpoint(model: BertForPreTraining, tokenizer: WordPieceTokenizer, directory,
                    card: dict | None = None) -> Path:
    """Write the model, its tokenizer and an optional model card; each file atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic.write_json(directory / "config.json", model.config.to_hf_dict(model.architecture))
    tokenizer.save(directory)
    if card is not None:
        atomic.write_json(directory / CARD_FILE, card)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    with atomic.atomic_path(directory / "model.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    return directory


def load_checkpoint(directory, device: str | torch.device = "cpu") -> Checkpoint:
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise CheckpointError(f"no model folder at {directory}")
    config = _read_config(directory)
    state = _normalize_keys(_read_weights(directory))
    mlm = "cls.predictions.transform.dense.weight" in state
    nsp = "cls.seq_relationship.weight" in state and "bert.pooler.dense.weight" in state
    pooler = "bert.pooler.dense.weight" in state
    model = BertForPreTraining(config, mlm_head=mlm, nsp_head=nsp, pooler=pooler)
    ignored = _load_state(model, state)
    tokenizer = WordPieceTokenizer.from_dir(directory)
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(f"vocab.txt has {tokenizer.vocab_size} tokens but config.json says "
                              f"vocab_size={config.vocab_size}: they belong to different models")
    card = _read_json(directory / CARD_FILE) if (directory / CARD_FILE).is_file() else {}
    return Checkpoint(model.to(device).eval(), tokenizer, directory, card if isinstance(card, dict) else {}, ignored)


def _read_json(path: Path):
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{path.name} is too large to be a config file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path.name} is not valid JSON ({exc})") from None


def _read_config(directory: Path) -> BertConfig:
    path = directory / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{directory} has no config.json: not a Hugging Face model folder")
    try:
        return BertConfig.from_dict(_read_json(path))
    except ConfigError as exc:
        raise CheckpointError(f"config.json: {exc}") from None


def _read_weights(directory: Path) -> dict[str, torch.Tensor]:
    safetensors_path, bin_path = directory / "model.safetensors", directory / "pytorch_model.bin"
    if safetensors_path.is_file():
        try:
            return load_file(str(safetensors_path), device="cpu")
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"model.safetensors is corrupt or truncated ({exc})") from None
    if bin_path.is_file():
        try:  # weights_only: tensors and plain containers only, never arbitrary objects
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as exc:
            raise CheckpointError("pytorch_model.bin could not be loaded safely: it is corrupt or holds "
                                  f"more than tensors ({str(exc).splitlines()[0][:200]})") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise CheckpointError("pytorch_model.bin does not hold a dictionary of tensors")
        return state
    raise CheckpointError(f"{directory} has no model.safetensors or pytorch_model.bin")


def _normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map BertModel keys (no `bert.` prefix) and TF-era gamma/beta names onto ours."""
    out = {}
    for key, value in state.items():
        if key.endswith(".gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith(".beta"):
            key = key[: -len("beta")] + "bias"
        if key.startswith(("embeddings.", "encoder.", "pooler.")):
            key = "bert." + key
        out[key] = value
    # The decoder is tied to the word embeddings here; older files store a copy and
    # sometimes keep the MLM bias under the decoder's name.
    decoder_bias = out.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None and "cls.predictions.bias" not in out:
        out["cls.predictions.bias"] = decoder_bias
    out.pop("cls.predictions.decoder.weight", None)
    out.pop("bert.embeddings.position_ids", None)
    return out


def _load_state(model: BertForPreTraining, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy weights in after checking names, shapes and values; returns keys we ignore."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    if missing:
        raise CheckpointError(f"the weights lack {len(missing)} tensors the config needs, e.g. {missing[0]}")
    for key, tensor in expected.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise CheckpointError(f"weights do not match config.json: {key} has shape {tuple(state[key].shape)}, "
                                  f"the config implies {tuple(tensor.shape)}")
        if not state[key].is_floating_point():
            raise CheckpointError(f"{key} is not a floating-point tensor")
        if not torch.isfinite(state[key]).all():
            raise CheckpointError(f"{key} contains NaN or infinite values")
    model.load_state_dict({k: state[k].float() for k in expected})
    return sorted(k for k in state if k not in expected)
