"""Stories in town: the bank, errands, a meal, a tech launch, studying.

Each story function returns 3-8 sentences about one protagonist; the optional
arguments let a seed sentence open the story with the matching protagonist.
"""

from __future__ import annotations

from bertviz_lab.corpus.grammar import Ref, Writer, addressee, named
from bertviz_lab.corpus.phrases import TOWN
from bertviz_lab.corpus.tables import VERB


def _agree(ref: Ref, base: str) -> str:
    """Simple present of a verb, agreeing with the referent."""
    return VERB[base].s if ref.agr == "sg" else base


def bank_story(w: Writer, who: Ref | None = None, first: str | None = None) -> list[str]:
    """A trip to the bank (money sense): deposit, withdraw, a loan, the teller."""
    who = who or w.person()
    teller = named("the teller", w.one("mf"))
    purpose = w.fill(w.pick(TOWN["bank"]))
    lead = [first or f"{w.who(who)} went to the bank to {purpose}."]
    v = w.pick(("deposit", "withdraw", "save", "spend", "earn"))
    return w.compose(lead, [
        lambda: [w.fill("the bank was {placetrait} {t}.", t=w.when("past"))],
        lambda: [w.fill("{S} waited in line for {num} minutes.", S=w.who(who))],
        lambda: [w.do(teller, w.pick(("greet", "help")), who.obj + " {manner}")],
        lambda: [w.act(who, "money")],
        lambda: [w.act(who, "money")],
        lambda: [w.fill("{S} asked about a loan.", S=w.who(who)),
                 f"the loan was {w.pick(('expensive', 'cheap'))}."],
        lambda: [w.fill("{S} opened an account for {poss} {kin}.", S=w.who(who), poss=who.poss)],
        lambda: [w.fill("{S} put the cash in {poss} {x}.", S=w.who(who), poss=who.poss,
                        x=w.pick(("wallet", "bag", "backpack")))],
        lambda: [f"how much money did {w.who(addressee(who))} {VERB[v].base}?",
                 w.fill("{S} {v} {num} dollars.", S=who.subj, v=VERB[v].ed)],
        lambda: [f"the bank opens at {w.pick(('eight', 'nine', 'ten'))} and closes at "
                 f"{w.pick(('four', 'five', 'six'))}."],
        lambda: [w.fill("{S} signed a form with {a:x}.", S=w.who(who),
                        x=w.pick(("pen", "pencil")))],
        lambda: [w.fill("the manager of the bank was {ptrait}.")],
        lambda: [w.act(who, "talk")],
    ])


def errand_story(w: Writer) -> list[str]:
    """Someone goes somewhere in town for a reason, and what happens there."""
    who = w.person()
    place = w.word("town")
    purpose = w.fill(w.pick(TOWN[place]), poss=who.poss)
    lead = [w.clause(w.who(who), who.agr, VERB["go"], f"to the {place} to {purpose}") + "."]
    return w.compose(lead, [
        lambda: [w.fill("{S} took the {vehicle} to the {p}.", S=w.who(who), p=place)],
        lambda: [w.act(who, "ride")],
        lambda: [w.act(who, "wear")],
        lambda: [w.fill("{S} wore {a:clothes} because it was {wtrait}.", S=w.who(who))],
        lambda: [w.act(who, "handle")],
        lambda: [w.act(who, "handle")],
        lambda: [w.fill("the {p} was {placetrait}.", p=place)],
        lambda: [w.fill("{poss} {thing} was {ttrait}.", poss=who.poss)],
        lambda: [w.act(who, "rest")],
        lambda: [w.fill("{S} met {poss} {kin} there.", S=w.who(who), poss=who.poss)],
        lambda: [w.act(who, "talk")],
        lambda: [w.act(who, "open")],
        lambda: [w.fill("{S} came home {x} in the {daypart}.", S=w.who(who),
                        x=w.pick(("late", "early")))],
        lambda: [w.fill("where did {S} go {t}?", S=w.who(addressee(who)), t=w.when("past")),
                 f"{who.subj} went to the {place}."],
        lambda: [w.act(who, "selfcare")],
        lambda: [w.fill("there were many {vehicle:pl} on the street.")],
        lambda: [w.fill("there are {num:town} in the city.")],
        lambda: [w.fill("{S} bought {num:thing} at the {x}.", S=w.who(who),
                        x=w.pick(("shop", "store", "market")))],
        lambda: [w.act(who, "motion")],
    ])


def _food_line(w: Writer) -> str:
    """'the soup was delicious today.' with a subject that agrees with was/were."""
    r = w.rng.random()
    if r < 0.3:
        subject, be = "food", "was"
    elif r < 0.55:
        subject, be = w.word("mass_food"), "was"
    elif r < 0.75:
        subject, be = w.word("dish"), "was"
    else:
        subject, be = w.word("fruit", plural=True), "were"
    when = w.pick(("today", "yesterday", "", "at lunch", "at dinner"))
    return w.fill(f"the {subject} {be} {{ftrait}} {when}".rstrip() + ".")


