"""The story world's treebank: sentences written together with their dependency trees.

Each construction below writes a sentence of the story world (its words drawn from the same decks, verb
classes and templates as the stories) and, as it places each word, the word's head and Universal
Dependencies relation, so the tree is known, not parsed. The phrases after a verb come from the verb
classes' templates, whose shape is fixed (tree_parts.py reads it; a test checks every template used fits).
The stories a model trains on (generator.py) are written by the story functions, which keep no trees: this
is a second writer over the same world, for measuring, with the constructions the stories use most
(weights in `_MIX`):

    clause     the cat sat on the mat .               subject, verb group (aux, not, usually), object or
                                                       obliques, a time phrase before (with a comma) or after
    copula     the food was delicious .               the adjective heads; the verb "be" is its cop
    relative   the cat that anna fed was hungry .     acl:relcl on the subject; "that" is the clause's obj or nsubj
    because    the boy wore a coat because he was cold .   advcl with mark; the pronoun's referent in `coref`
    and        the dog was happy and it ate the fish .     conj with cc; coreference again
    purpose    i went to the bank to deposit money .  advcl with mark "to"
    agreement  the children in the park were happy .  phrases between subject and verb (corpus/agreement.py)

Relations used: root nsubj obj iobj obl nmod case det nmod:poss nummod amod compound cop aux advmod acl:relcl
advcl mark conj cc punct (UD v2 names; `Tree.base_relation` drops the subtype).
"""

from __future__ import annotations

import random

from bertviz_lab.corpus.grammar import I, Ref, Writer, animal_ref, named
from bertviz_lab.corpus.morph import Noun
from bertviz_lab.corpus.phrases import TOWN
from bertviz_lab.corpus.tables import CATEGORIES
from bertviz_lab.corpus.tree import Builder, Tree
from bertviz_lab.corpus.tree_parts import (
    chunks,
    clause,
    copula,
    end,
    noun_phrase,
    after_verb,
    verb_group,
    when_phrase,
)
from bertviz_lab.errors import InputError

_ATTRACTOR_PLACES = (("in", "town"), ("near", "nature"), ("behind", "seat"), ("with", "thing"), ("by", "vehicle"))


# Verb classes whose templates are all chunk-shaped (the test checks it); the rest need a rule of their own.
CLASSES = ("motion", "amotion", "rest", "arest", "sit", "food", "drink", "handle", "open", "wear", "perceive",
           "read", "tech", "money", "sport", "music", "compete", "hit", "garden", "body", "selfcare", "travel",
           "ride", "talk", "light", "farmwork", "go", "cross", "study")


def _who(w: Writer) -> Ref:
    return w.person() if w.chance(0.6) else w.animal()


def _feeling(w: Writer) -> str:
    return w.word("feeling")


def _clause_tree(w: Writer) -> Tree:
    ref = _who(w)
    cls = w.pick(CLASSES if ref.noun == "" else ("amotion", "arest", "sit", "food", "perceive", "body"))
    verb, tails = w.deck("verb:" + cls).draw()
    group, tense = verb_group(w, verb, ref.agr)
    tail = w.fill(w.pick(tails), poss=ref.poss)
    b = Builder()
    r = w.rng.random()
    if r < 0.2 and tense:  # "yesterday , the cat sat ...": the phrase and the comma wait for the verb
        when, rel = when_phrase(b, w, tense)
        comma = b.add(",", "PUNCT", "punct")
        _, v = clause(b, ref.name, group, tail)
        b.link(when, v, rel)
        b.link(comma, v, "punct")
    else:
        _, v = clause(b, ref.name, group, tail)
        if r < 0.55 and tense:
            when, rel = when_phrase(b, w, tense)
            b.link(when, v, rel)
    return end(b, v, "clause")


def _copula_tree(w: Writer) -> Tree:
    b = Builder()
    r = w.rng.random()
    if r < 0.5:
        ref = _who(w)
        _, adj = copula(b, ref.name, ref.be_past if w.chance(0.7) else ref.be_now, _feeling(w),
                        w.one(("", "", "too")))
    else:
        food = w.word("fruit") if r < 0.75 else w.word("mass_food")
        _, adj = copula(b, "the " + food, "was", w.word("ftrait"))
    return end(b, adj, "copula")


