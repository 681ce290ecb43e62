"""Tests for bertviz_lab.bert.tokenizer: parity with transformers' BertTokenizerFast,
word/sequence bookkeeping, [MASK] handling, truncation, errors and save/load.

Every vocabulary is built here in a few lines; nothing is downloaded.
"""

import json
import random
import string

import pytest
from transformers import BertTokenizerFast

from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, Encoding, WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.errors import CheckpointError, InputError

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "play", "love", "and", "in", "is", "it",
         "hello", "world", "caf", "cafe", "creme", "brulee", "café", "crème", "brûlée", "Café",
         "i", "am", "run", "walk", "talk", "1984", "pm", "my", "so"]
PIECES = ["##ing", "##s", "##ed", "##er", "##é", "##e", "##84", "##14", "##ly"]
CJK = list("我爱自然语言处")  # "理" deliberately missing -> [UNK]
LETTERS = list(string.ascii_letters) + list("éèêûüïçñ") + list("ελληνικάΕ") + list("مرحبالع")
SYMBOLS = list(string.digits) + list(string.punctuation) + ["🤖", "€"]

SENTENCES = [
    "Café crème brûlée",
    "Hello, world! It's 3:30 p.m.",
    "in 1984, 3.14",
    "我爱自然语言处理",
    "I love 🤖 and 🍕!",
    "ThE CaT is PLAYING with the DOG",
    "the\u200bcat  \t sat\u00a0on the mat",
    "مرحبا بالعالم",
    "naïve façade, Ελληνικά €5",
]
PAIRS = [(SENTENCES[i], SENTENCES[j]) for i, j in [(0, 1), (2, 3), (4, 5), (6, 7), (8, 0), (5, 4)]]


def _vocab() -> list[str]:
    tokens = list(SPECIAL_TOKENS) + WORDS + PIECES + CJK + LETTERS + SYMBOLS
    tokens += ["##" + c for c in string.ascii_lowercase + string.digits + "éèûïçαεηλνικάمرحبالع"]
    return list(dict.fromkeys(tokens))  # unique, order kept


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in _vocab()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tok(vocab_file):
    return WordPieceTokenizer.from_vocab_file(vocab_file)


def _corpus(n: int = 200) -> list[str]:
    rng = random.Random(1234)
    nouns = ["cat", "dog", "teacher", "student", "robot", "garden", "river", "café"]
    verbs = ["sees", "likes", "is playing with", "was walking to", "jumped over", "loves"]
    return [f"The {rng.choice(nouns)} {rng.choice(verbs)} the {rng.choice(nouns)} "
            f"{rng.randint(1, 99)} times{rng.choice(['.', '!', '?'])}" for _ in range(n)]


def _assert_parity(ours: Encoding, hf: dict) -> None:
    assert ours.ids == hf["input_ids"]
    assert ours.segment_ids == hf["token_type_ids"]
    assert ours.offsets == [tuple(o) for o in hf["offset_mapping"]]


@pytest.mark.parametrize("lowercase", [True, False])
def test_matches_transformers_on_single_texts_and_pairs(vocab_file, lowercase):
    ours = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=lowercase)
    hf = BertTokenizerFast(str(vocab_file), do_lower_case=lowercase)
    for text in SENTENCES:
        _assert_parity(ours.encode(text), hf(text, return_offsets_mapping=True))
    for a, b in PAIRS:
        _assert_parity(ours.encode(a, b), hf(a, b, return_offsets_mapping=True))


def test_casing_changes_the_ids(vocab_file):
    cased = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=False).encode("Café")
    uncased = WordPieceTokenizer.from_vocab_file(vocab_file).encode("Café")
    assert cased.tokens[1:-1] == ["Café"]
    assert uncased.tokens[1:-1] == ["cafe"]  # uncased BERT also strips accents


def test_unknowns_and_odd_characters_do_not_crash(tok):
    enc = tok.encode("理 🍕 \u200b\u200d ok")
    assert enc.tokens[1] == "[UNK]" and enc.tokens[2] == "[UNK]"
    assert len(enc.ids) == len(enc.tokens) == len(enc.offsets) == len(enc.word_ids)


