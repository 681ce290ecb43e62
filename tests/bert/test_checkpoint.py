"""Checkpoints: parity with transformers both ways, every HF layout, and broken or hostile folders."""

import copy
import functools
import json
import os
import pickle
import shutil

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.errors import CheckpointError
from tests.helpers.lab import vocab_of_size

CONFIGS = {
    "tiny-gelu": BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=37, max_position_embeddings=40),
    "odd-relu": BertConfig(vocab_size=777, hidden_size=48, num_hidden_layers=5, num_attention_heads=3,
                           intermediate_size=96, hidden_act="relu", max_position_embeddings=64),
    "gelu_new-3types": BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=3, num_attention_heads=8,
                                  intermediate_size=128, hidden_act="gelu_new", type_vocab_size=3,
                                  layer_norm_eps=1e-5, pad_token_id=0),
    # Wide weights, so the FFN's inputs reach |x| ~ 2, where the tanh GELUs differ from erf by ~1e-4:
    # computing the wrong one would fail these at atol 1e-5.
    **{f"wide-{act}": BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, hidden_act=act, initializer_range=0.3,
                                 max_position_embeddings=40)
       for act in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python")},
}
# In float32 the two models sum in different orders (our fused QKV matmul, another BLAS kernel on another CPU),
# so outputs agree to rounding, which grows with their size: 1e-5 of the larger of 1 and the largest output
# (the wide configs' logits reach 5.5 and differed by 1.08e-5 on an Intel Xeon). In float64 rounding is
# ~1e-14, so 1e-9 proves the same computation: a tanh GELU in place of erf (~1e-4 apart) fails it at once.
TOL = dict(atol=1e-5, rtol=0)
TOL64 = dict(atol=1e-9, rtol=0)


def assert_close32(mine: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(mine, theirs, atol=TOL["atol"] * max(1.0, float(theirs.abs().max())), rtol=0)


def hf_model(cfg: BertConfig, cls=transformers.BertForPreTraining, seed=0):
    torch.manual_seed(seed)
    hf_cfg = transformers.BertConfig(**cfg.to_dict(), attn_implementation="eager")
    model = cls(hf_cfg).eval()
    with torch.no_grad():  # HF inits biases and LayerNorms to constants: randomize so parity means something
        for name, p in model.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                p.add_(0.05 * torch.randn_like(p))
    return model


def write_vocab(directory, size):
    WordPieceTokenizer.from_vocab(vocab_of_size(size)).save(directory)


def inputs(vocab, seed=3):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (2, 13), generator=g)
    segments = torch.zeros_like(ids)
    segments[:, 7:] = 1
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return ids, segments, mask


def assert_same_outputs(ours: BertForPreTraining, hf, vocab):
    """Same outputs as `hf` in float32 (to rounding) and in float64 (to 1e-9), without changing either model."""
    _compare(ours, hf, vocab, assert_close32)
    close64 = functools.partial(torch.testing.assert_close, **TOL64)
    _compare(copy.deepcopy(ours).double(), copy.deepcopy(hf).double(), vocab, close64)


def _compare(ours: BertForPreTraining, hf, vocab, close):
    ids, seg, am = inputs(vocab)
    with torch.no_grad():
        o = ours(ids, seg, am, trace=True)
        h = hf(input_ids=ids, token_type_ids=seg, attention_mask=am, output_attentions=True,
               output_hidden_states=True)
    if isinstance(hf, transformers.BertModel):
        close(o.hidden_states[-1], h.last_hidden_state)
        close(o.pooled, h.pooler_output)
    else:
        logits = h.prediction_logits if hasattr(h, "prediction_logits") else h.logits
        close(o.mlm_logits, logits)
    if hasattr(h, "seq_relationship_logits"):
        close(o.nsp_logits, h.seq_relationship_logits)
    assert len(h.attentions) == len(o.trace) and len(h.hidden_states) == len(o.hidden_states)
    for theirs, steps in zip(h.attentions, o.trace):
        close(steps.weights, theirs)
    for theirs, mine in zip(h.hidden_states, o.hidden_states):
        close(mine, theirs)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_transformers_checkpoint_loads_with_same_outputs(tmp_path, name):
    cfg = CONFIGS[name]
    hf = hf_model(cfg)
    hf.save_pretrained(tmp_path)
    write_vocab(tmp_path, cfg.vocab_size)
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.config == cfg and ckpt.model.has_mlm and ckpt.model.has_nsp
    assert_same_outputs(ckpt.model, hf, cfg.vocab_size)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_our_checkpoint_loads_in_transformers(tmp_path, name):
    cfg = CONFIGS[name]
    torch.manual_seed(1)
    ours = BertForPreTraining(cfg).eval()
    save_checkpoint(ours, WordPieceTokenizer.from_vocab(vocab_of_size(cfg.vocab_size)), tmp_path)
    hf = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert_same_outputs(ours, hf, cfg.vocab_size)
    hf_tok = transformers.BertTokenizerFast.from_pretrained(tmp_path)
    assert hf_tok("the cat sat")["input_ids"] == from_dir(tmp_path).encode("the cat sat").ids


