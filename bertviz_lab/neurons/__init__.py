"""Inside the feed-forward layer: two thirds of BERT's weights, read as key-value memories (Geva et al. 2021).

Each layer's feed-forward block is out = LN(a + W_2 act(W_1 a + b_1) + b_2). Neuron n of layer l is one row of W_1
(with b_1[n]), the "key" whose match with a token's vector a makes its activation act(w_1[n] . a + b_1[n]), and one
column of W_2, the "value" it adds to the residual stream in proportion to that activation.

- read.py: the activations (after the activation function) of every layer, by a PyTorch forward hook on each layer's
  `intermediate` module (HF's name), and edits to them (a neuron switched off, or set to its corpus mean).
- values.py: what a neuron writes, its value vector read through the MLM head's matrices.
- index.py: each neuron's top-activating contexts over a corpus, streamed and kept on disk by the weights' hash.
- factors.py: a sentence's activations factorised into a few parts (non-negative matrix factorisation, as Ecco).
- behind.py: the neurons a [MASK] guess rests on (activation x gradient, integrated gradients over the activation
  as Dai et al. 2022 do), and the causal test against random neurons of the same layers.
- outliers.py: the LayerNorm dimensions of outlying weight and bias (Kovaleva et al. 2021) and the held-out MLM
  loss when two of them are switched off, against two random ones.
"""
