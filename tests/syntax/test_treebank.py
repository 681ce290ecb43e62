"""A CoNLL-U treebank read into Trees: a good file round-trips through write_treebank, multiword tokens and empty
nodes are passed over, each broken sentence is left out with its own reason while the good ones load, and a file
that is not CoNLL-U (binary, a PNG, HTML, empty, too big, not UTF-8) is one InputError sentence."""

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.syntax import treebank
from bertviz_lab.syntax.treebank import parse_treebank, read_treebank, write_treebank


def line(i, form, upos, head, rel) -> str:
    return "\t".join((str(i), form, form.lower(), upos, "_", "_", str(head), rel, "_", "_"))


def sentence(*words) -> str:
    """CoNLL-U lines for words given as (form, upos, head, relation), ids from 1, then a blank line."""
    return "\n".join(line(i, *w) for i, w in enumerate(words, 1)) + "\n\n"


CAT = sentence(("The", "DET", 2, "det"), ("cat", "NOUN", 3, "nsubj"), ("slept", "VERB", 0, "root"),
               ("today", "NOUN", 3, "obl:tmod"), (".", "PUNCT", 3, "punct"))
RAIN = sentence(("It", "PRON", 2, "expl"), ("rained", "VERB", 0, "root"), ("!", "PUNCT", 2, "punct"))
TWO = "# sent_id = 1\n# text = The cat slept today .\n" + CAT + "# sent_id = 2\n" + RAIN


def refused(raw: bytes, name: str = "bank.conllu") -> str:
    with pytest.raises(InputError) as caught:
        parse_treebank(raw, name)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_two_sentence_file_reads_and_round_trips(tmp_path):
    path = tmp_path / "two.conllu"
    path.write_bytes(b"\xef\xbb\xbf" + TWO.replace("\n", "\r\n").encode())  # a BOM and Windows line ends are fine
    bank = read_treebank(path)
    cat, rain = bank.trees
    assert bank.name == "two.conllu" and bank.skipped == [] and bank.n_sentences == 2 and bank.n_words == 8
    assert cat.words == ("The", "cat", "slept", "today", ".") and cat.heads == (1, 2, -1, 2, 2)
    assert cat.relations == ("det", "nsubj", "root", "obl:tmod", "punct") and cat.base_relation(3) == "obl"
    assert rain.heads == (1, -1, 1) and rain.upos == ("PRON", "VERB", "PUNCT")
    assert bank.summary == "2 sentences (8 words) from two.conllu"
    again = read_treebank(write_treebank(bank.trees, tmp_path / "out" / "again.conllu"))
    assert [(t.words, t.heads, t.relations, t.upos) for t in again.trees] == \
        [(t.words, t.heads, t.relations, t.upos) for t in bank.trees]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["again.conllu"]  # no temp file left behind
    assert read_treebank(TWO.encode(), "upload.conllu").trees == bank.trees
    assert read_treebank(TWO.replace("\n", "\r").encode(), "mac.conllu").trees == bank.trees  # old Mac line ends


def test_multiword_tokens_and_empty_nodes_are_passed_over_keeping_the_words():
    text = ("1-2\tdel\t_\t_\t_\t_\t_\t_\t_\t_\n" + line(1, "de", "ADP", 3, "case") + "\n"
            + line(2, "el", "DET", 3, "det") + "\n" + line(3, "mar", "NOUN", 0, "root") + "\n"
            + "3.1\tvio\tver\tVERB\t_\t_\t_\t_\t3:conj\t_\n\n")
    (tree,) = parse_treebank(text.encode()).trees
    assert tree.words == ("de", "el", "mar") and tree.heads == (2, 2, -1)


def test_spaces_in_a_form_become_underscores_and_upos_underscore_becomes_x():
    text = "1\tNew York\tNew York\tPROPN\t_\t_\t0\troot\t_\t_\n2\tgreat  city\t_\t_\t_\t_\t1\tappos\t_\t_\n\n"
    (tree,) = parse_treebank(text.encode()).trees
    assert tree.words == ("New_York", "great_city") and tree.text.split(" ") == list(tree.words)
    assert tree.upos == ("PROPN", "X") and tree.relations == ("root", "appos")


