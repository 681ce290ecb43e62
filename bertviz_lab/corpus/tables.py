"""The lexicon turned into lookup tables: word categories, verb classes, vocabulary.

Everything here is computed once at import from the hand-written lists in
`lexicon` and `phrases`; the generator then only draws from these tuples.
"""

from __future__ import annotations

import re

from bertviz_lab.corpus import lexicon as L
from bertviz_lab.corpus import phrases as P
from bertviz_lab.corpus.morph import Noun, Verb, parse_nouns, parse_verbs

_SLOT = re.compile(r"\{[^}]*\}")


def _words(*specs: str) -> tuple[str, ...]:
    return tuple(" ".join(specs).split())


def _nouns(*specs: str) -> tuple[Noun, ...]:
    return parse_nouns(" ".join(specs))


def _mass(spec: str) -> tuple[Noun, ...]:
    return parse_nouns(spec, countable=False)


def _feed() -> tuple[Noun, ...]:
    """Everything some animal eats, as mass nouns ("the cat ate fish")."""
    return _mass(" ".join(sorted({f for foods in L.ANIMAL_FOOD.values() for f in foods.split()})))


# Category name (as used in template slots) -> its words: Nouns, or plain strings.
CATEGORIES: dict[str, tuple] = {
    # animals
    "pet": _nouns(L.PETS), "farm": _nouns(L.FARM_ANIMALS), "wild": _nouns(L.WILD_ANIMALS),
    "water": _nouns(L.WATER_ANIMALS), "small": _nouns(L.SMALL_ANIMALS),
    "animal": _nouns(L.PETS, L.FARM_ANIMALS, L.WILD_ANIMALS, L.WATER_ANIMALS, L.SMALL_ANIMALS,
                     "animal"),
    "feed": _feed(), "abody": _mass(L.ANIMAL_BODY), "apair": _nouns(L.ANIMAL_PAIRS),
    # people
    "male": _words(L.MALE_NAMES), "female": _words(L.FEMALE_NAMES),
    "man": _nouns(L.MEN), "woman": _nouns(L.WOMEN), "job": _nouns(L.JOBS),
    "role": _nouns(L.JOBS, L.OTHER_ROLES), "kin": _words(L.KIN),
    "hbody": _mass(L.HUMAN_BODY), "hpair": _nouns(L.HUMAN_PAIRS),
    # things
    "seat": _nouns(L.SEATS) + _mass(L.FIXED_SEATS), "room": _mass(L.ROOMS),
    "kitchenware": _nouns(L.KITCHENWARE),
    "thing": _nouns(L.THINGS), "paper": _nouns(L.PAPERS), "readable": _nouns(L.READABLE),
    "toy": _nouns(L.TOYS), "openable": _nouns(L.OPENABLES), "clothes": _nouns(L.CLOTHES),
    "vehicle": _nouns(L.ROAD_VEHICLES), "trip": _nouns(L.TRIP_VEHICLES),
    "ride": _words(L.RIDES), "instrument": _nouns(L.INSTRUMENTS), "sport": _words(L.SPORTS),
    "company": _words(L.COMPANIES), "device": _nouns(L.DEVICES),
    # food
    "fruit": _nouns(L.FRUIT), "dish": _nouns(L.DISHES), "baked": _nouns(L.BAKED),
    "mass_food": _words(L.MASS_FOOD), "drink": _words(L.DRINKS), "meal": _words(L.MEALS),
    # places and nature
    "nature": _nouns(L.NATURE), "town": _nouns(" ".join(P.TOWN)),
    # "tripcity" is a second deck over the cities, so travel stories cycle through all
    "city": tuple(L.CITIES), "tripcity": tuple(L.CITIES),
    "tree": _nouns(L.TREES), "flower": _nouns(L.FLOWERS), "weather": _words(L.WEATHER_MASS),
    # describing words
    "feeling": _words(L.FEELINGS), "atrait": _words(L.ANIMAL_TRAITS),
    "ptrait": _words(L.PERSON_TRAITS), "ttrait": _words(L.THING_TRAITS),
    "ftrait": _words(L.FOOD_TRAITS), "placetrait": _words(L.PLACE_TRAITS),
    "citytrait": _words(L.CITY_TRAITS), "dtrait": _words(L.DEVICE_TRAITS),
    "watertrait": _words(L.WATER_TRAITS), "sky": _words(L.SKY_TRAITS),
    "temp": _words(L.TEMPERATURE_TRAITS), "drysky": _words(L.DRY_TRAITS),
    "wtrait": _words(L.SKY_TRAITS, L.TEMPERATURE_TRAITS, L.NICE_WEATHER),
    "color": _words(L.COLORS), "flowercolor": _words(L.FLOWER_COLORS),
    "leafcolor": _words(L.LEAF_COLORS), "manner": _words(L.MANNER), "habit": _words(L.HABIT),
    # time and numbers
    "day": _nouns(L.DAYS), "month": _words(L.MONTHS), "season": _words(L.SEASONS),
    "daypart": _words(L.DAY_PARTS), "num": _words(L.NUMBERS), "field": L.FIELDS,
}

