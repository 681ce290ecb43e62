"""The seed texts: the five teaching documents this lab was made from, each named once by its subject.

A page that quotes one writes `cite("000")` ("the worked forward pass (seed text 000)"), so a reader learns what
"seed text 000" is and every page names it the same way; code and docs cite them so too (docs/development.md, "The
seed texts", says what each holds). The texts themselves are not shipped with the app.
"""

from __future__ import annotations

NAMES = {  # number -> what the document is, from its title and its first lines
    "000": "the worked forward pass",  # "Worked Example — Forward Pass Through BERT on a Masked Sentence"
    "001": "the academic manual",  # "Masked Language Models (BERT) — A Complete Academic Manual"
    "002": "the BERT tutorial",  # "11.6.3 BERT Series": contextual vectors, [CLS]/[SEP], a small BertModel
    "003": "the JAX code walk-through",  # "BERT: Understanding Bidirectional Transformers", in JAX/Flax
    "004": "the mathematical formulation",  # "Mathematical Formulation of BERT (Masked Language Modeling)"
}


def cite(number: str, *, start: bool = False, parens: bool = True) -> str:
    """"the worked forward pass (seed text 000)"; `start`: capitalized, to open a sentence; without `parens`:
    "the worked forward pass, seed text 000", for a place already in parentheses."""
    name = NAMES[number]
    text = f"{name} (seed text {number})" if parens else f"{name}, seed text {number}"
    return text[0].upper() + text[1:] if start else text
