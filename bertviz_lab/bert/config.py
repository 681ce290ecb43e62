"""Model configuration: a frozen dataclass with Hugging Face field names, plus presets.

`asdict(config)` is exactly what goes into a checkpoint's `config.json` (with the
`model_type` and `architectures` keys that `transformers` expects), so a folder
written here loads in `transformers` and a `bert-base-uncased` folder loads here.
"""

from __future__ import annotations

import math
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


# The largest value each size field may take: generous for every published BERT-family model
# (BERT-Large: 24 x 1024, FFN 4096; mBERT / XLM-R vocabularies up to 250,002; long-input BERTs with
# 4096 positions), yet small enough that a typo or a hostile config.json cannot ask the server for
# terabytes. The lower bound of each is 1.
SIZE_LIMITS = {
    "vocab_size": 300_000,
    "hidden_size": 4096,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "intermediate_size": 16_384,
    "max_position_embeddings": 8192,
    "type_vocab_size": 16,
    "embedding_size": 4096,
}
# Size fields that may be 0: no segment embeddings (DistilBERT), no separate embedding width (BERT).
MAY_BE_ZERO = frozenset({"type_vocab_size", "embedding_size"})
# The families this lab runs (bert/family.py reads each one's config.json and weights into BertConfig).
FAMILIES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "albert")
MAX_PARAMETERS = 2_000_000_000  # 6x BERT-Large: 8 GB of fp32 weights
# float field -> (low, high, low included, high included)
FLOAT_LIMITS = {
    "hidden_dropout_prob": (0.0, 1.0, True, False),
    "attention_probs_dropout_prob": (0.0, 1.0, True, False),
    "initializer_range": (0.0, 1.0, False, True),
    "layer_norm_eps": (0.0, 1.0, False, True),
}


