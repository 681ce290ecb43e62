"""The Syntax page: its sources, its one analysis and its four tabs."""
