"""The model a notebook works with: `load` and the `Lab` it returns, and what every call of the notebook API shares.

`load` takes what a student has at hand: the name of a model that comes with the lab ("bertviz-mini"), a model
folder, a Hugging Face Hub id (from the cache, or downloaded into it first, as the command line does), or a
`transformers` model and its tokenizer already in memory (bert/in_memory.py reads them without writing a file).
Models opened by name are kept (`LOADED` of them), so calling `nb.predict("bertviz-mini", ...)` again does not load
again; each `Lab` keeps its last results (`MEMO`: a traced pass, an explanation, a syntax analysis), so asking for
another figure of the same input runs nothing twice. Text goes through the checks the app uses (`encode`), and a
layer, head or choice out of range is an `InputError` of one sentence, never a traceback from deep inside.
"""

from __future__ import annotations

import importlib.util
import math
import numbers
import operator
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bertviz_lab import files
from bertviz_lab.bert import hub
from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.device import resolve_device
from bertviz_lab.bert.family import Family
from bertviz_lab.bert.in_memory import read_model
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import CheckpointError, InputError
from bertviz_lab.views import inputs

LOADED = 4  # models kept by (folder, device): a notebook switches between a few
MEMO = 16  # results each Lab keeps (traced passes, explanations, syntax analyses), the oldest dropped first
BAR_DELAY_S = 0.5  # a progress bar appears only for work that takes longer than this
_loaded: OrderedDict[tuple, Lab] = OrderedDict()


@dataclass(eq=False)
class Lab:
    """A model ready for the notebook calls: the lab's own BERT (`.model`), its tokenizer (`.tokenizer`) and the
    `Checkpoint` that holds both (`.checkpoint`), with where it came from (`.source`)."""

    checkpoint: Checkpoint
    source: str  # in words: "checkpoints/bertviz-mini (shipped with the lab)", "a BertForMaskedLM in memory", ...
    _memo: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)

    @property
    def model(self):
        return self.checkpoint.model

    @property
    def tokenizer(self) -> WordPieceTokenizer:
        return self.checkpoint.tokenizer

    @property
    def config(self) -> BertConfig:
        return self.checkpoint.config

    @property
    def family(self) -> Family:
        return self.checkpoint.family

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def __repr__(self) -> str:
        c, model = self.config, self.model
        heads = ("a replaced-token head (an ELECTRA discriminator)" if model.has_rtd else
                 "a masked-LM head" if model.has_mlm else "no masked-LM head")
        return (f"<Lab {self.family.title}: {c.num_hidden_layers} layers × {c.num_attention_heads} heads, hidden size "
                f"{c.hidden_size}, vocabulary of {self.tokenizer.vocab_size:,} ({self.tokenizer.kind}), {heads}, "
                f"{model.num_parameters():,} parameters on {self.device}; from {self.source}>")

    def no_mlm(self) -> str:
        """Why this model has no masked-LM head, to go on "..., so it cannot ...". A transformers object in memory
        is the class that was loaded (a BertModel has none, whatever its checkpoint holds); a folder was saved
        without one; an ELECTRA discriminator was never given one."""
        if self.checkpoint.path is None and not self.model.has_rtd:
            return (f"{self.source.removesuffix(' in memory')} has no such layer: load the model with AutoModelForMaskedLM (from_pretrained of the "
                    "same name) to get it")
        return self.family.no_mlm(self.model.has_rtd)

    def kept(self, key: Hashable) -> bool:
        """Whether a result is kept under `key`."""
        return key in self._memo

    def remember(self, key: Hashable, compute: Callable[[], object]):
        """The result kept under `key`, computed now if it is not (the MEMO most recent are kept)."""
        if key in self._memo:
            self._memo.move_to_end(key)
            return self._memo[key]
        value = compute()
        self._memo[key] = value
        while len(self._memo) > MEMO:
            self._memo.popitem(last=False)
        return value


