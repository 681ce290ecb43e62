"""Stories outdoors: a river walk, a city's weather, travel, sport, camping, a garden.

Each story function returns 3-8 sentences about one protagonist or place; the
optional arguments let a seed sentence open the story with the matching setting.
"""

from __future__ import annotations

from bertviz_lab.corpus.grammar import Ref, Writer, addressee, animal_ref, named
from bertviz_lab.corpus.morph import Noun, Verb
from bertviz_lab.corpus.stories_animals import any_meal, any_sound, feeling
from bertviz_lab.corpus.tables import COUNTRY_OF, VERB

_SOON = ("today", "tomorrow", "tonight", "this weekend", "next week")


def river_story(w: Writer, who: Ref | None = None, first: str | None = None) -> list[str]:
    """A walk along a river (the other kind of bank): water, fish, grass, trees."""
    who = who or w.person()
    side = w.pick(("next to", "along", "near"))
    lead = [first or w.fill("{S} took a walk {x} the {y} {t}.", S=w.who(who), x=side,
                            y=w.pick(("bank", "river", "bank of the river")), t=w.when("past"))]
    return w.compose(lead, [
        lambda: [w.fill("the water was {watertrait}.")],
        lambda: [w.do(w.animal("water"), "swim", "near the bank")],
        lambda: [f"the grass on the bank was {w.pick(('green', 'wet', 'long', 'soft'))}."],
        lambda: [w.fill("{a:x} sat on a branch of {a:tree}.", x=w.pick(("bird", "crow", "owl")))],
        lambda: [w.fill("{S} {y} and watched the {x}.", S=w.who(who),
                        y=w.pick(("sat on the bank", "sat by the river", "stood on the bridge")),
                        x=w.pick(("boats", "ducks", "swans", "fish")))],
        lambda: [f"the river flowed slowly toward the {w.pick(('sea', 'lake', 'village'))}."],
        lambda: [w.fill("the bark of the old {tree} was {x}.",
                        x=w.pick(("rough", "dark", "grey", "wet")))],
        lambda: [w.fill("{S} saw {a:water} in the water.", S=w.who(who))],
        lambda: [f"{w.pick(('a fisherman', 'an old man', 'a boy'))} was fishing on the bank."],
        lambda: [w.pick(("the leaves fell into the water.", "a leaf fell into the water."))],
        lambda: [w.fill("{num} {x} were flying over the river.",
                        x=w.pick(("ducks", "birds", "swans", "geese")))],
        lambda: w.ask(who, "motion", "along the river"),
        lambda: [w.act(who, "motion")],
        lambda: any_sound(w),
        lambda: any_meal(w),
    ])


def _weather_answer(w: Writer, city: str) -> str:
    """'it is cloudy and cold in paris.': one sky word and one temperature word."""
    return w.fill("it is {sky} and {temp} in {c}.", c=city)


def _rain_answer(w: Writer, rain: Verb) -> str:
    """A short answer to 'will it rain ...?'; "no" comes with dry weather only."""
    if w.chance(0.5):
        return f"yes, it will {rain.base} in the {w.word('daypart')}."
    return w.fill("no, it will be {drysky}.")


def weather_story(w: Writer, city: str | None = None, first: str | None = None) -> list[str]:
    """A city's weather: questions about rain, the sky, the wind, the season."""
    city = city or w.word("city")
    rain = VERB["rain"] if first and "rain" in first else VERB[w.pick(("rain", "snow"))]
    if first and first.startswith("will"):
        lead = [first, _rain_answer(w, rain)]
    else:
        when = w.pick(("today", "now", "this morning"))
        lead = [first or f"how is the weather in {city} {when}?", _weather_answer(w, city)]
    return w.compose(lead, [
        lambda: [f"will it {rain.base} in {city} {w.pick(_SOON)}?", _rain_answer(w, rain)],
        lambda: [w.clause("it", "sg", rain, f"in {city}") + "."],
        lambda: [w.fill("the sky over {c} was {sky}.", c=city)],
        # No time phrase for the sun and the wind: "last night, the sun shone" is wrong.
        lambda: [w.clause("the wind", "sg", VERB["blow"],
                          w.pick(("hard", "all day", "from the sea")), timed=False) + "."],
        lambda: [w.clause("the sun", "sg", VERB["shine"],
                          f"{w.pick(('brightly', 'all day'))} over {city}", timed=False) + "."],
        lambda: [w.clause("the lake", "sg", VERB["freeze"], w.fill("in {month}"), timed=False)
                 + "."],
        lambda: [f"people in {city} carried umbrellas."],
        lambda: [w.fill("in {month}, {c} is usually {wtrait}.", c=city)],
        lambda: [w.fill("the temperature was {num} degrees.")],
        lambda: [w.fill("there was a lot of {weather} in {c} {t}.", c=city, t=w.when("past"))],
        lambda: [f"there were dark clouds over {city}."],
        lambda: [w.fill("there are many {nature:pl} near {c}.", c=city)],
        lambda: [f"{city} is a city in {COUNTRY_OF[city]}."],
        lambda: [f"a storm hit {city} last night."],
        lambda: [f"after the rain, there was a rainbow over {city}."],
    ])


