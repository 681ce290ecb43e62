"""Settings of a pretraining run, validated before anything starts.

Every invalid value raises `ConfigError` naming the field in one sentence, so the CLI and the
Pretrain page refuse a run with a message instead of crashing a process. Every number has an
upper bound as well as a lower one: generous for real use, small enough that a typo or a
hostile form cannot ask a classroom machine for terabytes (`resources.check_resources` then
weighs what is left against the machine's free memory).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, fields
from numbers import Integral, Real

from bertviz_lab.bert.config import PRESET_SHAPES, RANDOM_TOKENS, SIZE_LIMITS, BertConfig, preset, show
from bertviz_lab.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16")
LEGACY_RANDOM_TOKENS = "wordpieces"  # what a run.json written before the setting existed trained with
LEGACY_DROPOUT = 0.1  # ... and the dropout it trained with (BERT's, the presets' own)
DEVICES = re.compile(r"auto|cpu|cuda(:\d{1,2})?")  # what bert.device.resolve_device accepts
MAX_STEPS = 10_000_000  # weeks of training even for the tiny model; also bounds warmup and the intervals

# Whole-number field -> (lowest, highest). threads is bounded by this machine's cores (see `max_threads`).
INT_LIMITS = {
    "steps": (1, MAX_STEPS),
    "batch_size": (1, 4096),
    "seq_len": (8, 512),  # the model's position table is seq_len long; BERT's has 512
    "vocab_size": (100, SIZE_LIMITS["vocab_size"]),  # below 100 the specials and the letters fill it
    "warmup": (0, MAX_STEPS),
    "grad_accum": (1, 1024),
    "eval_every": (1, MAX_STEPS),
    "eval_batches": (1, 1000),
    "checkpoint_every": (1, MAX_STEPS),
    "seed": (0, 2**32 - 1),  # what numpy and CUDA generators take
}
# Overrides of the preset's shape (None keeps the preset's): up to BERT-Large (24 x 1024, 16 heads).
SHAPE_LIMITS = {"layers": (1, 24), "heads": (1, 64), "hidden": (1, 1024)}
# Float field -> (test, what it must be); NaN and +-inf are refused before the test.
FLOAT_RULES = {
    "lr": (lambda v: 0 < v <= 10, "a finite number in (0, 10]"),
    "weight_decay": (lambda v: 0 <= v < 1, "a finite number in [0, 1)"),
    "mask_rate": (lambda v: 0 < v < 1, "a finite number strictly between 0 and 1"),
    "grad_clip": (lambda v: v >= 0, "0 (off) or a positive finite number"),
    "dropout": (lambda v: 0 <= v < 1, "a finite number in [0, 1)"),
}


def upper_bound(name: str) -> int | None:
    """The largest value a whole-number setting takes (None for floats and unbounded ones)."""
    if name == "threads":
        return max_threads()
    return (INT_LIMITS.get(name) or SHAPE_LIMITS.get(name) or (None, None))[1]


def max_threads() -> int:
    """The most CPU threads a run may ask for: this machine's cores."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "tiny"  # model size: tiny, mini, small, medium, base
    layers: int | None = None  # overrides of the preset's shape (None = keep the preset's)
    heads: int | None = None
    hidden: int | None = None
    corpus: str = "builtin"  # "builtin" or a path to a UTF-8 .txt file
    vocab_size: int = 4000  # WordPiece size when training on a user's text
    # The defaults are the classroom preset, tuned for a 2-layer model on 2 CPU cores: the held-out MLM
    # loss halves within 225-275 steps (python -m bench.learning_speed), well inside the run, so a class
    # sees learning live. Short sequences buy a large batch for the same compute (BERT itself trained
    # 90% of its steps at 128 of its 512 positions); a batch of 128 steadies the gradient so the peak rate
    # can be 3e-3; the long warmup keeps that rate from stalling the post-LN model at the unigram plateau
    # (warmup 20 stalls it); no dropout: the generated text is drawn fresh for every batch, so there is no fixed
    # training set to overfit (its sentences do recur: seed 0's 600 steps of pairs hold 269,513 sentences, 145,304
    # distinct), and with 0.1 seed 0 learns a little slower: held-out MLM loss at step 600 1.99 against 1.81 in fp32,
    # halved at step 250 against 225 (docs/training.md has the table, in fp32 and bf16).
    steps: int = 600
    batch_size: int = 128
    seq_len: int = 32  # longest input in tokens; also the model's max_position_embeddings
    lr: float = 3e-3  # peak learning rate (AdamW), reached after `warmup` steps, then linear decay to 0
    warmup: int = 100
    weight_decay: float = 0.01
    mask_rate: float = 0.15
    dropout: float = 0.0  # on every sublayer's output and the attention weights (BERT and the presets: 0.1)
    random_tokens: str = "vocabulary"  # the 10% random tokens: whole vocabulary (BERT) or "wordpieces" (no special)
    nsp: bool = True
    grad_clip: float = 1.0  # max global gradient norm; 0 = off
    grad_accum: int = 1  # micro-batches per optimizer step
    eval_every: int = 25
    eval_batches: int = 2  # 256 held-out sequences at the default batch: about 2% of the run's time
    checkpoint_every: int = 100
    seed: int = 0
    device: str = "auto"
    threads: int = 0  # CPU threads; 0 = every core no other program is using (threads.py)
    precision: str = "auto"  # bf16 autocast on CUDA; on CPU only where measured faster

    def __post_init__(self) -> None:
        for name, (low, high) in INT_LIMITS.items():
            self._set(name, whole_number(name, getattr(self, name), low, high))
        self._set("threads", whole_number("threads", self.threads, 0, max_threads(),
                                    "0 (every free core) to {high:,} (this machine's cores)"))
        for name, (low, high) in SHAPE_LIMITS.items():
            if getattr(self, name) is not None:
                self._set(name, whole_number(name, getattr(self, name), low, high, "{low:,} to {high:,} (BERT-Large)"))
        for name, (ok, wanted) in FLOAT_RULES.items():
            self._set(name, finite_number(name, getattr(self, name), ok, wanted))
        one_of("preset", self.preset, tuple(PRESET_SHAPES))
        one_of("random_tokens", self.random_tokens, tuple(RANDOM_TOKENS))  # the masking rule's options
        one_of("precision", self.precision, PRECISIONS)
        if not isinstance(self.device, str) or not DEVICES.fullmatch(self.device):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {show(self.device)}")
        if not isinstance(self.nsp, bool):
            raise ConfigError(f"nsp must be true or false, got {show(self.nsp)}")
        if not isinstance(self.corpus, str) or not self.corpus.strip():
            raise ConfigError("corpus must be 'builtin' or the path of a .txt file")
        self.model_config(vocab_size=100)  # shape errors (heads not dividing hidden) surface now

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)  # frozen: only __post_init__ normalizes (3.0 -> 3, numpy -> Python)

    def model_config(self, vocab_size: int) -> BertConfig:
        overrides = {"num_hidden_layers": self.layers, "num_attention_heads": self.heads,
                     "hidden_size": self.hidden}
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if self.hidden is not None:
            overrides["intermediate_size"] = 4 * self.hidden
        try:
            return preset(self.preset, vocab_size=vocab_size, max_position_embeddings=self.seq_len,
                          hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout, **overrides)
        except ConfigError as exc:  # name the run's field, not the model's
            message = str(exc).replace("num_attention_heads", "heads").replace("hidden_size", "hidden")
            raise ConfigError(message.replace("num_hidden_layers", "layers")) from None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> TrainConfig:
        """The config a run.json (or a checkpoint card) recorded: a TrainConfig or a ConfigError, for any JSON.

        An old one without random_tokens or dropout gets what it actually trained with
        (LEGACY_RANDOM_TOKENS, LEGACY_DROPOUT), not today's defaults. threads above this machine's cores (a run recorded on a bigger
        machine, resumed here) is clamped to the cores: the run goes on with what this machine
        has, where refusing would strand it and oversubscribing would only slow it down.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"training settings must be a JSON object, got {show(data)}")
        known = {f.name for f in fields(cls)}
        unknown = [key for key in data if key not in known]
        if unknown:
            raise ConfigError(f"unknown training setting {show(unknown[0])}")
        threads = data.get("threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads > max_threads():
            data = {**data, "threads": max_threads()}
        return cls(**{"random_tokens": LEGACY_RANDOM_TOKENS, "dropout": LEGACY_DROPOUT, **data})


def whole_number(name: str, value, low: int, high: int, span: str = "{low:,} to {high:,}") -> int:
    """`value` as a Python int in [low, high]; a whole float (3.0, as number inputs give) counts."""
    number = value
    if isinstance(value, Real) and not isinstance(value, (bool, Integral)):
        try:
            number = int(value) if float(value).is_integer() else None
        except (OverflowError, ValueError):  # inf, nan, a Fraction beyond floats
            number = None
    if isinstance(number, bool) or not isinstance(number, Integral) or not low <= number <= high:
        raise ConfigError(f"{name} must be a whole number from {span.format(low=low, high=high)}, "
                          f"got {show(value)}")
    return int(number)


def finite_number(name: str, value, ok, wanted: str) -> float:
    """`value` as a Python float if it is a finite real number that passes `ok`."""
    try:
        number = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
    except (OverflowError, ValueError):  # an int or Fraction too large for a float
        number = math.nan
    if not math.isfinite(number) or not ok(number):
        raise ConfigError(f"{name} must be {wanted}, got {show(value)}")
    return number


def one_of(name: str, value, options: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in options:
        raise ConfigError(f"{name} must be one of {', '.join(options)}, got {show(value)}")


def warmup_then_decay(step: int, warmup: int, total: int) -> float:
    """The learning rate's share of its peak at `step`: linear warmup over `warmup` steps (kept within a
    run shorter than that), then linear decay to 0 at the last step."""
    warmup = min(warmup, total)
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))