def _relative_tree(w: Writer) -> Tree:
    ref = w.animal() if w.chance(0.6) else w.role()
    b = Builder()
    subj = noun_phrase(b, ref.name)
    that = b.add("that", "PRON", "pron")
    verb = w.deck("verb:perceive").draw()[0]
    if w.chance(0.5):  # the cat that anna fed: "that" is the object of the relative clause
        doer = w.person()
        inner_subj = noun_phrase(b, doer.name)
        inner = b.add(verb.ed, "VERB", "verb")
        b.link(inner_subj, inner, "nsubj")
        b.link(that, inner, "obj")
    else:  # the cat that chased the ball
        inner = b.add(w.pick(("chased", "found", "watched", "lost")), "VERB", "verb")
        b.link(that, inner, "nsubj")
        after_verb(b, inner, w.fill("the {toy}"))
    b.link(inner, subj, "acl:relcl")
    cop = b.add(ref.be_past, "AUX", "function")
    adj = b.add(_feeling(w), "ADJ", "describing")
    b.link(subj, adj, "nsubj")
    b.link(cop, adj, "cop")
    return end(b, adj, "relative")


def because(b: Builder, ref: Ref, group: str, tail: str, adjective: str, degree: str = "") -> int:
    """"<clause> because <pronoun> was <adjective>"; the pronoun's referent is recorded in `coref`."""
    subj, verb = clause(b, ref.name, group, tail)
    mark = b.add("because", "SCONJ", "sconj")
    pron_at = len(b.words)
    _, adj = copula(b, ref.subj, ref.be_past, adjective, degree)
    b.link(mark, adj, "mark")
    b.link(adj, verb, "advcl")
    b.coref.append((pron_at, subj))
    return verb


def _because_tree(w: Writer) -> Tree:
    ref = _who(w)
    cls = w.pick(("wear", "handle", "food", "cross", "go")) if ref.noun == "" else w.pick(("cross", "arest", "sit"))
    verb, tails = w.deck("verb:" + cls).draw()
    b = Builder()
    v = because(b, ref, verb.ed if w.chance(0.6) else f"did not {verb.base}", w.fill(w.pick(tails), poss=ref.poss),
                _feeling(w), w.one(("", "", "too")))
    return end(b, v, "because")


def and_then(b: Builder, ref: Ref, adjective: str, group: str, tail: str) -> int:
    """"<ref> was <adjective> and <pronoun> <verb> <tail>"."""
    subj, adj = copula(b, ref.name, ref.be_past, adjective)
    cc = b.add("and", "CCONJ", "cconj")
    pron_at = len(b.words)
    _, verb = clause(b, ref.subj, group, tail)
    b.link(cc, verb, "cc")
    b.link(verb, adj, "conj")
    b.coref.append((pron_at, subj))
    return adj


def _and_tree(w: Writer) -> Tree:
    ref = _who(w)
    cls = w.pick(("food", "handle", "read")) if ref.noun == "" else w.pick(("food", "arest", "amotion"))
    verb, tails = w.deck("verb:" + cls).draw()
    b = Builder()
    root = and_then(b, ref, _feeling(w), verb.ed, w.fill(w.pick(tails), poss=ref.poss))
    return end(b, root, "and")


def purpose(b: Builder, ref: Ref, group: str, town: str, purpose_text: str) -> int:
    """"<ref> went to the <town> to <purpose>": the purpose is an advcl with mark "to"."""
    _, verb = clause(b, ref.name, group, "to the " + town)
    mark = b.add("to", "PART", "part")
    first, *rest = purpose_text.split()
    inner = b.add(first, "VERB", "verb")
    b.link(mark, inner, "mark")
    if rest:
        after_verb(b, inner, " ".join(rest))
    b.link(inner, verb, "advcl")
    return verb


