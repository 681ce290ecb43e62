"""Built-in minimal pairs for activation patching: a clean sentence with a [MASK], a corrupted one that differs in a
word or two and has its [MASK] at the same place, and the two answers whose logit difference is the score.

- number agreement with 0 to 3 attractors: corpus/agreement.py's pairs, the corrupted sentence with the subject in
  the other number ("the children in the park [MASK] happy ." / "the child in the park ...": were - was);
- pronoun and referent: "the boy was tired , so [MASK] went home ." / "the girl ...": he - she;
- determiner and noun: "i ate an [MASK] ." / "i ate a [MASK] .": apple (the one "an" allows) - melon;
- the two senses of bank, set by the word before it: "the grass on the bank was [MASK] ." / "the manager of the bank
  was [MASK] .": green - young.

Every word is a story-world word, so the shipped model reads each as one token and the two sentences have one
length (tests/corpus/test_minimal_pairs.py checks it); a model with another vocabulary may split a word, and the page
then says so. A pair is a question, not an answer: the shipped model, for one, does not tell "he" from "she".
"""

from __future__ import annotations

from dataclasses import dataclass

from bertviz_lab.corpus.agreement import MAX_ATTRACTORS, AgreementPair, agreement_pairs
from bertviz_lab.corpus.tables import CATEGORIES
from bertviz_lab.errors import InputError

MASK = "[MASK]"


@dataclass(frozen=True)
class MinimalPair:
    key: str  # as links and the command name it: "agreement-1"
    group: str  # what the pair tests: "number agreement"
    title: str  # one line for a picker
    clean: str  # with a [MASK]
    corrupt: str  # one length with `clean` (in the story world's words), its [MASK] at the same place
    answer: str  # the clean sentence's right word
    foil: str  # the corrupted sentence's
    note: str  # what the pair asks, in a sentence


def _numbers() -> dict[str, str]:
    """Every story-world noun's singular <-> plural."""
    out = {}
    for nouns in CATEGORIES.values():
        for noun in nouns:
            if getattr(noun, "pl", None) and noun.pl != noun.sg:
                out[noun.sg], out[noun.pl] = noun.pl, noun.sg
    return out


def _agreement(pair: AgreementPair, numbers: dict[str, str]) -> MinimalPair:
    words = pair.masked_words(MASK)
    flipped = list(words)
    flipped[1] = numbers[words[1]]  # "the <subject noun> ...": the subject in the other number
    count = pair.attractors
    attractors = "no attractor" if count == 0 else f"{count} attractor" + ("s" if count > 1 else "")
    clean, corrupt = " ".join(words), " ".join(flipped)
    return MinimalPair(
        f"agreement-{count}", "number agreement", f"agreement, {attractors}: {clean}", clean, corrupt, pair.right,
        pair.wrong, f"the verb agrees with '{words[1]}', not with the nouns between them ({attractors}): where does "
                    "the [MASK] learn the subject's number?")


def _agreements() -> list[MinimalPair]:
    numbers = _numbers()
    out = []
    pairs = agreement_pairs(per_count=20)
    for count in range(MAX_ATTRACTORS + 1):
        # every noun between the subject and the verb an attractor (no phrase of the subject's own number)
        pair = next(p for p in pairs if p.attractors == count and p.tree.words[1] in numbers
                    and list(p.tree.words).count("the") == count + 1)
        out.append(_agreement(pair, numbers))
    return out


PAIRS: tuple[MinimalPair, ...] = (
    *_agreements(),
    MinimalPair("pronoun", "pronoun and referent", "pronoun: the boy was tired , so [MASK] went home .",
                "the boy was tired , so [MASK] went home .", "the girl was tired , so [MASK] went home .", "he", "she",
                "the pronoun refers back to 'boy' or 'girl': does the model carry the referent's gender to the "
                "[MASK], and where?"),
    MinimalPair("determiner", "determiner and noun", "determiner: i ate an [MASK] .", "i ate an [MASK] .",
                "i ate a [MASK] .", "apple", "melon",
                "'an' asks for a noun that starts with a vowel sound: how does one letter of the determiner reach "
                "the noun's guess?"),
    MinimalPair("bank", "the two senses of bank", "bank: the grass on the bank was [MASK] .",
                "the grass on the bank was [MASK] .", "the manager of the bank was [MASK] .", "green", "young",
                "a river bank or a money bank, set by the words before it: which positions carry the sense to the "
                "[MASK]?"),
)


def by_key(key: str) -> MinimalPair:
    for pair in PAIRS:
        if pair.key == key:
            return pair
    raise InputError(f"no built-in pair called {key!r}: pick one of {', '.join(p.key for p in PAIRS)}")
