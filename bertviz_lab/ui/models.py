"""The model and device picker (drawn once, by app.py) and the cached loader every page uses.

Models load once per process (`st.cache_resource`) and are shared by every
session, so switching back to a model is instant. A folder that fails to load
leaves the previous model active and says why; CUDA without a GPU falls back to
the CPU with a note. In classroom mode a visitor's folder box opens only folders
under checkpoints/ and runs/, and the messages a visitor reads name no server path.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint, markdown_safe
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available, describe_devices
from bertviz_lab.errors import CheckpointError, LabError
from bertviz_lab.files import check_path
from bertviz_lab.pretrain import runs
from bertviz_lab.ui import classroom, state
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
            what = "fine-tuned" if run.kind == "finetune" else "run"
            found[f"{what} {run.name} ({run.status}, step {run.step})"] = str(run.checkpoint)
    return found


def device_name() -> str:
    """The device to load on: what the picker says, with CUDA falling back to CPU when absent."""
    choice = state.get(K.DEVICE)
    if choice == "cuda" and not cuda_available():
        return "cpu"
    return "cuda" if choice == "auto" and cuda_available() else ("cpu" if choice == "auto" else choice)


def visitor_roots() -> dict[str, Path]:
    """The folders a visitor may open models from, by the name a visitor types."""
    return {"checkpoints": SHIPPED, "runs": runs.runs_root()}


def _folder(path: str) -> str:
    """The folder to load for `path`: the owner's as typed; a visitor's resolved and inside visitor_roots()."""
    if classroom.is_owner():
        return str(check_path(path, "model folder", CheckpointError))
    return str(classroom.visitor_folder(path, visitor_roots()))


def shown(message: str) -> str:
    """A message as this session may read it: whole for the owner, without server paths for a visitor."""
    return message if classroom.is_owner() else classroom.hide_paths(message, visitor_roots())


def try_load(path: str) -> bool:
    """Make `path` the active model if it loads; otherwise keep the current one and remember why.

    Called from widget callbacks only, so it may also move the sidebar picker to the
    model's entry (or to none, for a folder typed by hand).
    """
    try:
        folder = _folder(path)
        cached_checkpoint(folder, device_name())
    except classroom.VisitorPathError as exc:
        state.put(K.ERROR, str(exc))  # the same sentence for every outside path, existing or not
        return False
    except LabError as exc:
        state.put(K.ERROR, shown(f"Could not load {path}: {exc}"))
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
        plain_error(shown(f"The model at {path} could not be loaded: {exc}"))
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


def _folder_box() -> None:
    if classroom.is_owner():
        with st.expander("Load a Hugging Face BERT folder"):
            st.text_input("Folder path", key=K.CUSTOM.name, placeholder="/path/to/bert-base-uncased")
            st.button("Load", key=K.LOAD.name, on_click=_load_custom)
        return
    with st.expander("Load a model folder"):
        st.caption("In classroom mode you can open the folders under checkpoints/ and runs/ of this lab.")
        st.text_input("Folder path", key=K.CUSTOM.name, placeholder="runs/my-run/checkpoint")
        st.button("Load", key=K.LOAD.name, on_click=_load_custom)


def plain_error(message: str) -> None:
    """An error box whose text is shown as typed: a path or config value is data, never markdown."""
    if markdown_safe(message):
        st.error(message)
    else:
        st.error("That did not work; the reason, as plain text:", icon=":material/error:")
        st.text(message)


def sidebar() -> None:
    """Model and device pickers. Changes go through callbacks, which run before the page does."""
    models = available_models()
    state.setdefault(K.CHOICE, label_of(state.get(K.PATH), models))  # a new session: the active model's entry
    with st.sidebar:
        st.subheader("Model")
        st.selectbox("Active model", list(models), key=K.CHOICE.name, on_change=_pick, args=(models,),
                     placeholder="a folder loaded from a path")
        _folder_box()
        if state.get(K.ERROR):
            plain_error(state.get(K.ERROR))
        st.subheader("Device")
        st.radio("Run the model on", DEVICE_CHOICES, key=K.DEVICE.name, horizontal=True,
                 format_func=DEVICE_LABELS.get)
        st.caption("Available: " + "; ".join(describe_devices()))
        if state.get(K.DEVICE) == "cuda" and not cuda_available():
            st.warning("No CUDA GPU on this machine: running on the CPU instead.")
