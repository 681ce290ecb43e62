"""Where is the answer made?: the page's sections (sections.py)."""
