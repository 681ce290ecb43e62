"""The readers of a link's values (ui/shell/links.py) that know only their type and range: the URL's text -> a value,
or ValueError(why), the why completing a note such as "layer=`abc` is not a whole number"."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from bertviz_lab.head_id import HeadId


def flag(value: str) -> bool:
    words = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}
    if value.lower() not in words:
        raise ValueError("is not 1 or 0")
    return words[value.lower()]


def integer(low: int, high: int) -> Callable[[str], int]:
    def read(value: str) -> int:
        if not re.fullmatch(r"-?\d{1,10}", value.strip()):
            raise ValueError("is not a whole number")
        number = int(value)
        if not low <= number <= high:
            raise ValueError(f"is not between {low:,} and {high:,}")
        return number
    return read


def number(low: float, high: float) -> Callable[[str], float]:
    def read(value: str) -> float:
        try:
            result = float(value) if len(value) <= 32 else math.nan
        except ValueError:
            result = math.nan
        if not math.isfinite(result):
            raise ValueError("is not a number")
        if not low <= result <= high:
            raise ValueError(f"is not between {low:g} and {high:g}")
        return result
    return read


def choice(options) -> Callable[[str], str]:
    def read(value: str) -> str:
        if value not in options:
            raise ValueError("is not one of " + ", ".join(map(str, options)))
        return value
    return read


def token_range(value: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d{1,6})-(\d{1,6})", value.strip())
    if not match or int(match[1]) > int(match[2]):
        raise ValueError("is not a token range like 0-63")
    return int(match[1]), int(match[2])


def head_name(value: str) -> str:
    HeadId.parse(value)  # ValueError("is not a head like L0 H1")
    return value
