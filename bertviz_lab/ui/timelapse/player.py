"""Widget groups of the Time-lapse page: the history picker, the player (a fragment that steps itself while
playing), the role chart and the diff of two steps. The data comes from views/timelapse/history.py; a sentence of the
learner's (typed here, or last on another page: ui/kit/yours.py) runs on a run's kept checkpoints, each loaded once
(about 10 ms each for the default tiny run on CPU) and then held, so a new sentence costs one forward per step
(about 1 ms each), cached too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from bertviz_lab import metrics
from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.figures import timelapse as ft
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import training as ftr
from bertviz_lab.figures.attention import attention_grid, attention_heatmap
from bertviz_lab.figures.predictions import prediction_bars
from bertviz_lab.errors import CheckpointError, InputError
from bertviz_lab.pretrain import runs, snapshots
from bertviz_lab.pretrain.head_roles import ROLE_NAMES
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.kit import yours
from bertviz_lab.ui.shell.state import SHIPPED
from bertviz_lab.ui.shell.state import TimeLapse as K
from bertviz_lab.ui.kit.tables import numbers, percents
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.timelapse import history as vt
from bertviz_lab.views.timelapse.frames import ProbeAt

PLAY_S = 1.2  # seconds per frame while playing
ALL_HEADS, ONE_HEAD = "All heads", "One head"
MAP_LABELS = 8  # words written on the word map (`map_labels`); the others on hover
ROLE_PX = 270  # the diff's role columns: with the head and distance, 1024 px in projector view (zoomed 1.25)
MAX_OWN_CHARS = 500  # a sentence typed here: the tiny models read a few dozen tokens


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


def _runnable(lapse: vt.TimeLapse) -> dict:
    """step -> folder: the frames' steps with a kept checkpoint, where a sentence of the learner's can run."""
    return {step: folder for step, folder in lapse.checkpoints if step in set(lapse.steps)}


def _own_texts(lapse: vt.TimeLapse) -> list[str]:
    """The learner's sentences offered as probes: the one typed last on another page, and the one typed here."""
    if not _runnable(lapse):
        return []
    typed = yours.latest()
    texts = [t.strip() for t in (typed.text_a if typed else "", state.get(K.OWN) or "") if t and t.strip()]
    return [t for t in dict.fromkeys(texts) if t not in lapse.texts]


def _use_own() -> None:
    if (state.get(K.OWN) or "").strip():
        state.put(K.PROBE, state.get(K.OWN).strip())


def controls(lapse: vt.TimeLapse) -> None:
    """Which probe sentence (a fixed one, or the learner's on a run's checkpoints), which heads, which role."""
    L, H = lapse.shape
    own = _own_texts(lapse)
    state.keep_valid(K.PROBE, lapse.texts + own)
    state.keep_valid(K.LAYER, range(L))
    state.keep_valid(K.HEAD, range(H))
    state.keep_valid(K.ROLE, list(lapse.frames[-1].roles))
    cols = st.columns([5, 3, 1, 1, 3])
    cols[0].selectbox("Probe sentence", lapse.texts + own, key=K.PROBE.name,
                      format_func=lambda t: f"yours: {t}" if t in own else t)
    cols[1].segmented_control("Attention", [ALL_HEADS, ONE_HEAD], key=K.VIEW.name, default=K.VIEW.default)
    one = state.get(K.VIEW) == ONE_HEAD
    cols[2].selectbox("Layer", range(L), key=K.LAYER.name, disabled=not one)
    cols[3].selectbox("Head", range(H), key=K.HEAD.name, disabled=not one)
    twins = vt.twins(lapse.frames[-1])
    cols[4].selectbox("Role", list(lapse.frames[-1].roles), key=K.ROLE.name,
                      format_func=lambda r: ROLE_NAMES.get(r, r) + (f" (= {ROLE_NAMES[twins[r]]})" if r in twins else ""),
                      help="The role each head's attention is scored on; (= previous token): on these probe sentences "
                           "the role's links all go to that neighbour, so the two scores are one")
    if not _runnable(lapse):
        st.caption(f"This history keeps snapshot frames of its {len(lapse.texts)} probe sentences but no checkpoint "
                   "at their steps, so it cannot run a sentence of yours; a run trained on the Pretrain page keeps "
                   "its checkpoints and can.")
        return
    st.text_input("Your own sentence, run on this run's kept checkpoints (write [MASK] where the model should "
                  "guess)", key=K.OWN.name, on_change=_use_own, max_chars=MAX_OWN_CHARS)


# A run keeps about 20 checkpoints (the 1-2-5 series under checkpoints.SERIES_CAP_BYTES, and the newest two): all of
# one run stay loaded, so a new sentence reads none of them from disk again. `stamp`: the folder's time, which
# changes when the folder is replaced or pruned.
@st.cache_resource(max_entries=32, show_spinner="Loading the run's kept checkpoints...")
def kept_checkpoint(folder: str, stamp: int) -> Checkpoint:
    """A kept checkpoint, loaded once for every session and section (`stamp`: the folder's time)."""
    return load_checkpoint(folder)