def load(source, tokenizer=None, *, device: str | torch.device | None = None) -> Lab:
    """A model to explore, from a name, a folder, a Hub id or a `transformers` model in memory.

    - `load("bertviz-mini")`: a model that comes with the lab, by name (checkpoints/ holds them);
    - `load("path/to/folder")`: a folder saved by this lab or by `transformers`' save_pretrained;
    - `load("bert-base-uncased")`: a Hugging Face Hub id, from the cache or downloaded into it first;
    - `load(model, tokenizer)`: a `transformers` model of the BERT family and its tokenizer, already loaded
      (BertForMaskedLM, BertForPreTraining, BertModel, and those of RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA).
      It is copied into the lab's own BERT by the steps a folder is read with, in memory: no file is written.

    `device`: "cpu", "cuda" or "auto" (a name or folder: "auto" by default; a model object: where it is).
    A model opened by name again (on the same device) is the one already loaded.
    """
    if isinstance(source, Lab):
        if tokenizer is not None or device is not None:
            raise InputError("this is a Lab already, with its own tokenizer and device: pass the Lab alone, or load "
                             "its source again with the device you want")
        return source
    if isinstance(source, (str, os.PathLike)):
        if tokenizer is not None:
            raise InputError("a model folder or name brings its own tokenizer: pass a tokenizer only with a "
                             "transformers model object, as load(model, tokenizer)")
        return _by_name(source, resolve_device("auto" if device is None else str(device)))
    where = None if device is None else resolve_device(str(device))
    return Lab(read_model(source, tokenizer, where), f"{_a(type(source).__name__)} in memory")


def _a(name: str) -> str:
    """'a BertModel', 'an ElectraModel'."""
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def lab_of(lab) -> Lab:
    """`lab` as a Lab: itself, or what `load` opens for a name, folder or Hub id."""
    if isinstance(lab, (Lab, str, os.PathLike)):
        return load(lab)
    raise InputError(f"expected a Lab (lab = nb.load(...)) or a model's name, folder or Hub id, got a "
                     f"{type(lab).__name__}; a transformers model needs its tokenizer: lab = nb.load(model, tokenizer)")


def _by_name(source, device: torch.device) -> Lab:
    """The model a name, folder or Hub id names, loaded once per (folder, device, folder's last change)."""
    path = files.check_path(source, "model folder", CheckpointError)
    text = os.fspath(source).strip()
    shipped = None if os.path.lexists(path) else files.shipped_model(text)
    if shipped is not None:
        folder, said = shipped, f"{text} (shipped with the lab)"
    elif not os.path.lexists(path) and hub.looks_like_hub_id(text):
        folder = hub.cached_folder(text)
        if folder is None:
            with Bar("B") as bar:
                folder = hub.fetch(text, progress=bar.bytes)
        said = f"the Hugging Face Hub: {text}"
    else:
        folder, said = path, text
    try:
        key = (str(Path(folder).resolve()), str(device), os.stat(folder).st_mtime_ns)
    except OSError:
        key = None  # load_checkpoint says what is wrong with it
    if key in _loaded:
        _loaded.move_to_end(key)
        return _loaded[key]
    lab = Lab(load_checkpoint(folder, device=device), said)
    if key is not None:
        _loaded[key] = lab
        while len(_loaded) > LOADED:
            _loaded.popitem(last=False)
    return lab


def encode(lab: Lab, text: str, text_b: str | None = None) -> Encoding:
    """The text as the model reads it, checked as the app checks it: not empty, readable characters, and no
    longer than the model reads (a notebook has no note to say what truncation dropped, so it is an error)."""
    for value, what in ((text, "text"), (text_b, "text_b")):
        if not (isinstance(value, str) or (what == "text_b" and value is None)):
            raise InputError(f"{what} must be a sentence (a str), not {type(value).__name__}"
                             + (": the options after the text are keywords (top_k=5)" if what == "text_b" else ""))
    return inputs.encode(lab.tokenizer, lab.model, text, text_b, allow_truncation=False)


