"""Mask & predict: what BERT reads, and ELECTRA's discriminator."""
