"""Choosing where the model runs: `auto`, `cpu` or `cuda` (`cuda:N`), with a clear error when asked for a GPU that
is not there, and what a GPU offers: its free memory, and whether it computes in bf16 natively."""

from __future__ import annotations

import gc

import torch

from bertviz_lab.errors import DeviceError, GpuMemoryError
from bertviz_lab.files import describe_bytes

DEVICE_CHOICES = ("auto", "cpu", "cuda")
GPU_HEADROOM = 0.9  # of a GPU's free memory a model or a run may plan to use (CUDA's context and caching need the rest)


def cuda_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` picks CUDA when present, else CPU; `cuda` without a GPU, or `cuda:N` past this machine's GPUs,
    is an error."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not cuda_available():
            raise DeviceError("CUDA was requested but no CUDA GPU is available "
                              "(this torch build or machine has none); use --device cpu or auto")
        try:
            device = torch.device(name)
        except RuntimeError:
            raise DeviceError(f"unknown device {name!r}; write cuda or cuda:N (N a GPU's number)") from None
        if device.type != "cuda":
            raise DeviceError(f"unknown device {name!r}; write cuda or cuda:N (N a GPU's number)")
        return check_gpu_index(device)
    raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_CHOICES)}")


def check_gpu_index(device: torch.device) -> torch.device:
    """`device` if this machine has that GPU (plain `cuda` means the current one); DeviceError otherwise."""
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        which = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise DeviceError(f"{device} is not on this machine: it has {count} CUDA GPU{'s' * (count != 1)} "
                          f"({which})" if count else f"{device} is not on this machine: it has no CUDA GPU")
    return device


def gpu_index(device: torch.device) -> int:
    """The number of the GPU `device` means (plain `cuda`: the current one)."""
    return torch.cuda.current_device() if device.index is None else device.index


def gpu_memory(device: torch.device) -> tuple[int, int] | None:
    """(free, total) bytes of the GPU `device` means, as its driver counts them (every process's use), or None for
    a CPU device. Free counts what this process's allocator holds unused as free too: it takes it before asking."""
    if device.type != "cuda":
        return None
    index = gpu_index(device)
    free, total = torch.cuda.mem_get_info(index)
    return int(free) + _cached_unused(index), int(total)


def _cached_unused(index: int) -> int:
    """Bytes this process's caching allocator reserved on the GPU and holds unused (0 before its first use)."""
    if not torch.cuda.is_initialized():
        return 0
    return max(0, torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index))


def native_bf16(device: torch.device) -> bool:
    """True on a GPU with bf16 units (compute capability 8.0 or later: A100, RTX 30xx, H100...). Older ones
    (V100, T4, RTX 20xx) only emulate bf16, which `torch.cuda.is_bf16_supported()` counts as support."""
    return device.type == "cuda" and torch.cuda.get_device_capability(gpu_index(device)) >= (8, 0)


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of a model's parameters and buffers as they are now."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def to_device(model: torch.nn.Module, device: str | torch.device, what: str = "this model") -> torch.nn.Module:
    """`model` moved to `device`; on a GPU, refused with one sentence (GpuMemoryError) when its weights would not
    fit in the GPU's free memory, or when the move runs out of it anyway (the partial copy freed again)."""
    device = torch.device(device)
    if device.type != "cuda":
        return model.to(device)
    needed, (free, total) = model_bytes(model), gpu_memory(device)
    if needed > GPU_HEADROOM * free:
        raise GpuMemoryError(_too_big(what, needed, free, device), could_fit=needed <= GPU_HEADROOM * total)
    try:
        return model.to(device)
    except torch.OutOfMemoryError:
        pass  # freed below, outside the handler: its traceback's frames still hold the partial copy
    model.to("cpu")
    gc.collect()
    torch.cuda.empty_cache()
    raise GpuMemoryError(_too_big(what, needed, gpu_memory(device)[0], device), could_fit=True)


def _too_big(what: str, needed: int, free: int, device: torch.device) -> str:
    return (f"{what} needs about {describe_bytes(needed)} of GPU memory and {device} has {describe_bytes(free)} "
            "free: run it on the CPU, or close what else holds the GPU (other models, other runs)")


def describe_devices() -> list[str]:
    """Human-readable list of what this machine offers, for the device picker."""
    found = [f"CPU ({torch.get_num_threads()} threads)"]
    for i in range(torch.cuda.device_count() if cuda_available() else 0):
        found.append(f"cuda:{i} ({torch.cuda.get_device_name(i)})")
    return found
