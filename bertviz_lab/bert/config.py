"""Model configuration: a frozen dataclass with Hugging Face field names, plus presets.

`asdict(config)` is exactly what goes into a checkpoint's `config.json` (with the
`model_type` and `architectures` keys that `transformers` expects), so a folder
written here loads in `transformers` and a `bert-base-uncased` folder loads here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from bertviz_lab.errors import ConfigError

# hidden_act names as `transformers` spells them -> what the FFN computes, in words for the pages.
# BERT's released code and transformers' "gelu" use the exact erf form; the others are the tanh
# approximation (three spellings, computed the way transformers computes each) and plain ReLU.
ACTIVATIONS = {
    "gelu": "GELU, exact: x · Φ(x) = x · ½(1 + erf(x / √2)), as in BERT's released code",
    "gelu_python": "GELU, exact: x · ½(1 + erf(x / √2))",
    "gelu_new": "GELU, tanh approximation: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))",
    "gelu_pytorch_tanh": "GELU, tanh approximation: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))",
    "gelu_fast": "GELU, tanh approximation: ½x(1 + tanh(0.7978845608 · x(1 + 0.044715x²)))",
    "relu": "ReLU: max(0, x)",
}

# Where MLM masking draws its 10% random tokens from: option -> what it means, in words. Used by
# bert/masking.py and recorded per run by pretrain/config.py; defined here, in a module without
# torch, so that building the CLI's parser stays fast.
RANDOM_TOKENS = {"vocabulary": "the whole vocabulary, special tokens included (as in BERT)",
                 "wordpieces": "word pieces only (never a special token)"}


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 8192  # WordPiece vocabulary, special tokens included
    hidden_size: int = 128  # d_model: width of every token vector
    num_hidden_layers: int = 2  # encoder layers stacked
    num_attention_heads: int = 2  # heads per layer; hidden_size must divide evenly
    intermediate_size: int = 512  # FFN inner width, 4 x hidden in the BERT family
    hidden_act: str = "gelu"  # FFN and MLM-transform activation
    hidden_dropout_prob: float = 0.1  # dropout after embeddings, attention output, FFN
    attention_probs_dropout_prob: float = 0.1  # dropout on attention weights (training only)
    max_position_embeddings: int = 512  # longest input, in tokens
    type_vocab_size: int = 2  # segments: 0 for sentence A, 1 for sentence B
    initializer_range: float = 0.02  # std of the normal init
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        positive = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must divide "
                f"hidden_size ({self.hidden_size})")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act must be one of {', '.join(ACTIVATIONS)}, got {self.hidden_act!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id must be a token id below vocab_size, got {self.pad_token_id}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict:
        return asdict(self)

    def to_hf_dict(self, architecture: str = "BertForPreTraining") -> dict:
        return {"architectures": [architecture], "model_type": "bert", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "BertConfig":
        """Build from a `config.json` dict, ignoring keys that are not ours (HF extras)."""
        if not isinstance(data, dict):
            raise ConfigError("config.json must hold a JSON object")
        model_type = data.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"this is a {model_type!r} model, not a BERT (model_type must be 'bert')")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a field of the wrong type, e.g. a list
            raise ConfigError(f"config.json has an invalid value: {exc}") from None


# name -> (layers, hidden, heads); intermediate is 4 x hidden, as in Turc et al. (2019).
PRESET_SHAPES = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
}


def preset(name: str, **overrides) -> BertConfig:
    """A BERT-family configuration by name (tiny, mini, small, medium, base)."""
    if name not in PRESET_SHAPES:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESET_SHAPES)}")
    layers, hidden, heads = PRESET_SHAPES[name]
    shape = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                 intermediate_size=4 * hidden)
    if name == "base":
        shape["vocab_size"] = 30522
    return BertConfig(**{**shape, **overrides})
