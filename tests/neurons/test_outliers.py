"""outliers.py: a planted outlier dimension is found and switching it off moves the MLM loss far more than random
dimensions do; the masks and draws are fixed by the seed; the shipped model's measured dimensions and losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.outliers import held_out, outlier_dims, outlier_test

pytestmark = pytest.mark.usefixtures("one_thread")

PLANTED = 13
SENTENCES = ["the cat sat on the mat .", "the dog sat on the rug .", "i went to the bank .",
             "the food was delicious today .", "how is the weather today ?", "the cat and the dog sat ."] * 3


def tiny(plant: bool = True) -> BertForPreTraining:
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, max_position_embeddings=64)).eval()
    with torch.no_grad():
        for layer in model.bert.encoder.layer:  # random LayerNorms, then one dimension's gain 20 times the rest
            for norm in (layer.attention.output.LayerNorm, layer.output.LayerNorm):
                norm.weight.add_(0.1 * torch.randn_like(norm.weight))
                norm.bias.add_(0.1 * torch.randn_like(norm.bias))
                if plant:
                    norm.weight[PLANTED] *= 20
    return model


def test_a_planted_outlier_is_found_and_matters_more_than_random_dims(tiny_tokenizer):
    model = tiny()
    found = outlier_dims(model)
    assert (found.weight_dims[:, 0] == PLANTED).all() and PLANTED in found.dims
    assert (found.weight_z[:, 0] > 5).all()
    test = outlier_test(model, tiny_tokenizer, SENTENCES, draws=10, seed=0)
    assert not np.isin(test.random_dims, test.dims).any()
    # an untrained model's loss is at chance (log 100): a dimension switched off moves it either way; how far is the
    # test (measured: 0.0267 for the planted one, against at most 0.0010 for 10 random pairs)
    assert abs(test.loss_off - test.loss) > 5 * np.abs(test.random_loss - test.loss).max()
    plain = outlier_dims(tiny(plant=False))
    assert not (plain.weight_dims[:, 0] == PLANTED).all()  # found because it was planted


def test_the_test_is_fixed_by_its_seed(tiny_tokenizer):
    model = tiny()
    one, two = (outlier_test(model, tiny_tokenizer, SENTENCES, dims=(1, 2), draws=4, seed=7) for _ in range(2))
    assert np.array_equal(one.random_dims, two.random_dims) and np.array_equal(one.random_loss, two.random_loss)
    assert one.loss == two.loss and one.masked == two.masked
    other = outlier_test(model, tiny_tokenizer, SENTENCES, dims=(1, 2), draws=4, seed=8)
    assert not np.array_equal(one.random_dims, other.random_dims)
    # every sentence has 6 or 7 words: 1 masked each (15% rounded, at least one)
    assert one.masked == len(SENTENCES)


def test_progress_and_bad_input(tiny_tokenizer):
    seen = []
    outlier_test(tiny(), tiny_tokenizer, SENTENCES[:2], draws=3, progress=lambda f, m: seen.append(f))
    assert seen == sorted(seen) and seen[0] == 0 and seen[-1] == 1.0 and len(seen) == 6
    with pytest.raises(InputError, match="two different"):
        outlier_test(tiny(), tiny_tokenizer, SENTENCES, dims=(3, 3))
    with pytest.raises(InputError, match="sentences"):
        outlier_test(tiny(), tiny_tokenizer, [])


def test_held_out_sentences_are_distinct_and_fixed():
    first = held_out(50)
    assert len(set(first)) == 50 and first == held_out(50) and first != held_out(50, seed=1)


def test_the_shipped_model_has_no_outlier_dims_that_matter(shipped):
    """Measured (python -m bench.neurons_findings): the shipped model's most outlying gains and biases are 3 to 4.4
    standard deviations out, no dimension is among them in more than 2 of the 8 slots, and switching the chosen
    pair (71, 221) off moves the held-out MLM loss about as much as a random pair (here 1.0989 -> 1.1039; random
    pairs -0.012 to +0.014): no BERT-busters outliers after 5,000 steps."""
    found = outlier_dims(shipped.model)
    assert found.dims == (71, 221) and found.counts.max() == 2
    assert np.abs(found.weight_z).max() < 5 and np.abs(found.bias_z).max() < 5
    test = outlier_test(shipped.model, shipped.tokenizer, held_out(100), draws=5, seed=0)
    assert not test.beats_random
    assert abs(test.loss_off - test.loss) < 0.02 and test.accuracy_off > test.accuracy - 0.05
