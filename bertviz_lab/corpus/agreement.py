"""Minimal pairs of subject-verb number agreement, with 0 to 3 attractors (Linzen et al. 2016; Goldberg 2019).

"the children in the park [MASK] happy ." : "were" is right, "was" wrong, and "park" is an attractor, a noun
between the subject and its verb whose number is the other one. Each pair is a story-world sentence written
with its tree (trees.py, the `agreement` construction): the subject, `attractors` prepositional phrases whose
nouns have the other number, and sometimes one more whose noun has the subject's number (so the count of
nouns in between does not tell the attractors apart), then "was/were" (or "is/are") and a feeling. The verb is
the word to mask; a model agrees when it scores the right form above the wrong one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bertviz_lab.corpus.grammar import Writer, named
from bertviz_lab.corpus.tree import Builder, Tree
from bertviz_lab.corpus.trees import agreement, agreement_places, agreement_subject, end
from bertviz_lab.errors import InputError

MAX_ATTRACTORS = 3
FORMS = {("then", False): "was", ("then", True): "were", ("now", False): "is", ("now", True): "are"}
MAX_PAIRS = 2_000  # per number of attractors


@dataclass(frozen=True)
class AgreementPair:
    tree: Tree  # the sentence with the right form
    verb: int  # the word to mask: the form of "be"
    right: str
    wrong: str
    attractors: int
    plural: bool  # the subject's number
    nearest_agrees: bool = True  # whether the noun nearest the verb has the subject's number (it is the subject's
    # own noun without a phrase in between): a model that copied the nearest noun's number would get this pair right

    def masked_words(self, mask_token: str) -> list[str]:
        words = list(self.tree.words)
        words[self.verb] = mask_token
        return words


def _pair(ref, places: list[tuple[str, bool]], tense: str, feeling: str) -> AgreementPair:
    """The pair for a subject, its phrases (text, plural noun?) in order, a tense and a feeling."""
    plural = ref.agr == "pl"
    right, wrong = FORMS[(tense, plural)], FORMS[(tense, not plural)]
    b = Builder()
    tree = end(b, agreement(b, ref, [text for text, _ in places], right, feeling), "agreement")
    attractors = sum(number != plural for _, number in places)
    nearest = places[-1][1] == plural if places else True
    return AgreementPair(tree, tree.relations.index("cop"), right, wrong, attractors, plural, nearest)


# The issue's own example, first, so the page and the CLI can show how the shipped model does on it.
EXAMPLE = "the children in the park were happy ."


def agreement_pairs(per_count: int = 100, seed: int = 0) -> list[AgreementPair]:
    """`per_count` pairs for each number of attractors 0..3 (the first one is `EXAMPLE`); the same seed always
    gives the same pairs, half of each count with a plural subject (so a model that always writes one form scores
    50%), about a third in the present tense."""
    if isinstance(per_count, bool) or not isinstance(per_count, int) or not 1 <= per_count <= MAX_PAIRS:
        raise InputError(f"the number of pairs per attractor count must be a whole number from 1 to "
                         f"{MAX_PAIRS:,}; got {per_count!r}")
    w = Writer(random.Random(seed))
    out = [_pair(named("the children", "n", "pl"), [("in the park", False)], "then", "happy")]
    for attractors in range(MAX_ATTRACTORS + 1):
        made = [p for p in out if p.attractors == attractors]
        plurals = sum(p.plural for p in made)
        for n in range(len(made), per_count):
            plural = 2 * plurals < n  # half the subjects plural, so always one form scores 50%
            plurals += plural
            ref = agreement_subject(w, plural)
            places = [(text, not plural) for text in agreement_places(w, attractors, not plural)]
            if attractors < MAX_ATTRACTORS and w.chance(0.4):  # one phrase of the subject's own number
                (extra,) = agreement_places(w, 1, plural)
                if extra.split()[0] not in {text.split()[0] for text, _ in places}:
                    places.insert(w.rng.randrange(len(places) + 1), (extra, plural))
            out.append(_pair(ref, places, "now" if w.chance(1 / 3) else "then", w.word("feeling")))
    return out
