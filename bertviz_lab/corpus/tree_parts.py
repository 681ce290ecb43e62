"""The pieces every story-world tree is built from: noun-phrase chunks, verb groups, time phrases, clauses.

A template after a verb has a fixed shape, chunks `[preposition] [the|a|some|his|two ...] [adjective ...] noun
...`, the last word of a chunk its head (a determiner after a noun starts the next chunk: "his friend | some
money"); `chunks` reads that shape as it adds the words, so the tree of a filled template is known from the
template. `kind_of` says what the lexicon calls a word (pet, fruit, town, describing, ...).
"""

from __future__ import annotations

from functools import lru_cache

from bertviz_lab.corpus.grammar import _BASE_GROUPS, _BE, Writer
from bertviz_lab.corpus.morph import Noun
from bertviz_lab.corpus.tables import CATEGORIES
from bertviz_lab.corpus.tree import Builder, Tree

DETERMINERS = frozenset("the a an some every this".split())
POSSESSIVES = frozenset("my his her its our their your".split())
PREPOSITIONS = frozenset("to on in under near behind across along into around through with from at for "
                         "about of by".split())
AUXILIARIES = frozenset("will did does do can is are am was were".split())
PRONOUNS = frozenset("i we you he she it they".split())
# Time phrases by tense: (phrase, its relation); slots filled like the stories' own.
_WHEN = {
    "past": (("yesterday", "obl:tmod"), ("last night", "obl:tmod"), ("last week", "obl:tmod"),
             ("this morning", "obl:tmod"), ("on {day}", "obl"), ("in {month}", "obl")),
    "habit": (("every day", "obl:tmod"), ("every {daypart}", "obl:tmod"), ("in the {daypart}", "obl"),
              ("in {season}", "obl")),
    "now": (("now", "advmod"), ("today", "obl:tmod"), ("this {daypart}", "obl:tmod")),
    "then": (("yesterday", "obl:tmod"), ("last night", "obl:tmod")),
    "future": (("tomorrow", "obl:tmod"), ("tonight", "obl:tmod"), ("next week", "obl:tmod"), ("soon", "advmod"),
               ("later", "advmod"), ("next {day}", "obl:tmod")),
}


@lru_cache(maxsize=1)
def _lexicon() -> tuple[dict[str, str], frozenset[str]]:
    """word -> its noun category (most specific first), and every describing word."""
    nouns: dict[str, str] = {}
    adjectives: set[str] = {"new", "old", "last", "next"}
    for name, items in CATEGORIES.items():  # nouns first: "apple" is a fruit before it is a company
        for item in items:
            if isinstance(item, Noun):
                for form in (item.sg, item.pl):
                    if form:
                        nouns.setdefault(form, name)
    for name, items in CATEGORIES.items():
        for item in items:
            if isinstance(item, Noun):
                continue
            if name.endswith(("trait", "color", "feeling")) or name in ("sky", "temp", "drysky", "color"):
                adjectives.update(item.split())
            else:
                for word in item.split():
                    nouns.setdefault(word, name)
    return nouns, frozenset(adjectives)


def kind_of(word: str) -> str:
    """What the lexicon says a word is: its noun category (pet, fruit, town, ...), "describing" for an adjective,
    "" when it does not know the word."""
    nouns, adjectives = _lexicon()
    return nouns.get(word) or ("describing" if word in adjectives else "")


def upos_of(word: str, head: bool) -> str:
    if word in DETERMINERS:
        return "DET"
    if word in POSSESSIVES or word in PRONOUNS:
        return "PRON"
    if word in CATEGORIES["num"]:
        return "NUM"
    if not head and word in _lexicon()[1]:
        return "ADJ"
    return "PROPN" if kind_of(word) in ("male", "female", "city", "tripcity", "company") else "NOUN"


def _starts_chunk(word: str) -> bool:
    return word in DETERMINERS or word in POSSESSIVES or word in CATEGORIES["num"]


def chunks(b: Builder, words: list[str]) -> list[tuple[str, int]]:
    """Add a template's words as chunks; returns (preposition or "", chunk head) per chunk."""
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(words):
        prep = ""
        if words[i] in PREPOSITIONS:
            prep, i = words[i], i + 1
        end = i
        while end < len(words) and words[end] not in PREPOSITIONS and not (
                end > i and _starts_chunk(words[end]) and not _starts_chunk(words[end - 1])):
            end += 1  # "his friend | some money": a determiner after a noun starts the next chunk
        if end == i:
            raise ValueError(f"a preposition with no noun after it in {' '.join(words)!r}")
        case = b.add(prep, "ADP", "adp") if prep else -1
        made = [b.add(w, upos_of(w, k == end - 1), kind_of(w)) for k, w in enumerate(words[i:end], start=i)]
        head = made[-1]
        for m in made[:-1]:
            u = b.upos[m]
            rel = {"DET": "det", "NUM": "nummod", "ADJ": "amod"}.get(u, "nmod:poss" if u == "PRON" else "compound")
            b.link(m, head, rel)
        if case >= 0:
            b.link(case, head, "case")
        out.append((prep, head))
        i = end
    return out


