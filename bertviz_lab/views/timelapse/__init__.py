"""Time-lapse: a run's snapshots as frames, and syntax as it forms over the kept checkpoints."""