@pytest.mark.parametrize("hf_class, has_mlm", [(transformers.BertForMaskedLM, True), (transformers.BertModel, False)])
def test_checkpoints_without_some_heads_load_and_say_so(tmp_path, hf_class, has_mlm):
    cfg = CONFIGS["odd-relu"]
    hf = hf_model(cfg, hf_class)
    hf.save_pretrained(tmp_path)
    write_vocab(tmp_path, cfg.vocab_size)
    model = load_checkpoint(tmp_path).model
    assert model.has_mlm == has_mlm and not model.has_nsp and model.architecture == hf_class.__name__
    assert_same_outputs(model, hf, cfg.vocab_size)
    assert model(*inputs(cfg.vocab_size)).nsp_logits is None


def test_pytorch_model_bin_with_tf_era_names_loads(tmp_path):
    cfg = CONFIGS["tiny-gelu"]
    hf = hf_model(cfg)
    state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in hf.state_dict().items()}
    torch.save(state, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_hf_dict()))
    write_vocab(tmp_path, cfg.vocab_size)
    assert_same_outputs(load_checkpoint(tmp_path).model, hf, cfg.vocab_size)


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned-marker",))


def test_hostile_pickle_is_never_executed(tmp_path, tiny_checkpoint, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.remove(tiny_checkpoint / "model.safetensors")
    with open(tiny_checkpoint / "pytorch_model.bin", "wb") as f:
        pickle.dump({"bert.embeddings.word_embeddings.weight": Exploit()}, f)
    with pytest.raises(CheckpointError, match="could not be loaded safely"):
        load_checkpoint(tiny_checkpoint)
    assert not (tmp_path / "pwned-marker").exists()


def test_save_is_atomic_and_leaves_no_temp_files(tiny_checkpoint):
    names = sorted(os.listdir(tiny_checkpoint))
    assert names == ["config.json", "model.safetensors", "model_card.json", "special_tokens_map.json",
                     "tokenizer_config.json", "vocab.txt"]
    assert load_checkpoint(tiny_checkpoint).card["steps"] == 0


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def change_config(path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, **changes}))


def poison(path):
    state = load_file(path / "model.safetensors")
    state["bert.pooler.dense.bias"][0] = float("nan")
    save_file(state, path / "model.safetensors")


BROKEN = {
    "missing folder": (lambda p: shutil.rmtree(p), "no model folder"),
    "no config": (lambda p: os.remove(p / "config.json"), "no config.json"),
    "config not json": (lambda p: (p / "config.json").write_text("{oops"), "not valid JSON"),
    "not bert": (lambda p: change_config(p, model_type="gpt2"), "gpt2. model; this lab runs the BERT family"),
    "bad config value": (lambda p: change_config(p, num_attention_heads=5), "num_attention_heads"),
    "truncated weights": (lambda p: truncate(p / "model.safetensors"), "corrupt or truncated"),
    "no weights": (lambda p: os.remove(p / "model.safetensors"), "no model.safetensors"),
    "mismatched shapes": (lambda p: change_config(p, hidden_size=64), "do not match config.json"),
    "nan weights": (poison, "NaN or infinite"),
    "vocab from another model": (lambda p: change_config(p, vocab_size=50), "different models|do not match"),
    "no vocab": (lambda p: os.remove(p / "vocab.txt"), "vocab"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_checkpoints_give_clear_errors(tiny_checkpoint, case):
    breaker, message = BROKEN[case]
    breaker(tiny_checkpoint)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tiny_checkpoint)
