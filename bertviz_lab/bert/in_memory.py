"""A `transformers` model and its tokenizer, already in memory, read into this lab's BERT without touching the disk.

A notebook has them loaded (`AutoModelForMaskedLM.from_pretrained(...)`); `read_model` turns them into the
`Checkpoint` a folder gives, by the same steps: the config through the family's translation (`config_of`), the
weights through the same renaming and checks (`model_from_state`), the tokenizer through tokenizer_json.py's reader.
Nothing is written anywhere. `transformers` is never imported (it is a test dependency only): the objects are
read by what they offer. A model is a torch module with `config.to_dict()` and `state_dict()`; a tokenizer is a
fast one (`backend_tokenizer`: its tokenizer.json, as a string) or a slow WordPiece one (`get_vocab()` and its
`do_lower_case`). The copy goes on the device the model is on, in eval mode; the original is left as it was.
"""

from __future__ import annotations

import torch

from bertviz_lab import files
from bertviz_lab.bert.checkpoint import Checkpoint, config_of, model_from_state
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.device import to_device
from bertviz_lab.bert.family import FAMILIES, Family
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_json_text
from bertviz_lab.errors import CheckpointError

SUPPORTED = ("BertForMaskedLM, BertForPreTraining, BertModel and the same classes of RoBERTa, XLM-RoBERTa, "
             "DistilBERT, ALBERT and ELECTRA (ElectraForPreTraining, ElectraForMaskedLM)")
ROLES = ("pad", "unk", "cls", "sep", "mask")


def read_model(model, tokenizer, device: str | torch.device | None = None) -> Checkpoint:
    """The lab's copy of a `transformers` `model` and its `tokenizer` (on `device`, by default the model's own)."""
    name = type(model).__name__
    raw, config, family = _config(model)
    files.check_memory(4 * config.num_parameters(), f"a copy of this {name}", CheckpointError)
    lab_tokenizer = read_tokenizer(tokenizer, family, config.vocab_size)
    built, ignored = model_from_state(raw, config, family, _state(model))
    where = torch.device(device) if device is not None else _device(model)
    return Checkpoint(to_device(built, where).eval(), lab_tokenizer, None, {}, ignored)


def _config(model) -> tuple[dict, BertConfig, Family]:
    """(the config as a dict, as BertConfig, its family), or a CheckpointError naming what the lab reads."""
    name = type(model).__name__
    to_dict = getattr(getattr(model, "config", None), "to_dict", None)
    if not isinstance(model, torch.nn.Module) or not callable(to_dict):
        raise CheckpointError(f"a {name} is not a transformers model: this lab reads {SUPPORTED}, "
                              "loaded with transformers' from_pretrained, together with its tokenizer")
    raw = to_dict()
    if not isinstance(raw, dict):
        raise CheckpointError(f"the config of this {name} is not a dictionary of settings")
    if raw.get("model_type", "bert") not in FAMILIES:
        raise CheckpointError(f"a {name} is not a model of the BERT family: this lab reads {SUPPORTED}")
    # The object's own class is what it is, whatever `architectures` says (a model built in memory says nothing).
    raw = {**raw, "architectures": [name]}
    config, family = config_of(raw, f"the config of this {name}")
    return raw, config, family


def _state(model) -> dict[str, torch.Tensor]:
    state = {k: v.detach() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    meta = next((k for k, v in state.items() if v.is_meta), None)
    if meta is not None:
        raise CheckpointError(f"the weights of this {type(model).__name__} are not loaded ({meta} has no values): "
                              "load the model with its weights first")
    return state


def _device(model) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def read_tokenizer(tokenizer, family: Family, max_tokens: int) -> WordPieceTokenizer:
    """The lab's tokenizer from a `transformers` one: a fast tokenizer's pipeline as it is, or a slow WordPiece
    tokenizer's vocabulary and casing."""
    name = type(tokenizer).__name__
    if tokenizer is None:
        raise CheckpointError("the model needs its tokenizer too: pass the one loaded with it "
                              "(AutoTokenizer.from_pretrained of the same name)")
    settings = _settings(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if callable(getattr(backend, "to_str", None)):
        return from_json_text(backend.to_str(), [settings], family.specials, max_tokens, f"this {name}")
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if not callable(get_vocab):
        raise CheckpointError(f"a {name} is not a tokenizer: pass the transformers tokenizer loaded with the model")
    if family.prefer_json:
        raise CheckpointError(f"this {name} is a slow {family.title} tokenizer, which this lab cannot read: load the "
                              "fast one (AutoTokenizer.from_pretrained(name), the default)")
    lower = settings.get("do_lower_case", True)
    basic = getattr(tokenizer, "basic_tokenizer", None)
    strip = getattr(basic, "strip_accents", (getattr(tokenizer, "init_kwargs", None) or {}).get("strip_accents"))
    if strip is not None and strip != lower:
        raise CheckpointError(f"this slow {name} sets strip_accents={strip} apart from its lowercasing, which this lab "
                              "reads from a fast tokenizer only: load the fast one (AutoTokenizer.from_pretrained)")
    odd = {role: token for role in ROLES if (token := settings.get(f"{role}_token")) not in (None, family.specials[role])}
    if odd:
        role, token = next(iter(odd.items()))
        raise CheckpointError(f"this slow {name} uses {token!r} as its {role} token, which this lab reads from a fast "
                              "tokenizer only: load the fast one (AutoTokenizer.from_pretrained)")
    vocab = get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise CheckpointError(f"the vocabulary of this {name} has gaps in its ids; expected ids 0..N-1")
    if len(tokens) > max_tokens:
        raise CheckpointError(f"this {name} lists {len(tokens):,} tokens but the model has room for {max_tokens:,} "
                              "(vocab_size): they belong to different models")
    return WordPieceTokenizer.from_vocab(tokens, lower)


def _settings(tokenizer) -> dict:
    """What tokenizer_config.json would say: do_lower_case (when the tokenizer says) and each role's token."""
    lower = getattr(tokenizer, "do_lower_case", None)
    if not isinstance(lower, bool):
        lower = (getattr(tokenizer, "init_kwargs", None) or {}).get("do_lower_case")
    named = getattr(tokenizer, "special_tokens_map", None) or {}
    settings = {f"{role}_token": str(named[f"{role}_token"]) for role in ROLES if named.get(f"{role}_token")}
    return {**settings, **({"do_lower_case": lower} if isinstance(lower, bool) else {})}
