"""Pretrain live: the new-run form, the live panel, the past runs."""
