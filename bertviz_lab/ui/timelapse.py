"""Widget groups of the Time-lapse page: the history picker, the player (a fragment that steps itself while
playing), the role chart and the diff of two steps. The data comes from views/timelapse.py."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab.figures import timelapse as tfig
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import training as figs
from bertviz_lab.figures.attention import attention_grid, attention_heatmap
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.pretrain import runs, snapshots
from bertviz_lab.pretrain.heads import ROLE_NAMES
from bertviz_lab.ui import state
from bertviz_lab.ui.state import SHIPPED
from bertviz_lab.ui.state import TimeLapse as K
from bertviz_lab.ui.tables import numbers, percents
from bertviz_lab.ui.widgets import chart
from bertviz_lab.views import timelapse as vt

PLAY_S = 1.2  # seconds per frame while playing
ALL_HEADS, ONE_HEAD = "All heads", "One head"


def sources() -> dict[str, tuple[str, Path, str]]:
    """id -> ("history", a shipped model folder, label) or ("run", a pretraining run folder, label); the ids
    stay the same while a run trains, the labels say how far it is."""
    out = {}
    for folder in sorted(p for p in SHIPPED.iterdir() if (p / vt.HISTORY / snapshots.FILE).is_file()):
        out[folder.name] = ("history", folder, f"{folder.name} (shipped: how it learned)")
    for run in runs.list_runs(kind="pretrain"):
        out[f"run {run.name}"] = ("run", run.path, f"run {run.name} ({run.status}, step {run.step:,})")
    return out


def open_button(run_name: str) -> None:
    """On the Pretrain page: open the Time-lapse page on this run."""
    if st.button("Open its time-lapse", icon=":material/slow_motion_video:", key=K.OPEN.name,
                 help="Scrub through this run's snapshots: guesses, attention and head roles at every checkpoint."):
        state.put(K.SOURCE, f"run {run_name}")
        st.switch_page("pages/timelapse.py")


def _version(path: Path) -> tuple:
    """What changes when a history gains frames or curves (which file, how long: the record files only grow,
    or are replaced whole) or its checkpoints change (the folder's time)."""
    stamps = []
    for f in (path / snapshots.FILE, path / vt.HISTORY / snapshots.FILE, path / "metrics.jsonl",
              path / vt.HISTORY / "metrics.jsonl"):
        try:
            info = f.stat()
            stamps.append((info.st_dev, info.st_ino, info.st_size))
        except OSError:
            stamps.append(None)
    try:
        stamps.append((path / "checkpoints").stat().st_mtime_ns)
    except OSError:
        stamps.append(None)
    return tuple(stamps)


@st.cache_data(max_entries=4, show_spinner="Reading the run's history...")
def _load(kind: str, path: str, version: tuple) -> vt.TimeLapse:
    return vt.from_history(path) if kind == "history" else vt.from_run(path)


def pick() -> vt.TimeLapse | None:
    """The history picker; the chosen history, or None (with a message) when it has no frames yet."""
    options = sources()
    if not options:
        st.info("No history yet: start a run on the Pretrain live page.")
        return None
    state.keep_valid(K.SOURCE, list(options))
    chosen = st.selectbox("History", list(options), key=K.SOURCE.name, format_func=lambda o: options[o][2],
                         help="The shipped model's own training, or any pretraining run (a run records a snapshot "
                              "at every checkpoint it writes: steps 0, 1, 2, 5, 10, 20, 50, ... and every "
                              "checkpoint interval).")
    kind, path, _ = options[chosen]
    lapse = _load(kind, str(path), _version(path))
    if not lapse.frames:
        st.info(lapse.note or "This run has no snapshot yet: the first one is written as soon as training starts.")
        return None
    if lapse.note:
        st.caption(lapse.note)
    return lapse


def controls(lapse: vt.TimeLapse) -> None:
    """Which probe sentence, which heads and which role the player shows."""
    L, H = lapse.shape
    state.keep_valid(K.PROBE, lapse.texts)
    state.keep_valid(K.LAYER, range(L))
    state.keep_valid(K.HEAD, range(H))
    state.keep_valid(K.ROLE, list(lapse.frames[-1]["roles"]))
    cols = st.columns([5, 3, 1, 1, 3])
    cols[0].selectbox("Probe sentence", lapse.texts, key=K.PROBE.name)
    cols[1].segmented_control("Attention", [ALL_HEADS, ONE_HEAD], key=K.VIEW.name, default=K.VIEW.default)
    one = state.get(K.VIEW) == ONE_HEAD
    cols[2].selectbox("Layer", range(L), key=K.LAYER.name, disabled=not one)
    cols[3].selectbox("Head", range(H), key=K.HEAD.name, disabled=not one)
    twins = vt.twins(lapse.frames[-1])
    cols[4].selectbox("Role", list(lapse.frames[-1]["roles"]), key=K.ROLE.name,
                      format_func=lambda r: f"{r}: to {ROLE_NAMES.get(r, r)}" + (
                          f" (here: the {ROLE_NAMES[twins[r]]})" if r in twins else ""))


def _toggle(last: int) -> None:
    playing = not state.get(K.PLAYING)
    if playing and state.get(K.STEP) == last:
        state.put(K.STEP, None)  # at the end: play from the start
    state.put(K.PLAYING, playing)


def player(lapse: vt.TimeLapse) -> None:
    """Play/pause and the step slider; everything that depends on the step redraws in one fragment."""
    steps = lapse.steps
    playing = bool(state.get(K.PLAYING)) and len(steps) > 1
    st.button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
              key=K.PLAY.name, on_click=_toggle, args=(steps[-1],), disabled=len(steps) < 2,
              help=f"Step through the {len(steps)} frames, one every {PLAY_S:g} s.")
    st.fragment(run_every=PLAY_S if playing else None)(_frame)(lapse, playing)


