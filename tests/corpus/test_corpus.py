"""Tests for bertviz_lab.corpus: the story world (determinism, vocabulary coverage,
seed sentences, grammar spot checks, speed) and the user's own text.

The generated corpora are cached per module: 4,000 stories take about 0.1 s.
"""

import random
import re
import time
from collections import Counter

import pytest

from bertviz_lab.corpus import (
    SEED_SENTENCES,
    StoryGenerator,
    documents_from_text,
    generate_documents,
    read_text_file,
    vocabulary,
)
from bertviz_lab.corpus.morph import Noun, article, gerund, plural, regular_past, third_person
from bertviz_lab.corpus.tables import CATEGORIES, VERB
from bertviz_lab.errors import InputError

N_COVER = 4000  # stories within which every vocabulary word must have appeared
SENTENCE = re.compile(r"[a-z]+(,? [a-z]+)*[.?]")


@pytest.fixture(scope="module")
def corpora() -> dict[int, list[list[str]]]:
    return {seed: generate_documents(N_COVER, seed=seed) for seed in (0, 1)}


@pytest.fixture(scope="module")
def sentences(corpora) -> list[str]:
    return [s for doc in corpora[0] for s in doc]


def _words(docs) -> set[str]:
    return {w for doc in docs for s in doc for w in re.findall(r"[a-z]+", s)}


def _nouns() -> tuple[set[str], set[str]]:
    """Singular and plural noun forms that differ (sheep/fish/deer are neither)."""
    sg, pl = set(), set()
    for items in CATEGORIES.values():
        for item in items:
            if isinstance(item, Noun) and item.pl and item.pl != item.sg:
                sg.add(item.sg)
                pl.add(item.pl)
    return sg - pl, pl - sg


# --- determinism ------------------------------------------------------------
def test_same_seed_same_stories_different_seed_different():
    assert generate_documents(200, seed=3) == generate_documents(200, seed=3)
    assert generate_documents(200, seed=3) != generate_documents(200, seed=4)
    assert generate_documents(30, seed=5) == StoryGenerator(5).stories(30)


def test_generator_neither_uses_nor_disturbs_the_global_rng():
    random.seed(1)
    state = random.getstate()
    first = generate_documents(50, seed=2)
    assert random.getstate() == state
    random.seed(99)
    assert generate_documents(50, seed=2) == first


def test_bad_counts_and_seeds_are_refused():
    assert StoryGenerator(0).stories(0) == []
    with pytest.raises(InputError, match="at least 0"):
        StoryGenerator(0).stories(-1)
    with pytest.raises(InputError, match="seed must be a whole number"):
        StoryGenerator("7")


# --- word forms and vocabulary ----------------------------------------------
def test_regular_word_forms():
    assert [plural(w) for w in ("cat", "bus", "cherry", "day", "box")] == [
        "cats", "buses", "cherries", "days", "boxes"]
    assert [third_person(w) for w in ("go", "moo", "carry", "play", "watch")] == [
        "goes", "moos", "carries", "plays", "watches"]
    assert [regular_past(w, False) for w in ("dance", "carry", "play")] == [
        "danced", "carried", "played"]
    assert regular_past("stop", True) == "stopped"
    assert [gerund(w, False) for w in ("make", "see", "tie")] == ["making", "seeing", "tying"]
    assert gerund("run", True) == "running"
    assert [article(w) for w in ("apple", "cat", "university", "hour", "old")] == [
        "an", "a", "a", "an", "an"]

def test_vocabulary_is_large_sorted_distinct_and_plain_words():
    vocab = vocabulary()
    assert len(vocab) >= 1500
    assert vocab == sorted(set(vocab))
    assert all(re.fullmatch(r"[a-z]+", w) for w in vocab)
    assert {"bank", "apple", "bat", "bark", "match", "light", "beijing", "natural"} <= set(vocab)


@pytest.mark.parametrize("seed", [0, 1])
def test_every_vocabulary_word_appears_and_nothing_else(corpora, seed):
    seen, vocab = _words(corpora[seed]), set(vocabulary())
    assert sorted(vocab - seen) == []
    assert sorted(seen - vocab) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_every_seed_sentence_appears_early(corpora, seed):
    early = {s for doc in corpora[seed][:600] for s in doc}
    assert [s for s in SEED_SENTENCES if s not in early] == []


