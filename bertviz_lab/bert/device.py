"""Choosing where the model runs: `auto`, `cpu` or `cuda`, with a clear error when asked for a GPU that is not there."""

from __future__ import annotations

import torch

from bertviz_lab.errors import DeviceError

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` picks CUDA when present, else CPU; `cuda` without a GPU is an error."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not cuda_available():
            raise DeviceError("CUDA was requested but no CUDA GPU is available "
                              "(this torch build or machine has none); use --device cpu or auto")
        return torch.device(name)
    raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_CHOICES)}")


def describe_devices() -> list[str]:
    """Human-readable list of what this machine offers, for the device picker."""
    found = [f"CPU ({torch.get_num_threads()} threads)"]
    for i in range(torch.cuda.device_count() if cuda_available() else 0):
        found.append(f"cuda:{i} ({torch.cuda.get_device_name(i)})")
    return found
