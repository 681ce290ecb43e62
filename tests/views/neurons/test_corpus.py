"""corpus.py: the story world's sentences, the learner's text, an upload (every bad file one sentence), and the
index built once and read back from the folder it was kept in."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.views.neurons import corpus as vne_corpus
from bertviz_lab.views.neurons.corpus import MAX_FILE_BYTES, MAX_WORDS, own_sentences, story_sentences, uploaded

pytestmark = pytest.mark.usefixtures("one_thread")


def test_story_sentences_are_text_and_a_prefix_of_a_longer_draw():
    few, more = story_sentences(30), story_sentences(60)
    assert len(few) == 30 and few == more[:30]
    assert all(isinstance(s, str) and s.strip() and "  " not in s for s in few)
    assert vne_corpus.story(30).sentences == tuple(few) and "30" in vne_corpus.story(30).name
    with pytest.raises(InputError, match="whole number from 1"):
        story_sentences(0)


def test_own_text_is_split_by_line_and_by_sentence_end():
    text = "the cat sat . the dog ran !\r\n\n  a bird sang  \n"
    assert own_sentences(text) == ["the cat sat .", "the dog ran !", "a bird sang"]
    long = " ".join(["word"] * (MAX_WORDS + 5))
    assert [len(s.split()) for s in own_sentences(long)] == [MAX_WORDS, 5]
    assert vne_corpus.typed("a b .\nc d .").note == "2 sentences"


@pytest.mark.parametrize("text", ["", "  \n \n", "\t"])
def test_empty_text_is_one_sentence(text):
    with pytest.raises(InputError, match="has no sentences"):
        own_sentences(text)


def test_too_many_sentences_is_one_sentence(monkeypatch):
    monkeypatch.setattr(vne_corpus, "MAX_SENTENCES", 3)
    with pytest.raises(InputError, match="has 4 sentences; the index reads at most 3"):
        own_sentences("a .\nb .\nc .\nd .")


def test_an_upload_reads_as_sentences():
    got = uploaded("notes.txt", "the cat sat .\nthe dog ran .".encode("utf-8-sig"))  # with a BOM
    assert got.sentences == ("the cat sat .", "the dog ran .") and got.name == "notes.txt"


@pytest.mark.parametrize("raw, said", [
    (b"", "the file is empty"),
    (b"   \n", "only whitespace"),
    (b"abc\x00def", "looks binary"),
    ("the cat".encode("utf-16"), "looks like UTF-16"),
    (b"caf\xe9 au lait", "not UTF-8 text"),
    (b"a" * (MAX_FILE_BYTES + 1), f"the limit is {MAX_FILE_BYTES:,} bytes"),
])
def test_every_bad_upload_is_one_sentence(raw, said):
    with pytest.raises(InputError, match=said) as caught:
        uploaded("x.txt", raw)
    assert "\n" not in str(caught.value)


def test_the_index_is_built_then_read_back(shipped, tmp_path):
    sentences = story_sentences(40)
    with pytest.raises(InputError, match="no sentences"):
        vne_corpus.index(shipped, [], folder=tmp_path)
    calls = []
    built = vne_corpus.index(shipped, vne_corpus.story(40), lambda f, m: calls.append(f), folder=tmp_path)
    layers, width = shipped.config.num_hidden_layers, shipped.config.intermediate_size
    assert built.values.shape[:2] == (layers, width) and len(built.sentences) == 40 and calls
    again = vne_corpus.index(shipped, sentences, lambda f, m: calls.append(("again", f)), folder=tmp_path)
    assert not [c for c in calls if isinstance(c, tuple)]  # read from the folder: no building, no progress
    np.testing.assert_array_equal(again.values, built.values)
