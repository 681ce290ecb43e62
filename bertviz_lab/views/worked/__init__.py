"""Worked examples: the seed texts' hand computations, redone exactly."""
