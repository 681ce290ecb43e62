"""Stories about animals: a pet at home, a farm, the zoo, a tired animal, the night.

Each story function returns 3-8 sentences about one protagonist; the optional
arguments let a seed sentence open the story with the matching protagonist.
"""

from __future__ import annotations

from bertviz_lab.corpus.grammar import Ref, Writer, addressee, animal_ref, named
from bertviz_lab.corpus.morph import Noun
from bertviz_lab.corpus.tables import ANIMAL, EATS, SOUNDS_OF, VERB


def feeling(w: Writer, ref: Ref, frame: str = "{S} {be} {feeling}.") -> list[str]:
    """How the referent felt: 'the cat was tired.' (or another frame with {S} and {be})."""
    return [w.fill(frame, S=w.who(ref), be=ref.be_past)]


def sound(w: Writer, ref: Ref) -> list[str]:
    """The animal makes its own sound: cats purr, cows moo, dogs bark."""
    verbs = SOUNDS_OF.get(ref.noun)
    if not verbs:
        return feeling(w, ref)
    tail = w.fill(w.pick(("", "loudly", "softly", "again", "at the {small}")))
    return [w.clause(w.who(ref), ref.agr, w.pick(verbs), tail) + "."]


def any_sound(w: Writer) -> list[str]:
    """Some animal's sound; drawing the sound first makes every sound verb appear."""
    verb, animals = w.deck("sounds").draw()
    ref = animal_ref(ANIMAL[w.pick(animals)], w.chance(0.35))
    tail = w.fill(w.pick(("", "loudly", "softly", "in the {nature}")))
    return [w.clause(ref.name, ref.agr, verb, tail) + "."]


def any_meal(w: Writer) -> list[str]:
    """Some animal eating what it eats; drawing the animal covers every animal and food."""
    noun = w.deck("animal").draw()
    if noun.sg not in EATS:
        return [f"the {noun.pl} were {w.word('feeling')}."]
    ref = animal_ref(noun, w.chance(0.35))
    return [w.clause(ref.name, ref.agr, VERB["eat"], w.pick(EATS[noun.sg])) + "."]


def relative(w: Writer, ref: Ref, doer: Ref) -> list[str]:
    """A relative clause on the animal: 'the cat that anna fed was hungry.'"""
    verb = w.deck("verb:perceive").draw()[0]
    r = w.rng.random()
    if r < 0.4:
        inner = f"{w.who(doer)} {verb.ed}"
    elif r < 0.7:
        inner = w.fill("{v} the {toy}", v=w.pick(("chased", "found", "watched", "lost")))
    else:
        inner = w.fill("did not {v} the {toy}", v=w.pick(("want", "like", "find", "see")))
    return [f"{ref.name} that {inner} {ref.be_past} {w.word('feeling')}."]


def pet_story(w: Writer, pet: Ref | None = None, first: str | None = None,
              second: str | None = None) -> list[str]:
    """A pet at home: where it sits, the weather outside, what it does and feels."""
    pet = pet or w.animal("pet")
    owner = w.person()
    lead = [first or w.act(pet, "sit")]
    if second or w.chance(0.4):
        lead.append(second or w.fill("it was {a:wtrait} {daypart}."))
    food = w.pick(EATS[pet.noun])
    return w.compose(lead, [
        lambda: sound(w, pet),
        lambda: feeling(w, pet),
        lambda: feeling(w, pet, "{S} {be} too {feeling} to play."),
        lambda: feeling(w, pet, "{S} {be} not {feeling}."),
        lambda: [w.do(pet, "play", "with {a:toy}")],
        lambda: [w.act(pet, "amotion")],
        lambda: [w.act(pet, "arest")],
        lambda: [w.do(pet, "eat", food)],
        lambda: [w.fill("{O} gave {it} some {food}.", O=w.who(owner), it=pet.obj, food=food)],
        lambda: [w.act(pet, "body")],
        lambda: w.ask(pet, "arest"),
        lambda: [f"where {pet.be_now} {pet.name}?",
                 w.fill("{S} {be} {v} in the {room}.", S=pet.subj, be=pet.be_now,
                        v=w.deck("verb:arest").draw()[0].ing)],
        lambda: [w.fill("there were {num:toy} on the {seat}.")],
        lambda: [w.fill("there were {num:seat} in the {room}.")],
        lambda: [w.fill("{S} looked out of the window and saw {a:small}.", S=w.who(pet))],
        lambda: [w.act(owner, "handle")],
        lambda: [w.act(owner, "open")],
        lambda: [w.act(owner, "perceive")],
        lambda: [w.fill("{S} {be} {color} and {atrait}.", S=w.who(pet), be=pet.be_past)],
        lambda: relative(w, pet, owner),
    ])


