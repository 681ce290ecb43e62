"""The corpus's word vectors (probing/features.py): every family's reading equals transformers' own hidden states
averaged over each word's tokens (as tests/syntax/test_report.py checks the Syntax page's reading), stacked sentence
after sentence; `stacked`'s rows, sentence ids and starts, by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.probing.features import read_features, stacked
from bertviz_lab.syntax.encode import read_corpus
from bertviz_lab.syntax.report import fitting, story_corpus
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

FAMILIES = ("bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra-generator", "electra-discriminator")


@pytest.mark.parametrize("name", FAMILIES)
def test_word_vectors_are_transformers_hidden_states_averaged_over_each_words_tokens(name, tmp_path):
    torch.manual_seed(0)
    hf, _ = build(name, tmp_path)
    ckpt = load_checkpoint(tmp_path)
    corpus = fitting(story_corpus(60), ckpt.tokenizer, ckpt.config.max_tokens).trees
    readings = read_corpus(ckpt.model, ckpt.tokenizer, corpus)
    cut = next(i for i, r in enumerate(readings) if any(len(g) > 1 for g in r.groups))  # a word in pieces
    trees = corpus[:3] + [corpus[cut]]
    features = read_features(ckpt.model, ckpt.tokenizer, trees, batch_size=4)
    L, d = ckpt.config.num_hidden_layers, ckpt.config.hidden_size
    assert features.vectors.shape == (sum(map(len, trees)), L + 1, d) and features.layers == L + 1
    split = 0
    for s, (tree, reading) in enumerate(zip(trees, read_corpus(ckpt.model, ckpt.tokenizer, trees))):
        ids = torch.tensor([ckpt.tokenizer.encode(tree.text).ids])
        with torch.no_grad():
            hidden = hf.base_model(input_ids=ids, output_hidden_states=True).hidden_states  # L + 1 x (1, T, d)
        want = np.stack([[hidden[layer][0, list(group)].double().mean(0).numpy() for group in reading.groups]
                         for layer in range(L + 1)], axis=1)  # (W, L + 1, d)
        rows = slice(features.start[s], features.start[s + 1])
        np.testing.assert_allclose(features.vectors[rows], want, atol=1e-4, rtol=1e-4, err_msg=f"{name} {s}")
        assert (features.sentence[rows] == s).all()
        split += sum(len(group) > 1 for group in reading.groups)
    assert split > 0, f"{name}: no word was split into pieces, so nothing here tested the averaging"


def test_stacked_puts_each_sentences_words_in_rows_after_the_last():
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)  # (L + 1, W, d): 3 words
    b = -np.arange(2 * 2 * 4, dtype=np.float32).reshape(2, 2, 4)  # 2 words
    features = stacked([a, b])
    assert features.vectors.shape == (5, 2, 4) and features.vectors.dtype == np.float32
    assert features.start.tolist() == [0, 3, 5] and features.sentence.tolist() == [0, 0, 0, 1, 1]
    assert np.array_equal(features.vectors[1, 1], a[1, 1]) and np.array_equal(features.vectors[4, 0], b[0, 1])
    with pytest.raises(InputError, match="no sentences"):
        stacked([])
