"""Representations: one word's vectors in many sentences and the logit lens (vectors.py), a typed word found in a
sentence (words.py), neighbours and geometry (neighbours.py), shapes and padding (shapes.py)."""