def _purpose_tree(w: Writer) -> Tree:
    ref = w.person()
    town = w.word("town")
    b = Builder()
    group = w.one(("went", "will go", "did not go")) if ref.agr == "sg" else w.one(("went", "will go", "go"))
    v = purpose(b, ref, group, town, w.fill(w.pick(TOWN[town]), poss=ref.poss))
    return end(b, v, "purpose")


def agreement(b: Builder, subject: Ref, places: list[str], be: str, adjective: str) -> int:
    """"<subject> <in the park> <near the trees> ... <be> <adjective>": each phrase modifies the noun before it
    (nmod); returns the adjective (the root)."""
    subj = head = noun_phrase(b, subject.name)
    for place in places:
        ((_, noun),) = chunks(b, place.split())
        b.link(noun, head, "nmod")
        head = noun
    cop = b.add(be, "AUX", "function")
    adj = b.add(adjective, "ADJ", "describing")
    b.link(subj, adj, "nsubj")
    b.link(cop, adj, "cop")
    return adj


def agreement_places(w: Writer, count: int, plural: bool) -> list[str]:
    """`count` prepositional phrases whose nouns are plural or singular as asked: "in the park"."""
    out = []
    for prep, category in w.rng.sample(_ATTRACTOR_PLACES, count):
        out.append(f"{prep} the {w.word(category, plural=plural)}")
    return out


def agreement_subject(w: Writer, plural: bool) -> Ref:
    """A subject for an agreement pair: an animal or a role, singular or plural, never a noun whose two numbers
    are spelled alike ("the sheep was/were" are both right)."""
    while True:
        noun = w.deck("animal:pl").draw() if w.chance(0.5) else w.deck("role:pl").draw()
        if noun.pl != noun.sg:
            break
    if noun.sg in {n.sg for n in CATEGORIES["animal"]}:
        return animal_ref(noun, plural)
    return named("the " + (noun.pl if plural else noun.sg), "n", "pl" if plural else "sg")


def _agreement_tree(w: Writer) -> Tree:
    plural = w.chance(0.5)
    ref = agreement_subject(w, plural)
    b = Builder()
    places = agreement_places(w, w.one((0, 1, 1, 2)), w.chance(0.5) != plural)
    root = agreement(b, ref, places, ref.be_past, _feeling(w))
    return end(b, root, "agreement")


_MIX = ((_clause_tree, 0.40), (_copula_tree, 0.10), (_relative_tree, 0.10), (_because_tree, 0.12),
        (_and_tree, 0.08), (_purpose_tree, 0.08), (_agreement_tree, 0.12))
MAX_TREES = 20_000


def treebank(n: int, seed: int = 0) -> list[Tree]:
    """`n` story-world sentences with their trees; the same seed always gives the same trees."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_TREES:
        raise InputError(f"the number of sentences must be a whole number from 0 to {MAX_TREES:,}; got {n!r}")
    rng = random.Random(seed)
    w = Writer(rng)
    makers, weights = zip(*_MIX)
    out = []
    for _ in range(n):
        w.new_story()
        out.append(rng.choices(makers, weights)[0](w))
    return out


def probe_trees() -> dict[str, Tree]:
    """The Time-lapse probe sentences (corpus/probes.py), written by the same rules: text -> tree."""
    animal, boy, girl = named("the animal", "n", noun="animal"), named("the boy", "m"), named("the girl", "f")
    dog = animal_ref(Noun("dog", "dogs"), False)
    made = []
    for build, root_of in (
        (lambda b: clause(b, "the cat", "sat", "on the mat")[1], "clause"),
        (lambda b: because(b, animal, "did not cross", "the street", "tired", "too"), "because"),
        (lambda b: because(b, boy, "wore", "a coat", "cold"), "because"),
        (lambda b: because(b, girl, "read", "a book", "bored"), "because"),
        (lambda b: purpose(b, I, "went", "bank", "deposit money"), "purpose"),
        (lambda b: and_then(b, dog, "happy", "ate", "the fish"), "and"),
    ):
        b = Builder()
        made.append(end(b, build(b), root_of))
    return {t.text: t for t in made}
