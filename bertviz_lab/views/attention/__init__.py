"""The Attention page's numbers: every head of one traced forward pass (explorer.py), the rest of the layer
(layer.py), long inputs (overview.py)."""
