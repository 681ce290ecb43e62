"""Any text a student can type or upload either gets an answer or one LabError sentence, never a traceback.

Hypothesis writes the texts: all of Unicode (control and format characters included; Python strings cannot
hold lone surrogates once encoded, and st.text() leaves them out), [MASK] and the other special tokens
sprinkled in, empty and whitespace-only boxes, texts far longer than the model reads. The input path is the
one Mask & predict and Attention take (encode, the clickable words, the predictions, the traced forward); the
corpus reader is the one Pretrain takes for pasted or uploaded text.
"""

from __future__ import annotations

import codecs

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.corpus import documents_from_text, read_text_file
from bertviz_lab.errors import LabError
from bertviz_lab.views import inputs
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.predict import guesses as vpr
from tests.helpers.lab import vocab_of_size
from tests.helpers.paths import ROOT

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PIECES = ["[MASK]", "[mask]", "[ MASK ]", "[MASK", "MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", " ", "\t", "\n",
          "\r\n", "\x00", "\u200b", "\u200d", "\ufeff", "\u202e", "\u0301", "\u00a0", "\u3000", "\U0001f600",
          "the", "cat", "un", "##able", "bank", ".", "?!", "ﬁ", "Ⅻ", "İ", "ß"]
WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000\u200b\ufeff"

any_text = st.text()  # every code point but surrogates, control characters included
sprinkled = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=40).map("".join)
blank = st.text(alphabet=WHITESPACE, max_size=30)
long_text = st.builds(lambda unit, times: unit * times, st.one_of(st.sampled_from(PIECES), st.text(min_size=1,
                      max_size=6)), st.integers(200, 5000))
texts = st.one_of(any_text, sprinkled, blank, long_text)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread


@pytest.fixture(scope="module", params=["test vocabulary", "shipped vocabulary"])
def checkpoint(request):
    """A tiny random BERT (64 positions) with the tests' 100 tokens or the shipped model's word pieces:
    the real code path, in milliseconds."""
    if request.param == "test vocabulary":
        tokenizer = WordPieceTokenizer.from_vocab(vocab_of_size(100))
    else:
        tokenizer = from_dir(ROOT / "checkpoints" / "bertviz-mini")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    return BertForPreTraining(config).eval(), tokenizer


def one_line(exc: LabError) -> None:
    message = str(exc)
    assert message.strip() and "\n" not in message and "Traceback" not in message, repr(message)


def sentence_pages(model, tokenizer, text_a: str, text_b: str | None) -> None:
    """What Mask & predict and Attention do with the boxes' text, down to the numbers they draw."""
    encoding = inputs.encode(tokenizer, model, text_a, text_b)
    assert 2 <= len(encoding) <= model.config.max_position_embeddings
    words = inputs.words(encoding, text_a, text_b)
    assert len({w.label for w in words}) == len(words)  # the pills need distinct labels
    clickable = [w.index for w in words if not w.is_mask][:2]
    try:
        report = vpr.explore_masks(model, tokenizer, encoding, clickable, top_k=3, max_steps=2)
        assert inputs.sentence(report.encoding.tokens, report.encoding.sequence_ids) and report.independent.masks
    except vpr.NothingMasked as exc:
        one_line(exc)
    view = av.explore(model, encoding)
    assert view.weights.shape[-1] == len(encoding)
    steps = av.softmax_steps(view, 0, 0, av.default_query(view))
    assert len(steps) == len(encoding)
    try:
        assert len(av.prediction_change(model, tokenizer, encoding)) > 0
    except LabError as exc:  # no [MASK]: the page shows this sentence instead of the table
        one_line(exc)


@settings(SETTINGS, max_examples=80)
@given(text_a=texts, text_b=st.one_of(st.none(), texts))
@example(text_a="", text_b=None)
@example(text_a=" \t\n\u3000", text_b=None)
@example(text_a="\x00\x01\x7f\u200b\ufeff", text_b=None)
@example(text_a="[MASK]", text_b="[MASK]")
@example(text_a="[MASK] " * 200, text_b=None)
@example(text_a="the cat sat on the [MASK] .", text_b="   ")
@example(text_a="\u0301\u0301[MASK]\u202e", text_b="[CLS][SEP][PAD]")
@example(text_a="the " * 5000, text_b="cat " * 5000)
def test_sentence_boxes_answer_or_say_why(checkpoint, text_a, text_b):
    model, tokenizer = checkpoint
    try:
        sentence_pages(model, tokenizer, text_a, text_b)
    except LabError as exc:
        one_line(exc)


@SETTINGS
@given(text=texts)
@example(text="the " * 80)
def test_refusing_truncation_is_one_sentence(checkpoint, text):
    model, tokenizer = checkpoint
    try:
        encoding = inputs.encode(tokenizer, model, text, allow_truncation=False)
    except LabError as exc:
        one_line(exc)
    else:
        assert not encoding.truncated


def test_an_overlong_text_names_its_length_when_truncation_is_refused(checkpoint):
    model, tokenizer = checkpoint
    with pytest.raises(LabError, match="202 tokens long; this model reads at most 64"):
        inputs.encode(tokenizer, model, "the " * 200, allow_truncation=False)


# --- The corpus reader: pasted text and uploaded files -----------------------------------------------------

story = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12), st.just(". "), st.just("\n\n")),
                 max_size=300).map("".join)


@SETTINGS
@given(text=st.one_of(any_text, story, blank, long_text))
@example(text="")
@example(text="\n\n\n")
@example(text="a. " * 400)
@example(text="dr. " * 400)
@example(text=("one two three four five six seven eight nine ten. " * 30).replace(". ", ".\r\n\r\n"))
@example(text="\x00\x85\u2028" * 300)
def test_pasted_text_gives_documents_or_one_sentence(text):
    try:
        documents = documents_from_text(text, min_sentences=3, min_words=10)
    except LabError as exc:
        one_line(exc)
    else:
        sentences = [s for doc in documents for s in doc]
        assert len(sentences) >= 3 and all(s.strip() for s in sentences)


uploads = st.one_of(
    st.binary(max_size=2000),
    st.text().map(lambda t: t.encode("utf-8")),
    st.tuples(st.sampled_from([codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, b""]),
              st.text(max_size=200), st.sampled_from(["utf-8", "utf-16-le", "latin-1", "cp1252"]))
    .map(lambda t: t[0] + t[1].encode(t[2], errors="replace")),
)


@SETTINGS
@given(data=uploads, limit=st.sampled_from([10, 1000, 20_000_000]))
@example(data=b"", limit=20_000_000)
@example(data=codecs.BOM_UTF8, limit=20_000_000)
@example(data=b"\xff\xfeh\x00i\x00", limit=20_000_000)
@example(data=b"caf\xe9", limit=20_000_000)
@example(data=b"text\x00more", limit=20_000_000)
@example(data=b"\xed\xa0\x80", limit=20_000_000)  # a UTF-8-encoded surrogate: not valid UTF-8
@example(data=b"a" * 11, limit=10)
def test_uploaded_bytes_give_text_or_one_sentence(data, limit):
    try:
        text = read_text_file(data, max_bytes=limit)
    except LabError as exc:
        one_line(exc)
    else:
        assert text.strip() and len(data) <= limit
        try:
            documents_from_text(text, min_sentences=1, min_words=1)
        except LabError as exc:
            one_line(exc)

