"""Words with two or three meanings, and the corpus sentences that use each meaning.

Seed 002's lesson is that BERT gives "bank" by a river and "bank" for money different
vectors. The story generator uses six such words (bank, apple, bat, bark, match, light);
`SENSE_SETS` holds, for each, sentences the generator writes, tagged with the sense they
use (the tests check every one appears verbatim in the generated corpus).

`sense_of` tags any sentence by the words around the ambiguous one (a pattern per sense):
it names a sense only when exactly one sense's pattern matches, so a sentence it cannot
tell apart stays untagged instead of being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Sense:
    name: str  # what a learner reads: "money", "river"
    pattern: re.Pattern  # matches a sentence that uses the word in this sense
    examples: tuple[str, ...]  # built-in sentences, each from the generated corpus


def _sense(name: str, pattern: str, *examples: str) -> Sense:
    return Sense(name, re.compile(pattern), examples)


SENSE_SETS: dict[str, tuple[Sense, ...]] = {
    "bank": (
        _sense("money", r"\b(deposit|money|account|loan|cash|bill|manager|opens at|teller|withdraw)\b",
               "i went to the bank to deposit money.", "the bank opens at nine and closes at five.",
               "the manager of the bank was polite.", "i went to the bank to ask about a loan."),
        _sense("river", r"\b(fishing|grass|river|walk|swim|swam|sat on the bank|near the bank)\b",
               "i took a walk next to the bank yesterday.", "a fisherman was fishing on the bank.",
               "the grass on the bank was green.", "an old man was fishing on the bank."),
    ),
    "apple": (
        _sense("fruit", r"\b(an|the|my|his|her) apple\b",
               "i ate an apple.", "the apple was ripe and sweet.", "mia does not slice an apple.",
               "the painter often wants an apple."),
        _sense("company", r"(^|, |\b(at|did|will|is|does|from) )apple\b(?! (was|is) ripe)",
               "apple released a new device.", "apple is a big company.",
               "engineers at apple designed the camera in beijing.", "did apple launch a small camera?"),
    ),
    "bat": (
        _sense("animal", r"\b(insects|flew|cave|upside down|barn|sleeping)\b",
               "the bat caught insects in the dark.", "at night, the bat flew out of the cave.",
               "during the day, the bat was sleeping upside down in a cave.",
               "at night, the bat flew out of the old barn."),
        _sense("sports", r"\b(ball|helmet|racket)\b",
               "i bought a new bat and a ball.", "she hit the ball with a bat.",
               "we were hitting the ball with our bat.", "she bought a new bat and a helmet."),
    ),
    "bark": (
        _sense("tree", r"\bthe bark of\b",
               "the bark of the old tree was rough.", "the bark of the old maple was grey.",
               "the bark of the old oak was wet.", "the bark of the old birch was dark."),
        _sense("dog", r"(?<!the )\bbark (at|loudly|again|in)\b",
               "the dog can bark at the ducks.", "the dogs will bark loudly.",
               "the dog will bark at the hens.", "in november, the fox will not bark again."),
    ),
    "match": (
        _sense("game", r"\b(started at|players|lose|loses|losing|lost|win|wins|winning|won|stadium)\b",
               "the match started at four.", "the players were calm after the match.",
               "will she lose the match?", "the players were proud after the match."),
        _sense("fire", r"\b(lit|lighting|lights?) a match\b",
               "i lit a match and started a fire.", "i lit a match.",
               "yesterday, they were lighting a match.", "she lit a match and started a fire."),
    ),
    "light": (
        _sense("brightness", r"\bthe light of\b",
               "the light of the fire was bright.", "the light of the fire was warm."),
        _sense("not heavy", r"\b(was|were|and) light\b|\blight and\b|\ba light (?!of)\w+",
               "the tent was light and easy to carry.", "the new watch was small and light.",
               "the laptops were light."),
        _sense("set fire to", r"\blight (a|the) (fire|candle|lamp|match)\b",
               "i can light the lamp.", "he wanted to light a candle.", "i always light a candle."),
    ),
}


def sense_of(word: str, sentence: str) -> str | None:
    """The sense `word` has in `sentence` (lowercase corpus text), or None if no pattern or several match."""
    found = [s.name for s in SENSE_SETS.get(word, ()) if s.pattern.search(sentence)]
    return found[0] if len(found) == 1 else None


def examples(word: str) -> list[tuple[str, str]]:
    """(sentence, sense) for every built-in sentence of `word`, sense by sense."""
    return [(sentence, s.name) for s in SENSE_SETS[word] for sentence in s.examples]
