"""Property tests: any JSON in config.json gives a bounded config or one ConfigError / CheckpointError line,
and every config accepted loads and runs. The cases hypothesis found stay here as explicit examples."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.config import ACTIVATIONS, MAX_PARAMETERS, MAY_BE_ZERO, SIZE_LIMITS, BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.errors import CheckpointError, ConfigError

FIELDS = [f.name for f in fields(BertConfig)]
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
# Values near every bound, huge and negative integers, non-finite floats, names that are almost right.
field_values = st.one_of(
    json_values,
    st.sampled_from([0, 1, 2, 3, 4, 5, 8, 16, 17, 32, 64, 65, 512, 4096, 4097, 16_384, 16_385, 300_000, 300_001, -1]),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=10**18, max_value=10**450),
    st.floats(min_value=-2, max_value=2) | st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, 1.0]),
    st.sampled_from([*ACTIVATIONS, "GELU", "swish", ""]),
)
config_dicts = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS + ["model_type", "architectures"]), field_values, max_size=len(FIELDS)),
    st.builds(lambda base, extra: {**base, **extra}, st.just(BertConfig().to_hf_dict()),
              st.dictionaries(st.sampled_from(FIELDS + ["model_type"]), field_values, max_size=3)),
)


def check_bounded(cfg: BertConfig) -> None:
    for name, high in SIZE_LIMITS.items():
        value = getattr(cfg, name)
        assert type(value) is int and (name not in MAY_BE_ZERO) <= value <= high, (name, value)
    assert cfg.hidden_size % cfg.num_attention_heads == 0 and 0 <= cfg.pad_token_id < cfg.vocab_size
    assert cfg.hidden_act in ACTIVATIONS and cfg.num_parameters() <= MAX_PARAMETERS


@SETTINGS
@given(data=config_dicts | json_values)
@example(data={"vocab_size": 10**399})  # a 400-digit integer: formatting it in the message would take ages
@example(data={"vocab_size": 10**5000})  # past Python's int-to-str limit: repr() itself would raise ValueError
@example(data={"num_hidden_layers": True})  # a bool is an int to Python, not to us
@example(data={"layer_norm_eps": float("nan")})  # NaN fails every comparison: a `not x < 0` check lets it in
@example(data={"initializer_range": 10**400})  # float(10**400) raises OverflowError
@example(data={"hidden_act": ["gelu"]})  # unhashable: `in ACTIVATIONS` would raise TypeError
@example(data={"model_type": {"a": 1}})
@example(data={"pad_token_id": None})  # real configs write null: read as BERT's pad id 0
@example(data={"vocab_size": 300_000, "hidden_size": 4096, "num_hidden_layers": 64, "intermediate_size": 16_384,
               "num_attention_heads": 64})  # every field at its bound: over the parameter cap
@example(data=[])
def test_from_dict_gives_a_bounded_config_or_a_config_error(data):
    try:
        cfg = BertConfig.from_dict(data)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 300, message
        return
    check_bounded(cfg)


TEMPLATE = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                      max_position_embeddings=16)
# The template's own config with a few fields changed: some still load (dropout, eps, activation...).
template_configs = st.builds(lambda extra: {**TEMPLATE.to_hf_dict(), **extra},
                             st.dictionaries(st.sampled_from(FIELDS + ["model_type"]), field_values, max_size=2))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    tokens = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(35)]
    torch.manual_seed(0)
    return save_checkpoint(BertForPreTraining(TEMPLATE), WordPieceTokenizer.from_vocab(tokens),
                           tmp_path_factory.mktemp("hypothesis") / "tiny")


def load_with_config(template: Path, text: str | bytes):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(template, Path(tmp) / "model"))
        (folder / "config.json").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "replace"))
        return load_checkpoint(folder)


@SETTINGS
@given(config=config_dicts | template_configs)
@example(config=TEMPLATE.to_hf_dict())  # the real one
@example(config={**TEMPLATE.to_hf_dict(), "vocab_size": 10})  # vocab.txt longer than the model's vocabulary
@example(config={**TEMPLATE.to_hf_dict(), "layer_norm_eps": float("nan")})  # NaN, as Python's json writes it
@example(config={"vocab_size": 0, "model_type": []})  # unhashable: `in FAMILIES` would raise TypeError
@example(config={**TEMPLATE.to_hf_dict(), "model_type": "roberta"})  # another family: its weight names differ
def test_a_fuzzed_config_json_loads_or_is_one_checkpoint_error(template, config):
    try:
        ckpt = load_with_config(template, json.dumps(config, allow_nan=True))
    except CheckpointError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    check_bounded(ckpt.config)
    assert ckpt.config.vocab_size == TEMPLATE.vocab_size and ckpt.model.num_parameters() == TEMPLATE.num_parameters()


@SETTINGS
@given(raw=st.binary(max_size=64) | st.text(max_size=64))
@example(raw=b"")
@example(raw=b"\xef\xbb\xbf{}")  # a BOM, then an empty object: the defaults do not match the weights
@example(raw="[" * 100_000)
@example(raw='{"vocab_size": ' + "9" * 5000 + "}")  # past Python's int-parsing limit
def test_config_json_of_arbitrary_bytes_is_one_checkpoint_error(template, raw):
    with pytest.raises(CheckpointError):
        load_with_config(template, raw)


small_configs = st.builds(
    lambda vocab, heads, head_dim, layers, ff, positions, types, act, eps, pad: {
        "vocab_size": vocab, "hidden_size": heads * head_dim, "num_attention_heads": heads,
        "num_hidden_layers": layers, "intermediate_size": ff, "max_position_embeddings": positions,
        "type_vocab_size": types, "hidden_act": act, "layer_norm_eps": eps, "pad_token_id": pad % vocab},
    st.integers(5, 60), st.integers(1, 4), st.integers(1, 6), st.integers(1, 2), st.integers(1, 24),
    st.integers(3, 24), st.integers(1, 3), st.sampled_from(list(ACTIVATIONS)),
    st.floats(min_value=1e-12, max_value=1.0), st.integers(0, 1000))


@pytest.fixture
def one_thread():
    """Tensors of a few dozen numbers: waking a second thread costs more than the math."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=small_configs, seed=st.integers(0, 2**16))
