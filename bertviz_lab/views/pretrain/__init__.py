"""Pretrain live: the new-run form, a run's progress and curves, and its probe sentence."""
