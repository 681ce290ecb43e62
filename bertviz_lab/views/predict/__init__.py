"""Mask & predict: the model's guesses at every [MASK] (guesses.py), and what the model reads of the text
(reading.py)."""
