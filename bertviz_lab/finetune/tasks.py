"""Downstream tasks: the built-in ones, written by the story generator that knows the answers.

The BERT tutorial (seed text 002): "first do general pretraining on massive text, then fine-tune the same
base model for different tasks". Each built-in task is one of the three shapes fine-tuning takes:

- acceptability (one sentence, like CoLA): a corpus sentence as written ("ok"), or the same
  sentence broken ("broken") by swapping a verb's agreement (was <-> were, is <-> are, does <-> do,
  has <-> have) or a determiner with the word after it ("the cat sat" -> "cat the sat").
- coherence (a pair, like NSP): text A is one or two sentences of a story, and sentence B either
  comes next in that story ("follows") or is from another story that never has A's sentences
  ("unrelated").
- entities (a tag per word, like named-entity recognition): each word's group in the generator's
  lexicon (PERSON, ANIMAL, FOOD, PLACE, TIME, ORG) or O. "apple" is FOOD or ORG by its sentence
  (`corpus.senses`); sentences with the few words the lexicon lists in two groups, or also as a
  verb (fish, cook, march, water, milk, mice), are left out, so every tag is the generator's truth.

Splits are fixed: train, dev and test come from different story seeds, and a dev or test
example never repeats a train one. Everything is seeded: the same task is the same every time.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from bertviz_lab.corpus import StoryGenerator
from bertviz_lab.corpus.generator import GLUE
from bertviz_lab.corpus.morph import Noun
from bertviz_lab.corpus.senses import sense_of
from bertviz_lab.corpus.tables import CATEGORIES, COUNTRY_OF, VERB
from bertviz_lab.errors import InputError

SEQUENCE, PAIR, TOKEN = "sequence", "pair", "token"  # one text, two texts, a tag per word
KIND_NAMES = {SEQUENCE: "one sentence", PAIR: "a sentence pair", TOKEN: "a tag per word"}
SPLIT_SIZES = {"train": 2000, "dev": 400, "test": 400}
SPLIT_SEEDS = {"train": 7001, "dev": 7002, "test": 7003}
O_TAG = "O"
CONTEXT = 2  # coherence: text A is the story so far, up to this many sentences (as NSP's segment A)


@dataclass(frozen=True)
class Example:
    text: str  # the sentence; for a token task, its words separated by single spaces
    text_b: str | None = None  # the second sentence of a pair task
    label: str | None = None  # sequence and pair tasks
    tags: tuple[str, ...] | None = None  # token tasks: one tag per word of text.split(" ")


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # SEQUENCE, PAIR or TOKEN
    labels: tuple[str, ...]  # class names (tags for a token task), in classifier order
    description: str  # one line
    train: tuple[Example, ...]
    dev: tuple[Example, ...]
    test: tuple[Example, ...] = ()
    source: str = "built-in"  # or the CSV file's name

    @property
    def level(self) -> str:
        """What the classifier reads: the whole input ("sequence") or each token ("token")."""
        return TOKEN if self.kind == TOKEN else SEQUENCE


# --- acceptability --------------------------------------------------------------------------------
AGREEMENT = {"was": "were", "were": "was", "is": "are", "are": "is", "does": "do", "do": "does",
             "has": "have", "have": "has"}
DETERMINERS = frozenset("the a an my his her their our your this some".split())
_WORD = re.compile(r"[a-z]+")


def _break(sentence: str, rng: random.Random) -> str | None:
    """The sentence made ungrammatical by one agreement swap or one determiner swap (None if it has neither)."""
    words = sentence.split(" ")
    bare = [_WORD.fullmatch(w) is not None for w in words]
    agreement = [i for i, w in enumerate(words) if bare[i] and w in AGREEMENT]
    order = [i for i, w in enumerate(words[:-1]) if bare[i] and bare[i + 1] and w in DETERMINERS
             and words[i + 1] not in DETERMINERS]
    choices = [("agreement", i) for i in agreement] + [("order", i) for i in order]
    if not choices:
        return None
    how, i = rng.choice(choices)
    if how == "agreement":
        words[i] = AGREEMENT[words[i]]
    else:
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _acceptability(split: str, n: int, used: set) -> list[Example]:
    rng = random.Random(SPLIT_SEEDS[split])
    out = []
    for sentence in _sentences(split):
        if sentence in used:
            continue
        if len(out) % 2:  # alternate: half ok, half broken
            broken = _break(sentence, rng)
            if broken is None or broken in _all_sentences() or broken in used:
                continue
            used.update((sentence, broken))
            out.append(Example(broken, label="broken"))
        else:
            used.add(sentence)
            out.append(Example(sentence, label="ok"))
        if len(out) == n:
            break
    return out


# --- coherence ------------------------------------------------------------------------------------
def _coherence(split: str, n: int, used: set) -> list[Example]:
    rng = random.Random(SPLIT_SEEDS[split])
    stories = [s for s in _stories(split) if len(s) >= 2]
    out = []
    for k, story in enumerate(stories):
        i = rng.randrange(len(story) - 1)
        context = story[max(0, i + 1 - CONTEXT):i + 1]
        a = " ".join(context)
        if len(out) % 2 == 0:
            example = Example(a, story[i + 1], label="follows")
        else:
            other = stories[(k + 1 + rng.randrange(len(stories) - 1)) % len(stories)]
            b = rng.choice(other)
            if any((s, b) in _together() for s in context):  # some story has both: "unrelated" would not be true
                continue
            example = Example(a, b, label="unrelated")
        if (example.text, example.text_b) in used:
            continue
        used.add((example.text, example.text_b))
        out.append(example)
        if len(out) == n:
            break
    return out


# --- entities -------------------------------------------------------------------------------------
ENTITY_GROUPS = {"PERSON": "male female man woman job role kin", "ANIMAL": "animal",
                 "FOOD": "fruit dish baked mass_food drink meal feed", "PLACE": "city town nature room",
                 "TIME": "day month season daypart", "ORG": "company"}
ENTITY_TAGS = (O_TAG, *ENTITY_GROUPS)
SENSE_TAGS = {("apple", "fruit"): "FOOD", ("apple", "company"): "ORG"}  # words whose tag is their sense


@lru_cache(maxsize=1)
def entity_lexicon() -> tuple[dict[str, str], frozenset[str]]:
    """(word -> tag for every word of one group, words in two groups or also a verb or glue word)."""
    groups: dict[str, set[str]] = {}
    for tag, names in ENTITY_GROUPS.items():
        for name in names.split():
            for item in CATEGORIES[name]:
                words = (item.sg, item.pl) if isinstance(item, Noun) else tuple(item.split())
                for word in words:
                    if word:
                        groups.setdefault(word, set()).add(tag)
    for country in COUNTRY_OF.values():  # "the netherlands", "new zealand": see `entity_tags`
        if " " not in country:
            groups.setdefault(country, set()).add("PLACE")
    verbs = {form for v in VERB.values() for form in (v.base, v.s, v.ed, v.ing)}
    ambiguous = frozenset(w for w, tags in groups.items() if len(tags) > 1 or w in verbs or w in GLUE)
    return {w: next(iter(t)) for w, t in groups.items() if w not in ambiguous}, ambiguous


_PHRASES = tuple(c.split() for c in COUNTRY_OF.values() if " " in c)


def split_punctuation(sentence: str) -> list[str]:
    """'she ate a pie, then slept.' -> ['she', 'ate', 'a', 'pie', ',', 'then', 'slept', '.']"""
    return re.findall(r"[a-z0-9']+|[^\sa-z0-9']", sentence)


def entity_tags(sentence: str) -> tuple[list[str], list[str]] | None:
    """(words, tags) of one corpus sentence, or None if a word's group depends on more than the lexicon knows."""
    lexicon, ambiguous = entity_lexicon()
    words = split_punctuation(sentence)
    tags = []
    for i, word in enumerate(words):
        if word not in DETERMINERS and any(words[i - k:i - k + len(c)] == c for c in _PHRASES
                                           for k in range(len(c)) if i >= k):
            tags.append("PLACE")  # a word of a country's name: "new" of "new zealand" (not "a new bag")
        elif word in ambiguous:
            sense = sense_of(word, sentence)
            tag = SENSE_TAGS.get((word, sense))
            if tag is None:
                return None
            tags.append(tag)
        else:
            tags.append(lexicon.get(word, O_TAG))
    return words, tags


