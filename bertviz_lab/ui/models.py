"""Which model the app uses, loaded once per process (st.cache_resource) and shared by every session."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertviz_lab.checkpoint import Checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CHECKPOINT = ROOT / "checkpoints" / "bertviz-mini"


@st.cache_resource(show_spinner="Loading the model…")
def cached_checkpoint(path: str, device: str = "cpu") -> Checkpoint:
    return load_checkpoint(path, device=device)


def active_checkpoint() -> Checkpoint:
    """The model the pages use: the shipped default until the picker (issue 4) offers others."""
    return cached_checkpoint(str(DEFAULT_CHECKPOINT))
