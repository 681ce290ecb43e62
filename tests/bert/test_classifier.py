"""Fine-tuning heads are Hugging Face's: a BertFor{Sequence,Token}Classification folder loads here as a
BertClassifier with the same labels and logits, ours loads there, and a broken classifier folder is one
CheckpointError that says what is wrong."""

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.classifier import SEQUENCE, TOKEN, BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import CheckpointError
from bertviz_lab.views.inputs import pad_batch
from tests.helpers.lab import vocab_of_size

SHAPE = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "max_position_embeddings": 64}
LABELS = ("negative", "neutral", "positive")
HF_CLASS = {SEQUENCE: transformers.BertForSequenceClassification, TOKEN: transformers.BertForTokenClassification}
# Different lengths, so the batch is padded, and a pair, so segment B's embeddings count.
INPUTS = [("the cat sat on the mat .", None), ("i love natural language processing", "it was unbelievable !"),
          ("the dog", None)]


def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(vocab_of_size(SHAPE["vocab_size"]))


def batch():
    """(input_ids, token_type_ids, attention_mask) of INPUTS, right-padded as transformers pads."""
    tok = tokenizer()
    padded = pad_batch([tok.encode(a, b) for a, b in INPUTS], tok.pad_id)
    assert padded.segments.any() and not padded.attention_mask.all()  # the batch tests what it should
    return padded.ids, padded.segments, padded.attention_mask


