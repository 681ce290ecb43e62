"""Reading a figure back in a test: plotly writes numpy arrays as base64 typed arrays."""

import base64

import numpy as np


def array(value) -> np.ndarray:
    """A trace's data as numpy, whether plotly wrote it as a base64 typed array or as a list."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(s) for s in str(shape).split(",")]) if shape else flat
    return np.asarray(value, dtype=float)