# --- shape ------------------------------------------------------------------
def test_documents_have_3_to_8_plain_lowercase_sentences(corpora):
    docs = corpora[0]
    assert {len(doc) for doc in docs} == set(range(3, 9))
    bad = [s for doc in docs for s in doc if not SENTENCE.fullmatch(s)]
    assert bad == []


def test_generation_is_fast():
    gen = StoryGenerator(7)
    start, count = time.perf_counter(), 0
    while count < 5000:
        count += len(gen.story())
    assert time.perf_counter() - start < 2.0


# --- grammar spot checks ----------------------------------------------------
def test_questions_negation_and_relative_clauses_occur(sentences):
    questions = [s for s in sentences if s.endswith("?")]
    starts = Counter(q.split()[0] for q in questions)
    assert {"how", "where", "what", "why", "which", "did", "does", "will", "is"} <= set(starts)
    text = " ".join(sentences)
    for negation in ("did not", "does not", "was not", "will not"):
        assert f" {negation} " in text
    assert any(re.match(r"the \w+ that .* (was|were) \w+\.$", s) for s in sentences)


def test_subject_verb_agreement(sentences):
    sg, pl = _nouns()
    pairs = Counter()
    for s in sentences:
        m = re.match(r"the (\w+) (was|were|is|are)\b", s)
        if m and m.group(1) in sg | pl:
            pairs[("pl" if m.group(1) in pl else "sg", m.group(2))] += 1
    assert pairs[("sg", "was")] and pairs[("pl", "were")] and pairs[("sg", "is")]
    assert pairs[("sg", "were")] == pairs[("pl", "was")] == 0
    assert pairs[("sg", "are")] == pairs[("pl", "is")] == 0
    text = " ".join(sentences)
    assert "the cat was" in text and "the cats were" in text and "the cats was" not in text


def test_verb_forms_agree_with_pronouns_and_auxiliaries(sentences):
    bare = {v.base for v in VERB.values() if v.base not in (v.s, v.ed)}
    third = {v.s for v in VERB.values()}
    past = {v.ed for v in VERB.values() if v.ed != v.base}
    bad = []
    for s in sentences:
        bad += [s for m in re.finditer(r"(?:^|, )(?:he|she|it) (\w+)", s) if m.group(1) in bare]
        bad += [s for m in re.finditer(r"(?:^|, )(?:i|we|they) (\w+)", s) if m.group(1) in third]
        bad += [s for m in re.finditer(r"\b(?:did not|will|can) (\w+)", s)
                if m.group(1) in past | third]
    assert bad == []
    starts = [s.split()[1] for s in sentences if s.startswith(("he ", "she ", "it "))]
    assert any(word in third for word in starts)


def test_a_and_an(sentences):
    text = " ".join(sentences)
    assert "an apple" in text and "a branch" in text
    assert re.findall(r"\ba (?!uni|use|usu|euro|one)[aeiou]\w*", text) == []
    assert re.findall(r"\ban (?!hour|honest)[^aeiou ]\w*", text) == []


def test_pronouns_refer_to_the_protagonist(corpora):
    """A story that opens with a woman's name goes on with 'she', a man's with 'he'."""
    female = set(CATEGORIES["female"])
    male = set(CATEGORIES["male"])
    follow = Counter()
    for doc in corpora[0]:
        first = doc[0].split()
        if len(first) > 1 and first[1] != "and":
            gender = "f" if first[0] in female else "m" if first[0] in male else None
            later = {s.split()[0] for s in doc[1:]}
            follow[(gender, "she" in later, "he" in later)] += 1
    assert follow[("f", True, False)] > 20 and follow[("m", False, True)] > 20
    assert follow[("f", False, True)] == follow[("m", True, False)] == 0


@pytest.mark.parametrize("sense_a, sense_b", [
    (r"went to the bank to (deposit|withdraw|open|ask|pay)",
     r"walk (next to|along|near) the bank"),
    (r"\bapple (released|launched|will|sold|is)", r"\b(ate an apple|the apple was ripe)"),
    (r"\bbats? flew out of", r"ball with (a|his|her|my|your|our|their) bat"),
    (r"\bbark(s|ed|ing)? at", r"the bark of the old"),
    (r"lit a match", r"the match started"),
    (r"the light of the", r"was light and easy"),
])
def test_ambiguous_words_appear_in_both_senses(sentences, sense_a, sense_b):
    text = " ".join(sentences)
    assert re.search(sense_a, text) and re.search(sense_b, text)


