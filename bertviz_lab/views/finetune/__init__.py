"""The Fine-tune page and the `classify` command: the run form, starting points and a classifier's answers
(classifier.py), and its dev set (dev.py)."""
