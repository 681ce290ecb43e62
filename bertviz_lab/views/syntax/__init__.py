"""Syntax across a corpus: one analysis per model read as tables and sentences written from its numbers
(analysis.py)."""
