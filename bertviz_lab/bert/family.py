"""The BERT family: each member's config.json and weight names read into this lab's BERT.

Every member is a BERT with a few differences, so one model (bert/model.py) runs them all once
their files are read into BERT's form. Each member has a module that says how it differs:

| family | module | differs from BERT in |
| --- | --- | --- |
| BERT (cased, multilingual, Chinese) | here | nothing: its vocabulary and casing only |
| DistilBERT | distilbert.py | 6 layers distilled from BERT; no segments, no pooler, no NSP |
| RoBERTa, XLM-R | roberta.py | byte-level BPE / SentencePiece; positions from pad + 1; no NSP |
| ELECTRA | electra.py | a generator (MLM) and a discriminator (replaced tokens); embeddings of their own width |
| ALBERT | albert.py | one layer's weights at every depth; narrow embeddings; SOP, not NSP |

A member reads as `Family`: its config.json translated into `BertConfig` keyword arguments, its
weight names renamed by patterns applied in order, and its special tokens. Weights no pattern maps
onto this model (a classifier head for another task, ALBERT's SOP head) load as "ignored".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from bertviz_lab.bert import albert, distilbert, electra, roberta
from bertviz_lab.bert.config import BertConfig, show
from bertviz_lab.bert.tokenizer import ROLES
from bertviz_lab.errors import ConfigError

NO_MLM_HEAD = "it was saved without the layer that turns hidden states into word guesses"


@dataclass(frozen=True)
class Family:
    name: str  # model_type in config.json
    title: str  # as people write it: "RoBERTa"
    summary: str  # one sentence: how it differs from BERT
    lacks: str  # what this lab's pages cannot show for it, and why ("" for BERT)
    translate: Callable[[dict], dict]  # config.json -> BertConfig keyword arguments
    renames: tuple[tuple[str, str], ...]  # (pattern, replacement) on weight names, in order
    specials: dict[str, str]  # role -> token, when the tokenizer files do not say
    prefer_json: bool  # read tokenizer.json even beside a vocab.txt

    def config(self, raw: dict) -> BertConfig:
        return BertConfig(**self.translate(raw))

    def no_mlm(self, has_rtd: bool) -> str:
        """Why a model of this family has no masked-LM head, for a sentence that goes on "..., so it cannot ...":
        an ELECTRA discriminator (`has_rtd`, its replaced-token head) was never given one (`lacks` says why); any
        other model, a bare ELECTRA encoder included, was saved without it."""
        return self.lacks if self.name == "electra" and has_rtd else NO_MLM_HEAD

    def rename(self, key: str) -> str:
        for pattern, replacement in self.renames:
            key = re.sub(pattern, replacement, key)
        return key


# BERT's own renames: a BertModel saved without the `bert.` prefix, TF-era LayerNorm names.
BERT_RENAMES = ((r"^(embeddings|encoder|pooler)\.", r"bert.\1."), (r"\.gamma$", ".weight"), (r"\.beta$", ".bias"))


def _from(module: ModuleType, name: str, title: str) -> Family:
    return Family(name, title, module.SUMMARY, module.LACKS, module.config, module.RENAMES + BERT_RENAMES,
                  module.SPECIALS, module.PREFER_JSON)


FAMILIES = {f.name: f for f in (
    Family("bert", "BERT", "the original: WordPiece, [CLS] A [SEP] B [SEP], pretrained with MLM and NSP", "",
           lambda raw: BertConfig.from_dict(raw).to_dict(), BERT_RENAMES, dict(ROLES), False),
    _from(distilbert, "distilbert", "DistilBERT"),
    _from(roberta, "roberta", "RoBERTa"),
    _from(roberta, "xlm-roberta", "XLM-RoBERTa"),
    _from(electra, "electra", "ELECTRA"),
    _from(albert, "albert", "ALBERT"),
)}


def family_of(raw: object) -> Family:
    """The family config.json names (model_type; BERT when it names none)."""
    if not isinstance(raw, dict):
        raise ConfigError("config.json must hold a JSON object")
    name = raw.get("model_type", "bert")
    titles = ", ".join(f.title for f in FAMILIES.values())
    if not isinstance(name, str):
        raise ConfigError(f"model_type must name a model family, got {show(name)}; this lab runs {titles}")
    if name not in FAMILIES:
        raise ConfigError(f"this is a {show(name)} model; this lab runs the BERT family: {titles}")
    return FAMILIES[name]
