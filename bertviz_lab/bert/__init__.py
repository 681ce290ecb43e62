"""The model as the paper draws it: config, WordPiece tokenizer, attention, the encoder and its
heads, 15% / 80-10-10 masking, the MLM and NSP losses, Hugging Face checkpoints, and the fast CPU
ops. Imports nothing from pretrain/, views/ or ui/ (see pyproject.toml's contracts)."""
