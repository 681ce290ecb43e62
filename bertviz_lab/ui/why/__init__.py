"""The Why-this-guess page's computations and sections, and its hand-off from other pages (sections.py)."""
