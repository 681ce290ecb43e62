"""Snapshots: what a model makes of the probe set at one step, small enough to keep for every checkpoint.

The pretraining loop takes one each time it writes a checkpoint (the 1-2-5 series of steps, the
regular ones and the last), and the trainer's process appends it to RUN/snapshots.jsonl, so the
Time-lapse page can scrub through a run without loading a single checkpoint. One record:

    {"kind": "snapshot", "step": 200, "layers": L, "heads": H,
     "probes": [{"text", "tokens": [T], "attention": L x H x T x T,          (the sentence as written)
                 "masked": word, "top": [[token, p], ...]}, ...],           (that word as [MASK])
     "roles": {"previous": L x H, "next": ..., "det_noun": ..., ...},        (see heads.py)
     "chance": {"previous": score, ...},              (each role's score if every head attended uniformly)
     "words": {"words": [W], "groups": [W], "xy": W x 2, "explained": share}}  (token embeddings, PCA)

Numbers are rounded to 4 decimals. A snapshot of bertviz-mini (4 layers x 4 heads, 6 probe
sentences of 9 to 15 tokens) is one line of 114-115 kB: 113,628 to 115,066 bytes over the 19
records of its shipped history, 2.17 MB in all (`awk '{ print length($0) }'
checkpoints/bertviz-mini/history/snapshots.jsonl`; the file is ASCII, so characters are bytes).
Nearly all of it is the attention weights, L x H x T x T numbers per sentence. On resume the
process drops the records past the checkpoint's step, as it does for the metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from bertviz_lab import atomic
from bertviz_lab.corpus.probes import PROBES, WORD_GROUPS
from bertviz_lab.errors import InputError
from bertviz_lab.pretrain import heads

FILE = "snapshots.jsonl"
TOP_K = 5
DECIMALS = 4
MAX_FILE_BYTES = 256 * 2**20  # a larger file in a run folder is not ours


def _rounded(array) -> list:
    return np.round(np.asarray(array, dtype=np.float64), DECIMALS).tolist()


@torch.no_grad()
def _top(model, tokenizer, encodings) -> list[list]:
    """The top-k guesses at each masked encoding's [MASK], as [[token, p], ...] per encoding."""
    device = next(model.parameters()).device
    tops = []
    for enc in encodings:
        where = torch.tensor([[tok == "[MASK]" for tok in enc.tokens]], device=device)
        out = model(torch.tensor([enc.ids], device=device), torch.tensor([enc.segment_ids], device=device),
                    masked_positions=where)
        p = out.mlm_logits[0].float().softmax(-1)
        values, ids = p.topk(min(TOP_K, p.numel()))
        tops.append([[tokenizer.id_to_token(int(i)), round(float(v), DECIMALS)] for v, i in zip(values, ids)])
    return tops


def word_positions(model, tokenizer) -> dict:
    """The WORD_GROUPS words that are one token of the vocabulary: their token embeddings' first two
    principal components (with the share of variance they explain)."""
    words, groups, ids = [], [], []
    for group, members in WORD_GROUPS.items():
        for word in members:
            i = tokenizer.token_to_id(word)
            if i is not None:
                words.append(word)
                groups.append(group)
                ids.append(i)
    if len(ids) < 3:
        return {"words": [], "groups": [], "xy": [], "explained": 0.0}
    vectors = model.bert.embeddings.word_embeddings.weight[ids].detach().float().cpu().numpy().astype(np.float64)
    centred = vectors - vectors.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    explained = float((s[:2] ** 2).sum() / max((s**2).sum(), 1e-30))
    return {"words": words, "groups": groups, "xy": _rounded(u[:, :2] * s[:2]), "explained": round(explained, 4)}


def take(model, tokenizer, step: int) -> dict | None:
    """The snapshot of `model` at `step`; None when no probe sentence fits the model."""
    limit = model.config.max_tokens
    probes, plain, masked = [], [], []
    for probe in PROBES:
        try:
            encodings = heads.encode(tokenizer, limit, probe.text), heads.encode(tokenizer, limit, probe.masked())
        except InputError:
            continue  # longer than this model reads
        probes.append(probe)
        plain.append(encodings[0])
        masked.append(encodings[1])
    if not probes:
        return None
    training = model.training
    model.eval()
    try:
        weights = heads.attention(model, plain)
        tops = _top(model, tokenizer, masked) if getattr(model, "has_mlm", False) else [[] for _ in probes]
        words = word_positions(model, tokenizer)
    finally:
        model.train(training)
    roles = heads.roles_of(weights, plain, probes)
    uniform = heads.uniform_scores(plain, probes)
    return {"kind": "snapshot", "step": int(step), "layers": model.config.num_hidden_layers,
            "heads": model.config.num_attention_heads,
            "probes": [{"text": p.text, "tokens": list(e.tokens), "attention": _rounded(w),
                        "masked": p.words[p.mask], "top": top}
                       for p, e, w, top in zip(probes, plain, weights, tops)],
            "roles": {role: _rounded(s) for role, s in roles.items()},
            "chance": {role: round(float(s[0, 0]), DECIMALS) for role, s in uniform.items()}, "words": words}


def read(path) -> list[dict]:
    """The snapshot records of a snapshots.jsonl, one per step (the last written wins), by step.
    A line that is not a snapshot record is skipped; a missing or oversized file reads as none."""
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return []
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    by_step = {}
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if (isinstance(record, dict) and record.get("kind") == "snapshot" and type(record.get("step")) is int
                and isinstance(record.get("probes"), list) and isinstance(record.get("roles"), dict)):
            by_step[record["step"]] = record
    return [by_step[s] for s in sorted(by_step)]


def keep_until(path, step: int) -> None:
    """On resume: drop the records past `step` (they belong to the steps about to be redone)."""
    path = Path(path)
    if path.is_file():
        kept = [r for r in read(path) if r["step"] <= step]
        atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
