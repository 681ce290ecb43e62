"""A tokenizer whose size does not match the model's rows of word embeddings (bert/checkpoint.py `vocab_warning`).

More tokens than rows is refused by every reader, in one sentence with both numbers. Fewer is opened, since a model
may carry rows no token reads, but said where the user reads it (the loaded checkpoint, every page's model note, the
command line's stderr): the guesses are then ranked among the tokenizer's tokens only. Rows that only pad the count
to a multiple of 8 (fewer than 128 of them, as transformers' pad_to_multiple_of and Megatron's 128 leave) go unsaid.
"""

from __future__ import annotations

import pytest
import transformers

from bertviz_lab.bert import checkpoint
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.in_memory import read_model
from bertviz_lab.cli import main
from bertviz_lab.errors import CheckpointError
from tests.helpers.family_models import build
from tests.helpers.lab import open_page
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")
FAMILIES = ["bert", "distilbert", "roberta", "xlm-roberta", "electra", "albert"]
EXTRA = 300  # rows no token reads: far more than padding


@pytest.mark.parametrize("tokens, rows", [(2171, 2171), (30522, 30592), (100, 128), (2171, 2176), (28996, 29056),
                                          (120, 120)])
def test_rows_that_pad_the_count_go_unsaid(tokens, rows):
    assert checkpoint.vocab_warning(tokens, rows) is None


@pytest.mark.parametrize("tokens, rows", [(100, 2171), (2171, 30522), (60, 100), (30521, 30522), (100, 256)])
def test_rows_no_token_reads_are_said_with_both_numbers(tokens, rows):
    said = checkpoint.vocab_warning(tokens, rows)
    assert said is not None and f"{tokens:,} tokens" in said and f"{rows:,} rows" in said
    assert said.count(". ") == 0 and said.endswith(".")  # one sentence


def resized(name: str, folder, extra: int = 0, pad: int | None = None):
    """Family member `name` saved in `folder` with `extra` more rows of word embeddings than its tokenizer has
    tokens (fewer, if negative), or padded to a multiple of `pad`; the tokenizer left as it was."""
    model, tok = build(name, folder)
    model.resize_token_embeddings(len(tok) + extra, pad_to_multiple_of=pad)
    model.save_pretrained(folder)
    return model, tok


@pytest.mark.parametrize("name", FAMILIES)
def test_a_folder_with_more_rows_than_tokens_opens_and_says_so(name, tmp_path):
    model, tok = resized(name, tmp_path / name, EXTRA)
    ckpt = load_checkpoint(tmp_path / name)
    assert ckpt.config.vocab_size == len(tok) + EXTRA and ckpt.tokenizer.vocab_size == len(tok)
    assert f"{len(tok):,} tokens" in ckpt.vocab_warning and f"{len(tok) + EXTRA:,} rows" in ckpt.vocab_warning


@pytest.mark.parametrize("name", FAMILIES)
def test_a_model_in_memory_with_more_rows_than_tokens_opens_and_says_so(name, tmp_path):
    model, tok = build(name, tmp_path / name)
    model.resize_token_embeddings(len(tok) + EXTRA)
    for tokenizer in (tok, transformers.AutoTokenizer.from_pretrained(tmp_path / name)):  # slow (WordPiece) and fast
        ckpt = read_model(model, tokenizer)
        assert f"{len(tok):,} tokens" in ckpt.vocab_warning and f"{len(tok) + EXTRA:,} rows" in ckpt.vocab_warning


@pytest.mark.parametrize("name", ["bert", "roberta", "albert"])
def test_padding_rows_go_unsaid_in_every_reader(name, tmp_path):
    model, tok = resized(name, tmp_path / name, pad=64)
    assert model.config.vocab_size % 64 == 0 and model.config.vocab_size - len(tok) < 64
    assert load_checkpoint(tmp_path / name).vocab_warning is None
    assert read_model(model, tok).vocab_warning is None


@pytest.mark.parametrize("name", ["bert", "roberta", "xlm-roberta"])  # vocab.txt; tokenizer.json (BPE, Unigram)
def test_more_tokens_than_rows_is_refused_with_both_numbers(name, tmp_path):
    model, tok = resized(name, tmp_path / name, -7)
    said = f"lists {len(tok):,} tokens but the model has room for {len(tok) - 7:,}"
    with pytest.raises(CheckpointError, match=said):
        load_checkpoint(tmp_path / name)
    with pytest.raises(CheckpointError, match=said):
        read_model(model, tok)


@pytest.fixture
def short_vocab(tiny_checkpoint):
    """The tiny checkpoint (100 rows) with only the first 40 lines of its vocab.txt."""
    vocab = tiny_checkpoint / "vocab.txt"
    vocab.write_text("".join(line + "\n" for line in vocab.read_text().splitlines()[:40]))
    return tiny_checkpoint


def test_the_command_line_says_it_on_stderr(short_vocab, capsys):
    assert main(["predict", "--checkpoint", str(short_vocab), "--device", "cpu", "the [MASK] sat ."]) == 0
    out, err = capsys.readouterr()
    assert "40 tokens" in err and "100 rows" in err and "40 tokens" not in out


def test_the_pages_say_it_where_the_guesses_are(short_vocab):
    for script in (ROOT / "app.py", ROOT / "pages" / "predict.py"):
        at = open_page(script, short_vocab)
        assert any("40 tokens" in w.value and "100 rows" in w.value for w in at.warning), script.name
