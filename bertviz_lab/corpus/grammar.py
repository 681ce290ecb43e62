"""Sentence building: referents, agreement, tense and template filling.

`Writer` holds one story generator's random state and its word decks. Story
functions ask it for referents (a cat, anna, i), for clauses whose verb agrees
with the subject, and for templates with their slots filled from categories.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from bertviz_lab.corpus.morph import Deck, Noun, Verb, article
from bertviz_lab.corpus.tables import CATEGORIES, SOUNDS, VERB, VERBS

_SLOT = re.compile(r"\{(\w+)(?::(\w+))?\}")
_FORMS = ("base", "s", "ed", "ing")
_BE = {"now": {"i": "am", "sg": "is", "pl": "are"},
       "then": {"i": "was", "sg": "was", "pl": "were"}}
_DO = {"i": "do", "sg": "does", "pl": "do"}
_BASE_AUX = (("will", "future"), ("did not", "past"), ("will not", "future"), ("can", ""),
             ("wanted to", "past"))
# How a verb's base form can be used after each kind of subject; plain present
# ("the cats sit", "i sit") only where the subject is not he/she/it.
_BASE_GROUPS = {
    "sg": _BASE_AUX + (("does not", "habit"),),
    "i": _BASE_AUX + (("do not", "habit"), ("", "habit"), ("", "habit")),
    "pl": _BASE_AUX + (("do not", "habit"), ("", "habit"), ("", "habit")),
}
# Time phrases that fit each tense, so "yesterday" never meets "will".
_WHEN = {
    "past": ("yesterday", "last night", "last week", "this morning", "on {day}", "in {month}",
             "{num} days ago", "earlier today", "last {season}", "in the {daypart}"),
    "habit": ("every day", "every {daypart}", "on {day:pl}", "in the {daypart}", "in {season}",
              "every {season}"),
    "now": ("now", "right now", "today", "at the moment", "this {daypart}"),
    "then": ("yesterday", "all {daypart}", "last night", "at noon"),
    "future": ("tomorrow", "tonight", "next week", "next {day}", "later", "soon",
               "this weekend", "next {season}", "in {month}"),
}
_PRONOUNS = {  # gender -> subject, object, possessive
    "m": ("he", "him", "his"), "f": ("she", "her", "her"), "n": ("it", "it", "its"),
    "pl": ("they", "them", "their"),
}


@dataclass(frozen=True)
class Ref:
    """Someone or something a story talks about, with the words that refer back to it."""

    name: str
    subj: str
    obj: str
    poss: str
    agr: str  # "i", "sg" or "pl": which verb forms agree with it
    noun: str = ""  # singular head noun of an animal, for what it eats and says

    @property
    def be_past(self) -> str:
        return _BE["then"][self.agr]

    @property
    def be_now(self) -> str:
        return _BE["now"][self.agr]


I = Ref("i", "i", "me", "my", "i")  # noqa: E741 - the pronoun itself
WE = Ref("we", "we", "us", "our", "pl")
YOU = Ref("you", "you", "you", "your", "pl")


def named(name: str, gender: str, agr: str = "sg", noun: str = "") -> Ref:
    """A referent called `name` whose pronouns follow `gender` ("m", "f", "n", "pl")."""
    subj, obj, poss = _PRONOUNS["pl" if agr == "pl" else gender]
    return Ref(name, subj, obj, poss, agr, noun)


def addressee(ref: Ref) -> Ref:
    """Who a question about `ref` is put to: the narrator "i" is asked as "you"."""
    return YOU if ref.agr == "i" else ref


def animal_ref(noun: Noun, plural: bool) -> Ref:
    """The cat (it) or the cats (they)."""
    name = "the " + (noun.pl if plural else noun.sg)
    return named(name, "n", "pl" if plural else "sg", noun.sg)


class Writer:
    """Draws words from shuffled decks and assembles agreeing sentences."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self._decks: dict[str | tuple, Deck] = {}
        self._seen: set[str] = set()

    # --- drawing -------------------------------------------------------------
    def deck(self, key: str) -> Deck:
        """The deck for a category ("fruit", "fruit:pl"), a verb class ("verb:eat") or a
        verb's forms ("form:eat"), created on first use."""
        deck = self._decks.get(key)
        if deck is None:
            deck = self._decks[key] = Deck(self._items(key), self.rng)
        return deck

    @staticmethod
    def _items(key: str) -> tuple:
        name, _, mode = key.partition(":")
        if name == "form":
            return _FORMS
        if name == "verb":
            return VERBS[mode]
        if name == "sounds":
            return tuple(SOUNDS.values())
        items = CATEGORIES[name]
        return tuple(n for n in items if n.pl) if mode == "pl" else items

    def word(self, key: str, plural: bool = False) -> str:
        """The next word of a category, singular or plural."""
        item = self.deck(key + ":pl" if plural else key).draw()
        if isinstance(item, Noun):
            return item.pl if plural else item.sg
        return item

    def one(self, options):
        """An independent choice, for choices that need no coverage."""
        return options[int(self.rng.random() * len(options))]

    def pick(self, options: tuple):
        """The next of a fixed tuple of options, drawn in shuffled rounds like a category.

        Only for tuples written in the source: each distinct tuple keeps a deck.
        """
        deck = self._decks.get(options)
        if deck is None:
            deck = self._decks[options] = Deck(options, self.rng)
        return deck.draw()

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fill(self, template: str, **given: str) -> str:
        """Replace {cat}, {cat:pl}, {a:cat}, {num:cat} and given {names} in a template."""
        def slot(match: re.Match) -> str:
            first, second = match.group(1), match.group(2)
            if second is None:
                return given[first] if first in given else self.word(first)
            if second == "pl":
                return self.word(first, plural=True)
            if first == "a":
                noun = given[second] if second in given else self.word(second)
                return f"{article(noun)} {noun}"
            return f"{self.word('num')} {self.word(second, plural=True)}"  # {num:cat}
        return _SLOT.sub(slot, template)

    # --- referents -----------------------------------------------------------
    def new_story(self) -> None:
        self._seen.clear()

    def who(self, ref: Ref) -> str:
        """The referent's full name the first time, then often just a pronoun."""
        if ref.name in self._seen and self.rng.random() < 0.6:
            return ref.subj
        self._seen.add(ref.name)
        return ref.name

    def person(self) -> Ref:
        """A protagonist: a named person, i, we, a role, or a group."""
        r = self.rng.random()
        if r < 0.30:
            gender = "m" if self.rng.random() < 0.5 else "f"
            return named(self.word("male" if gender == "m" else "female"), gender)
        if r < 0.46:
            return I
        if r < 0.52:
            return WE
        if r < 0.70:
            return self.role()
        if r < 0.80:
            return self.role(self.one(("man", "woman")))
        if r < 0.88:
            return named("the " + self.word("role", plural=True), "pl", "pl")
        if r < 0.94:
            return named("the " + self.word(self.one(("man", "woman")), plural=True), "pl", "pl")
        return named(f"{self.word('male')} and {self.word('female')}", "pl", "pl")

    def role(self, key: str = "role") -> Ref:
        """The teacher, the girl, the king: gendered nouns keep their gender."""
        gender = {"man": "m", "woman": "f"}.get(key) or self.one("mf")
        return named("the " + self.word(key), gender)

    def animal(self, key: str = "animal", plural: bool | None = None) -> Ref:
        """The cat or the cats: an animal of a category, singular or (30%) plural."""
        if plural is None:
            plural = self.rng.random() < 0.3
        return animal_ref(self.deck(key + ":pl" if plural else key).draw(), plural)

    # --- clauses ------------------------------------------------------------
    def when(self, tense: str) -> str:
        """A time phrase that fits the tense ("yesterday" for the past); "" for none."""
        return self.fill(self.one(_WHEN[tense])) if tense in _WHEN else ""

    def act(self, ref: Ref, cls: str, tail: str | None = None, **given: str) -> str:
        """One statement: subject, agreeing verb of class `cls`, what follows, maybe a time.

        `given` fixes template slots, e.g. device="phone" keeps a story's device.
        """
        verb, tails = self.deck("verb:" + cls).draw()
        rest = self.fill(tail if tail is not None else self.pick(tails), poss=ref.poss, **given)
        return self.clause(self.who(ref), ref.agr, verb, rest) + "."

    def do(self, ref: Ref, base: str, tail: str = "") -> str:
        """Like `act`, for one particular verb (by its base form)."""
        rest = self.fill(tail, poss=ref.poss)
        return self.clause(self.who(ref), ref.agr, VERB[base], rest) + "."

    def clause(self, subject: str, agr: str, verb: Verb, rest: str, timed: bool = True) -> str:
        """Subject + verb group + rest, with a tense drawn so every verb form gets used."""
        forms = self.deck("form:" + verb.base)
        form = forms.draw()
        if form == "s" and agr != "sg":
            # Only he/she/it can use the -s form: keep it for the next such subject.
            forms.put_back(form)
            form = self.one(("ed", "ing", "base"))
        if form == "ed":
            group, tense = verb.ed, "past"
        elif form == "s":
            group, tense = verb.s, "habit"
        elif form == "ing":
            tense = "now" if self.rng.random() < 0.5 else "then"
            group = f"{_BE[tense][agr]} {verb.ing}"
        else:
            aux, tense = self.one(_BASE_GROUPS[agr])
            if aux == "wanted to" and verb.base == "want":
                aux = "did not"  # not "wanted to want"
            group = f"{aux} {verb.base}" if aux else verb.base
        if tense == "habit" and " " not in group and self.rng.random() < 0.4:
            group = f"{self.word('habit')} {group}"  # "the cat usually sleeps"
            timed = timed and self.rng.random() < 0.3
        body = f"{group} {rest}" if rest else group
        r = self.rng.random() if timed else 1.0
        if r < 0.25:
            return f"{self.when(tense)}, {subject} {body}" if tense else f"{subject} {body}"
        if r < 0.55 and tense:
            return f"{subject} {body} {self.when(tense)}"
        return f"{subject} {body}"

    def ask(self, ref: Ref, cls: str, tail: str | None = None, **given: str) -> list[str]:
        """A yes/no question about the referent, and its short answer."""
        verb, tails = self.deck("verb:" + cls).draw()
        asked = addressee(ref)
        rest = self.fill(tail if tail is not None else self.pick(tails), poss=asked.poss, **given)
        rest = f" {rest}" if rest else ""
        mode = self.one(("past", "habit", "future", "now"))
        if mode == "now":
            question = f"{_BE['now'][asked.agr]} {self.who(asked)} {verb.ing}{rest}?"
            aux = _BE["now"][ref.agr]
        else:
            aux = {"past": "did", "future": "will"}.get(mode) or _DO[ref.agr]
            ask_aux = _DO[asked.agr] if mode == "habit" else aux
            question = f"{ask_aux} {self.who(asked)} {verb.base}{rest}?"
        # The narrator is asked as "you" but answers as "i": "did you ...? yes, i did."
        yes = self.rng.random() < 0.5
        answer = f"yes, {ref.subj} {aux}." if yes else f"no, {ref.subj} {aux} not."
        return [question, answer]

    def compose(self, lead: list[str], makers: list, minimum: int = 3,
                maximum: int = 8) -> list[str]:
        """Lead sentences, then sentences from `makers` in a shuffled order, 3-8 in all."""
        target = self.rng.randint(minimum, maximum)
        order = makers[:]
        self.rng.shuffle(order)
        sentences = list(lead)
        for make in order:
            if len(sentences) >= target:
                break
            made = make()
            if len(sentences) + len(made) <= maximum:
                sentences.extend(made)
        return sentences
