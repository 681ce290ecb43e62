"""RoBERTa (Liu et al., 2019) and XLM-R (Conneau et al., 2020): BERT trained longer, on more text.

The layers are BERT's. What differs: a byte-level BPE vocabulary (XLM-R: a SentencePiece one over
100 languages), `<s> A </s></s> B </s>` with `<mask>`, one segment row (text B is not marked),
positions counted from pad_token_id + 1 (so 514 position rows hold 512 tokens), no NSP head
(dropped: it did not help), and an MLM head (`lm_head`) whose activation is always GELU.
"""

from __future__ import annotations

from bertviz_lab.bert.config import bert_fields

SUMMARY = "BERT's layers, trained longer on more text and without NSP (XLM-R: in 100 languages)"
LACKS = ("RoBERTa and XLM-R have no NSP head: their authors found that dropping next-sentence prediction did "
         "not hurt, so they were trained with masked words only")
SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}
PREFER_JSON = True
DEFAULTS = {"vocab_size": 50265, "pad_token_id": 1, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
            "max_position_embeddings": 514}
RENAMES = (
    (r"^roberta\.", "bert."),
    (r"^lm_head\.dense\.", "cls.predictions.transform.dense."),
    (r"^lm_head\.layer_norm\.", "cls.predictions.transform.LayerNorm."),
    (r"^lm_head\.bias$", "cls.predictions.bias"),
    (r"^lm_head\.decoder\.", "cls.predictions.decoder."),
)


def config(raw: dict) -> dict:
    kwargs = bert_fields(raw, DEFAULTS, raw.get("model_type", "roberta"))
    return {**kwargs, "position_offset": kwargs["pad_token_id"] + 1, "head_act": "gelu"}
