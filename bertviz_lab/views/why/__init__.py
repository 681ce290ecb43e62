"""Why this guess?: the request (ask.py's `Ask`), every attribution method per token, their agreement and the causal
check (explanation.py), and the sentences where attention and occlusion disagree most (examples.py, over found.py)."""
