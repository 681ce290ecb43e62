"""The model and device picker (drawn once, by app.py) and the cached loader every page uses.

Models load once per process (`st.cache_resource`) and are shared by every
session, so switching back to a model is instant; whatever is computed from one is cached under its
`model_key` (the one cache-key idiom of ui/). A folder that fails to load
leaves the previous model active and says why; CUDA without a GPU falls back to
the CPU with a note. The picker and the folder box also take Hugging Face Hub ids
(bert/hub.py): one already in the Hugging Face cache opens at once, any other is
downloaded first, with a progress bar, before the picker is drawn. In classroom mode
a visitor's folder box opens only folders under checkpoints/ and runs/ and Hub models
already in the cache (never a download), and the messages a visitor reads name no server path.
For everyone, in the box and in links alike (`named`), `runs/x` and `checkpoints/x` name the lab's own
folders, wherever $BERTVIZ_RUNS points.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from bertviz_lab import classroom
from bertviz_lab.bert import hub
from bertviz_lab.bert.card import markdown_safe
from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.bert.device import DEVICE_CHOICES, cuda_available, describe_devices
from bertviz_lab.errors import CheckpointError, GpuMemoryError, LabError
from bertviz_lab.files import ROOT, check_path, describe_bytes
from bertviz_lab.pretrain import runs
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.classroom import is_owner
from bertviz_lab.ui.shell.router import end_page, ensure_router
from bertviz_lab.ui.shell.state import SHIPPED
from bertviz_lab.ui.shell.state import Model as K

log = logging.getLogger("bertviz_lab")
DEFAULT_CHECKPOINT = Path(K.PATH.default)
DEVICE_LABELS = {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA"}
BOX = "Open a model folder or a Hub id"
# What a visitor reads for a Hub id that is not in the cache (a visitor never starts a download).
NOT_CACHED = "{} is not among the Hub models this lab has downloaded: the teacher has to open it once first."


GPU_MODELS = 2  # models kept loaded on a GPU at once (six on the CPU): a GPU's memory is scarcer than the host's


def _load(path: str, device: str) -> Checkpoint:
    log.warning("loading model %s on %s", path, device)  # once per model and device: the server log shows it
    return load_checkpoint(path, device=device)


# Two functions, not one wrapped twice: Streamlit keys a cache by its function's name and code.
@st.cache_resource(show_spinner="Loading the model…", max_entries=6)
def _on_cpu(path: str, device: str) -> Checkpoint:
    return _load(path, device)


@st.cache_resource(show_spinner="Loading the model…", max_entries=GPU_MODELS)
def _on_gpu(path: str, device: str) -> Checkpoint:
    return _load(path, device)


def cached_checkpoint(path: str, device: str = "cpu") -> Checkpoint:
    """The model in `path` on `device`, loaded once per process. On a GPU at most GPU_MODELS stay loaded; when the
    GPU has no room for one more, the loaded ones are let go and the model is tried once more, alone: a class that
    switches models does not fill the GPU, and what still does not fit is one GpuMemoryError sentence."""
    if not device.startswith("cuda"):
        return _on_cpu(path, device)
    try:
        return _on_gpu(path, device)
    except GpuMemoryError as exc:
        if not exc.could_fit:  # bigger than the GPU: letting the class's models go would not help
            raise
    release_gpu_models()  # outside the handler, whose traceback holds the failed load's frames
    return _on_gpu(path, device)


def release_gpu_models() -> None:
    """Drop every model this process keeps on a GPU (a session still using one holds it until its next rerun)."""
    _on_gpu.clear()
    gc.collect()
    torch.cuda.empty_cache()


def forget_models() -> None:
    """Empty both model caches (the tests start from nothing)."""
    _on_cpu.clear()
    _on_gpu.clear()


def available_models() -> dict[str, str]:
    """Label -> what to open: shipped checkpoints and finished or stopped runs with a checkpoint (their
    folders), then Hub models (their ids): those in the Hugging Face cache and, for the owner, the
    suggested ones not downloaded yet."""
    found = {}
    for folder in sorted(SHIPPED.iterdir()) if SHIPPED.is_dir() else []:
        if (folder / "config.json").is_file():
            found[f"{folder.name} (shipped)"] = str(folder)
    for run in runs.list_runs():
        if run.status in ("finished", "stopped") and run.checkpoint is not None:
            what = "fine-tuned" if run.kind == "finetune" else "run"
            found[f"{what} {run.name} ({run.status}, step {run.step})"] = str(run.checkpoint)
    cached = hub.cached_models()
    found.update({f"{repo_id} (Hub, cached)": repo_id for repo_id in cached})
    if is_owner():
        found.update({f"{s.repo_id} (Hub, download ~{s.size})": s.repo_id for s in hub.SUGGESTED
                      if s.repo_id not in cached})
    return found


@dataclass(frozen=True)
class ModelKey:
    """What every cached result of a loaded model depends on besides its own inputs. Each cached function takes
    it first, then its hashable inputs by name, then the objects they stand for `_`-prefixed (Streamlit skips
    those): `lens(model_key(ckpt), ids, ckpt, encoding)`."""

    path: str  # the model's folder or Hub id
    device: str  # where it runs: "cpu" or "cuda"


def model_key(ckpt: Checkpoint) -> ModelKey:
    return ModelKey(str(ckpt.path), device_name())


def device_name(choice: str | None = None) -> str:
    """The device to load on: what the picker says (or `choice`), with CUDA falling back to CPU when absent."""
    choice = state.get(K.DEVICE) if choice is None else choice
    if choice == "cuda" and not cuda_available():
        return "cpu"
    return "cuda" if choice == "auto" and cuda_available() else ("cpu" if choice == "auto" else choice)


def visitor_roots() -> dict[str, Path]:
    """The folders a visitor may open models from, by the name a visitor types."""
    return {"checkpoints": SHIPPED, "runs": runs.runs_root()}


class _Download(Exception):
    """A Hub id the owner opened that is not in the cache yet: the sidebar downloads it on its next run."""


class _NotCached(LabError):
    """A Hub id a visitor opened that is not in the cache: a visitor never starts a download."""


def named(text: str) -> Path | str:
    """What a picker entry, a typed folder text or a link's `model=` names, read one way by the folder box and by
    links: a Hub id (the str) or a folder (a Path, not yet resolved or checked).

    A path that starts with a label of visitor_roots() ("checkpoints/x", "runs/x/checkpoint") is that root's
    folder, wherever $BERTVIZ_RUNS points, for the owner and for a visitor alike. Then a text that looks like
    a Hub id and names nothing on disk is the Hub id (a local folder wins). Any other text is a path: the
    owner's as typed ('~' expanded later, relative to the working folder), a visitor's relative to the lab.
    """
    text = text.strip()
    if (folder := classroom.labelled_folder(text, visitor_roots())) is not None:
        return folder
    path = Path(text)
    if not is_owner() and not path.is_absolute():
        path = ROOT / path
    return text if hub.looks_like_hub_id(text) and not os.path.lexists(path) else path


def is_hub(text: str) -> bool:
    """True if `text` means a Hub model (see `named`)."""
    return isinstance(named(text), str)


def _folder(target: str) -> str:
    """The folder to load for a picker entry or typed text: a Hub id's snapshot in the cache; otherwise the
    owner's folder as named, a visitor's resolved and inside visitor_roots()."""
    folder = named(target)
    if isinstance(folder, str):
        cached = hub.cached_folder(folder)
        if cached is not None:
            return str(cached)
        if not is_owner():
            raise _NotCached(NOT_CACHED.format(folder))
        raise _Download(folder)
    if not is_owner():
        return str(classroom.visitor_folder(str(folder), visitor_roots()))
    check_path(target, "model folder", CheckpointError)  # empty, overlong or control-character text: one sentence
    path = folder.expanduser()
    if not os.path.lexists(path):
        labelled = classroom.labelled_folder(target.strip(), visitor_roots()) is not None  # never read as an id
        raise CheckpointError(f"no model folder at {path}" + ("" if labelled else (
            f", and {target[:100]!r} is not a Hugging Face Hub id (like bert-base-uncased or org/name)")))
    return str(path)


def shown(message: str) -> str:
    """A message as this session may read it: whole for the owner, without server paths for a visitor."""
    return message if is_owner() else classroom.hide_paths(message, visitor_roots())


def try_load(target: str) -> bool:
    """Make `target` (a folder or a Hub id) the active model if it loads; otherwise keep the current one and
    remember why. A Hub id the owner has not downloaded yet is left for the sidebar to download.

    Called from widget callbacks, or by the sidebar before it draws the picker, so it may also move the
    picker to the model's entry (or to none, for a folder typed by hand).
    """
    try:
        folder = _folder(target)
        cached_checkpoint(folder, device_name())
    except _Download:
        state.put(K.DOWNLOAD, target)
        state.forget(K.ERROR)
        return False
    except (classroom.VisitorPathError, _NotCached) as exc:
        state.put(K.ERROR, str(exc))  # for a path: the same sentence for every outside path, existing or not
        return False
    except LabError as exc:
        state.put(K.ERROR, shown(f"Could not load {target}: {exc}"))
        return False
    state.put(K.PATH, folder)
    state.put(K.CHOICE, label_of(folder, available_models()))
    state.forget(K.ERROR)
    return True


def label_of(folder: str, models: dict[str, str]) -> str | None:
    """The picker's entry for `folder`: the entry of that folder, or of the Hub model whose snapshot it is."""
    return next((label for label, target in models.items()
                 if target == folder or (is_hub(target) and str(hub.cached_folder(target)) == folder)), None)