@example(data={"vocab_size": 5, "hidden_size": 1, "num_attention_heads": 1, "num_hidden_layers": 1,
               "intermediate_size": 1, "max_position_embeddings": 3, "type_vocab_size": 1, "hidden_act": "relu",
               "layer_norm_eps": 1.0, "pad_token_id": 4}, seed=0)  # the smallest BERT there is
def test_every_small_config_accepted_saves_loads_and_runs(one_thread, data, seed):
    cfg = BertConfig.from_dict(data)
    torch.manual_seed(seed)
    model = BertForPreTraining(cfg).eval()
    assert model.num_parameters() == cfg.num_parameters()
    tokens = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(cfg.vocab_size - len(SPECIAL_TOKENS))]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = load_checkpoint(save_checkpoint(model, WordPieceTokenizer.from_vocab(tokens), Path(tmp) / "m"))
    assert ckpt.config == cfg
    length = min(cfg.max_position_embeddings, 7)
    ids = torch.randint(0, cfg.vocab_size, (2, length), generator=torch.Generator().manual_seed(seed))
    segments = torch.randint(0, cfg.type_vocab_size, (2, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out, expected = ckpt.model(ids, segments), model(ids, segments)
    assert out.mlm_logits.shape == (2, length, cfg.vocab_size) and out.nsp_logits.shape == (2, 2)
    assert torch.isfinite(out.mlm_logits).all()
    torch.testing.assert_close(out.mlm_logits, expected.mlm_logits)


@pytest.mark.parametrize("heads", [dict(mlm=True, nsp=True, pooler=True), dict(mlm=True, nsp=False, pooler=False),
                                   dict(mlm=False, nsp=False, pooler=True), dict(mlm=False, nsp=False, pooler=False)])
def test_weight_shapes_are_those_of_the_model(heads):
    cfg = BertConfig(vocab_size=37, hidden_size=12, num_hidden_layers=3, num_attention_heads=3, intermediate_size=20,
                     max_position_embeddings=11, type_vocab_size=3)
    model = BertForPreTraining(cfg, mlm_head=heads["mlm"], nsp_head=heads["nsp"], pooler=heads["pooler"])
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == cfg.weight_shapes(**heads)
    assert cfg.num_parameters(**heads) == model.num_parameters()


def test_the_bounds_admit_every_published_bert_shape():
    large = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                       intermediate_size=4096)
    xlmr = BertConfig(vocab_size=250_002, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                      intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5)
    long = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072, max_position_embeddings=4096)
    assert large.num_parameters() == 336_226_108  # transformers' BertForPreTraining, bert-large-uncased
    assert xlmr.num_parameters() < MAX_PARAMETERS and long.max_position_embeddings == 4096
