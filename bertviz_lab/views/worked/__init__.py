"""Worked examples: the seed texts' hand computations, redone exactly (forward_pass.py: seed text 000; onehot.py: seed
text 001)."""
