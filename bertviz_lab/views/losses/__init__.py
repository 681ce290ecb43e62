"""The Losses walkthrough: one training example of BERT, every number on the way, and the masking rule over many draws."""
