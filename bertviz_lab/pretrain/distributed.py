"""torchrun support: join the process group when launched with several processes.

`torchrun --nproc_per_node=N -m bertviz_lab train ...` sets RANK / WORLD_SIZE /
LOCAL_RANK; the trainer then wraps the model in DistributedDataParallel (gloo on
CPU, nccl on CUDA) and shards the data by rank. A plain `python -m` run is the
world-size-1 case and skips all of this.

The group must be gone, its threads joined, before the interpreter shuts down. A gloo
worker thread that still holds the last reference to a tensor Python made and sent
through all_reduce (the step's metrics, the stop flag) takes the GIL to free it; once
the interpreter is finalizing, Python ends such a thread with pthread_exit, C++
unwinding turns that into std::terminate, and the rank dies of SIGABRT. On an idle
machine the worker lets go within microseconds; on a busy one it may still hold it when
rank 1, which has no evaluation or checkpoint to write after its last step, reaches
exit. destroy_process_group joins the threads only if it drops the group's last
reference, so nothing may outlive it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os

import torch
import torch.distributed as dist

from bertviz_lab.errors import DeviceError


@contextlib.contextmanager
def session(device: str):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or dist.is_initialized():
        yield
        return
    use_cuda = device != "cpu" and torch.cuda.is_available()
    gpu = local_gpu() if use_cuda else None
    if gpu is not None:
        torch.cuda.set_device(gpu)
    # DistributedDataParallel imports torch._dynamo, which imports torch.distributed.nn.functional, whose
    # functions take `group=group.WORLD` as a default argument: imported once the group exists, they would
    # hold it for good. Imported before, their default is None.
    importlib.import_module("torch._dynamo")  # not `import torch._dynamo`: that would make `torch` local here
    dist.init_process_group("nccl" if use_cuda else "gloo", device_id=gpu)  # NCCL bound to this rank's GPU now
    try:
        yield
    finally:
        gc.collect()  # the trainer, whose DDP wrapper holds the group, sits in reference cycles
        dist.destroy_process_group()  # now the group's last reference: its threads are joined here


def local_gpu() -> torch.device:
    """This rank's GPU: cuda:LOCAL_RANK, which must be one of this machine's."""
    local, count = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
    if not 0 <= local < count:
        raise DeviceError(f"torchrun started local rank {local}, but this machine has {count} CUDA GPU"
                          f"{'s' * (count != 1)}: start at most {count} processes per machine "
                          f"(--nproc_per_node={count}), or train on the CPU with --device cpu")
    return torch.device("cuda", local)
