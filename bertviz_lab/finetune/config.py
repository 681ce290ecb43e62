"""Settings of a fine-tuning run, validated before anything starts (each mistake is one ConfigError).

What to learn: a built-in `task` or a CSV file (`data`). Where to start: a pretrained `checkpoint`
folder, or `scratch`, a random BERT of a preset's size (with optional layers / heads / hidden, so
"the same model without pretraining" is the same shape). How: the whole model (full fine-tuning)
or, with `freeze_encoder`, the classifier alone on frozen features (a linear probe).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from bertviz_lab.bert.config import PRESET_SHAPES, BertConfig, preset, show
from bertviz_lab.errors import ConfigError
from bertviz_lab.finetune.tasks import BUILTIN
from bertviz_lab.pretrain.config import (
    DEVICES,
    INT_LIMITS,
    SHAPE_LIMITS,
    finite_number,
    max_threads,
    one_of,
    whole_number,
)

FT_INT_LIMITS = {name: INT_LIMITS[name] for name in
                 ("steps", "batch_size", "warmup", "eval_every", "checkpoint_every", "seed")}
FT_INT_LIMITS["seq_len"] = (8, 512)
FT_INT_LIMITS["eval_examples"] = (1, 100_000)
FLOAT_RULES = {
    "lr": (lambda v: 0 < v <= 1, "a finite number in (0, 1]"),
    "weight_decay": (lambda v: 0 <= v < 1, "a finite number in [0, 1)"),
}


@dataclass(frozen=True)
class FinetuneConfig:
    task: str = ""  # a built-in task (tasks.BUILTIN), or "" with `data`
    data: str = ""  # path of the learner's CSV (see finetune/data.py), or "" with `task`
    checkpoint: str = ""  # start from this pretrained model folder, or "" with `scratch`
    scratch: str = ""  # start from a random BERT of this preset's size, or "" with `checkpoint`
    layers: int | None = None  # with scratch: overrides of the preset's shape
    heads: int | None = None
    hidden: int | None = None
    freeze_encoder: bool = False  # True: train the classifier only (a linear probe of the frozen encoder)
    # Defaults measured with `python -m bench.finetune_gain` on the shipped model (2 CPU cores).
    steps: int = 200
    batch_size: int = 32
    seq_len: int = 64  # longest input in tokens (at most the model's max_position_embeddings)
    lr: float = 1e-4  # peak learning rate (AdamW): linear warmup, then linear decay to 0
    warmup: int = 20
    weight_decay: float = 0.01
    eval_every: int = 20
    eval_examples: int = 1000  # dev examples scored at each evaluation (the first ones; the dev set is fixed)
    checkpoint_every: int = 100
    seed: int = 0
    device: str = "auto"
    threads: int = 0  # CPU threads; 0 = every free core (pretrain/threads.py)

    def __post_init__(self) -> None:
        for name, (low, high) in FT_INT_LIMITS.items():
            self._set(name, whole_number(name, getattr(self, name), low, high))
        self._set("threads", whole_number("threads", self.threads, 0, max_threads(),
                                          "0 (every free core) to {high:,} (this machine's cores)"))
        for name, (low, high) in SHAPE_LIMITS.items():
            if getattr(self, name) is not None:
                self._set(name, whole_number(name, getattr(self, name), low, high))
        for name, (ok, wanted) in FLOAT_RULES.items():
            self._set(name, finite_number(name, getattr(self, name), ok, wanted))
        for name in ("task", "data", "checkpoint", "scratch", "device"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name} must be text, got {show(getattr(self, name))}")
        if bool(self.task) == bool(self.data):
            raise ConfigError("give either a built-in task or a CSV file of your own (data), not "
                              + ("both" if self.task else "neither"))
        if self.task:
            one_of("task", self.task, tuple(BUILTIN))
        if bool(self.checkpoint) == bool(self.scratch):
            raise ConfigError("start either from a pretrained checkpoint or from scratch (a random model), not "
                              + ("both" if self.checkpoint else "neither"))
        if self.scratch:
            one_of("scratch", self.scratch, tuple(PRESET_SHAPES))
        elif any(getattr(self, name) is not None for name in SHAPE_LIMITS):
            raise ConfigError("layers, heads and hidden shape a model from scratch; a checkpoint has its own")
        if not DEVICES.fullmatch(self.device):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {show(self.device)}")
        if not isinstance(self.freeze_encoder, bool):
            raise ConfigError(f"freeze_encoder must be true or false, got {show(self.freeze_encoder)}")

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)

    @property
    def source(self) -> str:
        """What the run learns, in a few words: the task's name or the CSV's."""
        return self.task or self.data.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def start(self) -> str:
        return f"from {self.checkpoint}" if self.checkpoint else f"from scratch ({self.scratch})"

    def scratch_config(self, vocab_size: int) -> BertConfig:
        """The random model's shape: the preset's, with layers / heads / hidden (FFN 4 x hidden) as given."""
        shape = {"num_hidden_layers": self.layers, "num_attention_heads": self.heads, "hidden_size": self.hidden}
        shape = {k: v for k, v in shape.items() if v is not None}
        if self.hidden is not None:
            shape["intermediate_size"] = 4 * self.hidden
        return preset(self.scratch, vocab_size=vocab_size, max_position_embeddings=self.seq_len, **shape)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> FinetuneConfig:
        """The config a run.json recorded: a FinetuneConfig or a ConfigError, for any JSON."""
        if not isinstance(data, dict):
            raise ConfigError(f"fine-tuning settings must be a JSON object, got {show(data)}")
        known = {f.name for f in fields(cls)}
        unknown = [key for key in data if key not in known]
        if unknown:
            raise ConfigError(f"unknown fine-tuning setting {show(unknown[0])}")
        threads = data.get("threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads > max_threads():
            data = {**data, "threads": max_threads()}
        return cls(**data)

    def cli_args(self) -> list[str]:
        """The `finetune` flags that reproduce this config (those that differ from the defaults)."""
        args = []
        for f in fields(self):
            value, base = getattr(self, f.name), f.default
            if value == base or (isinstance(value, float) and math.isclose(value, base)):
                continue
            flag = {"checkpoint": "--from", "scratch": "--from-scratch"}.get(f.name, "--" + f.name.replace("_", "-"))
            args += [flag] if value is True else [flag, str(value)]
        return args
