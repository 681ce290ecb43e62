"""Widget groups shared by pages: sentence inputs and encoding with visible notes."""

from __future__ import annotations

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs

MAX_CHARS = 100_000  # enough for 5,000+ words; the tokenizer truncates to what the model reads


def sentence_inputs(page: str, default_a: str, default_b: str = "") -> tuple[str, str | None]:
    """Sentence A and, when the pair toggle is on, sentence B. Keys are prefixed by `page`."""
    text_a = st.text_area("Sentence A", value=default_a, key=f"{page}.text_a", height=80, max_chars=MAX_CHARS)
    pair = st.toggle("Add a second sentence (segment B)", value=bool(default_b), key=f"{page}.pair")
    text_b = None
    if pair:
        text_b = st.text_area("Sentence B", value=default_b, key=f"{page}.text_b", height=68, max_chars=MAX_CHARS)
    return text_a, (text_b if text_b and text_b.strip() else None)


def encode_or_stop(ckpt: Checkpoint, text_a: str, text_b: str | None) -> Encoding:
    """Tokenize for the active model; bad text stops the page with a message, truncation is noted."""
    try:
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text_a, text_b)
    except InputError as exc:
        st.warning(str(exc))
        st.stop()
    if encoding.truncated:
        st.info(f"The text is {len(encoding) + encoding.truncated:,} tokens long; this model reads at most "
                f"{ckpt.config.max_position_embeddings}, so the last {encoding.truncated:,} tokens were dropped.")
    return encoding
