"""Settings of a pretraining run, validated before anything starts.

Every invalid value raises `ConfigError` naming the field, so the CLI and the
Pretrain page can refuse a run with a message instead of crashing a process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from numbers import Integral, Real

from bertviz_lab.bert.config import PRESET_SHAPES, BertConfig, preset
from bertviz_lab.bert.config import RANDOM_TOKENS as RANDOM_TOKEN_WORDS
from bertviz_lab.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16")
RANDOM_TOKENS = tuple(RANDOM_TOKEN_WORDS)  # where the 10% random tokens come from (the masking rule's options)
LEGACY_RANDOM_TOKENS = "wordpieces"  # what a run.json written before the setting existed trained with


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "tiny"  # model size: tiny, mini, small, medium, base
    layers: int | None = None  # overrides of the preset's shape (None = keep the preset's)
    heads: int | None = None
    hidden: int | None = None
    corpus: str = "builtin"  # "builtin" or a path to a UTF-8 .txt file
    vocab_size: int = 4000  # WordPiece size when training on a user's text
    # The defaults are the classroom preset: the held-out MLM loss halves after about 900 steps,
    # a minute or two on 2 CPU cores (python -m bench.learning_speed), so a class sees learning live.
    steps: int = 1500
    batch_size: int = 32
    seq_len: int = 64  # longest input in tokens; also the model's max_position_embeddings
    lr: float = 1e-3  # peak learning rate (AdamW), reached after `warmup` steps, then linear decay to 0
    warmup: int = 50
    weight_decay: float = 0.01
    mask_rate: float = 0.15
    random_tokens: str = "vocabulary"  # the 10% random tokens: whole vocabulary (BERT) or "wordpieces" (no special)
    nsp: bool = True
    grad_clip: float = 1.0  # max global gradient norm; 0 = off
    grad_accum: int = 1  # micro-batches per optimizer step
    eval_every: int = 25
    eval_batches: int = 4
    checkpoint_every: int = 100
    seed: int = 0
    device: str = "auto"
    threads: int = 0  # CPU threads; 0 = all cores but one (the app stays responsive)
    precision: str = "auto"  # bf16 autocast on CUDA; on CPU only where measured faster

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "vocab_size", "grad_accum", "eval_every",
                     "eval_batches", "checkpoint_every"):
            _check_int(self, name, minimum=1)
        for name in ("warmup", "threads", "seed"):
            _check_int(self, name, minimum=0)
        for name in ("layers", "heads", "hidden"):
            if getattr(self, name) is not None:
                _check_int(self, name, minimum=1)
        _check_real(self, "lr", lambda v: 0 < v <= 10, "a number in (0, 10]")
        _check_real(self, "weight_decay", lambda v: 0 <= v < 1, "a number in [0, 1)")
        _check_real(self, "mask_rate", lambda v: 0 < v < 1, "a number strictly between 0 and 1")
        _check_real(self, "grad_clip", lambda v: v >= 0, "0 (off) or a positive number")
        if self.preset not in PRESET_SHAPES:
            raise ConfigError(f"preset must be one of {', '.join(PRESET_SHAPES)}, got {self.preset!r}")
        if not isinstance(self.random_tokens, str) or self.random_tokens not in RANDOM_TOKENS:
            raise ConfigError(f"random_tokens must be one of {', '.join(RANDOM_TOKENS)}, got {self.random_tokens!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.seq_len < 8 or self.seq_len > 512:
            raise ConfigError(f"seq_len must be between 8 and 512 tokens, got {self.seq_len}")
        if not isinstance(self.corpus, str) or not self.corpus.strip():
            raise ConfigError("corpus must be 'builtin' or the path of a .txt file")
        self.model_config(vocab_size=100)  # shape errors (heads not dividing hidden) surface now

    def model_config(self, vocab_size: int) -> BertConfig:
        overrides = {"num_hidden_layers": self.layers, "num_attention_heads": self.heads,
                     "hidden_size": self.hidden}
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if self.hidden is not None:
            overrides["intermediate_size"] = 4 * self.hidden
        try:
            return preset(self.preset, vocab_size=vocab_size, max_position_embeddings=self.seq_len,
                          **overrides)
        except ConfigError as exc:  # name the run's field, not the model's
            message = str(exc).replace("num_attention_heads", "heads").replace("hidden_size", "hidden")
            raise ConfigError(message.replace("num_hidden_layers", "layers")) from None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        """The config a run.json (or a checkpoint card) recorded; an old one without random_tokens
        gets what it actually trained with, LEGACY_RANDOM_TOKENS, not today's default."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown training setting {unknown[0]!r}")
        return cls(**{"random_tokens": LEGACY_RANDOM_TOKENS, **data})


def _check_int(cfg, name: str, minimum: int) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_real(cfg, name: str, ok, wanted: str) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, Real) or value != value or not ok(value):
        raise ConfigError(f"{name} must be {wanted}, got {value!r}")
