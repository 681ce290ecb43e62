"""The whole class presses Reveal on the Lesson's training step at once (`bench.classroom_load --reveal N`).

Each of N sessions opens the Lesson's training step (`/lesson?step=training`, as a shared link would), picks a guess for the
loss at step 0, and then all N press Reveal together, while the typing sessions of `bench.classroom_load` go on
with their sentences on Mask & predict and Attention. The tiny training run is computed once for the class
(ui/shell/once.py): the session that starts it and every session that presses Reveal while it runs follow the same
progress, and all get the same run. A session's answer is the run that shows the revealed step: the verdict and
the caption under the run's loss chart ("Seed 0: held-out loss ... at step 0, ... after N steps").
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass

STEP = "training"  # the Lesson's "A short training run", by its id
ANSWER = "Seed 0: held-out loss"  # the caption the revealed step shows under the run's chart


@dataclass(frozen=True)
class Reveal:
    session: int
    seconds: float | None  # from pressing Reveal to the run that shows the answer; None: no answer
    problem: str = ""
    losses: str = ""  # the caption's numbers: every session must show the same run


def _texts(run) -> list[str]:
    return [m.body for m in run.of("markdown")]


def _guess(run) -> tuple[str, list[str]]:
    """The guess widget (pills) and its first option, as the browser sends it (the formatted option)."""
    for group in run.of("button_group"):
        if group.options:
            return group.id, [group.options[0].content]
    shown = run.problems() or [t[:120] for t in _texts(run)[-3:]]
    raise LookupError(f"no guess pills on the Lesson's training step (status {run.status}; the page shows: "
                      f"{' / '.join(shown)})")


async def session(url: str, index: int, everyone: asyncio.Barrier, timeout_s: float, open_timeout_s: float):
    """One student: open the training step, pick a guess, wait for the class, press Reveal; (first view s, Reveal)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    from bench.streamlit_client import Session

    start = time.perf_counter()
    try:
        lesson, run = await Session.open(url, "lesson", open_timeout_s, query=f"step={STEP}")
        if not run.of("button_group"):  # a fresh server's first requests can run the page outside app.py's
            run = await lesson.rerun(timeout_s=timeout_s)  # router, link unread: the next run reads it
        pills, option = _guess(run)
        lesson.set(WidgetState(id=pills, string_array_value={"data": option}))
        run = await lesson.rerun(timeout_s=timeout_s)
        reveal = lesson.widget_id(run, "button", "Reveal")
    except BaseException:
        await everyone.abort()  # the others would wait for this one forever
        raise
    first = time.perf_counter() - start
    await everyone.wait()
    try:
        lesson.set(WidgetState(id=reveal, trigger_value=True))
        try:
            run = await lesson.rerun(timeout_s=timeout_s)
        except TimeoutError:
            return first, Reveal(index, None, f"no answer within {timeout_s:g} s")
        shown = [t for t in _texts(run) if t.startswith(ANSWER)]
        crashed = [f"exception: {e.type}: {e.message}".splitlines()[0] for e in run.of("exception")]
        if crashed or not shown:
            return first, Reveal(index, None, " / ".join(crashed) or "the page shows no revealed run")
        return first, Reveal(index, run.seconds, losses=" ".join(re.findall(r"\d+\.\d+", shown[0])[:2]))
    finally:
        await lesson.close()
