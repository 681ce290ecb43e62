"""What a run will cost before it starts: its memory, and whether its corpus file is usable.

`check_resources` refuses a run that would not fit in this machine's free memory (a batch
of 4096 at 512 tokens asks for tens of GB), and `check_corpus` refuses a corpus path that
is not a readable UTF-8 text file of sentences (/proc files, /dev/zero, a FIFO, a folder,
binary data, a 5 GB file), each with one sentence, before any process starts.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from bertviz_lab import corpus, files
from bertviz_lab.bert.device import GPU_HEADROOM, gpu_index, resolve_device
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.distributed import local_gpu

BYTES_PER_FLOAT = 4  # training runs in fp32 (bf16 autocast only shrinks activations)
# Per parameter: the fp32 weight, its gradient, and AdamW's two moments.
BYTES_PER_PARAMETER = 4 + 4 + 8
# A training process before its model: Python, torch, the tokenizer and the corpus generator
# (measured: 340 MB resident on CPU with torch 2.13).
PROCESS_BYTES = 350_000_000
CUDA_CONTEXT_BYTES = 600_000_000  # a new process's CUDA context and cuBLAS workspace on its GPU (about 0.3-0.6 GB)


def estimate_memory(cfg: TrainConfig, vocab_size: int, fused_attention: bool = False) -> int:
    """Bytes one training process needs at its peak for its model and one micro-batch.

    parameters x (4 weight + 4 gradient + 8 AdamW moments), counted from the model config
    the settings imply, plus the activations autograd keeps for one micro-batch of B
    sequences of T = seq_len tokens (fp32; d hidden, I FFN width, h heads, L layers):

    - per token and layer: q, k, v (3d); the merged context, the attention output's dropout
      mask and its LayerNorm input and output (4d); the FFN's pre-activation and GELU output
      (2I); its dropout mask and LayerNorm input and output (3d); and of the attention
      matrices (math path, as on CPU) the softmax weights, the dropout mask and the dropped
      weights (3hT): 10d + 2I + 3hT floats; on a GPU (`fused_attention`) sdpa's kernel keeps no T x T matrix,
      so 10d + 2I;
    - one more layer's worth for the gradients alive during the backward pass;
    - per token, the embeddings' LayerNorm input and output, dropout mask and output (4d);
    - per masked position (N = mask_rate x B x T, MLM logits only there): the MLM transform
      (4d) and the logits, their log-softmax and both gradients (4V).

    Measured (peak RSS growth over building a `loop.Trainer` and one train step, CPU, fresh
    process, T filled): tiny B64 T32 70 MB for 88 estimated (0.80); mini B24 T32 105 / 146
    (0.72); mini B64 T32 239 / 287 (0.83); tiny B16 T256 201 / 241 (0.83); small B16 T128
    638 / 773 (0.82). The estimate is about 20% high, a margin for allocator slack; it
    takes T = seq_len, so on the short built-in stories (40 tokens or so) it is higher still.
    """
    model = cfg.model_config(vocab_size)
    d, ff, h, L = model.hidden_size, model.intermediate_size, model.num_attention_heads, model.num_hidden_layers
    tokens, T = cfg.batch_size * cfg.seq_len, cfg.seq_len
    masked = cfg.mask_rate * tokens
    per_token = (L + 1) * (10 * d + 2 * ff + (0 if fused_attention else 3 * h * T)) + 4 * d
    activations = tokens * per_token + masked * (4 * d + 4 * model.vocab_size)
    parameters = model.num_parameters(mlm=True, nsp=cfg.nsp, pooler=cfg.nsp)
    return int(BYTES_PER_PARAMETER * parameters + BYTES_PER_FLOAT * activations)


def run_vocab_size(cfg: TrainConfig) -> int:
    """The vocabulary the run's model will have: the built-in one's size, or the WordPiece size asked for."""
    if cfg.corpus == "builtin":
        from bertviz_lab.pretrain.data import builtin_vocabulary

        return len(builtin_vocabulary())
    return cfg.vocab_size


def check_resources(cfg: TrainConfig, placed: int | None = None) -> None:
    """Refuse, with one sentence, a run that needs more memory than this machine (or its GPU) has free.
    placed: the GPU `place` chose for a run the app starts."""
    gpu = run_gpu(cfg.device, placed)
    check_fits(estimate_memory(cfg, run_vocab_size(cfg), fused_attention=gpu is not None), gpu)


def check_fits(needed: int, gpu: torch.device | None) -> None:
    """Refuse a run needing `needed` bytes where it trains: on a GPU, that GPU's free memory as its driver counts
    it (the other runs on it and the models the app keeps there included), less the new process's own CUDA
    context; otherwise this machine's."""
    if gpu is not None:  # model and activations live on the GPU; the host keeps only the process
        free, total = torch.cuda.mem_get_info(gpu.index)  # what another process can have: not this one's cache
        if needed + CUDA_CONTEXT_BYTES > GPU_HEADROOM * free:
            raise ConfigError(f"this run needs about {files.describe_bytes(needed + CUDA_CONTEXT_BYTES)} of GPU "
                              f"memory; {gpu} has {files.describe_bytes(free)} free of {files.describe_bytes(total)}: "
                              "lower the batch size, the sequence length or the model size, or wait for other runs "
                              "to end")
        needed = 0
    try:
        files.check_memory(needed + PROCESS_BYTES, "this run", ConfigError)
    except ConfigError as exc:
        raise ConfigError(f"{exc}: lower the batch size, the sequence length or the model size") from None


