"""The probe set: a few sentences of the story world whose grammar we know, for watching heads form.

Each probe is a sentence the generator's templates write (the tests check every word is in its
vocabulary, and the first two are seed sentences), spelled as words separated by spaces, with
the links between its words that the templates put there:

    det_noun          a determiner -> its noun            ("the" -> "cat")
    verb_subject      a verb -> its subject's head word   ("sat" -> "cat")
    pronoun_referent  a pronoun -> the noun it stands for ("it" -> "animal")

and one word to mask, so a time-lapse shows the guess at [MASK] change as a model learns.
`WORD_GROUPS` are words of five kinds whose embeddings the time-lapse follows in 2-D.
"""

from __future__ import annotations

from dataclasses import dataclass

SYNTACTIC_ROLES = ("det_noun", "verb_subject", "pronoun_referent")


@dataclass(frozen=True)
class ProbeSentence:
    text: str  # lower case, one space between words, the full stop a word of its own
    mask: int  # the word (by index) masked for the top-k guess
    links: dict[str, tuple[tuple[int, int], ...]]  # role -> (from word, to word) pairs

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def masked(self) -> str:
        """The sentence with its `mask` word replaced by [MASK]."""
        words = self.words
        words[self.mask] = "[MASK]"
        return " ".join(words)


def _probe(text: str, mask: str, det: str = "", subj: str = "", pron: str = "") -> ProbeSentence:
    """Links written as 'from>to' word indices separated by spaces, e.g. det="0>1 4>5"."""
    def pairs(spec: str) -> tuple[tuple[int, int], ...]:
        return tuple(tuple(int(i) for i in link.split(">")) for link in spec.split())  # type: ignore[misc]
    links = {"det_noun": pairs(det), "verb_subject": pairs(subj), "pronoun_referent": pairs(pron)}
    return ProbeSentence(text, text.split().index(mask), {k: v for k, v in links.items() if v})


PROBES: tuple[ProbeSentence, ...] = (
    _probe("the cat sat on the mat .", "mat", det="0>1 4>5", subj="2>1"),
    _probe("the animal did not cross the street because it was too tired .", "street",
           det="0>1 5>6", subj="2>1 9>8", pron="8>1"),
    _probe("the boy wore a coat because he was cold .", "coat", det="0>1 3>4", subj="2>1 7>6", pron="6>1"),
    _probe("the girl read a book because she was bored .", "book", det="0>1 3>4", subj="2>1 7>6", pron="6>1"),
    _probe("i went to the bank to deposit money .", "money", det="3>4", subj="1>0"),
    _probe("the dog was happy and it ate the fish .", "fish", det="0>1 7>8", subj="2>1 6>5", pron="5>1"),
)

# Whose token embeddings the time-lapse plots: kinds a model learns to tell apart.
WORD_GROUPS: dict[str, tuple[str, ...]] = {
    "animals": ("cat", "dog", "horse", "bird", "fish"),
    "food": ("apple", "bread", "soup", "cake", "rice"),
    "places": ("park", "bank", "river", "street", "kitchen"),
    "verbs": ("sat", "ran", "ate", "went", "saw"),
    "function words": ("the", "a", "it", "and", "to"),
}
