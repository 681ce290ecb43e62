"""The model and device picker, and the cached loader every page uses.

Models load once per process (`st.cache_resource`) and are shared by every
session, so switching back to a model is instant. A folder that fails to load
leaves the previous model active and says why; CUDA without a GPU falls back to
the CPU with a note.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab import runs
from bertviz_lab.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.device import DEVICE_CHOICES, cuda_available, describe_devices
from bertviz_lab.errors import LabError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints"
DEFAULT_CHECKPOINT = SHIPPED / "bertviz-mini"
PATH_KEY, DEVICE_KEY, ERROR_KEY = "model.path", "model.device", "model.error"


@st.cache_resource(show_spinner="Loading the model…", max_entries=6)
def cached_checkpoint(path: str, device: str = "cpu") -> Checkpoint:
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
    choice = st.session_state.get(DEVICE_KEY, "auto")
    if choice == "cuda" and not cuda_available():
        return "cpu"
    return "cuda" if choice == "auto" and cuda_available() else ("cpu" if choice == "auto" else choice)


def try_load(path: str) -> bool:
    """Make `path` the active model if it loads; otherwise keep the current one and remember why."""
    try:
        cached_checkpoint(str(Path(path).expanduser()), device_name())
    except LabError as exc:
        st.session_state[ERROR_KEY] = f"Could not load {path}: {exc}"
        return False
    st.session_state[PATH_KEY] = str(Path(path).expanduser())
    st.session_state.pop(ERROR_KEY, None)
    return True


def active_checkpoint() -> Checkpoint:
    """The model the pages use (the shipped default until the picker chooses another)."""
    path = st.session_state.get(PATH_KEY, str(DEFAULT_CHECKPOINT))
    try:
        return cached_checkpoint(path, device_name())
    except LabError as exc:
        st.error(f"The model at {path} could not be loaded: {exc}")
        st.stop()


def sidebar() -> None:
    """Model and device pickers, drawn on every page."""
    models = available_models()
    current = st.session_state.get(PATH_KEY, str(DEFAULT_CHECKPOINT))
    labels = list(models)
    index = list(models.values()).index(current) if current in models.values() else None
    with st.sidebar:
        st.subheader("Model")
        choice = st.selectbox("Active model", labels, index=index, key="model.choice",
                              placeholder="a folder loaded from a path")
        if choice is not None and models[choice] != current:
            try_load(models[choice])
        with st.expander("Load a Hugging Face BERT folder"):
            path = st.text_input("Folder path", key="model.custom", placeholder="/path/to/bert-base-uncased")
            if st.button("Load", key="model.load", disabled=not path.strip()):
                if try_load(path.strip()):
                    st.rerun()
        if ERROR_KEY in st.session_state:
            st.error(st.session_state[ERROR_KEY])
        st.subheader("Device")
        st.radio("Run the model on", DEVICE_CHOICES, key=DEVICE_KEY, horizontal=True,
                 format_func=lambda d: {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA"}[d])
        st.caption("Available: " + "; ".join(describe_devices()))
        if st.session_state.get(DEVICE_KEY) == "cuda" and not cuda_available():
            st.warning("No CUDA GPU on this machine: running on the CPU instead.")
