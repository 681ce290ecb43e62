"""The lexicon turned into lookup tables: word categories, verb classes, vocabulary.

Everything here is computed once at import from the hand-written lists in
`lexicon` and `phrases`; the generator then only draws from these tuples.
"""

from __future__ import annotations

import re

from bertviz_lab.corpus import lexicon as L
from bertviz_lab.corpus import phrases as P
from bertviz_lab.corpus.morph import Noun, Verb, parse_nouns, parse_verbs


def _words(spec: str) -> tuple[str, ...]:
    return tuple(spec.split())


def _feed() -> tuple[Noun, ...]:
    """Everything some animal eats, as mass nouns ("the cat ate fish")."""
    names = sorted({food for foods in L.ANIMAL_FOOD.values() for food in foods.split()})
    return tuple(Noun(name, None) for name in names)


_ANIMAL_SPECS = (L.PETS, L.FARM_ANIMALS, L.WILD_ANIMALS, L.WATER_ANIMALS, L.SMALL_ANIMALS)

# Category name (as used in template slots) -> its words.
CATEGORIES: dict[str, tuple] = {
    "pet": parse_nouns(L.PETS), "farm": parse_nouns(L.FARM_ANIMALS),
    "wild": parse_nouns(L.WILD_ANIMALS), "water": parse_nouns(L.WATER_ANIMALS),
    "small": parse_nouns(L.SMALL_ANIMALS), "abody": parse_nouns(L.ANIMAL_BODY, countable=False),
    "apair": parse_nouns(L.ANIMAL_PAIRS),
    "animal": parse_nouns(" ".join(_ANIMAL_SPECS) + " animal"),
    "feed": _feed(),
    "male": _words(L.MALE_NAMES), "female": _words(L.FEMALE_NAMES),
    "man": parse_nouns(L.MEN), "woman": parse_nouns(L.WOMEN), "role": parse_nouns(L.JOBS + " " + L.OTHER_ROLES),
    "job": parse_nouns(L.JOBS),
    "kin": _words(L.KIN), "hbody": parse_nouns(L.HUMAN_BODY, countable=False),
    "hpair": parse_nouns(L.HUMAN_PAIRS),
    "seat": parse_nouns(L.SEATS), "room": parse_nouns(L.ROOMS, countable=False),
    "kitchenware": parse_nouns(L.KITCHENWARE), "thing": parse_nouns(L.THINGS),
    "paper": parse_nouns(L.PAPERS), "toy": parse_nouns(L.TOYS),
    "openable": parse_nouns(L.OPENABLES), "clothes": parse_nouns(L.CLOTHES),
    "vehicle": parse_nouns(L.ROAD_VEHICLES), "trip": parse_nouns(L.TRIP_VEHICLES),
    "ride": _words(L.RIDES), "readable": parse_nouns(L.READABLE), "baked": parse_nouns(L.BAKED),
    "flowercolor": _words(L.FLOWER_COLORS), "leafcolor": _words(L.LEAF_COLORS),
    "instrument": parse_nouns(L.INSTRUMENTS), "sport": _words(L.SPORTS),
    "company": _words(L.COMPANIES), "device": parse_nouns(L.DEVICES),
    "fruit": parse_nouns(L.FRUIT), "dish": parse_nouns(L.DISHES),
    "mass_food": _words(L.MASS_FOOD), "drink": _words(L.DRINKS), "meal": _words(L.MEALS),
    "nature": parse_nouns(L.NATURE), "town": parse_nouns(" ".join(P.TOWN)),
    "city": tuple(L.CITIES), "tripcity": tuple(L.CITIES), "tree": parse_nouns(P.TREES), "flower": parse_nouns(P.FLOWERS),
    "feeling": _words(L.FEELINGS), "atrait": _words(L.ANIMAL_TRAITS),
    "ptrait": _words(L.PERSON_TRAITS), "ttrait": _words(L.THING_TRAITS),
    "ftrait": _words(L.FOOD_TRAITS), "sky": _words(L.SKY_TRAITS),
    "temp": _words(L.TEMPERATURE_TRAITS), "wtrait": _words(" ".join((L.SKY_TRAITS, L.TEMPERATURE_TRAITS, L.NICE_WEATHER))),
    "drysky": _words(L.DRY_TRAITS),
    "placetrait": _words(L.PLACE_TRAITS), "dtrait": _words(L.DEVICE_TRAITS),
    "citytrait": _words(L.CITY_TRAITS),
    "watertrait": _words(P.WATER_TRAITS), "weather": _words(P.WEATHER_MASS),
    "color": _words(L.COLORS), "manner": _words(L.MANNER), "habit": _words(L.HABIT),
    "day": parse_nouns(L.DAYS), "month": _words(L.MONTHS), "season": _words(L.SEASONS),
    "daypart": _words(L.DAY_PARTS), "num": _words(L.NUMBERS), "field": P.FIELDS,
}

