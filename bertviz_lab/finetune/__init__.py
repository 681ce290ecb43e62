"""Fine-tuning: the other half of BERT's paradigm. Downstream tasks (tasks.py, data.py), the
fine-tuning settings (config.py) and loop (loop.py), run as background processes by the
pretraining run machinery (pretrain/process.py, pretrain/runs.py); and the Lesson's linear probe,
logistic regression on frozen features (linear_probe.py)."""
