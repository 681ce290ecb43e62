"""What a neuron writes: its value vector (its column of W_2, `output.dense.weight[:, n]`) read in the vocabulary's
space (Geva et al. 2021 and 2022, Dar et al. 2022), the tokens it promotes and suppresses.

The MLM head turns a final hidden state h into logits as W_dec LN(act(W_T h + b_T)) + b. Its matrices are read
here without its nonlinear parts: scores(v) = W_dec (gamma * centre(W_T v)), where W_T is the head's transform,
gamma its LayerNorm's gain, centre subtracts the mean (what LayerNorm does before it divides), and W_dec the
decoder (the word embeddings, tied). What is left out, stated on the page: the head's activation, the LayerNorm's
division by the spread (a positive number: it changes no ranking), the biases (the same for every neuron), and the
layers above the neuron's, whose LayerNorms and blocks stand between its value and the head. It is a reading of
the weights, not a test: switching the neuron off (read.Edit) is the test.

ALBERT's and ELECTRA-small's word vectors are narrower than their layers: W_T maps the layers' width to theirs,
so the same formula reads every family. ELECTRA's discriminator has no MLM head: no vocabulary to read into.
"""

from __future__ import annotations

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.read import check_neuron

NO_HEAD = ("this model has no masked-language-model head (ELECTRA's discriminator), so there is no vocabulary to "
           "read a neuron's value in: switching it off, below, still shows what it does")


def value_vectors(model: BertForPreTraining, layer: int) -> torch.Tensor:
    """(d_ff, d): row n is neuron n's value vector, what it adds to the residual stream per unit of activation."""
    check_neuron(model, layer)
    return model.bert.encoder.layer[layer].output.dense.weight.detach().T


def key_vectors(model: BertForPreTraining, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d_ff, d) and (d_ff,): row n of W_1 and b_1[n], the pattern neuron n detects (its activation is
    act(w . a + b) for a token's vector a after the attention half of the layer)."""
    check_neuron(model, layer)
    dense = model.bert.encoder.layer[layer].intermediate.dense
    return dense.weight.detach(), dense.bias.detach()


@torch.no_grad()
def vocabulary_scores(model: BertForPreTraining, vectors: torch.Tensor) -> torch.Tensor:
    """(k, V) the vocabulary scores of k vectors (k, d) through the MLM head's matrices (see the module's note)."""
    if not model.has_mlm:
        raise InputError(NO_HEAD)
    head = model.cls.predictions
    t = vectors.to(head.transform.dense.weight.dtype) @ head.transform.dense.weight.T  # (k, e)
    t = (t - t.mean(-1, keepdim=True)) * head.transform.LayerNorm.weight
    return (t @ model.bert.embeddings.word_embeddings.weight.T).float()  # (k, V): the decoder is the word vectors


def promoted(model: BertForPreTraining, layer: int, neuron: int, k: int = 10,
             vocab_size: int | None = None) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Neuron `neuron` of `layer`: the k token ids its value promotes most and the k it suppresses most, each with
    its score (the scores of all tokens are centred: 0 is the average token). `vocab_size`: the tokenizer's (the
    decoder may have padding rows past it)."""
    check_neuron(model, layer, neuron)
    scores = vocabulary_scores(model, value_vectors(model, layer)[neuron][None])[0]
    scores = scores[: vocab_size or None].double()
    scores = (scores - scores.mean()).cpu().numpy()
    order = np.argsort(-scores, kind="stable")
    up = [(int(i), float(scores[i])) for i in order[:k]]
    down = [(int(i), float(scores[i])) for i in order[::-1][:k]]
    return up, down
