"""The model and device picker, and the cached loader every page uses.

Models load once per process (`st.cache_resource`) and are shared by every
session, so switching back to a model is instant. A folder that fails to load
leaves the previous model active and says why; CUDA without a GPU falls back to
the CPU with a note.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available, describe_devices
from bertviz_lab.errors import LabError
from bertviz_lab.pretrain import runs

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints"
DEFAULT_CHECKPOINT = SHIPPED / "bertviz-mini"
PATH_KEY, DEVICE_KEY, ERROR_KEY = "model.path", "model.device", "model.error"
CHOICE_KEY, CUSTOM_KEY = "model.choice", "model.custom"


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
    """Make `path` the active model if it loads; otherwise keep the current one and remember why.

    Called from widget callbacks only, so it may also move the sidebar picker to the
    model's entry (or to none, for a folder typed by hand).
    """
    folder = str(Path(path).expanduser())
    try:
        cached_checkpoint(folder, device_name())
    except LabError as exc:
        st.session_state[ERROR_KEY] = f"Could not load {path}: {exc}"
        return False
    st.session_state[PATH_KEY] = folder
    st.session_state[CHOICE_KEY] = next((k for k, v in available_models().items() if v == folder), None)
    st.session_state.pop(ERROR_KEY, None)
    return True


def active_checkpoint() -> Checkpoint:
    """Draw the model and device picker in the sidebar and return the chosen model.

    Every page calls this once at the top, so the picker is on every page (and in
    every page's AppTest) and the model shown is always the one the page uses.
    """
    sidebar()
    path = st.session_state.get(PATH_KEY, str(DEFAULT_CHECKPOINT))
    try:
        return cached_checkpoint(path, device_name())
    except LabError as exc:
        st.error(f"The model at {path} could not be loaded: {exc}")
        st.stop()


def _pick(models: dict[str, str]) -> None:
    label = st.session_state.get(CHOICE_KEY)
    if label in models:
        try_load(models[label])


def _load_custom() -> None:
    path = st.session_state.get(CUSTOM_KEY, "").strip()
    if not path:
        st.session_state[ERROR_KEY] = "Type the path of a model folder first."
    else:
        try_load(path)


def ensure_router() -> None:
    """Leave Streamlit's legacy pages/-folder mode if this server started in it.

    A server whose first request is a deep link (say /attention, bookmarked) runs the
    page file directly with an automatic menu built from pages/, because app.py has not
    yet told Streamlit about st.navigation. Turning that flag off and rerunning sends the
    same URL through app.py's router, with its menu and wide layout.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without this internal: nothing to fix
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def sidebar() -> None:
    """Model and device pickers. Changes go through callbacks, which run before the page does."""
    ensure_router()
    models = available_models()
    current = st.session_state.get(PATH_KEY, str(DEFAULT_CHECKPOINT))
    if CHOICE_KEY not in st.session_state:
        st.session_state[CHOICE_KEY] = next((k for k, v in models.items() if v == current), None)
    with st.sidebar:
        st.subheader("Model")
        st.selectbox("Active model", list(models), key=CHOICE_KEY, on_change=_pick, args=(models,),
                     placeholder="a folder loaded from a path")
        with st.expander("Load a Hugging Face BERT folder"):
            st.text_input("Folder path", key=CUSTOM_KEY, placeholder="/path/to/bert-base-uncased")
            st.button("Load", key="model.load", on_click=_load_custom)
        if ERROR_KEY in st.session_state:
            st.error(st.session_state[ERROR_KEY])
        st.subheader("Device")
        st.radio("Run the model on", DEVICE_CHOICES, key=DEVICE_KEY, horizontal=True,
                 format_func=lambda d: {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA"}[d])
        st.caption("Available: " + "; ".join(describe_devices()))
        if st.session_state.get(DEVICE_KEY) == "cuda" and not cuda_available():
            st.warning("No CUDA GPU on this machine: running on the CPU instead.")
