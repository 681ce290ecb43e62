"""Sentences where attention and occlusion disagree, for the Why-this-guess page's example picker.

`score` is the search's reading of one sentence: every method on its one [MASK] (the top guess explained), then
how far last-layer attention (mean over heads) ranks the words as occlusion does (Spearman's rho over the words
that can be removed), and the word each puts first. `python -m bench.why_disagree` runs it over the story world's
sentences on the shipped model and writes the ones that disagree most to `views/why/found.py`; `examples` offers
them (and, with a real BERT active, Abnar & Zuidema's sentence) written with the active model's mask token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import MASK, WordPieceTokenizer
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.found import FOUND, SEARCH

# Abnar & Zuidema (2020)'s example: a real BERT reads "his" or "her" off "the author" or "sara".
REAL_BERT_EXAMPLE = "the author talked to sara about [MASK] book ."
REAL_BERT_VOCAB = 20_000  # a BERT with at least this many tokens is a real one (bert-base: 30,522), not the lab's


@dataclass(frozen=True)
class Scored:
    """One sentence as the search reads it."""

    result: vw.Why
    rho: float | None  # Spearman of attention against occlusion over the removable tokens (None: undefined)
    attended: int | None  # the removable token attention weights most (a position)
    occluded: int | None  # the one whose removal lowers the score most

    @property
    def note(self) -> str:
        tokens = self.result.encoding.tokens
        return (f"attention's top word: {tokens[self.attended]}; occlusion's: {tokens[self.occluded]}"
                if self.attended is not None and self.occluded is not None else "no word can be removed")


def score(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text: str) -> Scored:
    """Explain the top guess at the first [MASK] of `text` and compare last-layer attention with occlusion."""
    result = vw.why(model, tokenizer, inputs.encode(tokenizer, model, text))
    values, movable = result.explanation.values, result.explanation.movable
    return Scored(result, result.agreement["attention"]["occlusion"], vw.strongest(values["attention"], movable),
                  vw.strongest(values["occlusion"], movable))


@dataclass(frozen=True)
class Example:
    """A sentence offered on the page; str() is its text, so a selectbox shows it as is."""

    text: str  # with the active model's mask token where the word is hidden
    kind: str  # what is hidden: "noun" (or a name), "verb", "pronoun", "antecedent" (a pronoun's noun or name),
    # or "real BERT"
    word: str  # the word that was there ("" for the real-BERT sentence)
    target: str  # the shipped model's top guess there, the guess explained ("" for the real-BERT sentence)
    rho: float | None  # attention against occlusion on the shipped model (None: not measured)
    note: str  # what the numbers said, in one line

    def __str__(self) -> str:
        return self.text


def built_in() -> list[Example]:
    """The search's sentences (read when asked, so the search itself runs whatever the file holds)."""
    median = SEARCH["median_rho"]  # attention against occlusion, the median over the search's sentences
    return [Example(r["text"], r["kind"], r["word"], r["target"], r["rho"],
                    f"On the shipped model, explaining its guess “{r['target']}”: ρ = {r['rho']:.2f} against "
                    f"occlusion (the story world's median: {median:.2f}); {r['note']}.") for r in FOUND]


def real_bert(tokenizer: WordPieceTokenizer, family: str) -> bool:
    return family == "bert" and tokenizer.vocab_size >= REAL_BERT_VOCAB


def examples(tokenizer: WordPieceTokenizer, family: str) -> list[Example]:
    """The examples that apply to the active model, its mask token written in: Abnar & Zuidema's first for a real
    BERT, then the story world's (found on the shipped model, readable by any)."""
    found = built_in()
    if real_bert(tokenizer, family):
        found.insert(0, Example(REAL_BERT_EXAMPLE, "real BERT", "", "", None, "Abnar & Zuidema (2020): does the "
                                "guess rest on “author” and “sara”, and does attention say so?"))
    return [replace(e, text=e.text.replace(MASK, tokenizer.mask_token)) for e in found]