_VERB_CLASSES = {
    "motion": P.MOTION, "rest": P.REST, "sit": P.SIT, "food": P.FOOD, "drink": P.DRINK,
    "handle": P.HANDLE, "open": P.OPEN, "wear": P.WEAR, "perceive": P.PERCEIVE,
    "study": P.STUDY, "read": P.READ, "tech": P.TECH, "money": P.MONEY, "sport": P.SPORT,
    "music": P.MUSIC, "compete": P.COMPETE, "hit": P.HIT, "garden": P.GARDEN, "body": P.BODY,
    "selfcare": P.HUMAN_BODY,
    "travel": P.TRAVEL, "ride": P.RIDE, "talk": P.TALK, "light": P.LIGHT,
    "farmwork": P.FARM_WORK, "go": P.GO,
    "amotion": P.ANIMAL_MOTION, "arest": P.ANIMAL_REST, "cross": P.CROSS, "weather": P.WEATHER, "sun": P.SUN,
    "wind": P.WIND, "freeze": P.FREEZE,
}


def _verb_class(spec: dict[str, tuple[str, ...]]) -> tuple[tuple[Verb, tuple[str, ...]], ...]:
    return tuple((parse_verbs(key)[0], tails) for key, tails in spec.items())


# Verb class name -> (verb, templates of what may follow it) pairs.
VERBS: dict[str, tuple[tuple[Verb, tuple[str, ...]], ...]] = {
    name: _verb_class(spec) for name, spec in _VERB_CLASSES.items()
}
# Animal sound verbs, with the animals that make each sound.
SOUNDS: dict[str, tuple[Verb, tuple[str, ...]]] = {
    base: (parse_verbs(base)[0], _words(animals)) for base, animals in L.ANIMAL_SOUNDS.items()
}
# Animal (singular) -> what it eats, and the sounds it makes.
EATS: dict[str, tuple[str, ...]] = {a: _words(f) for a, f in L.ANIMAL_FOOD.items()}
SOUNDS_OF: dict[str, tuple[Verb, ...]] = {}
for _verb, _animals in SOUNDS.values():
    for _animal in _animals:
        SOUNDS_OF.setdefault(_animal, ())
        SOUNDS_OF[_animal] += (_verb,)
COUNTRY_OF = dict(L.CITIES)
ANIMAL: dict[str, Noun] = {noun.sg: noun for noun in CATEGORIES["animal"]}
# Any verb by its base form, for sentences that need one particular verb.
VERB: dict[str, Verb] = {verb.base: verb for pairs in VERBS.values() for verb, _ in pairs}
VERB.update({verb.base: verb for verb, _ in SOUNDS.values()})


def lexicon_words() -> set[str]:
    """Every word any category or verb class can put into a sentence."""
    words: set[str] = set()
    for items in CATEGORIES.values():
        for item in items:
            if isinstance(item, Noun):
                words.update((item.sg, item.pl) if item.pl else (item.sg,))
            else:
                words.update(item.split())
    for pairs in list(VERBS.values()) + [[(v, ()) for v, _ in SOUNDS.values()]]:
        for verb, _ in pairs:
            words.update((verb.base, verb.s, verb.ed, verb.ing))
    for country in COUNTRY_OF.values():
        words.update(country.split())
    templates = [t for pairs in VERBS.values() for _, tails in pairs for t in tails]
    templates += [t for purposes in P.TOWN.values() for t in purposes]
    for template in templates:
        words.update(_SLOT.sub(" ", template).split())
    return words


_SLOT = re.compile(r"\{[^}]*\}")
