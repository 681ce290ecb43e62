"""The validity checks of session-state keys (ui/shell/state.py): (remembered value, options offered now) -> the value
to keep, or FORGET. `state.keep_valid` applies a key's check before its widget is drawn."""

from __future__ import annotations

FORGET = object()  # what a check returns for a value to drop: the widget then shows its own default


def one_of(value, options: list):
    """A single choice, kept while the options still offer it."""
    return value if value in options else FORGET


def some_of(values, options: list) -> list:
    """A multiple choice: the chosen values the options still offer, in their order."""
    return [v for v in values if v in options]


def nearest(value, options: list):
    """A position in a range of numbers: moved to the nearest end when the range shrinks."""
    return min(max(value, options[0]), options[-1])


def span(value, options: list):
    """A (first, last) token range, cut to the tokens offered now ([0, T - 1]); dropped if nothing is left."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        return FORGET
    first, last = value[0], min(value[1], options[-1])
    return (first, last) if options[0] <= first <= last else FORGET
