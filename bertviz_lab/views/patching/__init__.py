"""Where is the answer made?: the request (ask.py's `PatchAsk`), the two recorded runs and the grids patched between
them (runs.py), and what a grid says, its checks and its CSV rows (reading.py)."""
