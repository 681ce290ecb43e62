"""The Worked examples page's calculators."""
