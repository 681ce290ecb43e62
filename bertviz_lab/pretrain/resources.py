"""What a run will cost before it starts: its memory, and whether its corpus file is usable.

`check_resources` refuses a run that would not fit in this machine's free memory (a batch
of 4096 at 512 tokens asks for tens of GB), and `check_corpus` refuses a corpus path that
is not a readable UTF-8 text file of sentences (/proc files, /dev/zero, a FIFO, a folder,
binary data, a 5 GB file), each with one sentence, before any process starts.
"""

from __future__ import annotations

from pathlib import Path

from bertviz_lab import corpus, files
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.pretrain.config import TrainConfig

BYTES_PER_FLOAT = 4  # training runs in fp32 (bf16 autocast only shrinks activations)
# Per parameter: the fp32 weight, its gradient, and AdamW's two moments.
BYTES_PER_PARAMETER = 4 + 4 + 8
# A training process before its model: Python, torch, the tokenizer and the corpus generator
# (measured: 340 MB resident on CPU with torch 2.13).
PROCESS_BYTES = 350_000_000
GPU_HEADROOM = 0.9  # of a GPU's memory a run may plan to use (CUDA's context and caching take the rest)


def estimate_memory(cfg: TrainConfig, vocab_size: int) -> int:
    """Bytes one training process needs at its peak for its model and one micro-batch.

    parameters x (4 weight + 4 gradient + 8 AdamW moments), counted from the model config
    the settings imply, plus the activations autograd keeps for one micro-batch of B
    sequences of T = seq_len tokens (fp32; d hidden, I FFN width, h heads, L layers):

    - per token and layer: q, k, v (3d); the merged context, the attention output's dropout
      mask and its LayerNorm input and output (4d); the FFN's pre-activation and GELU output
      (2I); its dropout mask and LayerNorm input and output (3d); and of the attention
      matrices (math path, as on CPU) the softmax weights, the dropout mask and the dropped
      weights (3hT): 10d + 2I + 3hT floats;
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
    per_token = (L + 1) * (10 * d + 2 * ff + 3 * h * T) + 4 * d
    activations = tokens * per_token + masked * (4 * d + 4 * model.vocab_size)
    parameters = model.num_parameters(mlm=True, nsp=cfg.nsp, pooler=cfg.nsp)
    return int(BYTES_PER_PARAMETER * parameters + BYTES_PER_FLOAT * activations)


def run_vocab_size(cfg: TrainConfig) -> int:
    """The vocabulary the run's model will have: the built-in one's size, or the WordPiece size asked for."""
    if cfg.corpus == "builtin":
        from bertviz_lab.pretrain.data import builtin_vocabulary

        return len(builtin_vocabulary())
    return cfg.vocab_size


def check_resources(cfg: TrainConfig) -> None:
    """Refuse, with one sentence, a run that needs more memory than this machine (or its GPU) has."""
    needed = estimate_memory(cfg, run_vocab_size(cfg))
    gpu = _gpu_bytes(cfg.device)
    if gpu is not None:  # model and activations live on the GPU; the host keeps only the process
        if needed > GPU_HEADROOM * gpu:
            raise ConfigError(f"this run needs about {files.describe_bytes(needed)} of GPU memory; the GPU has "
                              f"{files.describe_bytes(gpu)}: lower the batch size, the sequence length or the "
                              "model size")
        needed = 0
    try:
        files.check_memory(needed + PROCESS_BYTES, "this run", ConfigError)
    except ConfigError as exc:
        raise ConfigError(f"{exc}: lower the batch size, the sequence length or the model size") from None


def _gpu_bytes(device: str) -> int | None:
    """Total memory of the CUDA GPU the run would train on, or None when it trains on the CPU."""
    if device == "cpu":
        return None
    import torch

    if not torch.cuda.is_available():
        return None  # "auto" trains on the CPU; "cuda" is refused elsewhere with its own message
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return int(torch.cuda.get_device_properties(index).total_memory)


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