def _download() -> None:
    """Download the Hub model the owner asked for, with a progress bar where the picker will be, then open it."""
    repo_id = state.get(K.DOWNLOAD)
    state.forget(K.DOWNLOAD)
    if not repo_id or not is_owner():
        return
    with st.sidebar:
        slot = st.empty()
        with slot.container():
            bar = st.progress(0.0, text=f"Downloading `{repo_id}` from the Hugging Face Hub…")
            caption = st.empty()
    script = get_script_run_ctx()
    shown_at = [-1]  # the percentage last drawn: a redraw only when it moves

    def report(done: int, total: int, filename: str) -> None:
        if get_script_run_ctx() is None:  # Xet downloads report from a thread of their own
            add_script_run_ctx(threading.current_thread(), script)
        percent = done * 100 // total if total else 0
        if percent != shown_at[0]:
            shown_at[0] = percent
            bar.progress(min(percent, 100), text=f"Downloading `{repo_id}` from the Hugging Face Hub: "
                                                 f"{describe_bytes(done)} of {describe_bytes(total)}")
            caption.caption(f"`{filename}`")

    try:
        fetched = hub.fetch(repo_id, progress=report) is not None
    except LabError as exc:
        state.put(K.ERROR, f"Could not download {repo_id}: {exc}")
        fetched = False
    slot.empty()
    if not (fetched and try_load(repo_id)):  # the picker back on the model in use
        state.put(K.CHOICE, label_of(state.get(K.PATH), available_models()))