def randomize(model: torch.nn.Module) -> None:
    """Both libraries init biases and LayerNorms to constants: randomize every weight so parity means something."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.2 * torch.randn_like(p))


def hf_logits(hf, ids, segments, mask) -> torch.Tensor:
    with torch.no_grad():
        return hf(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits


def assert_same_logits(ours: BertClassifier, hf, level: str) -> None:
    ids, segments, mask = batch()
    with torch.no_grad():
        mine = ours.eval().classify(ids, segments, mask)
    theirs = hf_logits(hf.eval(), ids, segments, mask)
    assert mine.shape == theirs.shape == ((3, 3) if level == SEQUENCE else (*ids.shape, 3))
    real = mask.bool() if level == TOKEN else slice(None)  # a padding position's tag is nobody's
    torch.testing.assert_close(mine[real], theirs[real], atol=1e-5, rtol=0)
    assert mine.abs().max() > 0.1  # random weights give logits far from 0: equality is not a coincidence


@pytest.fixture(params=[SEQUENCE, TOKEN])
def hf_folder(request, tmp_path):
    """A random transformers classifier saved with save_pretrained (safetensors) plus a vocab.txt."""
    level = request.param
    config = transformers.BertConfig(**SHAPE, num_labels=3, id2label=dict(enumerate(LABELS)),
                                     label2id={label: i for i, label in enumerate(LABELS)},
                                     attn_implementation="eager")
    hf = HF_CLASS[level](config)
    randomize(hf)
    hf.save_pretrained(tmp_path / "hf")
    tokenizer().save(tmp_path / "hf")
    assert (tmp_path / "hf" / "model.safetensors").exists()
    return level, tmp_path / "hf", hf.eval()


def test_a_transformers_classifier_loads_with_its_labels_and_logits(hf_folder):
    level, folder, hf = hf_folder
    ckpt = load_checkpoint(folder)
    assert isinstance(ckpt.model, BertClassifier) and ckpt.model.level == level
    assert ckpt.model.labels == LABELS and ckpt.model.architecture == HF_CLASS[level].__name__
    assert (ckpt.model.bert.pooler is not None) is (level == SEQUENCE)
    assert not ckpt.model.has_mlm and not ckpt.model.has_nsp
    assert ckpt.ignored_keys == []
    assert_same_logits(ckpt.model, hf, level)


@pytest.mark.parametrize("level", [SEQUENCE, TOKEN])
def test_our_classifier_loads_in_transformers_with_the_same_logits_and_labels(tmp_path, level):
    torch.manual_seed(0)
    ours = BertClassifier(BertConfig(**SHAPE), LABELS, level)
    randomize(ours)
    save_checkpoint(ours.eval(), tokenizer(), tmp_path / "ours")
    hf, info = HF_CLASS[level].from_pretrained(tmp_path / "ours", output_loading_info=True,
                                               attn_implementation="eager")
    assert {k: list(v) for k, v in info.items()} == {"missing_keys": [], "unexpected_keys": [],
                                                      "mismatched_keys": [], "error_msgs": []}
    assert hf.config.id2label == dict(enumerate(LABELS)) and hf.config.num_labels == 3
    assert hf.config.label2id == {label: i for i, label in enumerate(LABELS)}
    assert_same_logits(ours, hf, level)
    again = load_checkpoint(tmp_path / "ours").model  # and back here: the same model
    assert (again.labels, again.level) == (LABELS, level)
    assert_same_logits(again, hf, level)


def test_a_classifier_without_id2label_gets_transformers_default_names(hf_folder):
    _level, folder, _hf = hf_folder
    config = json.loads((folder / "config.json").read_text())
    del config["id2label"], config["label2id"]
    (folder / "config.json").write_text(json.dumps(config))
    assert load_checkpoint(folder).model.labels == ("LABEL_0", "LABEL_1", "LABEL_2")


def edit_config(**changes):
    def edit(folder):
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return edit


def edit_weights(change):
    def edit(folder):
        state = load_file(folder / "model.safetensors")
        change(state)
        save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return edit


def drop_pooler(state):
    del state["bert.pooler.dense.weight"], state["bert.pooler.dense.bias"]


def narrow_classifier(state):
    state["classifier.weight"] = state["classifier.weight"][:, :16].contiguous()


BROKEN = {  # (breaker, message): every one on the sequence classifier of `hf_folder`
    "id2label count": (edit_config(id2label={"0": "negative", "1": "positive"}),
                       "config.json: id2label should name the classifier's 3 labels, got 2"),
    "id2label keys not numbers": (edit_config(id2label={"a": "negative", "b": "neutral", "c": "positive"}),
                                  "config.json: id2label's keys must be the label numbers 0, 1, ..."),
    "id2label numbers not 0..2": (edit_config(id2label={"0": "negative", "1": "neutral", "7": "positive"}),
                                  "config.json: id2label must map 0 to 2 to label names"),
    "id2label not names": (edit_config(id2label={"0": "negative", "1": "neutral", "2": 3}),
                           "config.json: id2label must map 0 to 2 to label names"),
    "duplicate labels": (edit_config(id2label={"0": "same", "1": "same", "2": "other"}),
                         "config.json: the labels must be distinct"),
    "classifier of the wrong width": (edit_weights(narrow_classifier),
                                      ("weights do not match config.json: classifier.weight should be a float "
                                       "tensor of shape (3, 32), got (3, 16)")),
    "sequence classifier without pooler": (edit_weights(drop_pooler),
                                           ("a sequence classifier reads the pooler, but the weights lack "
                                            "bert.pooler.dense")),
    "classifier without bias": (edit_weights(lambda state: state.pop("classifier.bias")),
                                ("weights do not match config.json: classifier.bias should be a float tensor "
                                 "of shape (3,), got nothing")),
    "one label": (edit_weights(lambda state: state.update({"classifier.weight": state["classifier.weight"][:1],
                                                           "classifier.bias": state["classifier.bias"][:1]})),
                  "classifier.weight has shape (1, 32): a classifier needs 2 to 1000 rows of 32 (one per label)"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_classifier_checkpoint_is_one_clear_error(tmp_path, case):
    config = transformers.BertConfig(**SHAPE, num_labels=3, id2label=dict(enumerate(LABELS)))
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path)
    tokenizer().save(tmp_path)
    load_checkpoint(tmp_path)  # whole, it loads
    breaker, message = BROKEN[case]
    breaker(tmp_path)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path)
    assert str(caught.value) == message and "\n" not in str(caught.value)


def test_a_token_classifier_needs_no_pooler_and_a_pretraining_folder_is_no_classifier(tmp_path, tiny_checkpoint):
    config = transformers.BertConfig(**SHAPE, num_labels=3, id2label=dict(enumerate(LABELS)))
    transformers.BertForTokenClassification(config).save_pretrained(tmp_path / "tok")
    tokenizer().save(tmp_path / "tok")
    model = load_checkpoint(tmp_path / "tok").model
    assert model.level == TOKEN and model.bert.pooler is None
    assert not isinstance(load_checkpoint(tiny_checkpoint).model, BertClassifier)


def test_the_card_names_the_heads_a_model_has():
    cfg = BertConfig(**SHAPE)
    many = tuple(f"L{i}" for i in range(10))
    assert BertClassifier(cfg, LABELS, SEQUENCE).heads_summary == ("a sentence classifier on the pooled CLS vector, no MLM "
                                                           "head (3 labels: negative, neutral, positive)")
    assert BertClassifier(cfg, many, TOKEN).heads_summary == ("a tag classifier on every token, no MLM head "
                                                      "(10 labels: L0, L1, L2, L3, L4, L5, L6, L7 and 2 more)")
    from bertviz_lab.bert.model import BertForPreTraining
    assert [BertForPreTraining(cfg, **heads).heads_summary for heads in (
        {}, {"nsp_head": False}, {"mlm_head": False, "nsp_head": False})] == [
        "MLM + NSP", "MLM only", "none (encoder only)"]