@st.cache_resource(max_entries=512, show_spinner=False)
def _own_probe(folder: str, stamp: int, text: str) -> ProbeAt:
    return vt.own_probe(kept_checkpoint(folder, stamp), text)


def own_frames(lapse: vt.TimeLapse, text: str) -> tuple[dict[int, ProbeAt], str]:
    """The learner's sentence at every step with a kept checkpoint (each cached), or why not."""
    out = {}
    for step, folder in _runnable(lapse).items():
        try:
            out[step] = _own_probe(str(folder), folder.stat().st_mtime_ns, text)
        except InputError as exc:
            return {}, f"Your sentence cannot be run: {exc}."
        except (CheckpointError, OSError):
            continue  # broken, or pruned while read
    return out, "" if out else "None of this run's checkpoints can be read right now."


def _probes(lapse: vt.TimeLapse) -> dict[int, ProbeAt]:
    """step -> the chosen probe at that step: a fixed probe at every frame, the learner's at the kept checkpoints."""
    chosen = state.get(K.PROBE)
    if chosen in _own_texts(lapse):
        found, why = own_frames(lapse, chosen)
        if found:
            if len(found) < len(lapse.steps):
                st.caption(f"Your sentence runs on this run's {len(found)} kept checkpoints, so it plays at their "
                           f"steps only ({', '.join(f'{s:,}' for s in found)}).")
            return found
        st.warning(plain(why) + " Showing the first probe sentence.")
    return {f.step: vt.probe(f, chosen) or f.probes[0] for f in lapse.frames}


def _toggle(last: int) -> None:
    playing = not state.get(K.PLAYING)
    if playing and state.get(K.STEP) == last:
        state.put(K.STEP, None)  # at the end: play from the start
    state.put(K.PLAYING, playing)


def player(lapse: vt.TimeLapse, *sections: Callable[[vt.TimeLapse, int], None]) -> None:
    """Play/pause and the step slider; everything that depends on the step redraws in one fragment, `sections`
    (each drawn with the history and the step shown) last."""
    probes = _probes(lapse)
    steps = sorted(probes)
    playing = bool(state.get(K.PLAYING)) and len(steps) > 1
    st.button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
              key=K.PLAY.name, on_click=_toggle, args=(steps[-1],), disabled=len(steps) < 2,
              help=f"Step through the {len(steps)} frames, one every {PLAY_S:g} s.")
    st.fragment(run_every=PLAY_S if playing else None)(_frame)(lapse, probes, playing, sections)


def _frame(lapse: vt.TimeLapse, probes: dict[int, ProbeAt], playing: bool, sections: tuple = ()) -> None:
    steps = sorted(probes)
    if state.get(K.STEP) not in steps:
        state.put(K.STEP, steps[0] if playing else steps[-1])
    elif playing and state.get(K.PLAYING):
        index = steps.index(state.get(K.STEP)) + 1
        if index >= len(steps):
            state.put(K.PLAYING, False)
            st.rerun()  # the whole page: the button says Play again and the fragment stops ticking
        state.put(K.STEP, steps[index])
    step = st.select_slider("Step", steps, key=K.STEP.name, format_func=lambda s: f"{s:,}")
    index = lapse.steps.index(step)
    frame, probe = lapse.frames[index], probes[step]
    _caption(lapse, step)
    left, right = st.columns([3, 2])
    labels = token_labels(probe.tokens)
    if state.get(K.VIEW) == ONE_HEAD:
        layer, head = state.get(K.LAYER), state.get(K.HEAD)
        fig = attention_heatmap(probe.attention[layer, head], labels, labels,
                                f"Layer {layer} · head {head} · step {step:,}", height=520)
    else:
        fig = attention_grid(probe.attention, labels, labels, title=f"Every head at step {step:,}")
    chart(fig, f"timelapse_{step}", left, key="lapse.attention")
    _guesses(probe, step, max((p for pr in probes.values() for _, p in pr.top), default=0.0), right)
    curves = ftr.Curves(lapse.train, lapse.eval)
    if not lapse.eval.empty or not lapse.train.empty:
        chart(ft.mark_step(ftr.loss_curves({lapse.name: curves}, "mlm"), step), f"timelapse_{step}_loss", right,
              key="lapse.loss")
    left, right = st.columns([3, 2])
    role = state.get(K.ROLE) or "previous"
    chance = frame.chance.get(role)
    chart(ft.role_lines(lapse.steps, vt.role_series(lapse, role), role, index,
                          f"Each head's score for {ROLE_NAMES.get(role, role)}", chance), f"timelapse_roles_{role}",
          left, key="lapse.roles")
    if chance is not None:
        left.caption(f"Dashed: what a head attending evenly to every token would score ({chance:.2f}, about 1 / the "
                     f"sentence's length); a head plays the role only well above it ({vt.CLEAR:g} times or more in "
                     "the table below). One point per checkpoint, evenly spaced: the steps are not to scale."
                     + (f" {vt.twins_note(frame)}" if role in vt.twins(frame) else ""))
    if frame.words:
        xy = vt.positions(lapse)[index]
        labels, written = map_labels(frame.words, frame.groups, probe.tokens)
        chart(ft.word_map(xy, frame.words, frame.groups, f"Word embeddings at step {step:,}",
                            labelled=set(labels)), f"timelapse_{step}_words", right, key="lapse.words")
        right.caption(word_map_note(len(frame.words), frame.explained, written))
    for section in sections:
        section(lapse, step)


