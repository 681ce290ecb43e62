"""The story generator: which story comes next, the seed sentences, the vocabulary.

Story kinds are drawn from a shuffled deck, so every kind comes up once per
round; now and then a seed story opens with one of `SEED_SENTENCES`, so a model
trained on the stream sees the class's example sentences in their own world.
"""

from __future__ import annotations

import random
from functools import lru_cache

from bertviz_lab.corpus import stories_animals as A
from bertviz_lab.corpus import stories_outdoor as O
from bertviz_lab.corpus import stories_town as T
from bertviz_lab.corpus.grammar import I, Writer, named
from bertviz_lab.corpus.morph import Deck
from bertviz_lab.corpus.tables import lexicon_words
from bertviz_lab.errors import InputError

_ANIMAL = named("the animal", "n", noun="animal")
# Each seed sentence with the story it opens (or, as `second`, continues).
_SEED_STORIES = (
    ("the cat sat on the mat.",
     lambda w, s: A.pet_story(w, named("the cat", "n", noun="cat"), first=s)),
    ("it was a warm afternoon.", lambda w, s: A.pet_story(w, second=s)),
    ("the food was delicious today.", lambda w, s: T.meal_story(w, second=s)),
    ("i love natural language processing.", lambda w, s: T.study_story(w, I, first=s)),
    ("how is the weather today?", lambda w, s: O.weather_story(w, first=s)),
    ("will it rain in beijing today?", lambda w, s: O.weather_story(w, "beijing", first=s)),
    ("i went to the bank to deposit money.", lambda w, s: T.bank_story(w, I, first=s)),
    ("the animal did not cross the street because it was too tired.",
     lambda w, s: A.street_story(w, _ANIMAL, first=s)),
    ("the animal that did not cross the street was tired.",
     lambda w, s: A.street_story(w, _ANIMAL, first=s)),
    ("i took a walk next to the bank yesterday.", lambda w, s: O.river_story(w, I, first=s)),
    ("i ate an apple.", lambda w, s: T.meal_story(w, I, first=s)),
    ("apple released a new device.", lambda w, s: T.tech_story(w, "apple", first=s)),
    ("the dog sat on the mat.",
     lambda w, s: A.pet_story(w, named("the dog", "n", noun="dog"), first=s)),
)
# The class's example sentences; each one appears verbatim in the generated stories.
SEED_SENTENCES: tuple[str, ...] = tuple(sentence for sentence, _ in _SEED_STORIES)
# Story kinds; a kind listed twice comes up twice per round.
_KINDS = (A.pet_story, A.pet_story, A.farm_story, A.zoo_story, A.street_story, A.night_story,
          T.bank_story, T.bank_story, T.errand_story, T.errand_story, T.meal_story,
          T.meal_story, T.tech_story, T.study_story, T.study_story, O.river_story, O.river_story,
          O.weather_story, O.weather_story, O.travel_story, O.travel_story, O.sports_story,
          O.camping_story, O.garden_story)
_SEED_RATE = 0.08  # about one story in twelve replays a seed sentence

# Words that only the story templates themselves contribute (the, was, because, ...).
GLUE = frozenset("""
after again ago all am and are asked balcony barn bats be because become branch brightly by
came camping can caught city clouds company day days degrees did do does down during earlier
early easy every fell first fisherman fishing flowed food form gave had has he helmet her
him his home how i is it its last late later leaf line lived looked lot many me million
minutes moment moon most much my next night no noon not now one our out outside over put
racket rainbow right rough screen shade she signed sky soon stars started storm subject sun
temperature tent that their them there they this today tomorrow tonight too toward turned
upside us was we weather week weekend were what where which why will year yes yesterday you
""".split())


class StoryGenerator:
    """An endless, reproducible stream of short stories from one seed."""

    def __init__(self, seed: int = 0):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InputError(f"the seed must be a whole number; got {seed!r}")
        self._rng = random.Random(seed)  # private: never disturbs or reads the global RNG
        self._writer = Writer(self._rng)
        self._kinds = Deck(_KINDS, self._rng)
        self._seeds = Deck(_SEED_STORIES, self._rng)

    def story(self) -> list[str]:
        """One document: a list of 3-8 sentences about one protagonist or place."""
        self._writer.new_story()
        if self._rng.random() < _SEED_RATE:
            sentence, tell = self._seeds.draw()
            return tell(self._writer, sentence)
        return self._kinds.draw()(self._writer)

    def stories(self, n: int) -> list[list[str]]:
        """The next `n` stories."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"the number of stories must be a whole number of at least 0; "
                             f"got {n!r}")
        return [self.story() for _ in range(n)]


def generate_documents(n: int, seed: int = 0) -> list[list[str]]:
    """`n` stories from a fresh generator: the same seed always gives the same stories."""
    return StoryGenerator(seed).stories(n)


@lru_cache(maxsize=1)
def _vocabulary() -> tuple[str, ...]:
    return tuple(sorted(lexicon_words() | GLUE))


def vocabulary() -> list[str]:
    """Sorted distinct words the grammar can emit (punctuation excluded)."""
    return list(_vocabulary())
