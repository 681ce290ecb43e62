"""DistilBERT (Sanh et al., 2019): a student trained to match BERT's outputs (the released ones have 6 layers).

Its layers are BERT's under other names (q_lin for query, sa_layer_norm for the attention's
LayerNorm, ...). It has no segment embeddings (text B is not marked as B), no pooler and no NSP
head: it was distilled with MLM alone. Its config.json names the sizes its own way (dim, n_layers).
"""

from __future__ import annotations

from bertviz_lab.bert.config import bert_fields

SUMMARY = "distilled from BERT (the released ones have 6 layers); no segment embeddings, no pooler, no NSP head"
LACKS = ("DistilBERT has no NSP head and no segment embeddings: it was distilled with masked words only, "
         "so it cannot say whether B follows A")
SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
PREFER_JSON = False
DEFAULTS = {"vocab_size": 30522, "max_position_embeddings": 512, "initializer_range": 0.02, "pad_token_id": 0,
            "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072, "activation": "gelu", "dropout": 0.1,
            "attention_dropout": 0.1}
NAMES = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
         "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
         "attention_dropout": "attention_probs_dropout_prob"}
RENAMES = (
    (r"^distilbert\.", ""),
    (r"^transformer\.", "encoder."),
    (r"\.attention\.q_lin\.", ".attention.self.query."),
    (r"\.attention\.k_lin\.", ".attention.self.key."),
    (r"\.attention\.v_lin\.", ".attention.self.value."),
    (r"\.attention\.out_lin\.", ".attention.output.dense."),
    (r"\.sa_layer_norm\.", ".attention.output.LayerNorm."),
    (r"\.ffn\.lin1\.", ".intermediate.dense."),
    (r"\.ffn\.lin2\.", ".output.dense."),
    (r"\.output_layer_norm\.", ".output.LayerNorm."),
    (r"^vocab_transform\.", "cls.predictions.transform.dense."),
    (r"^vocab_layer_norm\.", "cls.predictions.transform.LayerNorm."),
    (r"^vocab_projector\.bias$", "cls.predictions.bias"),
    (r"^vocab_projector\.weight$", "cls.predictions.decoder.weight"),
)


def config(raw: dict) -> dict:
    merged = {**DEFAULTS, **raw}
    renamed = {NAMES.get(k, k): v for k, v in merged.items() if k not in NAMES.values()}
    return {**bert_fields(renamed, {}, "distilbert"), "type_vocab_size": 0, "layer_norm_eps": 1e-12}
