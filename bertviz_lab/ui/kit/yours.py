"""Your sentence follows you: the sentence a learner types on one page (Mask & predict, Attention, Losses) is the
one the next of these pages opens on, and the one Time-lapse offers as a probe.

One session value holds it with a serial number; typing on a page publishes its sentence, and every page with
sentence boxes opens on the newest one (the page records the serial it showed, `Sentences.seen`).
Each page's own box still takes any other sentence (that one then becomes yours). A page opened from a link keeps
the link's sentence and publishes it: the link said what to show.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import Sentences, Yours


@dataclass(frozen=True)
class Typed:
    text_a: str
    text_b: str | None  # None: one sentence
    serial: int


def latest() -> Typed | None:
    return state.get(Yours.SENTENCE)


def publish(keys: Sentences) -> None:
    """Make the page's sentence the learner's, and its sentence B when the pair is the learner's: the pair toggle
    turned on, or a B other than the page's default (Losses opens on a pair of its own, which stays there)."""
    own_pair = state.get(keys.text_b) != keys.text_b.default or not keys.pair.default
    text_b = state.get(keys.text_b) if state.get(keys.pair) and own_pair else None
    typed = Typed(state.get(keys.text_a) or "", text_b or None, (latest().serial if latest() else 0) + 1)
    state.put(Yours.SENTENCE, typed)
    state.put(keys.seen, typed.serial)


def adopt(keys: Sentences) -> None:
    """Before the page's boxes are drawn: open on the learner's sentence when it is newer than the one the page
    showed last, or when Streamlit has dropped the box's text (it forgets a widget's value while its page is
    closed; the page's last sentence was then the learner's). A sentence set otherwise (a link, a test) stays. On
    a page's first draw, a sentence that is not the page's default came from a link: it is kept and published."""
    if state.get(keys.seen) is None and state.get(keys.text_a) != keys.text_a.default:
        publish(keys)
        return
    typed = latest()
    if typed is None:
        state.put(keys.seen, 0)
        return
    if typed.serial <= (state.get(keys.seen) or 0) and state.held(keys.text_a):
        return
    state.put(keys.text_a, typed.text_a)
    if typed.text_b is not None:  # a pair: the page shows it as a pair; one sentence leaves the page's B as it is
        state.put(keys.pair, True)
        state.put(keys.text_b, typed.text_b)
    state.put(keys.seen, typed.serial)
