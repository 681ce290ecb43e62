"""The Representations page's tabs: same word and logit lens (vectors.py), neighbours and geometry (neighbours.py),
shapes and padding (shapes.py)."""