def _guesses(probe: ProbeAt, step: int, highest: float, where) -> None:
    """The top guesses at [MASK] on one probability scale for every step (`highest`: over all of them)."""
    if not probe.top:
        where.info("Write [MASK] in your sentence where the model should guess, to see its guesses at every step.")
        return
    title = f"Guesses for [MASK] (true: {probe.masked})" if probe.masked else "Guesses for [MASK]"
    fig = prediction_bars([{"token": t, "probability": p} for t, p in probe.top], title)
    chart(ft.fixed_probability_axis(fig, highest), f"timelapse_{step}_guesses", where, key="lapse.top")
    words = probe.text.split()
    if probe.masked in words:
        words[words.index(probe.masked)] = "[MASK]"
    where.caption(plain(" ".join(words)))


def map_labels(words: list[str], groups: list[str], tokens: list[str]) -> tuple[list[str], str]:
    """The words the map writes out, and the sentence that says which: the probe sentence's words on the map, as
    its tokens read them ("The mat." is "the", "mat", "."), and when fewer than 3 are, the first word of each group
    too; MAP_LABELS at most, in the map's order."""
    read = set(tokens)
    chosen = [w for w in words if w in read]
    parts = [f"the probe sentence's words on the map ({', '.join(chosen)})"] if chosen else []
    if len(chosen) < 3:
        firsts = [words[groups.index(g)] for g in dict.fromkeys(groups)]
        parts.append(f"the first word of each group ({', '.join(firsts)})")
        chosen = chosen + firsts
    labels = list(dict.fromkeys(chosen))
    cut = f", the first {MAP_LABELS} of them" if len(labels) > MAP_LABELS else ""
    return labels[:MAP_LABELS], f"Written out: {' and '.join(parts)}{cut}."


def word_map_note(words: int, explained: float, written: str) -> str:
    """`written`: which words the map writes out (`map_labels`)."""
    return (f"The token embeddings of {words} words on their first two principal components, turned to line up "
            f"with the next frame. These two axes hold {explained:.0%} of the variance of these embeddings; the other "
            f"{1 - explained:.0%} lies in directions not drawn, so two words close here may still be far apart. "
            f"Within that, watch words of one kind gather. {written} Point at a dot for the others.")


def _caption(lapse: vt.TimeLapse, step: int) -> None:
    held = lapse.eval[lapse.eval["step"] <= step] if not lapse.eval.empty else lapse.eval
    loss = f" · held-out MLM loss {metrics.row(held, -1).loss:.3f}" if not held.empty else ""
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
    """Two steps compared: the heads whose attention moved most, then the guesses that changed (the columns that
    matter first, so the table fits a projector; the sentences in an expander)."""
    steps = lapse.steps
    state.keep_valid(K.FROM, steps)
    state.keep_valid(K.TO, steps)
    a, b = st.columns(2)
    first = a.selectbox("From step", steps, key=K.FROM.name, index=0, format_func=lambda s: f"{s:,}")
    last = b.selectbox("To step", steps, key=K.TO.name, index=len(steps) - 1, format_func=lambda s: f"{s:,}")
    fa, fb = lapse.frames[steps.index(first)], lapse.frames[steps.index(last)]
    changes = vt.head_changes(fa, fb)
    roles = {c: st.column_config.TextColumn(width=ROLE_PX, help="The whole text: click the cell.")
             for c in ("before", "after")}  # a role with its twin runs long: cut with "…", the table fits
    st.dataframe(changes.drop(columns=["layer", "index"]).head(8), hide_index=True,
                 column_config={**numbers(changes, "%.3f"), **roles, "head": st.column_config.TextColumn(width=120)})
    st.caption("Distance: how much of each word token's attention moved (total variation, 0 to 1), averaged "
               "over the probe sentences. Before and after: the role the head plays most, with its score, among "
               f"the roles it scores at {vt.CLEAR:g} times uniform attention's score or more; below that, no clear "
               "role (a head at step 0 spreads its attention nearly evenly). " + vt.twins_note(fb))
    predictions = vt.prediction_changes(fa, fb)
    predictions.insert(0, "#", range(1, len(predictions) + 1))
    shown = list(dict.fromkeys(["#", "true word", f"guess at {first}", f"guess at {last}", "changed",
                                f"p(guess) at {first}", f"p(guess) at {last}"]))
    st.dataframe(percents(predictions[shown], f"p(guess) at {first}", f"p(guess) at {last}"), hide_index=True)
    st.caption(f"{int(predictions['changed'].sum())} of {len(predictions)} top guesses changed. p(guess): the "
               "probability the model gives its top guess, which may not be the true word.")
    with st.expander("The probe sentences (#), with [MASK] for the true word"):
        st.markdown("\n".join(f"{n}. {plain(text)}" for n, text in zip(predictions["#"], predictions["sentence"])))
