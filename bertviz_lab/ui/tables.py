"""Display formats for tables: how many digits a column shows (the data keeps every digit), and how tall."""

from __future__ import annotations

import pandas as pd
import streamlit as st

MAX_ROWS_IN_FULL = 24  # taller tables scroll


def number(fmt: str = "%.4f", label: str | None = None):
    return st.column_config.NumberColumn(label, format=fmt)


def points(change: float) -> str:
    """A change of a share, in percentage points ("+45.2 points"): a metric's delta, not a relative change."""
    return f"{100 * change:+.1f} points"


def percents(df: pd.DataFrame, *columns: str, digits: int = 1):
    """`df` for st.dataframe with these columns shown as percentages, every one with `digits` decimals
    (Streamlit's "percent" format drops trailing zeros: 86% beside 86.98%); the data keeps every digit."""
    return df.style.format({c: f"{{:.{digits}%}}" for c in columns if c in df.columns}, na_rep="–")


def numbers(df: pd.DataFrame, fmt: str = "%.4f", **special: str) -> dict:
    """`fmt` for every float column, or the format `special` names for it (e.g. weight="%.6f")."""
    return {c: number(special.get(c, fmt)) for c, dtype in df.dtypes.items() if pd.api.types.is_float_dtype(dtype)}


def table_height(df: pd.DataFrame):
    return "content" if len(df) <= MAX_ROWS_IN_FULL else 600