def test_trained_tokenizer_saves_and_loads_in_transformers(tmp_path):
    corpus = _corpus()
    ours = WordPieceTokenizer.train(corpus, vocab_size=300, min_frequency=2)
    assert ours.vocab[:5] == list(SPECIAL_TOKENS)
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (0, 1, 2, 3, 4)
    assert 50 < ours.vocab_size <= 300
    ours.save(tmp_path)
    hf = BertTokenizerFast.from_pretrained(str(tmp_path))
    assert hf.mask_token_id == ours.mask_id and hf.model_max_length == 512
    probes = corpus[:5] + ["A student was playing Tetris in the café", "The [MASK] jumped!"]
    for text in probes:
        _assert_parity(ours.encode(text), hf(text, return_offsets_mapping=True))
    _assert_parity(ours.encode(probes[-2], probes[-1]),
                   hf(probes[-2], probes[-1], return_offsets_mapping=True))


def test_cased_save_is_loaded_cased(tmp_path):
    ours = WordPieceTokenizer.train(_corpus(), vocab_size=300, lowercase=False)
    ours.save(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["do_lower_case"] is False
    again = from_dir(tmp_path)
    assert again.lowercase is False
    hf = BertTokenizerFast.from_pretrained(str(tmp_path))
    assert again.encode("The Cat").ids == hf("The Cat")["input_ids"]
    assert again.encode("The Cat").ids != again.encode("the cat").ids


def test_save_then_from_dir_round_trips(tok, tmp_path):
    tok.save(tmp_path / "nested" / "ckpt")
    again = from_dir(tmp_path / "nested" / "ckpt")
    assert again.vocab == tok.vocab and again.lowercase is True
    for a, b in PAIRS:
        assert again.encode(a, b) == tok.encode(a, b)
    assert not list(tmp_path.glob("nested/ckpt/*.tmp"))  # no temp files left behind


def test_word_pieces_share_a_word_id_and_pair_numbering_continues(tok):
    enc = tok.encode("the cat playing", "dog sat")
    assert enc.tokens == ["[CLS]", "the", "cat", "play", "##ing", "[SEP]", "dog", "sat", "[SEP]"]
    assert enc.word_ids == [None, 0, 1, 2, 2, None, 3, 4, None]
    assert enc.sequence_ids == [None, 0, 0, 0, 0, None, 1, 1, None]
    assert enc.segment_ids == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert enc.offsets[3:5] == [(8, 12), (12, 15)] and enc.offsets[6] == (0, 3)
    assert enc.special_mask == [True, False, False, False, False, True, False, False, True]
    assert len(enc) == 9 and enc.truncated == 0


@pytest.mark.parametrize("text", ["the [MASK] sat", "the [mask] sat", "the [Mask] sat"])
def test_typed_mask_is_one_token_and_one_word(tok, text):
    enc = tok.encode(text)
    assert enc.ids == [tok.cls_id, tok.token_to_id("the"), tok.mask_id, tok.token_to_id("sat"), tok.sep_id]
    assert enc.word_ids == [None, 0, 1, 2, None]
    assert enc.offsets[2] == (4, 10)  # span in the text as typed
    assert enc.special_mask == [True, False, False, False, True]


def test_lowercase_mask_is_not_special_for_a_cased_tokenizer(vocab_file):
    cased = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=False)
    assert cased.mask_id in cased.encode("the [MASK] sat").ids
    assert cased.mask_id not in cased.encode("the [mask] sat").ids


def test_single_text_truncation_keeps_the_frame_and_reports_the_loss(tok):
    text = "the cat sat on the mat and the dog is playing in the world " * 3
    full = tok.encode(text)
    enc = tok.encode(text, max_length=16)
    assert len(enc) == 16 and enc.ids[0] == tok.cls_id and enc.ids[-1] == tok.sep_id
    assert enc.ids[:-1] == full.ids[:15]
    assert enc.truncated == len(full) - 16 > 0


@pytest.mark.parametrize("len_a, len_b, max_length", [(12, 12, 16), (20, 3, 12), (3, 20, 12),
                                                      (9, 8, 10), (2, 30, 5), (6, 6, 7)])
