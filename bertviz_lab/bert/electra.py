"""ELECTRA (Clark et al., 2020): a small generator fills masks, a discriminator spots its fakes.

Both are BERTs. The generator is an MLM model; the discriminator has no MLM head but one logit per
token, "was this token replaced?", trained on every token rather than the 15% masked. Their token
vectors may have another width than the layers (embedding_size: ELECTRA-small 128 into 256-wide layers;
the base and large generators 768 and 1024 into narrower ones), projected by `embeddings_project`;
where the widths match (the base and large discriminators) there is no projection.
"""

from __future__ import annotations

from bertviz_lab.bert.config import bert_fields

SUMMARY = "a generator (an MLM) and a discriminator that tells replaced tokens from original ones"
# True of both models, since the note shows whichever is active: the generator fills masks, the discriminator cannot.
LACKS = ("ELECTRA has no NSP head, and only its generator has an MLM head to fill masks: the discriminator has no "
         "MLM head, and instead of guessing a [MASK] it gives every token the probability that it was replaced")
SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
PREFER_JSON = False
DEFAULTS = {"vocab_size": 30522, "embedding_size": 128, "hidden_size": 256, "num_attention_heads": 4,
            "intermediate_size": 1024}
RENAMES = (
    (r"^electra\.", "bert."),
    (r"^embeddings_project\.", "bert.embeddings_project."),
    (r"^generator_predictions\.dense\.", "cls.predictions.transform.dense."),
    (r"^generator_predictions\.LayerNorm\.", "cls.predictions.transform.LayerNorm."),
    (r"^generator_lm_head\.bias$", "cls.predictions.bias"),
    (r"^generator_lm_head\.weight$", "cls.predictions.decoder.weight"),
    (r"^discriminator_predictions\.", "cls.discriminator."),
)


def config(raw: dict) -> dict:
    kwargs = bert_fields(raw, DEFAULTS, "electra")
    projected = kwargs["embedding_size"] != kwargs.get("hidden_size", 768)  # as transformers decides
    return {**kwargs, "embedding_size": kwargs["embedding_size"] if projected else 0, "head_act": "gelu"}
