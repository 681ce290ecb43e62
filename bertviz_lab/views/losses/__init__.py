"""The Losses walkthrough: one training example of BERT, every number on the way (walkthrough.py), and the masking
rule over many draws (masking_stats.py)."""
