"""What every command shares: the exit status of a user's mistake, loading `--checkpoint`, and text
from files (run records, model cards, labels) made safe to print on one line."""

from __future__ import annotations

import json

EXIT_USAGE = 2


def load(args):
    """The checkpoint of `--checkpoint`, on the device of `--device`."""
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.bert.device import resolve_device

    return load_checkpoint(args.checkpoint, device=resolve_device(args.device))


def one_line(value) -> str:
    """No newlines or terminal control codes from a run's files reach the terminal."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())


def printable(value) -> str:
    """A card value on one line with no control characters (JSON for anything but plain text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "".join(c if c.isprintable() else "?" for c in text)
