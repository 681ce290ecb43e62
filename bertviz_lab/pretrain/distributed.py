"""torchrun support: join the process group when launched with several processes.

`torchrun --nproc_per_node=N -m bertviz_lab train ...` sets RANK / WORLD_SIZE /
LOCAL_RANK; the trainer then wraps the model in DistributedDataParallel (gloo on
CPU, nccl on CUDA) and shards the data by rank. A plain `python -m` run is the
world-size-1 case and skips all of this.
"""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist


@contextlib.contextmanager
def session(device: str):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or dist.is_initialized():
        yield
        return
    use_cuda = device != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()