def _frame(lapse: vt.TimeLapse, playing: bool) -> None:
    steps = lapse.steps
    if state.get(K.STEP) not in steps:
        state.put(K.STEP, steps[0] if playing else steps[-1])
    elif playing and state.get(K.PLAYING):
        index = steps.index(state.get(K.STEP)) + 1
        if index >= len(steps):
            state.put(K.PLAYING, False)
            st.rerun()  # the whole page: the button says Play again and the fragment stops ticking
        state.put(K.STEP, steps[index])
    step = st.select_slider("Step", steps, key=K.STEP.name, format_func=lambda s: f"{s:,}")
    index = steps.index(step)
    frame = lapse.frames[index]
    probe = vt.probe(frame, state.get(K.PROBE)) or frame["probes"][0]
    _caption(lapse, step)
    left, right = st.columns([3, 2])
    labels = token_labels(probe["tokens"])
    if state.get(K.VIEW) == ONE_HEAD:
        layer, head = state.get(K.LAYER), state.get(K.HEAD)
        fig = attention_heatmap(probe["attention"][layer, head], labels, labels,
                                f"Layer {layer} · head {head} · step {step:,}", height=520)
    else:
        fig = attention_grid(probe["attention"], labels, labels, title=f"Every head at step {step:,}")
    chart(fig, f"timelapse_{step}", left, key="lapse.attention")
    masked = probe["text"].split()
    masked[masked.index(probe["masked"])] = "[MASK]"
    chart(prediction_bars([{"token": t, "probability": p} for t, p in probe["top"]],
                          f"Guesses for [MASK] (true: {probe['masked']})"), f"timelapse_{step}_guesses", right,
          key="lapse.top")
    right.caption(" ".join(masked))
    curves = figs.Curves(lapse.train, lapse.eval)
    if not lapse.eval.empty or not lapse.train.empty:
        chart(tfig.mark_step(figs.loss_curves({lapse.name: curves}, "mlm"), step), f"timelapse_{step}_loss", right,
              key="lapse.loss")
    left, right = st.columns([3, 2])
    role = state.get(K.ROLE) or "previous"
    chance = frame["chance"].get(role)
    chart(tfig.role_lines(steps, vt.role_series(lapse, role), role, index,
                          f"Each head's score for {ROLE_NAMES.get(role, role)}", chance), f"timelapse_roles_{role}",
          left, key="lapse.roles")
    if chance is not None:
        left.caption(f"Dashed: what a head attending evenly to every token would score ({chance:.2f}, about 1 / the "
                     f"sentence's length); a head plays the role only well above it ({vt.CLEAR:g} times or more in "
                     "the table below). One point per checkpoint, evenly spaced: the steps are not to scale."
                     + (f" {vt.twins_note(frame)}" if role in vt.twins(frame) else ""))
    if frame["words"]:
        xy = vt.positions(lapse)[index]
        chart(tfig.word_map(xy, frame["words"], frame["groups"], f"Word embeddings at step {step:,}"),
              f"timelapse_{step}_words", right, key="lapse.words")
        right.caption(word_map_note(len(frame["words"]), frame["explained"]))


