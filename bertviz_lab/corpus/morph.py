"""Word forms and the shuffled deck the generator draws words from.

Regular English spelling rules give plurals, verb forms and a/an; the lexicon
spells out every irregular form, and marks the verbs whose final consonant
doubles (stop -> stopped), because spelling alone cannot tell where the stress is.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_VOWELS = frozenset("aeiou")
_SIBILANT_ENDINGS = ("s", "sh", "ch", "x", "z")
# "a" before these although they start with a vowel letter, "an" before these
# although they do not: the sound decides, not the letter.
_A_BEFORE = ("uni", "use", "usu", "euro", "one")
_AN_BEFORE = ("hour", "honest")


@dataclass(frozen=True)
class Noun:
    """A noun's singular and plural; `pl` is None for names and mass nouns."""

    sg: str
    pl: str | None


@dataclass(frozen=True)
class Verb:
    """The four verb forms the grammar uses (no perfect tenses, so no participle)."""

    base: str
    s: str
    ed: str
    ing: str


def plural(noun: str) -> str:
    """Regular plural: cats, buses, cherries, days."""
    if noun.endswith(_SIBILANT_ENDINGS):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in _VOWELS:
        return noun[:-1] + "ies"
    return noun + "s"


def third_person(verb: str) -> str:
    """Present tense after he/she/it: walks, watches, carries, goes."""
    if verb.endswith(_SIBILANT_ENDINGS) or (verb.endswith("o") and not verb.endswith("oo")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in _VOWELS:
        return verb[:-1] + "ies"
    return verb + "s"


def regular_past(verb: str, double: bool) -> str:
    """Past tense of a regular verb: danced, carried, played, stopped, walked."""
    if double:
        return verb + verb[-1] + "ed"
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in _VOWELS:
        return verb[:-1] + "ied"
    return verb + "ed"


def gerund(verb: str, double: bool) -> str:
    """The -ing form: running, dancing, seeing, tying, walking."""
    if double:
        return verb + verb[-1] + "ing"
    if verb.endswith("ie"):
        return verb[:-2] + "ying"
    if verb.endswith("e") and not verb.endswith(("ee", "ye", "oe")) and len(verb) > 2:
        return verb[:-1] + "ing"
    return verb + "ing"


def article(word: str) -> str:
    """'a' or 'an' for the word that follows it."""
    if word.startswith(_AN_BEFORE):
        return "an"
    if word[0] in _VOWELS and not word.startswith(_A_BEFORE):
        return "an"
    return "a"


def parse_nouns(spec: str, countable: bool = True) -> tuple[Noun, ...]:
    """'cat mouse:mice' -> nouns; a colon gives an irregular plural."""
    nouns = []
    for item in spec.split():
        sg, _, pl = item.partition(":")
        nouns.append(Noun(sg, (pl or plural(sg)) if countable else None))
    return tuple(nouns)


def parse_verbs(spec: str) -> tuple[Verb, ...]:
    """'walk eat:ate stop* run:ran*' -> verbs; colon = irregular past, * = doubling."""
    verbs = []
    for item in spec.split():
        double = item.endswith("*")
        base, _, past = item.rstrip("*").partition(":")
        past = past or regular_past(base, double)
        verbs.append(Verb(base, third_person(base), past, gerund(base, double)))
    return tuple(verbs)


class Deck:
    """Draws items in shuffled rounds: every item comes up once per round.

    Unlike independent draws this guarantees that a category of n words is
    fully used after n draws, so rare words still appear early in training.
    """

    __slots__ = ("_items", "_rng", "_left")

    def __init__(self, items, rng: random.Random):
        self._items = list(items)
        if not self._items:
            raise ValueError("a deck needs at least one item")
        self._rng = rng
        self._left: list = []

    def draw(self):
        """The next item of this round; an empty deck starts a new shuffled round."""
        if not self._left:
            self._left = self._items[:]
            self._rng.shuffle(self._left)
        return self._left.pop()

    def put_back(self, item) -> None:
        """Return a drawn item that could not be used; it comes up again this round."""
        self._left.insert(0, item)
