"""The Representations page's tabs."""