def show(value: object) -> str:
    """A short, safe rendering of a user's value for a one-line message (never 400 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length() * 30103 // 100000 + 1}-digit number"
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    if isinstance(value, list) and len(value) <= 8 and all(isinstance(x, (str, int, float)) for x in value):
        return f"[{', '.join(show(x) for x in value)}]"
    return f"a {type(value).__name__}"


def _check_whole(name: str, value: object, high: int) -> None:
    low = 0 if name in MAY_BE_ZERO else 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be a whole number from {low} to {high:,}, got {show(value)}")


def _check_float(name: str, value: object) -> None:
    low, high, low_in, high_in = FLOAT_LIMITS[name]
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    # ints compare with floats exactly, however large; NaN fails every comparison
    if not (number and (low <= value if low_in else low < value) and (value <= high if high_in else value < high)):
        where = f"{'[(' [not low_in]}{low:g}, {high:g}{'])'[not high_in]}"
        raise ConfigError(f"{name} must be a finite number in {where}, got {show(value)}")


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
    # How a family differs from BERT (bert/family.py); the defaults are BERT's and stay out of config.json.
    family: str = "bert"  # the Hugging Face model_type the weights came from
    position_offset: int = 0  # RoBERTa, XLM-R: position ids count from pad_token_id + 1
    embedding_size: int = 0  # ELECTRA, ALBERT: token vectors this wide, projected up to hidden_size; 0: none
    head_act: str = ""  # the MLM head's activation when it is not hidden_act (RoBERTa, ELECTRA: "gelu")
    shared_layers: bool = False  # ALBERT: one layer's weights at every depth

    def __post_init__(self) -> None:
        for name, high in SIZE_LIMITS.items():
            _check_whole(name, getattr(self, name), high)
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must divide "
                f"hidden_size ({self.hidden_size})")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act must be one of {', '.join(ACTIVATIONS)}, got {show(self.hidden_act)}")
        for name in FLOAT_LIMITS:
            _check_float(name, getattr(self, name))
        self._check_family()
        pad = self.pad_token_id
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < self.vocab_size:
            raise ConfigError(f"pad_token_id must be a token id below vocab_size ({self.vocab_size:,}), "
                              f"got {show(pad)}")
        if self.num_parameters() > MAX_PARAMETERS:
            raise ConfigError(f"this configuration has {self.num_parameters():,} parameters; the limit is "
                              f"{MAX_PARAMETERS:,} (BERT-Large has about 336 million)")

    def _check_family(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"family must be one of {', '.join(FAMILIES)}, got {show(self.family)}")
        if self.head_act and self.head_act not in ACTIVATIONS:
            raise ConfigError(f"head_act must be one of {', '.join(ACTIVATIONS)}, got {show(self.head_act)}")
        offset = self.position_offset
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < self.max_position_embeddings:
            raise ConfigError(f"position_offset must be a whole number below max_position_embeddings "
                              f"({self.max_position_embeddings:,}), got {show(offset)}")
        if not isinstance(self.shared_layers, bool):
            raise ConfigError(f"shared_layers must be true or false, got {show(self.shared_layers)}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def max_tokens(self) -> int:
        """The longest input: every position embedding, less those RoBERTa's offset skips."""
        return self.max_position_embeddings - self.position_offset

    @property
    def embedding_width(self) -> int:
        """The width of the token, position and segment vectors (hidden_size unless factorised)."""
        return self.embedding_size or self.hidden_size

    @property
    def head_activation(self) -> str:
        return self.head_act or self.hidden_act

    def weight_shapes(self, *, mlm: bool = True, nsp: bool = True, pooler: bool = True,
                      rtd: bool = False) -> dict[str, tuple]:
        """Name -> shape of every weight of a `BertForPreTraining` with these heads, in Hugging Face's
        BERT naming: what a checkpoint must hold, known before any tensor exists. `rtd`: ELECTRA's
        replaced-token head. With shared layers (ALBERT) only layer 0 is listed: it is every layer."""
        d, ff, vocab, e = self.hidden_size, self.intermediate_size, self.vocab_size, self.embedding_width

        def dense(name: str, d_out: int, d_in: int) -> dict:
            return {f"{name}.weight": (d_out, d_in), f"{name}.bias": (d_out,)}

        def norm(name: str, width: int = d) -> dict:
            return {f"{name}.LayerNorm.weight": (width,), f"{name}.LayerNorm.bias": (width,)}

        shapes = {"bert.embeddings.word_embeddings.weight": (vocab, e),
                  "bert.embeddings.position_embeddings.weight": (self.max_position_embeddings, e),
                  **norm("bert.embeddings", e)}
        if self.type_vocab_size:
            shapes["bert.embeddings.token_type_embeddings.weight"] = (self.type_vocab_size, e)
        if self.embedding_size:
            shapes.update(dense("bert.embeddings_project", d, e))
        for i in range(1 if self.shared_layers else self.num_hidden_layers):
            layer = f"bert.encoder.layer.{i}"
            for name in ("query", "key", "value"):
                shapes.update(dense(f"{layer}.attention.self.{name}", d, d))
            shapes.update({**dense(f"{layer}.attention.output.dense", d, d), **norm(f"{layer}.attention.output"),
                           **dense(f"{layer}.intermediate.dense", ff, d), **dense(f"{layer}.output.dense", d, ff),
                           **norm(f"{layer}.output")})
        if pooler or nsp:
            shapes.update(dense("bert.pooler.dense", d, d))
        if mlm:  # the decoder is tied to the word embeddings: only its bias is a weight of its own
            shapes.update({"cls.predictions.bias": (vocab,), **dense("cls.predictions.transform.dense", e, d),
                           **norm("cls.predictions.transform", e)})
        if nsp:
            shapes.update(dense("cls.seq_relationship", 2, d))
        if rtd:
            shapes.update({**dense("cls.discriminator.dense", d, d),
                           **dense("cls.discriminator.dense_prediction", 1, d)})
        return shapes

    def num_parameters(self, *, mlm: bool = True, nsp: bool = True, pooler: bool = True) -> int:
        """Weights of a `BertForPreTraining` with these heads, counted from the shape alone."""
        return sum(math.prod(shape) for shape in self.weight_shapes(mlm=mlm, nsp=nsp, pooler=pooler).values())

    def to_dict(self) -> dict:
        """The fields, less the family ones at BERT's defaults (a BERT's config.json is unchanged)."""
        return {k: v for k, v in asdict(self).items() if k not in FAMILY_DEFAULTS or v != FAMILY_DEFAULTS[k]}

    def to_hf_dict(self, architecture: str = "BertForPreTraining") -> dict:
        return {"architectures": [architecture], "model_type": "bert", **self.to_dict()}

    @classmethod
    def from_dict(cls, data: object) -> BertConfig:
        """Build from a `config.json` dict, ignoring keys that are not ours (HF extras).

        Any JSON value in gives a config or a `ConfigError`, never another exception.
        """
        if not isinstance(data, dict):
            raise ConfigError("config.json must hold a JSON object")
        model_type = data.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"this is a {show(model_type)} model, not a BERT (model_type must be 'bert')"
                              if isinstance(model_type, str) else f"model_type must be 'bert', got {show(model_type)}")
        known = {f.name for f in fields(cls)} - set(FAMILY_DEFAULTS)
        kwargs = {k: v for k, v in data.items() if k in known}
        if kwargs.get("pad_token_id", 0) is None:  # some configs write null: BERT pads with id 0
            del kwargs["pad_token_id"]
        return cls(**kwargs)


# The fields by which a family differs from BERT, at BERT's values (bert/family.py sets them per family).
FAMILY_DEFAULTS = {"family": "bert", "position_offset": 0, "embedding_size": 0, "head_act": "",
                    "shared_layers": False}
_SET_BY_FAMILY = frozenset(FAMILY_DEFAULTS) - {"embedding_size"}


def bert_fields(raw: dict, defaults: dict, family: str) -> dict:
    """The BertConfig fields a family member's config.json `raw` gives (the family's `defaults` for those it leaves
    out): what each family module (distilbert.py, roberta.py, ...) builds its translation on."""
    if raw.get("tie_word_embeddings", True) is False:
        raise ConfigError("this model's output layer is not tied to its token embeddings; this lab reads "
                          "tied models only")
    merged, known = {**defaults, **raw}, {f.name for f in fields(BertConfig)}
    # The family fields come from the family's module, never from the file (embedding_size is both).
    kwargs = {k: v for k, v in merged.items() if k in known and k not in _SET_BY_FAMILY}
    if kwargs.get("pad_token_id", 0) is None:
        kwargs["pad_token_id"] = defaults.get("pad_token_id", 0)
    return {**kwargs, "family": family}


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
