"""Text a user typed or a link carried, drawn as written: `plain()` escapes it for Streamlit's Markdown. The
shell's own notes use it (links.py, router.py), and so does every widget group (ui/kit/widgets.py's `say`)."""

from __future__ import annotations

import re

WORD_JOINER = "\u2060"  # invisible, zero-width, and not a space: GFM starts no bare link after it
# Where GFM would make a bare address a link (`https://`, `www.`, an e-mail's `@`). Streamlit's Markdown finds
# these in the text after its backslash escapes are read, so escaping alone still draws https://x as a link.
_LINKABLE = re.compile(r"(?i)(?<=https:)(?=//)|(?<=http:)(?=//)|(?<=www)(?=\.)|(?=@)")


def plain(text: str) -> str:
    """`text` as Markdown that shows it as typed: labels, alert bodies and captions are Markdown, and what a user
    typed or a link carried must never draw a link, an image or HTML. Every ASCII punctuation character is
    backslash-escaped, and a word joiner (U+2060, drawn as nothing) goes inside each bare address's `://`, `www.`
    and `@`, which GFM would otherwise draw as a link even when escaped."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", _LINKABLE.sub(WORD_JOINER, text))
