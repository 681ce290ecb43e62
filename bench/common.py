"""Shared benchmark plumbing: thread pinning, interleaved timing, per-round ratios, a transformers twin."""

from __future__ import annotations

import os
import statistics
import time

import torch

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.masking import mask_tokens
from bertviz_lab.pretrain.data import Batch


def pin_threads(n: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    torch.set_num_threads(n)


def hf_twin(model, attn_implementation: str = "eager"):
    """A transformers BertForPreTraining holding exactly our model's weights."""
    import transformers

    cfg: BertConfig = model.config
    hf = transformers.BertForPreTraining(transformers.BertConfig(**cfg.to_dict(),
                                                                 attn_implementation=attn_implementation))
    missing, _ = hf.load_state_dict(model.state_dict(), strict=False)
    assert all("decoder" in k for k in missing), missing  # the decoder is tied to the embeddings
    hf.tie_weights()
    return hf


def hf_adamw(model, weight_decay: float, lr: float) -> torch.optim.AdamW:
    """The optimizer our loop uses (bert.ops.adamw: fused, BERT's betas and eps, no decay on biases and
    LayerNorm), for a transformers model: both sides of a training benchmark step alike."""
    from bertviz_lab.pretrain.loop import param_groups

    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.999), eps=1e-6, fused=True)


def hf_train_step(model, optimizer, batch, grad_clip: float = 1.0, amp_dtype: torch.dtype | None = None) -> None:
    """One MLM + NSP training step of a transformers BertForPreTraining on one of our batches
    (an explicit all-ones attention mask where ours needs none, as transformers users pass one),
    under the autocast our Trainer uses (its `amp_dtype`: None for fp32), on the batch's device."""
    attention = batch.attention_mask if batch.attention_mask is not None else torch.ones_like(batch.input_ids)
    with torch.autocast(batch.input_ids.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        out = model(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids, attention_mask=attention,
                    labels=batch.labels, next_sentence_label=batch.nsp_labels)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def interleaved_ms(fns: dict, rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    """Wall time in ms of each callable, one list entry per round; each round runs every callable
    back to back, so a drift in machine load hits all of them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def median_ratio(numerator: list[float], denominator: list[float]) -> float:
    """The median of the per-round ratios: noise that slows one whole round cancels out."""
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc) -> None:
    """Stop a server process: SIGTERM, up to 10 s to exit, then SIGKILL."""
    import contextlib
    import subprocess

    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    if proc.poll() is None:
        proc.kill()


def wait_healthy(url: str, proc, log=None, timeout: float = 60) -> None:
    """Wait until a Streamlit server at `url` answers its health check; raise if `proc` exits first."""
    import contextlib
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                return
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError(f"the server stopped with exit code {proc.returncode}: {tail}")
        time.sleep(0.3)
    raise RuntimeError(f"the server did not start within {timeout:.0f} s")


def fixed_batch(cfg: BertConfig, size: int, seq_len: int, device: torch.device | str = "cpu") -> Batch:
    """[CLS] A [SEP] B [SEP] of random ids, 15% of them masked by BERT's rule, random NSP labels; seeded."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (size, seq_len), generator=g)
    ids[:, 0], ids[:, seq_len // 2], ids[:, -1] = 2, 3, 3
    segments = torch.zeros_like(ids)
    segments[:, seq_len // 2 + 1:] = 1
    masked = mask_tokens(ids, special_ids={0, 1, 2, 3, 4}, vocab_size=cfg.vocab_size, mask_id=4, generator=g)
    nsp = torch.randint(0, 2, (size,), generator=g)
    return Batch(masked.input_ids, segments, None, masked.labels, nsp, size * seq_len).to(device)
