"""Where the checkout is, for a test at any depth of tests/."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