_VERB_CLASSES = {
    "motion": P.MOTION, "amotion": P.ANIMAL_MOTION, "rest": P.REST, "arest": P.ANIMAL_REST,
    "sit": P.SIT, "food": P.FOOD, "drink": P.DRINK, "handle": P.HANDLE, "open": P.OPEN,
    "wear": P.WEAR, "perceive": P.PERCEIVE, "study": P.STUDY, "read": P.READ, "tech": P.TECH,
    "money": P.MONEY, "sport": P.SPORT, "music": P.MUSIC, "compete": P.COMPETE, "hit": P.HIT,
    "garden": P.GARDEN, "body": P.BODY, "selfcare": P.HUMAN_BODY, "travel": P.TRAVEL,
    "ride": P.RIDE, "talk": P.TALK, "light": P.LIGHT, "farmwork": P.FARM_WORK, "go": P.GO,
    "cross": P.CROSS,
}

# Verb class name -> (verb, templates of what may follow it) pairs.
VERBS: dict[str, tuple[tuple[Verb, tuple[str, ...]], ...]] = {
    name: tuple((parse_verbs(spec)[0], tails) for spec, tails in table.items())
    for name, table in _VERB_CLASSES.items()
}
# Animal sound verb -> (the verb, the animals that make that sound).
SOUNDS: dict[str, tuple[Verb, tuple[str, ...]]] = {
    base: (parse_verbs(base)[0], _words(animals)) for base, animals in L.ANIMAL_SOUNDS.items()
}
# Any verb by its base form, for sentences that need one particular verb.
VERB: dict[str, Verb] = {verb.base: verb for pairs in VERBS.values() for verb, _ in pairs}
VERB.update({verb.base: verb for verb, _ in SOUNDS.values()})
VERB.update({verb.base: verb for verb in parse_verbs(P.WEATHER_VERBS)})

ANIMAL: dict[str, Noun] = {noun.sg: noun for noun in CATEGORIES["animal"]}
EATS: dict[str, tuple[str, ...]] = {a: _words(f) for a, f in L.ANIMAL_FOOD.items()}
SOUNDS_OF: dict[str, tuple[Verb, ...]] = {
    animal: tuple(verb for verb, animals in SOUNDS.values() if animal in animals)
    for animal in ANIMAL
}
COUNTRY_OF: dict[str, str] = dict(L.CITIES)


def lexicon_words() -> set[str]:
    """Every word a category, a verb or a phrase table can put into a sentence."""
    words: set[str] = set()
    for items in CATEGORIES.values():
        for item in items:
            if isinstance(item, Noun):
                words.update((item.sg, item.pl) if item.pl else (item.sg,))
            else:
                words.update(item.split())
    for verb in VERB.values():
        words.update((verb.base, verb.s, verb.ed, verb.ing))
    for country in COUNTRY_OF.values():
        words.update(country.split())
    templates = [t for pairs in VERBS.values() for _, tails in pairs for t in tails]
    templates += [t for purposes in P.TOWN.values() for t in purposes]
    for template in templates:
        words.update(_SLOT.sub(" ", template).split())
    return words
