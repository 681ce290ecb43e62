"""outliers.py: the outlier dimensions with each layer's gain and bias, the loss test on a few held-out sentences,
and the discriminator (no loss to measure, said in a sentence)."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.neurons.outliers import outlier_dims
from bertviz_lab.views.neurons.outliers import NO_LOSS, held_out, outliers_view

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_shipped_model(shipped):
    sentences = held_out(12)
    view = outliers_view(shipped, sentences, draws=3)
    layers, width = shipped.config.num_hidden_layers, shipped.config.hidden_size
    assert view.gamma.shape == view.beta.shape == (layers, width) and view.sentences == 12
    assert view.dims == outlier_dims(shipped.model).dims
    layer, dim = 0, int(view.outliers.weight_dims[0, 0])
    assert view.gamma[layer, dim] == float(shipped.model.bert.encoder.layer[0].output.LayerNorm.weight.detach()[dim])
    assert view.test.random_loss.shape == (3,) and view.test.dims == view.dims and view.no_head == ""


def test_no_sentences_is_one_sentence(shipped):
    with pytest.raises(InputError, match="no sentences to measure the loss on"):
        outliers_view(shipped, ["", "  "])


def test_the_discriminator_shows_the_weights_without_the_test(family):
    view = outliers_view(family("electra-discriminator"), draws=2)
    assert view.test is None and view.no_head == NO_LOSS and view.sentences == 0
    assert np.isfinite(view.gamma).all() and view.gamma.shape == (2, 32)
