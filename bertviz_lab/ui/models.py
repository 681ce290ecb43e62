"""The model and device picker (drawn once, by app.py) and the cached loader every page uses.

Models load once per process (`st.cache_resource`) and are shared by every
session, so switching back to a model is instant. A folder that fails to load
leaves the previous model active and says why; CUDA without a GPU falls back to
the CPU with a note.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available, describe_devices
from bertviz_lab.errors import LabError
from bertviz_lab.pretrain import runs
from bertviz_lab.ui import state
from bertviz_lab.ui.router import ensure_router
from bertviz_lab.ui.state import SHIPPED
from bertviz_lab.ui.state import Model as K

log = logging.getLogger("bertviz_lab")
DEFAULT_CHECKPOINT = Path(K.PATH.default)
DEVICE_LABELS = {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA"}


@st.cache_resource(show_spinner="Loading the model…", max_entries=6)
def cached_checkpoint(path: str, device: str = "cpu") -> Checkpoint:
    log.warning("loading model %s on %s", path, device)  # once per model and device: the server log shows it
    return load_checkpoint(path, device=device)


def available_models() -> dict[str, str]:
    """Label -> folder: shipped checkpoints, then finished or stopped runs with a checkpoint."""
    found = {}
    for folder in sorted(SHIPPED.iterdir()) if SHIPPED.is_dir() else []:
        if (folder / "config.json").is_file():
            found[f"{folder.name} (shipped)"] = str(folder)
    for run in runs.list_runs():
        if run.status in ("finished", "stopped") and run.checkpoint is not None:
            found[f"run {run.name} ({run.status}, step {run.step})"] = str(run.checkpoint)
    return found


def device_name() -> str:
    """The device to load on: what the picker says, with CUDA falling back to CPU when absent."""
    choice = state.get(K.DEVICE)
    if choice == "cuda" and not cuda_available():
        return "cpu"
    return "cuda" if choice == "auto" and cuda_available() else ("cpu" if choice == "auto" else choice)


def try_load(path: str) -> bool:
    """Make `path` the active model if it loads; otherwise keep the current one and remember why.

    Called from widget callbacks only, so it may also move the sidebar picker to the
    model's entry (or to none, for a folder typed by hand).
    """
    folder = str(Path(path).expanduser())
    try:
        cached_checkpoint(folder, device_name())
    except LabError as exc:
        state.put(K.ERROR, f"Could not load {path}: {exc}")
        return False
    state.put(K.PATH, folder)
    state.put(K.CHOICE, label_of(folder, available_models()))
    state.forget(K.ERROR)
    return True


def label_of(folder: str, models: dict[str, str]) -> str | None:
    return next((label for label, path in models.items() if path == folder), None)


def active_model() -> Checkpoint:
    """The model the sidebar's picker chose; a page calls this once at the top.

    If that folder no longer loads, the page stops with a message saying why.
    """
    ensure_router()
    path = state.get(K.PATH)
    try:
        return cached_checkpoint(path, device_name())
    except LabError as exc:
        st.error(f"The model at {path} could not be loaded: {exc}")
        st.stop()


def _pick(models: dict[str, str]) -> None:
    label = state.get(K.CHOICE)
    if label in models:
        try_load(models[label])


def _load_custom() -> None:
    path = state.get(K.CUSTOM).strip()
    if not path:
        state.put(K.ERROR, "Type the path of a model folder first.")
    else:
        try_load(path)


def sidebar() -> None:
    """Model and device pickers. Changes go through callbacks, which run before the page does."""
    models = available_models()
    state.setdefault(K.CHOICE, label_of(state.get(K.PATH), models))  # a new session: the active model's entry
    with st.sidebar:
        st.subheader("Model")
        st.selectbox("Active model", list(models), key=K.CHOICE.name, on_change=_pick, args=(models,),
                     placeholder="a folder loaded from a path")
        with st.expander("Load a Hugging Face BERT folder"):
            st.text_input("Folder path", key=K.CUSTOM.name, placeholder="/path/to/bert-base-uncased")
            st.button("Load", key=K.LOAD.name, on_click=_load_custom)
        if state.get(K.ERROR):
            st.error(state.get(K.ERROR))
        st.subheader("Device")
        st.radio("Run the model on", DEVICE_CHOICES, key=K.DEVICE.name, horizontal=True,
                 format_func=DEVICE_LABELS.get)
        st.caption("Available: " + "; ".join(describe_devices()))
        if state.get(K.DEVICE) == "cuda" and not cuda_available():
            st.warning("No CUDA GPU on this machine: running on the CPU instead.")