def test_bank_senses_come_with_their_own_context(corpora):
    money = {"money", "cash", "account", "loan", "dollars", "teller", "deposit", "bill"}
    river = {"river", "water", "fish", "grass", "ducks", "swans", "boats"}
    money_docs = [d for d in corpora[0] if any("went to the bank to" in s for s in d)]
    river_docs = [d for d in corpora[0] if any(re.search("walk .*the bank", s) for s in d)]
    assert len(money_docs) > 50 and len(river_docs) > 50
    money_ctx = [_words([d]) for d in money_docs]
    river_ctx = [_words([d]) for d in river_docs]
    assert sum(bool(words & money) for words in money_ctx) > 0.9 * len(money_docs)
    assert sum(bool(words & river) for words in river_ctx) > 0.5 * len(river_docs)
    assert sum(bool(words & money) for words in river_ctx) < 0.1 * len(river_docs)


def test_the_seed_world_is_there(sentences):
    text = " ".join(sentences)
    seats = set(re.findall(r"\bsat on the (\w+)", text))
    assert {"mat", "rug", "chair", "sofa", "bench", "floor"} <= seats
    assert set(re.findall(r"went to the (\w+) to deposit money", text)) == {"bank"}
    assert "to withdraw cash" in text
    assert len(set(re.findall(r"will it rain in (\w+)", text))) > 20
    assert set(re.findall(r"i love (\w+) language processing", text)) == {"natural"}
    assert re.search(r"\bloves? (machine|deep) learning", text)
    assert re.search(r"the \w+ was delicious", text) and " was tired." in text


# --- the user's own text ----------------------------------------------------
def _paragraph(i: int, n: int = 4) -> str:
    return " ".join(f"Paragraph {i} has sentence number {j} with a few extra words."
                    for j in range(n))


def test_paragraphs_become_documents():
    text = "\n\n".join(_paragraph(i) for i in range(6))
    docs = documents_from_text(text)
    assert len(docs) == 6 and all(len(d) == 4 for d in docs)
    assert docs[0][0] == "Paragraph 0 has sentence number 0 with a few extra words."


def test_text_without_paragraphs_is_cut_every_five_sentences():
    text = " ".join(_paragraph(i) for i in range(6)).replace("\n", " ")
    docs = documents_from_text(text)
    assert [len(d) for d in docs] == [5, 5, 5, 5, 4]


def test_sentence_splitting_keeps_punctuation_and_abbreviations():
    para = ("Dr. Smith met Mr. Jones at 3.14 p.m. on Main St. today! Was it fun?  Yes, e.g. "
            "the cake.\tJ. K. Rowling wrote \"books.\" The end\u0007 is near.")
    filler = "\n\n" + "\n\n".join(_paragraph(i, 5) for i in range(5))
    doc = documents_from_text(para + filler)[0]
    assert doc == ["Dr. Smith met Mr. Jones at 3.14 p.m. on Main St. today!", "Was it fun?",
                   "Yes, e.g. the cake.", "J. K. Rowling wrote \"books.\"", "The end is near."]


def test_whitespace_and_control_characters_are_cleaned():
    text = "\r\n\r\n".join(_paragraph(i).replace(" ", " \x00\t ") for i in range(6))
    docs = documents_from_text(text)
    assert len(docs) == 6
    assert all("  " not in s and "\x00" not in s and "\t" not in s for d in docs for s in d)


@pytest.mark.parametrize("text", ["", "One sentence only.", _paragraph(0, 19)])
def test_too_little_text_is_refused(text):
    with pytest.raises(InputError, match=r"at least 20 sentences and 200 words; got"):
        documents_from_text(text)


def test_thresholds_can_be_lowered():
    assert documents_from_text("One. Two.", min_sentences=2, min_words=2) == [["One.", "Two."]]


def test_read_text_file_accepts_utf8_with_or_without_bom():
    assert read_text_file("café\n".encode()) == "café\n"
    assert read_text_file(b"\xef\xbb\xbfhello") == "hello"


@pytest.mark.parametrize("data, message", [
    ("café".encode("latin-1"), "not UTF-8"),
    ("hello".encode("utf-16"), "not UTF-8"),
    (b"abc\x00def", "binary"),
    (b"", "empty"),
    (b"\xef\xbb\xbf  \n", "empty"),
    (b"x" * 101, "limit"),
])
def test_read_text_file_refuses_bad_files(data, message):
    with pytest.raises(InputError, match=message):
        read_text_file(data, max_bytes=100)
