"""The BERT family: each member loads from a folder `transformers` saved, tokenizes as `transformers` does,
and gives the same logits, attention weights and hidden states (<= 1e-5)."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.errors import CheckpointError
from bertviz_lab.views import inputs
from tests.helpers.family_models import build

TOL = dict(atol=1e-5, rtol=0)
MEMBERS = ["bert-cased", "bert-multilingual", "bert-tanh", "distilbert", "roberta", "xlm-roberta",
           "electra-generator", "electra-discriminator", "albert", "albert-sop"]
SENTENCES = [("the cat sat on the [MASK] .", None), ("The Cat sat on the mat .", "he sat by the river bank ."),
             ("le chat était fatigué . 猫坐在垫子上。", None),
             ("i went to the bank to deposit money .", "they love food .")]
FAMILY = {"bert": "bert", "distilbert": "distilbert", "roberta": "roberta", "xlm": "xlm-roberta",
          "electra": "electra", "albert": "albert"}


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    model, tok = build(request.param, folder)
    return request.param, model, tok, load_checkpoint(folder)


def hf_ids(tok, text_a, text_b):
    text_a, text_b = (t.replace("[MASK]", tok.mask_token) if t else t for t in (text_a, text_b))
    return tok(text_a, text_b)["input_ids"]


def test_each_member_reads_as_its_family(member):
    name, _, _, ckpt = member
    assert ckpt.config.family == FAMILY[name.split("-")[0]]
    assert ckpt.family.title and ckpt.family.summary
    assert bool(ckpt.family.lacks) == (ckpt.config.family != "bert")


def test_tokenizer_gives_the_ids_transformers_gives(member):
    _, _, tok, ckpt = member
    for text_a, text_b in SENTENCES:
        encoding = ckpt.tokenizer.encode(text_a, text_b)
        assert encoding.ids == hf_ids(tok, text_a, text_b), (text_a, text_b, encoding.tokens)
    typed = ckpt.tokenizer.encode("the cat sat on the [MASK] .")
    assert typed.ids.count(ckpt.tokenizer.mask_id) == 1  # a typed [MASK] is this family's mask token


def test_logits_attention_and_hidden_states_match_transformers(member):
    name, hf, tok, ckpt = member
    for text_a, text_b in SENTENCES:
        encoding = ckpt.tokenizer.encode(text_a, text_b)
        out = inputs.run(ckpt.model, encoding, trace=True)
        ids = torch.tensor([encoding.ids])
        kwargs = {} if name in ("distilbert", "roberta", "xlm-roberta") else \
            {"token_type_ids": torch.tensor([encoding.segment_ids])}
        with torch.no_grad():
            theirs = hf(input_ids=ids, output_attentions=True, output_hidden_states=True, **kwargs)
        if ckpt.model.has_rtd:
            torch.testing.assert_close(out.rtd_logits, theirs.logits, **TOL)
            assert out.mlm_logits is None
        else:
            logits = theirs.prediction_logits if hasattr(theirs, "prediction_logits") else theirs.logits
            torch.testing.assert_close(out.mlm_logits, logits, **TOL)
        if ckpt.model.has_nsp:
            torch.testing.assert_close(out.nsp_logits, theirs.seq_relationship_logits, **TOL)
        assert len(out.trace) == len(theirs.attentions) and len(out.hidden_states) == len(theirs.hidden_states)
        for steps, weights in zip(out.trace, theirs.attentions):
            torch.testing.assert_close(steps.weights, weights, **TOL)
        for mine, hidden in zip(out.hidden_states, theirs.hidden_states):
            torch.testing.assert_close(mine, hidden, **TOL)


def test_a_padded_batch_matches_at_every_real_token(member):
    """Padding on the right: RoBERTa's positions count real tokens only, and [PAD] keys get no weight."""
    name, hf, _, ckpt = member
    encodings = [ckpt.tokenizer.encode(a, b) for a, b in SENTENCES]
    batch = inputs.pad_batch(encodings, ckpt.tokenizer.pad_id)
    kwargs = {} if name in ("distilbert", "roberta", "xlm-roberta") else {"token_type_ids": batch.segments}
    with torch.no_grad():
        mine = ckpt.model(batch.ids, batch.segments, batch.attention_mask)
        theirs = hf(input_ids=batch.ids, attention_mask=batch.attention_mask, output_hidden_states=True, **kwargs)
    real = batch.attention_mask.bool()
    torch.testing.assert_close(mine.hidden_states[-1][real], theirs.hidden_states[-1][real], **TOL)


