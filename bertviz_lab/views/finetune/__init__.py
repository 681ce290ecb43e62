"""The Fine-tune page and the `classify` command: the run form, starting points, a classifier's answers and its dev set."""
