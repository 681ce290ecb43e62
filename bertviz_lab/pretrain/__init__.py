"""One pretraining run: its settings (config.py), batches (data.py), corpus and vocabulary
(corpus_setup.py), the loop (loop.py), its checkpoints on disk (checkpoints.py), the process that
drives it and writes the run folder (process.py), starting and reading runs (runs.py), shipping a
finished one (publish.py) and torchrun/DDP (distributed.py). Builds on bert/; knows nothing of pages."""