def run_gpu(device: str, placed: int | None = None) -> torch.device | None:
    """The GPU a run on `device` will train on, or None when it trains on the CPU ("auto" without a GPU): the one
    `place` chose (placed), this rank's under torchrun, else the one the device names (plain: the current one).
    DeviceError for `cuda` without a GPU, or a GPU this machine does not have."""
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return None
    if placed is not None:
        return torch.device("cuda", placed)
    if device in ("auto", "cuda") and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return local_gpu()  # checked before the group forms, on the rank's own GPU
    return torch.device("cuda", gpu_index(resolve_device(device)))


def place(device: str) -> int | None:
    """The GPU a run the app starts on "auto" or "cuda" should train on when this machine has several: the one with
    the most free memory now (a class's runs would otherwise all share cuda:0). None: nothing to choose.
    (Asking a GPU its free memory opens this process's CUDA context there, once.)"""
    if device not in ("auto", "cuda") or not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return None
    free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
    return free.index(max(free))


def gpu_env(placed: int | None) -> dict[str, str]:
    """The environment that shows a trainer only the GPU `place` chose (it trains on its cuda:0): its entry in this
    process's CUDA_VISIBLE_DEVICES, or its number. Its settings keep "auto", so a resume places it anew."""
    if placed is None:
        return {}
    visible = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return {"CUDA_VISIBLE_DEVICES": visible[placed] if placed < len(visible) else str(placed)}


def read_corpus(path) -> tuple[Path, str]:
    """The path and text of a user's corpus file: a regular, readable UTF-8 text file under the size cap.

    Every problem is one InputError sentence starting with "corpus", which the Pretrain form
    files under its Corpus field.
    """
    path = _corpus_path(path)
    data = files.read_bytes(path, "corpus file", MAX_TEXT_BYTES, InputError)
    try:
        return path, corpus.read_text_file(data, MAX_TEXT_BYTES)
    except InputError as exc:
        raise InputError(f"corpus file {path.name}: {exc}") from None


def _corpus_path(path) -> Path:
    """The path typed, if it is a sensible path outside the system's folders."""
    try:
        path = files.check_path(path, "corpus file", InputError)
    except InputError as exc:  # "the corpus file is empty" -> "corpus file is empty", under the Corpus field
        message = str(exc)
        raise InputError(message[4:] if message.startswith("the ") else message) from None
    # /dev/stdin may lead to a regular file; the path as typed is refused as well as the resolved one
    if files.in_system_folder(path.absolute()):
        raise InputError(f"corpus file {path} is a system file, not one of yours")
    return path


def corpus_documents(path) -> tuple[Path, list[list[str]]]:
    """The documents (lists of sentences) of a user's corpus file, or an InputError starting with "corpus"."""
    path, text = read_corpus(path)
    try:
        return path, corpus.documents_from_text(text)
    except InputError as exc:
        raise InputError(f"corpus file {path.name}: {exc}") from None


def check_corpus(cfg: TrainConfig) -> None:
    """Fail now, with the reason, if the run's corpus cannot be used (before any process starts)."""
    if cfg.corpus != "builtin":
        corpus_documents(cfg.corpus)
