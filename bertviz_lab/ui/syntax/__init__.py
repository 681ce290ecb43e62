"""The Syntax page: its sources, its one analysis and its first two tabs (analysis.py), the probe and agreement tabs
(probe_and_agreement.py)."""
