"""A tokenizer from a model's folder (`from_dir`: vocab.txt for a WordPiece model, else `tokenizer.json`), and from
`tokenizer.json`: how RoBERTa, XLM-R, ALBERT (and any Hub model) ship theirs.

The file holds the whole pipeline (normalizer, pre-tokenizer, model, post-processor with the
family's `<s> A </s></s> B </s>` or `[CLS] A [SEP] B [SEP]` template), so reading it as it is
gives the ids `transformers` gives. What the file cannot say is which token plays which part;
tokenizer_config.json and special_tokens_map.json name them, else the family's defaults do.
`from_json_text` reads the same JSON from a string: a fast tokenizer in memory (bert/in_memory.py) holds it.
`WORD_START` is each kind's mark of a word's first token (Ġ, ▁), once for the pages, the lesson and the typed
words of Why this guess?
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenizers import Tokenizer

from bertviz_lab import files
from bertviz_lab.bert.tokenizer import MAX_VOCAB_BYTES, ROLES, WordPieceTokenizer
from bertviz_lab.errors import CheckpointError

KINDS = {"WordPiece": "WordPiece", "BPE": "byte-level BPE", "Unigram": "SentencePiece Unigram"}
# kind -> the mark a token carries for the space before it (WordPiece marks the other pieces instead, with ##),
# and the marks alone: a word typed without one may stand in the vocabulary with one ("Ġmat", "▁mat")
WORD_START = {KINDS["BPE"]: "Ġ", KINDS["Unigram"]: "▁"}
WORD_MARKERS = tuple(WORD_START.values())


def from_json(path: Path, settings: dict, defaults: dict[str, str], max_tokens: int | None) -> WordPieceTokenizer:
    """The tokenizer in `path`, its special tokens named by `settings` (tokenizer_config.json),
    special_tokens_map.json beside it, or `defaults`, in that order."""
    text = files.read_text(path, "tokenizer.json", MAX_VOCAB_BYTES, CheckpointError)
    return from_json_text(text, [settings, _special_map(path.parent)], defaults, max_tokens)


def from_json_text(text: str, sources: list[dict], defaults: dict[str, str], max_tokens: int | None,
                   what: str = "tokenizer.json") -> WordPieceTokenizer:
    """The tokenizer a tokenizer.json's text describes (a file's, or a fast tokenizer's in memory, `what` naming
    it in errors). Its special tokens are named by the first of `sources` (dicts as tokenizer_config.json writes
    them: mask_token, ...) to name one, else by `defaults`; it lowercases when the first source says
    do_lower_case."""
    try:
        tok = Tokenizer.from_str(text)
    except Exception as exc:  # tokenizers raises a bare Exception for every malformed file
        raise CheckpointError(f"{what} is not a tokenizer this lab can read ({str(exc)[:160]})") from None
    tok.no_truncation()  # the lab truncates itself, and pads batches itself
    tok.no_padding()
    size = tok.get_vocab_size(with_added_tokens=True)
    if max_tokens is not None and size > max_tokens:
        raise CheckpointError(f"{what} lists {size:,} tokens but the model has room for {max_tokens:,} "
                              "(vocab_size): they belong to different models.")
    kind = KINDS.get(type(tok.model).__name__)
    if kind is None:
        raise CheckpointError(f"{what} uses a {type(tok.model).__name__} model; this lab reads "
                              f"{', '.join(KINDS)}")
    vocab = tok.get_vocab(with_added_tokens=True)
    specials = {role: _named(role, sources, vocab) or default for role, default in defaults.items()}
    lowercase = bool(sources) and sources[0].get("do_lower_case") is True
    return WordPieceTokenizer(tok, lowercase, specials, kind)


def _special_map(folder: Path) -> dict:
    """special_tokens_map.json as a dict ({} when absent or not an object)."""
    path = folder / "special_tokens_map.json"
    if not os.path.lexists(path):
        return {}
    found = files.read_json(path, "special_tokens_map.json", error=CheckpointError)
    return found if isinstance(found, dict) else {}


def _named(role: str, sources: list[dict], vocab: dict[str, int]) -> str | None:
    """The token the first of `sources` to name one names for `role` ("mask" -> mask_token), if in the vocabulary."""
    for source in sources:
        value = source.get(f"{role}_token")
        if isinstance(value, dict):  # {"content": "<mask>", "lstrip": true, ...}
            value = value.get("content")
        if isinstance(value, str) and value in vocab:
            return value
    return None


def read_settings(folder: Path) -> dict:
    """tokenizer_config.json as a dict ({} when absent)."""
    config = folder / "tokenizer_config.json"
    if not os.path.lexists(config):
        return {}
    settings = files.read_json(config, "tokenizer_config.json", error=CheckpointError)
    if not isinstance(settings, dict):
        raise CheckpointError(f"{config} should hold a JSON object of settings.")
    return settings


def from_dir(directory: str | os.PathLike, max_tokens: int | None = None,
             specials: dict[str, str] | None = None, prefer_json: bool = False) -> WordPieceTokenizer:
    """Load a folder's tokenizer: vocab.txt (and do_lower_case from tokenizer_config.json) for a
    WordPiece model, else tokenizer.json. `specials`: the family's special tokens, when the folder's
    tokenizer_config.json does not name them; `prefer_json`: read tokenizer.json even if vocab.txt
    is there (a family whose vocab.txt is not WordPiece)."""
    folder = files.check_path(directory, "tokenizer folder", CheckpointError)
    settings = read_settings(folder)
    has_json, has_vocab = (os.path.lexists(folder / name) for name in ("tokenizer.json", "vocab.txt"))
    if has_json and (prefer_json or not has_vocab):
        return from_json(folder / "tokenizer.json", settings, specials or ROLES, max_tokens)
    if not has_vocab:
        raise CheckpointError(f"No vocab.txt or tokenizer.json in {folder}; is this a model folder?")
    lowercase = settings.get("do_lower_case", True)  # transformers' default when the config does not say
    if not isinstance(lowercase, bool):
        raise CheckpointError(f"{folder / 'tokenizer_config.json'} must set do_lower_case to true or false.")
    return WordPieceTokenizer.from_vocab_file(folder / "vocab.txt", lowercase, max_tokens)