def word_map_note(words: int, explained: float) -> str:
    return (f"The token embeddings of {words} words on their first two principal components, turned to line up "
            f"with the next frame. These two axes hold {explained:.0%} of the variance of these embeddings; the other "
            f"{1 - explained:.0%} lies in directions not drawn, so two words close here may still be far apart. "
            "Within that, watch words of one kind gather.")


def _caption(lapse: vt.TimeLapse, step: int) -> None:
    held = lapse.eval[lapse.eval["step"] <= step] if not lapse.eval.empty else lapse.eval
    loss = f" · held-out MLM loss {held.iloc[-1]['mlm_loss']:.3f}" if not held.empty else ""
    total = int(lapse.train["step"].max()) if not lapse.train.empty else lapse.steps[-1]
    st.caption(f"Frame {lapse.steps.index(step) + 1} of {len(lapse.steps)} · step {step:,} of {total:,}{loss}")


def formed(lapse: vt.TimeLapse) -> None:
    """One line per head that ends up playing the chosen role, with the step from which it does."""
    role = state.get(K.ROLE) or "previous"
    lines = vt.formed_lines(lapse, role)
    if not lines:
        st.caption(f"No head gives {vt.FORMED:.0%} or more of its attention to {ROLE_NAMES.get(role, role)} "
                   "at the last step.")
        return
    st.markdown("\n".join(lines))
    if role in vt.twins(lapse.frames[-1]):
        st.caption(vt.twins_note(lapse.frames[-1]))


def diff(lapse: vt.TimeLapse) -> None:
    """Two steps side by side: the heads whose attention moved most, and the guesses that changed."""
    steps = lapse.steps
    state.keep_valid(K.FROM, steps)
    state.keep_valid(K.TO, steps)
    a, b = st.columns(2)
    first = a.selectbox("From step", steps, key=K.FROM.name, index=0, format_func=lambda s: f"{s:,}")
    last = b.selectbox("To step", steps, key=K.TO.name, index=len(steps) - 1, format_func=lambda s: f"{s:,}")
    fa, fb = lapse.frames[steps.index(first)], lapse.frames[steps.index(last)]
    changes = vt.head_changes(fa, fb)
    a.dataframe(changes.drop(columns=["layer", "index"]).head(8), hide_index=True,
                column_config=numbers(changes, "%.3f"))
    a.caption("Distance: how much of each word token's attention moved (total variation, 0 to 1), averaged "
              "over the probe sentences. Before and after: the role the head plays most, with its score, among "
              f"the roles it scores at {vt.CLEAR:g} times uniform attention's score or more; below that, no clear "
              "role (a head at step 0 spreads its attention nearly evenly). " + vt.twins_note(fb))
    predictions = vt.prediction_changes(fa, fb)
    b.dataframe(percents(predictions, f"p(guess) at {first}", f"p(guess) at {last}"), hide_index=True)
    b.caption(f"{int(predictions['changed'].sum())} of {len(predictions)} top guesses changed. p(guess): the "
              "probability the model gives its top guess, which may not be the true word.")
