"""The run pages' library, written once for Pretrain live and Fine-tune: who may start a run, the run picker,
the live panel (a fragment that redraws itself while the run trains: status and Stop, progress, then the
page's own metrics and curves), Use this model / Resume / Delete with the refusals they may meet, and the
box of runs to overlay. A page parametrises it with one `RunPage`: the kind of run it lists, its session keys
(`state.RunKeys`), how a run is described, and what its live panel draws under the progress bar.

Runs live on disk (`bertviz_lab.pretrain.runs`, which starts, stops, resumes and deletes both kinds), so every
tab and every new session sees the same ones; the session only remembers which run it is looking at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from bertviz_lab.errors import LabError
from bertviz_lab.figures import training as ftr
from bertviz_lab.pretrain import runs
from bertviz_lab.ui.shell import classroom as ui_classroom
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import try_load
from bertviz_lab.ui.shell.state import Model, RunKeys
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.pretrain import live as vp

REFRESH_S = 1.5  # the live panel's refresh interval while a run trains
BADGE = {"starting": ("blue", ":material/hourglass_top:"), "running": ("blue", ":material/play_arrow:"),
         "finished": ("green", ":material/check_circle:"), "stopped": ("orange", ":material/stop_circle:"),
         "diverged": ("red", ":material/trending_up:"), "failed": ("red", ":material/error:"),
         "unreadable": ("gray", ":material/help:")}


# --- Curves, read as the run writes them ---------------------------------------------------------
@st.cache_data(max_entries=64, show_spinner=False)
def _curves(run_dir: str, version: tuple) -> ftr.Curves:
    return vp.read_curves(run_dir)


def curves_of(run_dir: Path) -> ftr.Curves:
    """The run's curves, built again only when its metrics file grew or was replaced (and then only the new
    lines are read: the reader keeps its place in the file)."""
    version = vp.metrics_version(run_dir)
    return ftr.Curves() if version is None else _curves(str(run_dir), version)


# --- Who may start one ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Gate:
    """Who is about to start a run, and whether they may now."""
    who: str  # runs.OWNER, or "visitor <address>" in classroom mode
    cap: int | None  # the most runs that may train at once when a visitor starts one; None: the owner, no cap
    allowed: bool


def may_start(active: int) -> Gate:
    """Whether this session may start a run while `active` ones train: in classroom mode a visitor may only
    while fewer than `classroom.max_runs()` train (the warning says so when not)."""
    who, cap = ui_classroom.visitor_id(), None if ui_classroom.is_owner() else ui_classroom.max_runs()
    allowed = cap is None or vp.start_allowed(active, who, cap)
    if not allowed:
        st.warning(vp.cap_note(active, cap), icon=":material/group:")
    return Gate(who, cap, allowed)


# --- One run page --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunPage:
    """What a run page gives the shared parts."""
    kind: str  # the runs it shows (runs.KINDS)
    keys: RunKeys
    describe: Callable[[dict], str]  # a run's settings in one line, from its saved config
    body: Callable[[runs.RunInfo, ftr.Curves], None]  # the live panel's own part, under the progress bar
    active_note: str  # beside "Use this model" once the run's model is the active one
    warn: Callable[[dict], str | None] | None = None  # a warning over the progress bar, from the run's config
    named: bool = False  # the picker shows each run's description after its name

    def all_runs(self) -> list[runs.RunInfo]:
        return runs.list_runs(kind=self.kind)

    def pick(self, all_runs: list[runs.RunInfo], started: runs.RunInfo | None) -> runs.RunInfo:
        """The run shown: the one just started, else the session's choice, else the newest active one."""
        keys, names = self.keys, {r.name: r for r in all_runs}
        if started is not None:
            state.put(keys.run, started.name)
        state.keep_valid(keys.run, names)
        remembered = state.get(keys.selected)
        newest = next((r for r in all_runs if r.active), all_runs[0])
        state.setdefault(keys.run, remembered if remembered in names else newest.name)

        def label(name: str) -> str:
            return f"{name} · {self.describe(names[name].config)}" if self.named else name
        name = st.selectbox("Run", list(names), key=keys.run.name, format_func=label)  # its status: the live panel
        state.put(keys.selected, name)
        return names[name]

    def live_panel(self, run: runs.RunInfo) -> None:
        """Status, progress and the page's curves of one run; redrawn every REFRESH_S seconds while it trains."""
        state.put(self.keys.watching, run.active)
        st.fragment(run_every=REFRESH_S if run.active else None)(_live)(self, str(run.path))

    def status_row(self, run: runs.RunInfo) -> None:
        """The run's status badge, name, settings and last message, and Stop while it trains (for whoever may)."""
        color, icon = BADGE.get(run.status, ("gray", None))
        left, right = st.columns([5, 1], vertical_alignment="center")
        with left:
            st.badge(run.status, color=color, icon=icon)
            st.caption(f"**{plain(run.name)}** · {self.describe(run.config)} · {plain(run.message)}")  # as written
        if run.active and vp.can_control(run, ui_classroom.visitor_id()):
            right.button("Stop", key=self.keys.stop.name, icon=":material/stop:", on_click=self.stop,
                         args=(str(run.path),), help="Saves a checkpoint and stops; the run can be resumed later.",
                         width="stretch")
        elif run.active:
            right.caption(vp.control_note(run))

    # The buttons' callbacks. Who may act is checked again, on the run as it is now; a refusal (say, a second
    # click while the run is starting) is kept in `notice` to show as one line.
    def stop(self, run_dir: str) -> None:
        self._act(runs.stop, run_dir)

    def resume(self, run_dir: str) -> None:
        self._act(runs.resume, run_dir)

    def delete(self, run_dir: str) -> None:
        self._act(runs.delete, run_dir)

    def _act(self, do: Callable[[Path], object], run_dir: str) -> None:
        run = runs.read(run_dir)
        state.forget(self.keys.confirm)
        if not vp.can_control(run, ui_classroom.visitor_id()):
            state.put(self.keys.notice, vp.control_note(run))
            return
        try:
            do(run.path)
        except LabError as exc:
            state.put(self.keys.notice, str(exc))

    def notice(self) -> None:
        """The last refusal of a Stop, Resume or Delete, once."""
        if state.get(self.keys.notice):
            st.warning(plain(state.get(self.keys.notice)), icon=":material/block:")  # it may quote a path
            state.forget(self.keys.notice)

    def actions(self, run: runs.RunInfo) -> None:
        """Use this model (finished or stopped), Resume (stopped, failed or diverged, with a checkpoint) and
        Delete (with a confirmation) for a run that is not training; visitors see these on their own runs only."""
        keys = self.keys
        if run.active:
            return
        mine = vp.can_control(run, ui_classroom.visitor_id())
        left, right = st.columns([1, 3], vertical_alignment="center")
        if run.status in ("finished", "stopped") and run.checkpoint is not None:
            path = str(run.checkpoint)
            left.button("Use this model", key=keys.use.name, type="primary", icon=":material/model_training:",
                        on_click=try_load, args=(path,))
            if state.get(Model.PATH) == path:
                right.success(self.active_note)
            else:
                right.caption(f"Makes {run.checkpoint.name} of {run.name} the active model of every page "
                              "(it is in the sidebar's picker too).")
        if not mine:
            st.caption(vp.control_note(run))
            return
        if run.resumable:
            help_ = ("Continues from its last good checkpoint, "
                     f"{run.checkpoint.name}" + (" (with the same settings the loss may explode again)."
                                                 if run.status == "diverged" else "."))
            left.button("Resume", key=keys.resume.name, icon=":material/play_arrow:", on_click=self.resume,
                        args=(str(run.path),), help=help_)
        if state.get(keys.confirm) != run.name:
            left.button("Delete run", key=keys.delete.name, icon=":material/delete:", on_click=state.put,
                        args=(keys.confirm, run.name))
            return
        st.warning(f"Delete run {plain(run.name)}? This removes its checkpoints.", icon=":material/delete:")
        yes, no, _ = st.columns([1, 1, 4])
        yes.button("Delete", key=keys.delete_yes.name, type="primary", on_click=self.delete, args=(str(run.path),))
        no.button("Cancel", key=keys.delete_no.name, on_click=state.forget, args=(keys.confirm,))

    def overlaid(self, all_runs: list[runs.RunInfo], help: str) -> list[str]:
        """The names of the runs chosen in the "Overlay runs" box."""
        names = [r.name for r in all_runs]
        state.keep_valid(self.keys.compare, names)
        return st.multiselect("Overlay runs", names, key=self.keys.compare.name, placeholder="pick two or more runs",
                              help=help)


def _live(page: RunPage, run_dir: str) -> None:
    run = runs.read(run_dir)
    if state.get(page.keys.watching) and not run.active:
        state.put(page.keys.watching, False)
        st.rerun()  # the whole page: the results, the run table and "Use this model" change too
    curves = curves_of(run.path)
    page.status_row(run)
    if page.warn is not None and (note := page.warn(run.config)):
        st.warning(note, icon=":material/trending_flat:")
    st.progress(min(1.0, run.step / max(run.total_steps, 1)), text=vp.progress_text(run, curves.train))
    page.body(run, curves)
