"""The pretraining loop: MLM (+ optional NSP) with AdamW, warmup and decay, yielding metric records.

`Trainer.run()` is a generator: the CLI, the background runner, the app and the
tests all drive this one loop and receive the same records. With a run folder
it also writes checkpoints (see `checkpoints.py`); a NaN or inf loss stops the run
as "diverged" without overwriting the last good checkpoint. Under `torchrun` it
trains with DistributedDataParallel: each rank draws its own batches, rank 0
evaluates and writes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.device import resolve_device
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.precision import autocast_dtype
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.corpus_setup import build_corpus
from bertviz_lab.pretrain.data import Batch, make_batch

TRAIN_STREAM, EVAL_STREAM = 0, 1


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: str | os.PathLike | None = None, resume: bool = False,
                 model_config: BertConfig | None = None):
        """`model_config` replaces the one derived from cfg (benchmarks use it to pin a vocabulary size)."""
        self.cfg, self.run_dir = cfg, Path(run_dir) if run_dir else None
        self.rank, self.world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and self.world > 1:  # one GPU per rank, chosen by distributed.session
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type == "cpu":
            torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 2) - 1))
        self.stop_requested = False
        self.corpus = build_corpus(cfg, self.run_dir if self.rank == 0 else None)
        self.tokenizer = self.corpus.tokenizer
        torch.manual_seed(cfg.seed)
        model_cfg = model_config or cfg.model_config(self.tokenizer.vocab_size)
        self.model = BertForPreTraining(model_cfg, nsp_head=cfg.nsp, pooler=cfg.nsp).to(self.device)
        self.optimizer = torch.optim.AdamW(_param_groups(self.model, cfg.weight_decay), lr=cfg.lr,
                                           betas=(0.9, 0.999), eps=1e-6)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.amp_dtype = autocast_dtype(cfg.precision, self.device)
        self.step, self.elapsed = 0, 0.0
        if resume:
            state = checkpoints.load_latest(self.run_dir, self.model, self.optimizer, self.scheduler)
            self.step, self.elapsed = state["step"], state["elapsed"]
        self.ddp = self.model
        if self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
            torch.manual_seed(cfg.seed + 1000 * self.rank)  # each rank its own dropout masks

    def _lr_factor(self, step: int) -> float:
        """Linear warmup to the peak over `warmup` steps, then linear decay to 0 at the last step."""
        warmup, total = self.cfg.warmup, self.cfg.steps
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    def batch(self, step: int, micro: int = 0, stream: int = TRAIN_STREAM) -> Batch:
        source = self.corpus.train if stream == TRAIN_STREAM else self.corpus.held_out
        return make_batch(source, self.tokenizer, step=step * self.cfg.grad_accum + micro,
                          batch_size=self.cfg.batch_size, seq_len=self.cfg.seq_len, nsp=self.cfg.nsp,
                          mask_rate=self.cfg.mask_rate, rank=self.rank, stream=stream).to(self.device)

    def losses(self, model, batch: Batch) -> dict[str, torch.Tensor]:
        """Forward one batch with the MLM head only at masked positions (sparse prediction)."""
        selected = batch.labels != -100
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            out = model(batch.input_ids, batch.token_type_ids, batch.attention_mask, masked_positions=selected)
        targets = batch.labels[selected]
        logits = out.mlm_logits.float()
        result = {"mlm_loss": F.cross_entropy(logits, targets), "mlm_logits": logits.detach(),
                  "mlm_targets": targets}
        if batch.nsp_labels is not None:
            nsp_logits = out.nsp_logits.float()
            result["nsp_loss"] = F.cross_entropy(nsp_logits, batch.nsp_labels)
            result["nsp_correct"] = (nsp_logits.argmax(-1) == batch.nsp_labels).sum()
        return result

    def train_step(self) -> dict:
        """One optimizer step (over grad_accum micro-batches); returns the step's metrics."""
        start = time.perf_counter()
        self.ddp.train()
        sums = torch.zeros(7, device=self.device)  # mlm_loss, nsp_loss, mlm_correct, masked, nsp_correct, n, tokens
        for micro in range(self.cfg.grad_accum):
            batch = self.batch(self.step, micro)
            out = self.losses(self.ddp, batch)
            loss = out["mlm_loss"] + out.get("nsp_loss", 0.0)
            (loss / self.cfg.grad_accum).backward()
            sums += torch.stack([out["mlm_loss"].detach(), out.get("nsp_loss", torch.tensor(0.0)).detach().to(sums),
                                 (out["mlm_logits"].argmax(-1) == out["mlm_targets"]).sum().to(sums),
                                 torch.tensor(float(out["mlm_targets"].numel()), device=self.device),
                                 out.get("nsp_correct", torch.tensor(0)).to(sums),
                                 torch.tensor(float(len(batch.input_ids)), device=self.device),
                                 torch.tensor(float(batch.tokens), device=self.device)])
        if self.world > 1:
            dist.all_reduce(sums)
            sums[:2] /= self.world
        grad_norm = (torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
                     if self.cfg.grad_clip > 0 else torch.tensor(0.0))
        lr = self.scheduler.get_last_lr()[0]
        finite = bool(torch.isfinite(sums[:2]).all() and torch.isfinite(grad_norm))
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        seconds = time.perf_counter() - start
        self.elapsed += seconds
        s = sums.tolist()
        record = {"kind": "train", "step": self.step, "mlm_loss": s[0] / self.cfg.grad_accum,
                  "mlm_acc": s[2] / max(s[3], 1), "lr": lr, "grad_norm": float(grad_norm),
                  "tokens_per_s": s[6] / seconds, "elapsed": self.elapsed}
        if self.cfg.nsp:
            record.update(nsp_loss=s[1] / self.cfg.grad_accum, nsp_acc=s[4] / max(s[5], 1))
        # Diverged: a NaN/inf, or a loss far past chance level (uniform guessing scores ln V).
        record["finite"] = finite and record["mlm_loss"] < 3 * math.log(self.tokenizer.vocab_size)
        return record

    @torch.no_grad()
    def evaluate(self, batches: int | None = None) -> dict:
        """Held-out MLM loss, top-1 and top-5 accuracy, NSP accuracy (fixed batches: comparable over time)."""
        self.model.eval()
        totals = dict(loss=0.0, top1=0, top5=0, masked=0, nsp_loss=0.0, nsp=0, pairs=0)
        for i in range(batches or self.cfg.eval_batches):
            batch = self.batch(i, stream=EVAL_STREAM)
            out = self.losses(self.model, batch)
            n = out["mlm_targets"].numel()
            top5 = out["mlm_logits"].topk(min(5, out["mlm_logits"].shape[-1]), dim=-1).indices
            hits = top5 == out["mlm_targets"][:, None]
            totals["loss"] += float(out["mlm_loss"]) * n
            totals["top1"] += int(hits[:, 0].sum())
            totals["top5"] += int(hits.any(-1).sum())
            totals["masked"] += n
            if "nsp_loss" in out:
                totals["nsp_loss"] += float(out["nsp_loss"]) * len(batch.input_ids)
                totals["nsp"] += int(out["nsp_correct"])
                totals["pairs"] += len(batch.input_ids)
        m = max(totals["masked"], 1)
        record = {"kind": "eval", "step": self.step, "mlm_loss": totals["loss"] / m,
                  "mlm_top1": totals["top1"] / m, "mlm_top5": totals["top5"] / m}
        if totals["pairs"]:
            record.update(nsp_loss=totals["nsp_loss"] / totals["pairs"], nsp_acc=totals["nsp"] / totals["pairs"])
        return record

    def save(self) -> dict:
        path = checkpoints.save(self.run_dir, self.model, self.tokenizer, self.optimizer, self.scheduler,
                             step=self.step, elapsed=self.elapsed, card=self.card())
        return {"kind": "checkpoint", "step": self.step, "path": str(path)}

    def card(self) -> dict:
        return {"trained_by": "bertviz_lab", "corpus": self.corpus.description, "steps": self.step,
                "train_config": self.cfg.to_dict(), "device": str(self.device),
                "training_seconds": round(self.elapsed, 1)}

    def _should_stop(self) -> bool:
        flag = torch.tensor(float(self.stop_requested), device=self.device)
        if self.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag)

    def run(self) -> Iterator[dict]:
        """Train to the last step, yielding records; the last one has kind "end" and the status."""
        writer = self.run_dir is not None and self.rank == 0
        if writer and self.step == 0:
            yield self.save()  # a loadable checkpoint exists from the start, whatever happens next
        if self.rank == 0 and self.step == 0:
            yield self.evaluate()
        while self.step < self.cfg.steps:
            if self._should_stop():
                if writer:
                    yield self.save()
                yield {"kind": "end", "status": "stopped", "step": self.step,
                       "message": f"stopped at step {self.step} of {self.cfg.steps}"}
                return
            record = self.train_step()
            finite = record.pop("finite")
            yield record
            if not finite:
                yield {"kind": "end", "status": "diverged", "step": self.step,
                       "message": f"the loss exploded (NaN, infinite or far above chance) at step {self.step}; "
                                  "the last good checkpoint is kept (try a lower learning rate)"}
                return
            if self.rank == 0 and (self.step % self.cfg.eval_every == 0 or self.step == self.cfg.steps):
                yield self.evaluate()
            if writer and (self.step % self.cfg.checkpoint_every == 0 or self.step == self.cfg.steps):
                yield self.save()
        yield {"kind": "end", "status": "finished", "step": self.step,
               "message": f"finished {self.step} steps in {self.elapsed:.0f} s"}


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT's convention: no weight decay on biases and LayerNorm parameters."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
