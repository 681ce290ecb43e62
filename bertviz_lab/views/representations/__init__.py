"""Representations: one word's vectors in many sentences, the logit lens, neighbours and geometry, shapes and padding."""
