"""The Time-lapse page's "Where the answer is made, as it learned": one minimal pair's residual grid (denoising) at the
kept checkpoint of the step the player shows (views/timelapse/answer.py), drawn in the player's frame so it follows
its slider and its Play.

Each checkpoint's grid is computed when its step is first shown and then held for every session (a few dozen
patched runs of the kept checkpoint, which player.py's `kept_checkpoint` loads once): playing through a run computes
each grid once.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab.corpus.minimal_pairs import by_key
from bertviz_lab.errors import CheckpointError
from bertviz_lab.figures.patching import columns, grid_heatmap
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.ui.timelapse.player import kept_checkpoint
from bertviz_lab.views.timelapse import history as vt
from bertviz_lab.views.timelapse.answer import PAIR, AnswerAt, answer_at, kept_at

HEADER = "Where the answer is made, as it learned"


@st.cache_resource(max_entries=256, show_spinner="Patching the pair at this checkpoint...")
def _answer(folder: str, stamp: int, key: str) -> AnswerAt:
    ckpt = kept_checkpoint(folder, stamp)
    return answer_at(ckpt.model, ckpt.tokenizer, by_key(key))


def section(lapse: vt.TimeLapse, step: int) -> None:
    """The header, the pair, and the grid of the last kept checkpoint at or before `step` with its sentences; one
    sentence instead where there is no checkpoint or the pair cannot be patched there."""
    st.header(HEADER)
    pair = by_key(PAIR)
    st.caption(f"Clean: “{plain(pair.clean)}”; corrupted: “{plain(pair.corrupt)}”. In the corrupted run, one vector "
               "of the clean run is put back at a time (a row: the embeddings or a layer's output; a column: a "
               "position), and the cell says how much of the clean answer comes back (0 none, 1 all of it). Play the "
               "run to watch where the answer is made move as the model learns.")
    if not lapse.checkpoints:
        st.caption("This history keeps no checkpoint, so there is no model to patch; a run trained on the Pretrain "
                   "page keeps its checkpoints.")
        return
    kept = kept_at(lapse.checkpoints, step)
    if kept is None:
        st.caption(f"No checkpoint was kept at or before step {step:,}: move the slider on.")
        return
    at, folder = kept
    try:
        found = _answer(str(folder), folder.stat().st_mtime_ns, PAIR)
    except (CheckpointError, OSError):
        st.info(f"The checkpoint of step {at:,} cannot be read right now.", icon=":material/info:")
        return
    if at != step:
        st.caption(f"Step {step:,} has no kept checkpoint: this is step {at:,}'s, the last kept before it.")
    if found.note:
        st.info(f"At step {at:,}: {plain(found.note)}", icon=":material/info:")
        return
    chart(grid_heatmap(found.values, found.f, found.rows, columns("resid", found.tokens, 0),
                       f"The residual stream at step {at:,}, clean into corrupted", metric=found.metric),
          f"timelapse_{at}_patching", key="lapse.patching")
    st.markdown("\n".join(f"- {plain(s)}" for s in found.sentences))