def meal_story(w: Writer, who: Ref | None = None, first: str | None = None,
               second: str | None = None) -> list[str]:
    """A meal: what someone ate and drank, and how it tasted."""
    who = who or w.person()
    cook = named("the " + w.pick(("waiter", "chef", "cook")), w.one("mf"))
    lead = [first or w.act(who, "food")]
    if second:
        lead.append(second)
    return w.compose(lead, [
        lambda: [_food_line(w)],
        lambda: [w.act(who, "food")],
        lambda: [w.act(who, "drink")],
        lambda: [w.fill("{S} had {mass_food} for {meal}.", S=w.who(who))],
        lambda: [w.fill("{C} brought {O} a bowl of {mass_food}.", C=w.who(cook), O=who.obj)],
        lambda: [w.fill("{S} did not like the {mass_food} because it was too {ftrait}.",
                        S=w.who(who))],
        lambda: [w.fill("the {fruit} was ripe and {x}.", x=w.pick(("sweet", "juicy", "fresh")))],
        lambda: [w.fill("what did {S} eat for {meal}?", S=w.who(addressee(who))),
                 w.fill("{S} ate {a:dish} and some {mass_food}.", S=who.subj)],
        lambda: [w.do(who, "wash", "the {kitchenware:pl}")],
        lambda: [w.fill("there were {num:kitchenware} on the table.")],
        lambda: [w.fill("{S} had {meal} at {a:placetrait} restaurant with {poss} {kin}.",
                        S=w.who(who), poss=who.poss)],
        lambda: [w.fill("{S} {be} not hungry after {meal}.", S=w.who(who), be=who.be_past)],
        lambda: [w.act(who, "rest")],
    ])


def tech_story(w: Writer, company: str | None = None, first: str | None = None) -> list[str]:
    """A company (apple the company, not the fruit) releases a new device."""
    maker = named(company or w.word("company"), "n")
    device = w.word("device")
    buyer = w.person()
    lead = [first or w.act(maker, "tech", device=device)]
    return w.compose(lead, [
        lambda: [w.fill("the new {d} was {dtrait} and {dtrait}.", d=device)],
        lambda: [f"many people bought the {device}."],
        lambda: [w.fill("{C} sold {num} million {device:pl} {t}.", C=w.who(maker),
                        t=w.when("past"))],
        lambda: [w.fill("the {d} has {a:dtrait} screen and {a:dtrait} chip.", d=device)],
        lambda: [w.fill("{S} waited outside the store to buy one.", S=w.who(buyer))],
        lambda: w.ask(maker, "tech", device=device),
        lambda: [w.fill("the {device:pl} were {dtrait}.")],
        lambda: [w.fill("engineers at {C} designed the {d} in {city}.", C=maker.name, d=device)],
        lambda: [w.act(maker, "tech", device=device)],
        lambda: [f"{maker.name} is a big company."],
    ])


def study_story(w: Writer, who: Ref | None = None, first: str | None = None) -> list[str]:
    """Someone who loves a subject: reading, classes, teachers, music."""
    who = who or w.person()
    field = w.word("field")
    teacher = named("the teacher", w.one("mf"))
    if first:
        lead = [first]
    elif w.chance(0.5):
        lead = [f"{w.who(who)} {_agree(who, 'love')} {field}."]
    else:
        lead = [w.act(who, "study", field=field)]
    student = "students" if who.agr == "pl" else "a student"
    asked = addressee(who)
    return w.compose(lead, [
        lambda: [w.fill("{S} {be} {x} at the university in {city}.", S=w.who(who),
                        be=who.be_now, x=student)],
        lambda: [w.act(who, "read", "{a:readable} about " + field)],
        lambda: [w.do(teacher, "explain", field + " to the students")],
        lambda: [w.fill("{S} {v} to become {a:job}.", S=w.who(who), v=_agree(who, "want"))],
        lambda: [w.act(who, "study", field=field)],
        lambda: [f"{w.who(who)} learned a lot about {field} this year."],
        lambda: [f"which subject {'does' if asked.agr == 'sg' else 'do'} {w.who(asked)} like?",
                 f"{who.subj} {_agree(who, 'like')} {field}."],
        lambda: [w.act(who, "music")],
        lambda: [w.fill("there were {num:instrument} in the music room.")],
        lambda: [w.fill("the students were {ptrait}.")],
        lambda: [w.act(who, "rest")],
        lambda: [w.act(who, "handle")],
        lambda: [w.act(who, "read")],
        lambda: [f"{w.who(who)} did not understand {field} at first."],
    ])
