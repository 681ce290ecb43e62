"""Reading back in a test what a page drew: its charts as JSON, their data (plotly writes numpy arrays as base64
typed arrays), and its text as the learner reads it."""

import base64
import json
import re

import numpy as np


def array(value) -> np.ndarray:
    """A trace's data as numpy, whether plotly wrote it as a base64 typed array or as a list."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(s) for s in str(shape).split(",")]) if shape else flat
    return np.asarray(value, dtype=float)


def figures(at) -> list[dict]:
    """Every plotly chart an AppTest run drew, as the JSON the browser is sent."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def shown(markdown: str) -> str:
    """Markdown as the page shows it: backslash escapes (ui/shell/text.py's plain) resolved, so \\<s\\> reads as <s>."""
    return re.sub(r"\\(.)", r"\1", markdown)