def test_what_each_family_has_and_lacks(member):
    name, _, _, ckpt = member
    model = ckpt.model
    expected = {"bert": (True, True, False), "distilbert": (True, False, False), "roberta": (True, False, False),
                "xlm-roberta": (True, False, False), "electra-generator": (True, False, False),
                "electra-discriminator": (False, False, True), "albert": (True, False, False),
                "albert-sop": (True, False, False)}
    key = "bert" if name.startswith("bert") else name
    assert (model.has_mlm, model.has_nsp, model.has_rtd) == expected[key]
    if name == "albert-sop":  # sentence-order prediction is not NSP: its head is listed, not run
        assert any("sop_classifier" in k for k in ckpt.ignored_keys)


def test_albert_stores_one_layer_and_uses_it_at_every_depth(tmp_path):
    build("albert", tmp_path)
    model = load_checkpoint(tmp_path).model
    layers = model.bert.encoder.layer
    assert len(layers) == 3 and all(layer is layers[0] for layer in layers)
    one_layer = sum(p.numel() for p in layers[0].parameters())
    assert model.num_parameters() < 2 * one_layer + model.bert.embeddings.word_embeddings.weight.numel()


def test_roberta_reads_512_tokens_from_514_positions(tmp_path):
    build("roberta", tmp_path)
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.config.max_position_embeddings == 42 and ckpt.config.max_tokens == 40
    long_text = " ".join(["cat"] * 100)
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, long_text)
    assert len(encoding) == 40 and encoding.truncated == len(ckpt.tokenizer.encode(long_text, max_length=999)) - 40
    assert inputs.run(ckpt.model, encoding).mlm_logits.shape == (1, 40, ckpt.config.vocab_size)


def test_only_berts_are_saved_in_bert_layout(tmp_path):
    build("roberta", tmp_path / "in")
    ckpt = load_checkpoint(tmp_path / "in")
    with pytest.raises(CheckpointError, match="saves BERT checkpoints only"):
        save_checkpoint(ckpt.model, ckpt.tokenizer, tmp_path / "out")


@pytest.mark.parametrize("change, message", [
    ({"model_type": "gpt2"}, "this lab runs the BERT family"),
    ({"num_hidden_groups": 2}, "several layer groups"),
    ({"tie_word_embeddings": False}, "not tied"),
])
def test_family_configs_this_lab_cannot_run_are_one_clear_line(tmp_path, change, message):
    import json

    build("albert", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path)


def test_the_cli_reads_every_family(tmp_path, capsys):
    """info names the family and what it lacks; predict fills RoBERTa's <mask> from a typed [MASK]; heads runs
    on ELECTRA's attention; a discriminator asked to predict gets one error line."""
    import json

    from bertviz_lab.cli import main

    for name in ("roberta", "electra-discriminator"):
        build(name, tmp_path / name)
    assert main(["info", "--checkpoint", str(tmp_path / "roberta"), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["family"] == "RoBERTa" and card["tokenizer"] == "byte-level BPE" and "no NSP head" in card["lacks"]
    assert main(["predict", "--checkpoint", str(tmp_path / "roberta"), "--device", "cpu", "the cat sat on the [MASK] .",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["heads", "--checkpoint", str(tmp_path / "electra-discriminator"), "--device", "cpu", "--json"]) == 0
    roles = json.loads(capsys.readouterr().out)
    assert roles
    assert main(["predict", "--checkpoint", str(tmp_path / "electra-discriminator"), "--device", "cpu",
                 "the [MASK] sat ."]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "MLM" in err and err.count("\n") == 1


def test_fine_tuning_starts_from_berts_only(tmp_path):
    """A run saves BERT checkpoints: starting one from another family is one sentence, before and at the start."""
    from bertviz_lab.errors import ConfigError
    from bertviz_lab.finetune import runs as ft_runs
    from bertviz_lab.finetune.config import FinetuneConfig
    from bertviz_lab.finetune.loop import FineTuner

    build("roberta", tmp_path / "roberta")
    cfg = FinetuneConfig(task="coherence", checkpoint=str(tmp_path / "roberta"), seq_len=32, device="cpu", threads=1)
    for start in (lambda: ft_runs.check(cfg), lambda: FineTuner(cfg)):
        with pytest.raises(ConfigError, match="^fine-tuning starts from a BERT checkpoint; this is a roberta model"):
            start()


@pytest.mark.parametrize("content, message", [
    ("{not json", "tokenizer.json is not a tokenizer this lab can read"),
    ('{"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}', "uses a WordLevel model; this lab reads"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}', "has no <pad>, <unk>, <s>, </s>, <mask>"),
])
def test_a_broken_tokenizer_json_is_one_clear_line(tmp_path, content, message):
    build("roberta", tmp_path)
    (tmp_path / "tokenizer.json").write_text(content)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path)
