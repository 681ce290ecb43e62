"""Why this guess?: the request, every attribution method per token, their agreement and the causal check."""