BROKEN = {
    "no root": (sentence(("a", "X", 2, "dep"), ("b", "X", 1, "dep")), "no word has head 0"),
    "two roots": (sentence(("a", "X", 0, "root"), ("b", "X", 0, "root")), "2 words have head 0 (words 1, 2)"),
    "cycle": (sentence(("a", "X", 0, "root"), ("b", "X", 3, "dep"), ("c", "X", 2, "dep")), "cycle"),
    "out of range": (sentence(("a", "X", 0, "root"), ("b", "X", 40, "dep")),
                     "word 2's head 40 is outside the sentence (it has 2 words)"),
    "own head": (sentence(("a", "X", 0, "root"), ("b", "X", 2, "dep")), "word 2 is its own head"),
    "too long": (sentence(*[("w", "X", 0 if i == 0 else 1, "dep") for i in range(treebank.MAX_WORDS + 1)]),
                 f"it has {treebank.MAX_WORDS + 1} words; the limit is {treebank.MAX_WORDS}"),
    "bad head": (CAT.replace("\t3\tpunct", "\tx\tpunct"), "word 5's HEAD 'x' is not a word number"),
    "huge head": (CAT.replace("\t3\tpunct", "\t" + "9" * 5000 + "\tpunct"), "word 5's HEAD '9999"),
    "no head": (CAT.replace("\t3\tpunct", "\t_\tpunct"), "word 5 has no head"),
    "ids skip": (CAT.replace("\n4\t", "\n7\t"), "this line has 7 where 4 was due"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_sentence_is_left_out_with_its_reason_and_the_good_ones_load(case):
    bad, reason = BROKEN[case]
    bank = parse_treebank((CAT + bad + RAIN).encode())
    assert [t.words[1] for t in bank.trees] == ["cat", "rained"]
    assert bank.n_sentences == 3 and bank.n_skipped == 1 and len(bank.skipped) == 1
    assert bank.skipped[0].startswith("sentence 2, line ") and reason in bank.skipped[0]
    assert bank.summary.endswith("; 1 left out")


def test_a_file_where_nothing_is_usable_is_one_error_with_the_first_reason():
    message = refused((BROKEN["no root"][0] + BROKEN["cycle"][0]).encode())
    assert message.startswith("no sentence of bank.conllu could be read: sentence 1, line 1: no word has head 0")


@pytest.mark.parametrize("raw, words", [
    (bytes(range(256)) * 4, "binary data"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "PNG image"),
    (b"PK\x03\x04\x14\x00\x00\x00", "ZIP archive"),
    (b"\n<!DOCTYPE html>\n<html><body><pre>1\tThe</pre></body></html>\n", "web page (HTML)"),
    (b"", "is empty"),
    (b" \n\t\n", "only whitespace"),
    (b"The cat slept.\n\nIt rained!\n", "not a CoNLL-U file: line 1: 'The cat slept.'"),
    (b"1\tThe\tthe\n", "has 3 columns"),
    (b"# just a comment\n\n# another\n", "only comments"),
    (CAT.replace("The", "Th\xe9").encode("latin-1"), "not UTF-8 text (byte 0xe9 at position 4, on line 1)"),
    (CAT.encode("utf-16"), "looks like UTF-16"),
    (b"# global.columns = ID FORM HEAD\n" + CAT.encode(), "declares columns of its own"),
])
def test_a_file_that_is_not_conllu_is_one_sentence_naming_the_problem(raw, words):
    message = refused(raw)
    assert message.startswith("bank.conllu") and words in message


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(treebank, "MAX_TREEBANK_BYTES", 1000)
    assert "is 3.1 kB; the limit is 1 kB" in refused(TWO.encode() * 10)
    path = tmp_path / "big.conllu"
    path.write_text(TWO * 10)
    with pytest.raises(InputError, match=r"big\.conllu is .*the limit is 1 kB"):
        read_treebank(path)


def test_an_uploads_name_is_shown_on_one_line():
    assert refused(b"", "evil\n\x1b[2Jname.conllu" + "x" * 200).startswith("evil[2Jname.conllu")


def test_the_sentence_cap_keeps_the_first_sentences_with_a_note(monkeypatch):
    monkeypatch.setattr(treebank, "MAX_SENTENCES", 3)
    bank = parse_treebank((RAIN * 3 + BROKEN["no root"][0] + CAT * 2).encode(), "many.conllu")
    assert len(bank.trees) == 3 and bank.n_unread == 3 and bank.n_skipped == 0
    assert bank.notes == ["only the first 3 sentences were kept; 3 more in many.conllu were not read"]


def test_write_refuses_what_would_not_read_back(tmp_path):
    tree = parse_treebank(RAIN.encode()).trees[0]
    with pytest.raises(InputError, match="there are no trees"):
        write_treebank([], tmp_path / "x.conllu")
    with pytest.raises(InputError, match="not a Tree"):
        write_treebank(["It rained !"], tmp_path / "x.conllu")
    spaced = type(tree)(("It", "rained hard"), (1, -1), ("expl", "root"), ("PRON", "VERB"))
    with pytest.raises(InputError, match="holding whitespace"):
        write_treebank([spaced], tmp_path / "x.conllu")
    assert not (tmp_path / "x.conllu").exists()


def test_a_big_file_says_how_far_its_reading_is_and_a_small_one_says_nothing(tmp_path):
    """Issue 52: 20 MiB of 100-word sentences take 16-40 s to read; the page and the command draw how far."""
    lines_in = (CAT + RAIN).count("\n")  # two sentences: 10 lines, their blank lines included
    calls = []
    bank = parse_treebank(((CAT + RAIN) * 300).encode(), "big.conllu", progress=lambda *a: calls.append(a))
    assert len(bank.trees) == 600
    total = (CAT + RAIN).count("\n") * 300 + 1  # the text split on line ends: one more piece than ends
    assert [message for _, message in calls] == [
        f"reading the treebank: line {n * lines_in // 2 - 1:,} of {total:,}" for n in (250, 500)]
    assert [fraction for fraction, _ in calls] == [(n * lines_in // 2 - 1) / total for n in (250, 500)]
    path = tmp_path / "small.conllu"
    path.write_text(TWO, encoding="utf-8")
    read_treebank(path, progress=lambda *a: calls.append(a))  # fewer than REPORT_EVERY sentences: no report
    assert len(calls) == 2 and treebank.REPORT_EVERY == 250


def test_a_sentence_of_invisible_words_is_left_out_with_a_reason_that_names_no_text_box():
    """A treebank FORM of a zero-width space alone: the model reads no token of it. The sentence is left out (the
    tokenizer's own message names "Text A", a box the Syntax page does not have), and the rest is analysed."""
    from bertviz_lab.bert.tokenizer import WordPieceTokenizer
    from bertviz_lab.corpus.tree import Tree
    from bertviz_lab.syntax.report import Corpus, fitting, story_corpus

    tokenizer = WordPieceTokenizer.from_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "."])
    hidden = Tree(("\u200b", "\u2060"), (-1, 0), ("root", "dep"), ("X", "X"))
    kept = fitting(Corpus([hidden, *story_corpus(10).trees], "mine.conllu"), tokenizer, 64)
    assert len(kept.trees) == 10 and "Text A" not in kept.note
    assert kept.note == ("1 sentences this model cannot read word by word were left out (the first: it has no "
                         "characters the tokenizer can read (only invisible or control characters))")
    from bertviz_lab.syntax.words import encode_words  # the one place the syntax package encodes a sentence's words

    with pytest.raises(InputError, match="^it has no characters the tokenizer can read"):
        encode_words(tokenizer, hidden.words, 64)
