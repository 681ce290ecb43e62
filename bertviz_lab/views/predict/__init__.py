"""Mask & predict: the model's guesses at every [MASK], and what the model reads of the text."""