def travel_story(w: Writer) -> list[str]:
    """A trip to a city: how it went, what the city is like, where it is."""
    who = w.person()
    city = w.word("tripcity")  # its own deck, so every city's country comes up each round
    lead = [w.act(who, "travel", f"to {city}"), f"{city} is a city in {COUNTRY_OF[city]}."]
    return w.compose(lead, [
        lambda: [w.act(who, "travel")],
        lambda: [w.act(who, "handle")],
        lambda: [w.act(who, "perceive")],
        lambda: [w.act(who, "motion")],
        lambda: [w.fill("there were many {trip:pl} going to {c}.", c=city)],
        lambda: [w.fill("{S} packed {num:clothes} in {poss} bag.", S=w.who(who), poss=who.poss)],
        lambda: [w.fill("{poss} {thing} was {ttrait}.", poss=who.poss)],
        lambda: [w.act(who, "rest")],
        lambda: [w.fill("{c} is {a:citytrait} city.", c=city)],
        lambda: [w.fill("there are many {town:pl} in {c}.", c=city)],
        lambda: [w.fill("{x} has beautiful {nature:pl}.", x=COUNTRY_OF[city])],
        lambda: [f"the people of {city} were {w.pick(('friendly', 'kind', 'polite'))}."],
        lambda: [w.fill("the {trip} to {c} was {x}.", c=city,
                        x=w.pick(("late", "early", "full", "crowded")))],
        lambda: [w.fill("{S} stayed in a hotel near the {nature}.", S=w.who(who))],
        lambda: [w.act(who, "talk")],
        lambda: [w.fill("where did {S} go {t}?", S=w.who(addressee(who)), t=w.when("past")),
                 f"{who.subj} went to {city}."],
    ])


def sports_story(w: Writer) -> list[str]:
    """A game (the match kind of match; the baseball kind of bat)."""
    who = w.person()
    fans, players = named("the fans", "pl", "pl"), named("the players", "pl", "pl")
    lead = [w.do(who, "play", w.fill("{sport} with {poss} friends", poss=who.poss))]
    return w.compose(lead, [
        lambda: [f"the match started at {w.pick(('two', 'three', 'four', 'seven'))}."],
        lambda: [w.act(who, "hit")],
        lambda: [w.act(who, "compete")],
        lambda: [w.act(who, "rest")],
        lambda: [w.act(who, "motion")],
        lambda: [w.do(fans, "cheer", "{manner}")],
        lambda: feeling(w, players, "{S} {be} {feeling} after the match."),
        lambda: w.ask(who, "compete"),
        lambda: [w.act(who, "sport")],
        lambda: [f"the coach was proud of {who.obj}."],
        lambda: [f"{w.who(who)} bought a new bat and a {w.pick(('ball', 'helmet', 'racket'))}."],
        lambda: [w.fill("the stadium was {placetrait}.")],
    ])


def camping_story(w: Writer) -> list[str]:
    """Camping: lighting a match (the fire kind), a light tent, the light of the fire."""
    who = w.person()
    lead = [w.fill("{S} went camping in the {x} {t}.", S=w.who(who), t=w.when("past"),
                   x=w.pick(("forest", "mountains", "hills", "valley", "jungle", "desert")))]
    return w.compose(lead, [
        lambda: [w.act(who, "light")],
        lambda: [w.act(who, "handle")],
        lambda: [w.act(who, "motion")],
        lambda: [f"{w.who(who)} lit a match and started a fire."],
        lambda: [f"the {w.pick(('tent', 'bag', 'backpack'))} was light and easy to carry."],
        lambda: [f"the light of the fire was {w.pick(('warm', 'bright'))}."],
        lambda: [f"{w.who(who)} turned on {who.poss} flashlight."],
        lambda: [w.fill("{S} cooked {mass_food} over the fire.", S=w.who(who))],
        lambda: [f"{w.who(who)} heard {w.pick(('an owl', 'a wolf', 'a fox'))} in the dark."],
        lambda: ["the stars were bright that night."],
        lambda: [w.fill("{S} slept in a tent near the {nature}.", S=w.who(who))],
        lambda: feeling(w, who),
        lambda: [w.act(who, "rest")],
        lambda: any_sound(w),
    ])


def garden_story(w: Writer) -> list[str]:
    """A garden through the seasons: flowers, trees, fruit and bees."""
    who = w.person()
    bee = animal_ref(Noun("bee", "bees"), w.chance(0.5))
    lead = [w.fill("in {season}, the {flower:pl} in the garden were {flowercolor}.")]
    return w.compose(lead, [
        lambda: [w.act(who, "garden")],
        lambda: [w.act(who, "garden")],
        lambda: [w.fill("the leaves turned {leafcolor} in autumn.")],
        lambda: [w.do(bee, "buzz", "near the {flower:pl}")],
        lambda: [w.fill("the {tree} in the yard was {x}.",
                        x=w.pick(("tall", "old", "young", "big")))],
        lambda: [w.fill("{S} picked some {fruit:pl} from the trees.", S=w.who(who))],
        lambda: [w.fill("{S} sat under the {tree} and read {a:readable}.", S=w.who(who))],
        lambda: [w.act(who, "perceive")],
        lambda: [w.fill("the {flower} smelled {x}.", x=w.pick(("sweet", "nice", "lovely")))],
        lambda: [w.fill("there were {num:small} in the garden.")],
        lambda: any_meal(w),
    ])
