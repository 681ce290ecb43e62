"""ALBERT (Lan et al., 2020): BERT with fewer weights, the same depth.

Two ideas, both worth seeing: one layer's weights are used at every depth (a 12-layer ALBERT stores
one layer), and token vectors are narrow (embedding_size, 128) and projected up to the layers'
width. It was pretrained with sentence-order prediction (SOP: is A before B, or swapped?) in place
of NSP; this lab shows MLM and attention, and lists the SOP head as ignored.
"""

from __future__ import annotations

from bertviz_lab.bert.config import bert_fields
from bertviz_lab.errors import ConfigError

SUMMARY = "one layer's weights shared by every layer, narrow token vectors; SOP in place of NSP"
LACKS = ("ALBERT has no NSP head: it was trained to tell whether two sentences are in order or swapped "
         "(sentence-order prediction), a head this lab does not run")
SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
PREFER_JSON = True
DEFAULTS = {"vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_attention_heads": 64,
            "intermediate_size": 16384, "hidden_act": "gelu_new", "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0, "num_hidden_groups": 1, "inner_group_num": 1}
RENAMES = (
    (r"^albert\.", "bert."),
    (r"^(embeddings|encoder|pooler)\.", r"bert.\1."),
    (r"^bert\.encoder\.embedding_hidden_mapping_in\.", "bert.embeddings_project."),
    (r"^bert\.encoder\.albert_layer_groups\.0\.albert_layers\.0\.", "bert.encoder.layer.0."),
    (r"\.attention\.(query|key|value)\.", r".attention.self.\1."),
    (r"\.attention\.dense\.", ".attention.output.dense."),
    (r"\.attention\.LayerNorm\.", ".attention.output.LayerNorm."),
    (r"\.ffn\.", ".intermediate.dense."),
    (r"\.ffn_output\.", ".output.dense."),
    (r"\.full_layer_layer_norm\.", ".output.LayerNorm."),
    (r"^bert\.pooler\.(weight|bias)$", r"bert.pooler.dense.\1"),
    (r"^predictions\.dense\.", "cls.predictions.transform.dense."),
    (r"^predictions\.LayerNorm\.", "cls.predictions.transform.LayerNorm."),
    (r"^predictions\.bias$", "cls.predictions.bias"),
    (r"^predictions\.decoder\.", "cls.predictions.decoder."),
)


def config(raw: dict) -> dict:
    merged = {**DEFAULTS, **raw}
    if merged["num_hidden_groups"] != 1 or merged["inner_group_num"] != 1:
        raise ConfigError("this ALBERT shares its weights among several layer groups; this lab reads the released "
                          "ALBERTs, which share one layer (num_hidden_groups = inner_group_num = 1)")
    return {**bert_fields(raw, DEFAULTS, "albert"), "shared_layers": True}
