"""Inside the feed-forward layer: what a learner asks (ask.py's `NeuronAsk`), the corpus whose top contexts index
each neuron (corpus.py), one sentence's activations and factors (sentence.py), one neuron's contexts, value and
switch-off (neuron.py), the neurons behind a guess and the causal test against random ones, with the built-in
grammatical and word-knowledge guesses side by side (behind.py), the outlier LayerNorm dimensions (outliers.py), and
what each says in sentences written from its numbers (reading.py)."""
