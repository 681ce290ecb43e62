"""Mask & predict: what BERT reads (reading.py), and ELECTRA's discriminator (replaced.py)."""