def after_verb(b: Builder, verb: int, text: str) -> None:
    """The phrases after a verb: bare chunks are its objects (two: iobj then obj), "of" chunks modify the noun
    before them, the others are obliques of the verb."""
    made = chunks(b, text.split())
    bare = [head for prep, head in made if not prep]
    for (prep, head), before in zip(made, [None] + made[:-1]):
        if prep == "of" and before is not None:
            b.link(head, before[1], "nmod")
        elif prep:
            b.link(head, verb, "obl")
        else:
            b.link(head, verb, "iobj" if len(bare) == 2 and head == bare[0] else "obj")


def noun_phrase(b: Builder, name: str) -> int:
    """A referent's name as a noun phrase ("the cat", "anna", "tom and mia", "they"); returns its head."""
    if " and " in name:
        first, second = name.split(" and ")
        head = noun_phrase(b, first)
        cc = b.add("and", "CCONJ", "cconj")
        other = noun_phrase(b, second)
        b.link(cc, other, "cc")
        b.link(other, head, "conj")
        return head
    if name in PRONOUNS:
        return b.add(name, "PRON", "pron")
    ((_, head),) = chunks(b, name.split())
    return head


def verb_words(b: Builder, group: str) -> int:
    """A verb group ("did not cross", "is sitting", "usually sits"): the last word is the verb, the rest its
    auxiliaries and adverbs."""
    *before, last = group.split()
    made = [b.add(w, "AUX" if w in AUXILIARIES else ("PART" if w == "not" else "ADV"), "function")
            for w in before]
    verb = b.add(last, "VERB", "verb")
    for m in made:
        b.link(m, verb, "aux" if b.upos[m] == "AUX" else "advmod")
    return verb


def when_phrase(b: Builder, w: Writer, tense: str) -> tuple[int, str]:
    """A time phrase that fits the tense, added unlinked; returns its head and the relation it takes."""
    phrase, rel = w.one(_WHEN[tense])
    words = w.fill(phrase).split()
    if len(words) == 1 and rel == "advmod":
        return b.add(words[0], "ADV", "time"), rel
    ((_, noun),) = chunks(b, words)
    return noun, rel


def verb_group(w: Writer, verb, agr: str) -> tuple[str, str]:
    """A verb group that agrees with its subject and its tense, drawn as `Writer.clause` draws one (every form
    of the verb comes up; "wanted to" is left out: its tree needs an xcomp)."""
    form = w.deck("form:" + verb.base).draw()
    if form == "s" and agr != "sg":
        w.deck("form:" + verb.base).put_back(form)
        form = w.one(("ed", "ing", "base"))
    if form == "ed":
        return verb.ed, "past"
    if form == "s":
        return (f"{w.word('habit')} {verb.s}" if w.chance(0.3) else verb.s), "habit"
    if form == "ing":
        tense = "now" if w.chance(0.5) else "then"
        return f"{_BE[tense][agr]} {verb.ing}", tense
    aux, tense = w.one(tuple(g for g in _BASE_GROUPS[agr] if g[0] != "wanted to"))
    return (f"{aux} {verb.base}" if aux else verb.base), tense


def clause(b: Builder, subject: str, group: str, tail: str) -> tuple[int, int]:
    """subject + verb group + tail, the verb the clause's head; returns (subject head, verb)."""
    subj = noun_phrase(b, subject)
    verb = verb_words(b, group)
    b.link(subj, verb, "nsubj")
    if tail:
        after_verb(b, verb, tail)
    return subj, verb


def copula(b: Builder, subject: str, be: str, adjective: str, degree: str = "") -> tuple[int, int]:
    """"the cat was (too) tired": the adjective heads, "was" is its cop; returns (subject head, adjective)."""
    subj = noun_phrase(b, subject)
    cop = b.add(be, "AUX", "function")
    adv = b.add(degree, "ADV", "function") if degree else -1
    adj = b.add(adjective, "ADJ", "describing")
    b.link(subj, adj, "nsubj")
    b.link(cop, adj, "cop")
    if adv >= 0:
        b.link(adv, adj, "advmod")
    return subj, adj


def end(b: Builder, root: int, construction: str) -> Tree:
    """The full stop, the root, and the finished tree."""
    b.link(b.add(".", "PUNCT", "punct"), root, "punct")
    b.link(root, -1, "root")
    return b.tree(construction)
