"""Time-lapse: a run's snapshots as frames (frames.py, history.py), and syntax as it forms over the kept checkpoints
(syntax.py, its file syntax_file.py)."""