def farm_story(w: Writer) -> list[str]:
    """A farmer, the farm animals, what they eat and the sounds they make."""
    farmer = named("the farmer", w.one("mf")) if w.chance(0.5) else w.person()
    animal = w.animal("farm")
    food = w.pick(EATS[animal.noun])
    dog = named("the dog", "n", noun="dog")
    lead = [w.fill("{F} lived on a farm near the {nature}.", F=w.who(farmer))]
    return w.compose(lead, [
        lambda: [w.act(farmer, "farmwork")],
        lambda: sound(w, animal),
        lambda: any_sound(w),
        lambda: [w.do(animal, "eat", f"{food} in the field")],
        lambda: [w.do(dog, "bark", "at the {farm:pl}")],
        lambda: [w.act(farmer, "garden")],
        lambda: [w.fill("{A} {be} {atrait}.", A=w.who(animal), be=animal.be_past)],
        lambda: feeling(w, animal),
        lambda: relative(w, animal, farmer),
        lambda: w.ask(animal, "arest", "in the barn"),
        lambda: [w.fill("{F} sold {num:dish} at the market.", F=w.who(farmer))],
        lambda: any_meal(w),
        lambda: [w.fill("it was {a:wtrait} {daypart} on the farm.")],
    ])


def _how_many(w: Writer, visitor: Ref) -> list[str]:
    """'how many pandas did anna see?' 'she saw nine pandas.'"""
    animals = w.word("wild", plural=True)
    return [w.fill("how many {x} did {S} see?", x=animals, S=w.who(addressee(visitor))),
            w.fill("{S} saw {num} {x}.", x=animals, S=visitor.subj)]


def zoo_story(w: Writer) -> list[str]:
    """A visit to the zoo: wild animals resting, eating, roaring."""
    visitor = w.person()
    animal = w.animal("wild")
    food = w.pick(EATS[animal.noun])
    lead = [w.fill("{S} went to the zoo with {poss} {kin} {t}.", S=w.who(visitor),
                   poss=visitor.poss, t=w.when("past"))]
    rest = ("in the sun", "under {a:tree}", "near the water", "in the shade")
    return w.compose(lead, [
        lambda: [w.act(animal, "arest", w.pick(rest))],
        lambda: sound(w, animal),
        lambda: any_sound(w),
        lambda: [w.do(animal, "eat", food)],
        lambda: [w.act(visitor, "perceive")],
        lambda: _how_many(w, visitor),
        lambda: [w.fill("the animal that {S} liked most was the {wild}.", S=w.who(visitor))],
        lambda: [w.fill("{A} {be} {atrait} and {atrait}.", A=w.who(animal), be=animal.be_past)],
        lambda: [w.do(visitor, "draw", "{a:atrait} {wild}")],
        lambda: [w.fill("{S} took {num} photos of the {wild:pl}.", S=w.who(visitor))],
        lambda: any_meal(w),
        lambda: [f"the animals were {w.word('feeling')}."],
    ])


# Why an animal would not cross; "tired" twice, as in the seed sentences.
_TOO = ("tired", "tired", "scared", "sleepy", "nervous", "hungry", "lazy", "old")


def street_story(w: Writer, animal: Ref | None = None, first: str | None = None) -> list[str]:
    """An animal that is too tired (or scared) to cross a busy street."""
    animal = animal or w.animal("animal")
    place = w.pick(("street", "road", "bridge"))
    lead = [first or w.fill("{A} wanted to cross the {p}.", A=w.who(animal), p=place)]
    return w.compose(lead, [
        lambda: [f"{animal.name} did not cross the {place} because {animal.subj} "
                 f"{animal.be_past} too {w.pick(_TOO)}."],
        lambda: [f"{animal.name} that did not cross the {place} {animal.be_past} "
                 f"{w.pick(_TOO)}."],
        lambda: [w.fill("there were many {vehicle:pl} on the {p}.", p=place)],
        lambda: [w.act(animal, "arest", f"under {{a:tree}} near the {place}")],
        lambda: [w.fill("{a:ptrait} {role} helped {it} across the {p}.", it=animal.obj, p=place)],
        lambda: [w.do(animal, "cross", f"the {place} {{manner}}")],
        lambda: [f"why did {w.who(animal)} not cross the {place}?",
                 f"because {animal.subj} {animal.be_past} too {w.pick(_TOO)}."],
        lambda: feeling(w, animal),
    ])


def night_story(w: Writer) -> list[str]:
    """Night animals: bats leaving a cave, an owl hooting, the moon and stars."""
    bats = animal_ref(Noun("bat", "bats"), w.chance(0.5))
    owl = named("the owl", "n", noun="owl")
    watcher = w.person()
    lead = [f"at night, {bats.name} flew out of the {w.pick(('cave', 'old barn', 'tree'))}."]
    return w.compose(lead, [
        lambda: [f"{w.who(bats)} caught insects in the dark."],
        lambda: [f"during the day, {bats.name} {bats.be_past} sleeping upside down in a cave."],
        lambda: ["the moon was bright and the stars were shining."],
        lambda: sound(w, owl),
        lambda: any_sound(w),
        lambda: [f"{w.who(watcher)} watched the bats from the "
                 f"{w.pick(('balcony', 'porch', 'window', 'roof'))}."],
        lambda: [w.fill("{S} {be} not scared of the bats.", S=w.who(watcher), be=watcher.be_past)],
        lambda: [w.act(watcher, "perceive")],
    ])
