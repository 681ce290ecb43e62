"""Benchmarks against transformers; run each as a module from the repository root: python -m bench.inference."""