def test_pair_truncation_is_longest_first_like_transformers(tok, vocab_file, len_a, len_b, max_length):
    hf = BertTokenizerFast(str(vocab_file))
    a, b = " ".join(WORDS[:len_a]), " ".join(reversed(WORDS[-len_b:]))
    assert len(tok.encode(a)) == len_a + 2 and len(tok.encode(b)) == len_b + 2
    enc = tok.encode(a, b, max_length=max_length)
    ref = hf(a, b, truncation="longest_first", max_length=max_length, return_offsets_mapping=True)
    _assert_parity(enc, ref)
    assert len(enc) == max_length and enc.truncated == len_a + len_b + 3 - max_length
    assert 0 in enc.sequence_ids and 1 in enc.sequence_ids
    assert enc.ids[-1] == tok.sep_id


def test_no_truncation_when_it_fits(tok):
    assert tok.encode("the cat", "the dog", max_length=7).truncated == 0


@pytest.mark.parametrize("max_length", [5, 7, 10, 16, 512])
def test_batched_ids_are_exactly_what_encode_gives(tok, max_length):
    rng = random.Random(max_length)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 14))) + rng.choice(["", " .", " [MASK] ?"])
             for _ in range(40)]
    pairs = [(a, None if i % 4 == 0 else b) for i, (a, b) in enumerate(zip(texts, reversed(texts)))]
    expected = [tok.encode(a, b, max_length=max_length) for a, b in pairs]
    assert tok.encode_ids(pairs, max_length) == [(e.ids, e.segment_ids) for e in expected]
    assert any(e.truncated for e in expected) == (max_length < 30)  # both sides of the cut were exercised


def test_batched_ids_raise_the_sentence_encode_would(tok):
    with pytest.raises(InputError, match="no characters"):
        tok.encode_ids([("the cat", None), ("\u200b\u200b", None)])
    with pytest.raises(InputError, match="at least 5"):
        tok.encode_ids([("the cat", "the dog")], max_length=4)


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text_is_an_input_error(tok, text):
    with pytest.raises(InputError, match="empty"):
        tok.encode(text)
    with pytest.raises(InputError, match="Text B is empty"):
        tok.encode("the cat", text)


def test_bad_arguments_are_input_errors(tok):
    with pytest.raises(InputError, match="string"):
        tok.encode(42)
    with pytest.raises(InputError, match="at least 3"):
        tok.encode("the cat", max_length=2)
    with pytest.raises(InputError, match="at least 5"):
        tok.encode("the cat", "the dog", max_length=4)
    with pytest.raises(InputError, match="no characters"):
        tok.encode("\u200b\u200b")
    with pytest.raises(InputError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])
    with pytest.raises(InputError, match="no characters"):
        tok.encode("the cat", "\x00\u200b")
    with pytest.raises(InputError, match="list of sentences"):
        WordPieceTokenizer.train("the cat sat")
    with pytest.raises(InputError, match="strings"):
        WordPieceTokenizer.train(["the cat", 7])
    with pytest.raises(InputError, match="No training texts"):
        WordPieceTokenizer.train([])
    assert isinstance(tok.encode("the", max_length=3), Encoding)


def test_missing_vocab_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="vocab.txt"):
        from_dir(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "nope.txt")


def test_vocab_without_mask_names_the_missing_token(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"\[MASK\]"):
        from_dir(tmp_path)
    with pytest.raises(CheckpointError, match="twice"):
        WordPieceTokenizer.from_vocab(list(SPECIAL_TOKENS) + ["the", "the"])


def test_broken_tokenizer_config_is_a_checkpoint_error(tok, tmp_path):
    tok.save(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        from_dir(tmp_path)


def test_decode_and_lookups(tok):
    enc = tok.encode("the cat playing", "[MASK] sat")
    assert tok.decode(enc.ids) == "[CLS] the cat playing [SEP] [MASK] sat [SEP]"
    assert tok.decode(enc.ids, skip_special_tokens=True) == "the cat playing sat"
    assert tok.id_to_token(tok.token_to_id("##ing")) == "##ing"
    assert tok.token_to_id("zebra") is None
    assert tok.special_ids == frozenset(range(5))
    assert tok.vocab[tok.mask_id] == "[MASK]"