def _entities(split: str, n: int, used: set) -> list[Example]:
    out = []
    for sentence in _sentences(split):
        tagged = entity_tags(sentence) if sentence not in used else None
        if tagged is None:
            continue
        used.add(sentence)
        words, tags = tagged
        out.append(Example(" ".join(words), tags=tuple(tags)))
        if len(out) == n:
            break
    return out


# --- the registry ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Builtin:
    """How a built-in task is made: what `builtin` reads to build its `Task`."""
    kind: str  # SEQUENCE, PAIR or TOKEN
    labels: tuple[str, ...]  # class names (tags for a token task), in classifier order
    make: Callable[[str, int, set], list[Example]]  # (split, examples wanted, sentences used so far) -> examples
    description: str  # one line


BUILTIN = {
    "acceptability": Builtin(SEQUENCE, ("ok", "broken"), _acceptability,
                             "Is the sentence grammatical? Half are broken by one agreement or word-order swap "
                             "(like CoLA)."),
    "coherence": Builtin(PAIR, ("follows", "unrelated"), _coherence,
                         "Does sentence B continue the story that text A begins, or come from another story? "
                         "(like NSP)"),
    "entities": Builtin(TOKEN, ENTITY_TAGS, _entities,
                        "Tag each word: person, animal, food, place, time, company (ORG) or O (like NER)."),
}


@lru_cache(maxsize=len(BUILTIN))
def builtin(name: str) -> Task:
    """A built-in task by name, with its fixed train, dev and test splits."""
    if name not in BUILTIN:
        raise InputError(f"unknown task {str(name)[:40]!r}: the built-in tasks are {', '.join(BUILTIN)}")
    recipe = BUILTIN[name]
    used: set = set()  # sentences (pairs) a split has drawn on: no later split uses them again
    splits = [tuple(recipe.make(split, SPLIT_SIZES[split], used)) for split in ("train", "dev", "test")]
    return Task(name, recipe.kind, recipe.labels, recipe.description, *splits)


@lru_cache(maxsize=len(SPLIT_SEEDS))
def _stories(split: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(s) for s in StoryGenerator(SPLIT_SEEDS[split]).stories(4000))


def _sentences(split: str) -> list[str]:
    """The split's sentences in story order, each once."""
    return list(dict.fromkeys(s for story in _stories(split) for s in story))


@lru_cache(maxsize=1)
def _together() -> frozenset[tuple[str, str]]:
    """Every (A, B) of two sentences that share a story, in any split."""
    return frozenset((a, b) for split in SPLIT_SEEDS for story in _stories(split) for a in story for b in story)


@lru_cache(maxsize=1)
def _all_sentences() -> frozenset[str]:
    """Every sentence of every split's stories: a 'broken' sentence found here is really a good one."""
    return frozenset(s for split in SPLIT_SEEDS for story in _stories(split) for s in story)