def active_model() -> Checkpoint:
    """The model the sidebar's picker chose; a page calls this once at the top.

    If that folder no longer loads, the page stops with a message saying why.
    """
    ensure_router()
    path = state.get(K.PATH)
    try:
        return cached_checkpoint(path, device_name())
    except LabError as exc:
        where = f"{repo_id} (in the Hugging Face cache)" if (repo_id := hub.repo_id_of(path)) else f"at {path}"
        plain_error(shown(f"The model {where} could not be loaded: {exc}"))
        end_page()


def _pick(models: dict[str, str]) -> None:
    label = state.get(K.CHOICE)
    if label in models:
        try_load(models[label])


def _load_custom() -> None:
    text = state.get(K.CUSTOM).strip()
    if not text:
        state.put(K.ERROR, "Type the path of a model folder or a Hugging Face Hub id first.")
    else:
        try_load(text)


def _folder_box() -> None:
    with st.expander(BOX):
        if is_owner():
            st.caption("A folder in the Hugging Face layout, or a Hub id such as `bert-base-uncased` or `org/name`: "
                       "downloaded once into the Hugging Face cache, it opens offline afterwards. Small ones to try:")
            st.caption("\n".join(f"- `{s.repo_id}` (~{s.size}): {s.about}" for s in hub.SUGGESTED))
            placeholder = "/path/to/model or bert-base-uncased"
        else:
            st.caption("In classroom mode you can open the folders under checkpoints/ and runs/ of this lab, and "
                       "the Hugging Face Hub models the teacher has opened before.")
            placeholder = "runs/my-run/checkpoint"
        st.text_input("Folder path or Hub id", key=K.CUSTOM.name, placeholder=placeholder)
        st.button("Load", key=K.LOAD.name, on_click=_load_custom)


def plain_error(message: str) -> None:
    """An error box whose text is shown as typed: a path or config value is data, never markdown."""
    if markdown_safe(message):
        st.error(message)
    else:
        st.error("That did not work; the reason, as plain text:", icon=":material/error:")
        st.text(message)


def sidebar() -> None:
    """Model and device pickers. Changes go through callbacks, which run before the page does; a Hub
    model they asked for is downloaded here, before the picker, which then shows it as cached."""
    _download()
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
