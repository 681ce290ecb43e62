"""Pretrain live: the new-run form, a run's progress and curves (live.py), and its probe sentence (probe.py)."""
