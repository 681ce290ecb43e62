"""The lexicon turned into lookup tables: word categories, verb classes, vocabulary.

Everything here is computed once at import from the hand-written lists in
`lexicon` and `phrases`; the generator then only draws from these tuples.
"""

from __future__ import annotations

import re

from bertviz_lab.corpus import lexicon
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
    return _mass(" ".join(sorted({f for foods in lexicon.ANIMAL_FOOD.values() for f in foods.split()})))


# Category name (as used in template slots) -> its words: Nouns, or plain strings.
CATEGORIES: dict[str, tuple] = {
    # animals
    "pet": _nouns(lexicon.PETS), "farm": _nouns(lexicon.FARM_ANIMALS), "wild": _nouns(lexicon.WILD_ANIMALS),
    "water": _nouns(lexicon.WATER_ANIMALS), "small": _nouns(lexicon.SMALL_ANIMALS),
    "animal": _nouns(lexicon.PETS, lexicon.FARM_ANIMALS, lexicon.WILD_ANIMALS, lexicon.WATER_ANIMALS, lexicon.SMALL_ANIMALS,
                     "animal"),
    "feed": _feed(), "abody": _mass(lexicon.ANIMAL_BODY), "apair": _nouns(lexicon.ANIMAL_PAIRS),
    # people
    "male": _words(lexicon.MALE_NAMES), "female": _words(lexicon.FEMALE_NAMES),
    "man": _nouns(lexicon.MEN), "woman": _nouns(lexicon.WOMEN), "job": _nouns(lexicon.JOBS),
    "role": _nouns(lexicon.JOBS, lexicon.OTHER_ROLES), "kin": _words(lexicon.KIN),
    "hbody": _mass(lexicon.HUMAN_BODY), "hpair": _nouns(lexicon.HUMAN_PAIRS),
    # things
    "seat": _nouns(lexicon.SEATS) + _mass(lexicon.FIXED_SEATS), "room": _mass(lexicon.ROOMS),
    "kitchenware": _nouns(lexicon.KITCHENWARE),
    "thing": _nouns(lexicon.THINGS), "paper": _nouns(lexicon.PAPERS), "readable": _nouns(lexicon.READABLE),
    "toy": _nouns(lexicon.TOYS), "openable": _nouns(lexicon.OPENABLES), "clothes": _nouns(lexicon.CLOTHES),
    "vehicle": _nouns(lexicon.ROAD_VEHICLES), "trip": _nouns(lexicon.TRIP_VEHICLES),
    "ride": _words(lexicon.RIDES), "instrument": _nouns(lexicon.INSTRUMENTS), "sport": _words(lexicon.SPORTS),
    "company": _words(lexicon.COMPANIES), "device": _nouns(lexicon.DEVICES),
    # food
    "fruit": _nouns(lexicon.FRUIT), "dish": _nouns(lexicon.DISHES), "baked": _nouns(lexicon.BAKED),
    "mass_food": _words(lexicon.MASS_FOOD), "drink": _words(lexicon.DRINKS), "meal": _words(lexicon.MEALS),
    # places and nature
    "nature": _nouns(lexicon.NATURE), "town": _nouns(" ".join(P.TOWN)),
    # "tripcity" is a second deck over the cities, so travel stories cycle through all
    "city": tuple(lexicon.CITIES), "tripcity": tuple(lexicon.CITIES),
    "tree": _nouns(lexicon.TREES), "flower": _nouns(lexicon.FLOWERS), "weather": _words(lexicon.WEATHER_MASS),
    # describing words
    "feeling": _words(lexicon.FEELINGS), "atrait": _words(lexicon.ANIMAL_TRAITS),
    "ptrait": _words(lexicon.PERSON_TRAITS), "ttrait": _words(lexicon.THING_TRAITS),
    "ftrait": _words(lexicon.FOOD_TRAITS), "placetrait": _words(lexicon.PLACE_TRAITS),
    "citytrait": _words(lexicon.CITY_TRAITS), "dtrait": _words(lexicon.DEVICE_TRAITS),
    "watertrait": _words(lexicon.WATER_TRAITS), "sky": _words(lexicon.SKY_TRAITS),
    "temp": _words(lexicon.TEMPERATURE_TRAITS), "drysky": _words(lexicon.DRY_TRAITS),
    "wtrait": _words(lexicon.SKY_TRAITS, lexicon.TEMPERATURE_TRAITS, lexicon.NICE_WEATHER),
    "color": _words(lexicon.COLORS), "flowercolor": _words(lexicon.FLOWER_COLORS),
    "leafcolor": _words(lexicon.LEAF_COLORS), "manner": _words(lexicon.MANNER), "habit": _words(lexicon.HABIT),
    # time and numbers
    "day": _nouns(lexicon.DAYS), "month": _words(lexicon.MONTHS), "season": _words(lexicon.SEASONS),
    "daypart": _words(lexicon.DAY_PARTS), "num": _words(lexicon.NUMBERS), "field": lexicon.FIELDS,
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
    base: (parse_verbs(base)[0], _words(animals)) for base, animals in lexicon.ANIMAL_SOUNDS.items()
}
# Any verb by its base form, for sentences that need one particular verb.
VERB: dict[str, Verb] = {verb.base: verb for pairs in VERBS.values() for verb, _ in pairs}
VERB.update({verb.base: verb for verb, _ in SOUNDS.values()})
VERB.update({verb.base: verb for verb in parse_verbs(P.WEATHER_VERBS)})

ANIMAL: dict[str, Noun] = {noun.sg: noun for noun in CATEGORIES["animal"]}
EATS: dict[str, tuple[str, ...]] = {a: _words(f) for a, f in lexicon.ANIMAL_FOOD.items()}
SOUNDS_OF: dict[str, tuple[Verb, ...]] = {
    animal: tuple(verb for verb, animals in SOUNDS.values() if animal in animals)
    for animal in ANIMAL
}
COUNTRY_OF: dict[str, str] = dict(lexicon.CITIES)


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