def needs_mlm(lab: Lab, then: str) -> None:
    """An InputError unless the model has its masked-LM head (`then`: what it cannot do without one)."""
    if not lab.model.has_mlm:
        raise InputError(f"this model has no masked-language-model (MLM) head: {lab.no_mlm()}, so it {then}")


def index(value, count: int, what: str, first: str = "", owner: str = "this model") -> int:
    """`value` as an int in 0..count-1, or an InputError naming the ones `owner` has (`first`: what 0 is)."""
    if isinstance(value, str):  # "1" is not the layer 1 (nor a token's text: those calls look text up first)
        raise InputError(f"{what} must be a whole number from 0 to {count - 1}, not the text {value!r}")
    number = as_int(value)
    if number is None or not 0 <= number < count:
        zero = f"0{f' ({first})' if first else ''}"
        raise InputError(f"{what} {value!r} does not exist: {owner} has {what}s {zero} to {count - 1}")
    return number


def whole(value, low: int, high: int, what: str) -> int:
    """`value` as an int in low..high, or an InputError saying so."""
    number = as_int(value)
    if number is None or not low <= number <= high:
        raise InputError(f"{what} must be a whole number from {low:,} to {high:,}, got {value!r}")
    return number


def positive(value, what: str) -> float:
    """`value` as a float above 0, or an InputError saying so."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise InputError(f"{what} must be a positive number, got {value!r}")
    return float(value)


def as_int(value) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def choice(value, options: Iterable, what: str):
    """`value` if it is one of `options`, else an InputError listing them."""
    options = list(options)
    if value not in options:
        raise InputError(f"{what} must be one of {', '.join(map(repr, options))}, got {value!r}")
    return value


def flag(value, what: str) -> bool:
    """`value` if it is True or False (a truthy "no" must not switch an ablation on), else an InputError."""
    if not isinstance(value, bool):
        raise InputError(f"{what} must be True or False, got {value!r}")
    return value


def sentence_list(sentences, what: str = "sentences") -> list[str]:
    """A list of non-empty sentences (one string is refused: it would be read letter by letter)."""
    if isinstance(sentences, str) or not isinstance(sentences, Iterable):
        raise InputError(f"{what} must be a list of sentences, e.g. [\"the cat sat .\", \"a dog ran .\"]")
    sentences = list(sentences)
    for n, text in enumerate(sentences, 1):
        if not isinstance(text, str):
            raise InputError(f"sentence {n} must be text, not {type(text).__name__}")
        if not text.strip():
            raise InputError(f"sentence {n} is empty")
    return sentences


class Bar:
    """A progress bar (tqdm's, drawn as a widget in Jupyter) for long work, shown only past BAR_DELAY_S."""

    def __init__(self, unit: str = "%"):
        self.unit, self.bar = unit, None

    def _draw(self, total: float, what: str):
        if importlib.util.find_spec("ipywidgets") is not None:  # Jupyter draws tqdm.auto's bar as a widget
            from tqdm.auto import tqdm
        else:  # tqdm.auto without ipywidgets warns in every cell ("IProgress not found"): a text bar instead
            from tqdm.std import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, unit=self.unit, unit_scale=self.unit == "B", delay=BAR_DELAY_S, desc=what)
        self.bar.set_description_str(what, refresh=False)
        return self.bar

    def bytes(self, done: int, total: int, what: str) -> None:
        """hub.fetch's news: bytes done of all, and the file being fetched."""
        bar = self._draw(total, what)
        bar.total = total
        bar.update(done - bar.n)

    def fraction(self, done: float, what: str) -> None:
        """The news of an analysis or an explanation: the share done (0..1), and what is running."""
        bar = self._draw(100, what)
        bar.update(round(100 * min(max(done, 0.0), 1.0)) - bar.n)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
