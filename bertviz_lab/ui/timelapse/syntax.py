"""The Time-lapse page's "Syntax as it forms" section: the structural probe, the relations' best heads and agreement
at every checkpoint a run kept (views/timelapse/syntax.py), drawn from the history's syntax.jsonl; then probing over
training (views/timelapse/findings.py): the tasks' expected layers, the probes' selectivity and the amnesic effect.

The file is read once per version (its path, time and size: the cache below), so a redraw of the page reads nothing.
A run with checkpoints the file lacks gets a button that measures them: the work runs once in a thread of its own
(ui/shell/once.py), every session that looks at the run meanwhile follows its progress bar, and a running run's later
checkpoints are measured by the same button the next time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import streamlit as st

from bertviz_lab.errors import LabError
from bertviz_lab.figures import timelapse_syntax as fts
from bertviz_lab.probing.records import TASK_NAMES
from bertviz_lab.pretrain import runs
from bertviz_lab.syntax.relations import ALL
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell import turns
from bertviz_lab.ui.shell.state import SHIPPED
from bertviz_lab.ui.shell.state import TimeLapse as K
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.timelapse import history as vt
from bertviz_lab.views.timelapse.findings import amnesic_sentence, order_sentence, selectivity_sentence
from bertviz_lab.views.timelapse.findings import series as probing_series
from bertviz_lab.views.timelapse import syntax as vts

MEASURE = "lapse.syntax.measure"  # the button's element key
WORK = "Measuring syntax at the kept checkpoints"
_jobs: dict[str, once.Once[vts.SyntaxHistory]] = {}  # run folder -> its last measurement, for every session
_jobs_lock = threading.Lock()


def _folder() -> tuple[str, Path]:
    """("run", its folder) or ("history", a shipped model's folder): the history the page shows (ui/timelapse/player.py's
    `sources` names a run "run NAME", a shipped model by its folder's name)."""
    chosen = str(state.get(K.SOURCE) or "")
    if chosen.startswith("run ") and (runs.runs_root() / chosen[4:]).is_dir():
        return "run", runs.runs_root() / chosen[4:]
    return "history", SHIPPED / chosen


def _version(path: Path) -> tuple | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


@st.cache_data(max_entries=8, show_spinner=False)
def _read(path: str, version: tuple | None, shape: tuple[int, int]) -> vts.SyntaxHistory:
    return vts.read(path, shape)


def _job(folder: Path, fresh: bool) -> once.Once[vts.SyntaxHistory] | None:
    """The folder's measurement: a new one when `fresh` (unless one is running), else the one running, if any."""
    with _jobs_lock:
        job = _jobs.get(str(folder))
        if fresh and (job is None or not job.running()):
            job = _jobs[str(folder)] = once.Once(WORK)
        return job if fresh or (job is not None and job.running()) else None


def _measure(folder: Path, job: once.Once[vts.SyntaxHistory]) -> vts.SyntaxHistory | None:
    """Follow the measurement (started if need be) with a progress bar; None, with the error, when it fails."""
    def work(report: once.Report) -> vts.SyntaxHistory:  # its share of the cores: the class's redraws need the rest
        threads = None if "OMP_NUM_THREADS" in os.environ else turns.SHARED_THREADS  # a user's setting wins
        return vts.measure(folder, progress=lambda fraction, message: report((fraction, message)), threads=threads)

    try:
        return once.follow(job, work, lambda news: st.progress(*news), first=(0.0, "Starting"))
    except LabError as exc:
        st.error(plain(str(exc)))
        return None


def section(lapse: vt.TimeLapse) -> None:
    """The section: its figures when the history has syntax records, the button that measures the kept checkpoints
    it lacks, or one line saying why there is nothing to show."""
    kind, folder = _folder()
    path = vts.file_of(folder) if kind == "run" else folder / vt.HISTORY / vts.FILE
    version = _version(path)
    history = _read(str(path), version, lapse.shape)
    kept = dict(lapse.checkpoints) if kind == "run" else {}
    todo = vts.unmeasured(history, list(kept))
    if history.source:
        st.info(plain(history.source), icon=":material/info:")
    if history.note:
        st.caption(plain(history.note))
    if history.before_probing:
        st.caption(vts.BEFORE_PROBING)
    running = _job(folder, fresh=False) if kind == "run" else None
    if todo and running is None:
        seconds = vts.seconds_needed(history, todo, kept[todo[-1]])
        pressed = st.button(f"Measure syntax at each kept checkpoint (about {max(1, round(seconds)):,} s)",
                            key=MEASURE, icon=":material/account_tree:",
                            help=f"{len(todo)} kept checkpoint{'s' * (len(todo) != 1)} not measured yet (steps "
                                 f"{', '.join(f'{s:,}' for s in todo)}): the structural probe, the best head of each "
                                 "relation, agreement, and the probes of part of speech, dependency label and noun "
                                 "number with noun number removed, on a fixed sample of the story world, at each.")
        running = _job(folder, fresh=True) if pressed else None
    if running is not None and _measure(folder, running) is not None:
        st.rerun()  # the whole page again: the file read anew, the button gone (or offering what is left)
    if history.records:
        draw(lapse, history, version)
    elif not todo:
        st.caption("No syntax measured: this run keeps no checkpoint to measure it on." if kind == "run" else
                   f"No syntax measured: this model's history holds none ({vt.HISTORY}/{vts.FILE}).")


@st.cache_resource(max_entries=8, show_spinner=False)  # shared, never changed: chart() draws a copy where it enlarges
def _figures(path: str, version: tuple | None, losses: tuple, _history: vts.SyntaxHistory, _held) -> dict:
    """The three charts of one version of a file (and of the run's held-out curve, `losses`: its length and last
    step), built once: the page redraws without building them again."""
    history, steps = _history, _history.steps
    relations = vts.relations_shown(history)
    data = vts.series(history, relations)
    loss = (_held["step"].to_numpy(), _held["loss"].to_numpy()) if _held is not None else ()
    last = history.records[-1]
    return {"uuas": fts.uuas_lines(steps, data["uuas"], last.linear_uuas, "Structural probe: UUAS at each step", *loss),
            "agreement": fts.agreement_lines(steps, data["agreement"], "Agreement by attractors"),
            "relations": fts.relation_lines(steps, relations, data["accuracy"], data["heads"], data["baseline"],
                                             "Each relation's best head, dependent → head"),
            "beat": [n for n, a, b in zip(relations, data["accuracy"][-1], data["baseline"]) if n != ALL and a > b],
            "others": sorted(set(last.relations) - set(relations)), **_probing_figures(history)}


def _probing_figures(history: vts.SyntaxHistory) -> dict:
    """The three probing charts (none when no step has probing)."""
    data = probing_series(history)
    if not data["steps"]:
        return {}
    steps, names = data["steps"], [TASK_NAMES[t] for t in data["tasks"]]
    return {"expected": fts.expected_layer_lines(steps, names, data["expected"], data["centre"], history.shape[0],
                                                 "Expected layer of each task"),
            "selectivity": fts.selectivity_lines(steps, names, data["selectivity"], data["accuracy"], data["control"],
                                                 data["layer"], "Selectivity of the linear probe"),
            "amnesic": fts.amnesic_lines(steps, data["drop"], data["random_drop"], data["loss_rise"],
                                         data["random_loss_rise"], "noun number", "Agreement with noun number removed")
            if (data["rank"] > 0).any() else None}


def draw(lapse: vt.TimeLapse, history: vts.SyntaxHistory, version: tuple | None) -> None:
    """The sentence that says when the tree appears, and the three charts (`version`: of the file read)."""
    steps, settings = history.steps, history.settings
    held = lapse.eval if {"step", "loss"} <= set(lapse.eval.columns) and not lapse.eval.empty else None
    if history.source:  # measured on another run (a shipped model's rerun): this model's loss is not that run's
        held = None
    losses = (len(held), int(held["step"].iloc[-1])) if held is not None else ()
    figs = _figures(str(history.path), version, losses, history, held)
    st.markdown(vts.tree_sentence(history))
    left, right = st.columns(2)  # the agreement chart needs its legend's room
    chart(figs["uuas"], "timelapse_syntax_uuas", left, key="lapse.syntax.uuas")
    trained, tested = vts.probe_split(history.records[-1])
    left.caption(f"A structural probe (Hewitt & Manning) at each layer, trained on {trained} sentences of the "
                 f"story world and tested on {tested} more (seed {settings.seed}, {settings.probe_steps} probe steps): "
                 "the share of the gold trees' edges found by the minimum spanning tree of the probe's distances. "
                 "Dashed: the linear baseline, each word linked to the next. One point per checkpoint, evenly spaced: "
                 "the steps are not to scale. " + vts.syntax_page_note(history))
    chart(figs["agreement"], "timelapse_syntax_agreement", right, key="lapse.syntax.agreement")
    right.caption(f"With the verb masked, how often the model puts the right form above the wrong one "
                  f"({settings.agreement_pairs} pairs per number of attractors: nouns of the other number between "
                  "subject and verb). Dashed: chance, 50% (half the subjects are plural).")
    chart(figs["relations"], "timelapse_syntax_relations", key="lapse.syntax.relations")
    beat, others = figs["beat"], figs["others"]
    st.caption(f"For each relation, the share of its dependents whose most-attended word (itself left out) is their "
               f"gold head, by the head that scores best at that step (Clark et al.); dashed, always picking the word "
               f"at one fixed offset, the best one for the relation. At step {steps[-1]:,} "
               + (f"a head beats its baseline on {plain(', '.join(beat))}." if beat else "no head beats its baseline.")
               + (f" Not drawn: {plain(', '.join(others))}." if others else ""))
    if "expected" in figs:
        _draw_probing(history, figs)


def _draw_probing(history: vts.SyntaxHistory, figs: dict) -> None:
    """The probing charts, each with its sentence from the numbers."""
    st.subheader("What a probe finds, and whether the model uses it")
    left, right = st.columns(2)
    chart(figs["expected"], "timelapse_probing_expected_layer", left, key="lapse.probing.expected")
    left.caption("Tenney et al.'s expected layer: where, on average, a linear probe over a learned mix of the hidden "
                 "states gains its accuracy (0 = the embeddings). " + order_sentence(history))
    chart(figs["selectivity"], "timelapse_probing_selectivity", right, key="lapse.probing.selectivity")
    right.caption("Hewitt & Liang's selectivity at the linear probe's best hidden state: its test accuracy minus a "
                  "control task's, where each word type gets one random label, so that only memorising types scores. "
                  + selectivity_sentence(history))
    if figs["amnesic"] is None:
        if amnesic_sentence(history):
            st.caption(amnesic_sentence(history))
    else:
        chart(figs["amnesic"], "timelapse_probing_amnesic", key="lapse.probing.amnesic")
        st.caption("Elazar et al.'s amnesic probing: noun number's directions removed from one hidden state by "
                   "iterative nullspace projection, and agreement across attractors measured again (every number of "
                   "attractors pooled), against random directions of the same rank; the masked-LM loss's rise on "
                   "hover. " + amnesic_sentence(history))
