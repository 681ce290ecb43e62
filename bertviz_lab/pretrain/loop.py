"""The pretraining loop: MLM (+ optional NSP) with AdamW, warmup and decay, yielding metric records.

`Trainer.run()` is a generator: the `train` command (`process.py`, which the app starts in the background),
`publish.py`, the benchmarks and the tests all drive this one loop and receive the same records. The losses are those
of `bert/losses.py` (the MLM loss fused with its accuracy, `bert/fused.py`); a step's metric sums travel as
`StepTotals`, held-out ones as `EvalTotals` (totals.py), and each becomes a `Metrics` record
(bertviz_lab/metrics.py, the names fine-tuning writes too). With a run folder it
also writes checkpoints (see `checkpoints.py`), each with a snapshot of the probe set (`snapshots.py`, a record of
kind "snapshot"); a NaN or inf loss (or one far above chance) stops the run as "diverged" without overwriting the last
good checkpoint. Under `torchrun` it trains with DDP: each rank draws its own batches, rank 0 evaluates and writes.
In `run` the training batches come from supply.py: kept from an earlier run or shipped, or made here.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.device import resolve_device, to_device
from bertviz_lab.bert.fused import masked_lm_loss
from bertviz_lab.bert.losses import IGNORE_INDEX, nsp_cross_entropy
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import adamw
from bertviz_lab.bert.precision import AUTOCAST_DTYPES, autocast_dtype, autocast_name, loss_scaler
from bertviz_lab.metrics import CHECKPOINT, END, TRAIN, Metrics
from bertviz_lab.pretrain import batch_cache, checkpoints, snapshots
from bertviz_lab.pretrain.config import TrainConfig, warmup_then_decay
from bertviz_lab.pretrain.corpus_setup import build_corpus
from bertviz_lab.pretrain.data import Batch, batch_maker
from bertviz_lab.pretrain.supply import BatchSupply
from bertviz_lab.pretrain.threads import Threads
from bertviz_lab.pretrain.totals import BatchLosses, EvalTotals, StepTotals

TRAIN_STREAM, EVAL_STREAM = 0, 1


class Loop:
    """What every training loop shares: run to the last step, yielding records; stop and save on request.

    A subclass has cfg (steps, eval_every, checkpoint_every, threads), step, elapsed, rank, world, device,
    run_dir and stop_requested, calls `_use_threads` once it knows its device and world, and defines
    train_step (the step's `Metrics` and False once its loss diverged, or None when stopped between
    micro-batches), evaluate (a `Metrics`) and save. The fine-tuning loop (finetune/loop.py) is one.
    Metrics travel as their `record()`, like the other records."""

    amp_dtype: torch.dtype | None = None  # the autocast dtype its forwards run under (None: fp32)

    @property
    def autocast(self) -> str:
        """The autocast the run uses, as its card and status record it: "bf16", "fp16" or "off"."""
        return autocast_name(self.amp_dtype)

    def _use_threads(self) -> None:
        """self.threads: on the CPU, cfg.threads threads; 0: every core no other program is using, looked at again
        each second (threads.py), or under torchrun each rank its share of the machine's cores. None on a GPU."""
        self.threads = None
        if self.device.type == "cpu":
            ranks = int(os.environ.get("LOCAL_WORLD_SIZE", self.world)) if self.world > 1 else 1
            self.threads = Threads(self.cfg.threads, ranks=ranks)

    def _make_optimizer(self) -> None:
        """BERT's recipe over the model's trainable parameters: AdamW (betas 0.9/0.999, eps 1e-6, no decay on
        biases and LayerNorm), the rate warmed up linearly over cfg.warmup steps, then decayed linearly to 0."""
        self.optimizer = adamw(self.model, param_groups(self.model, self.cfg.weight_decay), lr=self.cfg.lr,
                               betas=(0.9, 0.999), eps=1e-6)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: warmup_then_decay(step, self.cfg.warmup, self.cfg.steps))

    def _should_stop(self) -> bool:
        flag = torch.tensor(float(self.stop_requested), device=self.device)
        if self.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag)

    def snapshot(self) -> dict | None:
        """A record of what the model makes of the probe set now (see snapshots.py); None: not kept."""
        return None

    def _save(self) -> Iterator[dict]:
        yield self.save()
        record = self.snapshot()
        if record is not None:
            yield record

    def _checkpoint_due(self) -> bool:
        """Every checkpoint_every steps, the last step, and the 1-2-5 series (0, 1, 2, 5, 10, 20, ...)."""
        return (self.step % self.cfg.checkpoint_every == 0 or self.step == self.cfg.steps
                or checkpoints.on_series(self.step))

    def run(self) -> Iterator[dict]:
        """Train to the last step, yielding records; the last one has kind "end" and the status."""
        writer = self.run_dir is not None and self.rank == 0
        if self.threads is not None:  # the first look at the machine: before the first evaluation and step
            self.threads.update()
        if writer and self.step == 0:
            yield from self._save()  # a loadable checkpoint exists from the start, whatever happens next
        if self.rank == 0 and self.step == 0:
            yield self.evaluate().record()
        while self.step < self.cfg.steps:
            if self._should_stop():
                if writer:
                    yield from self._save()
                yield {"kind": END, "status": "stopped", "step": self.step,
                       "message": f"stopped at step {self.step} of {self.cfg.steps}"}
                return
            if self.threads is not None:
                self.threads.update()
            done = self.train_step()
            if done is None:  # stopped between micro-batches: the check above saves the last whole step
                continue
            metrics, finite = done
            yield metrics.record()
            if not finite:
                yield {"kind": END, "status": "diverged", "step": self.step,
                       "message": f"the loss exploded (NaN, infinite or far above chance) at step {self.step}; "
                                  "the last good checkpoint is kept (try a lower learning rate)"}
                return
            if self.rank == 0 and (self.step % self.cfg.eval_every == 0 or self.step == self.cfg.steps):
                yield self.evaluate().record()
            if writer and self._checkpoint_due():
                yield from self._save()
        yield {"kind": END, "status": "finished", "step": self.step,
               "message": f"finished {self.step} steps in {self.elapsed:.0f} s"}


class Trainer(Loop):
    def __init__(self, cfg: TrainConfig, run_dir: str | os.PathLike | None = None, resume: bool = False,
                 model_config: BertConfig | None = None):
        """`model_config` replaces the one derived from cfg (benchmarks use it to pin a vocabulary size)."""
        self.cfg, self.run_dir = cfg, Path(run_dir) if run_dir else None
        self.rank, self.world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and self.world > 1:  # one GPU per rank, chosen by distributed.session
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._use_threads()
        self.stop_requested, self.keep_batches, self._supply = False, True, None
        self._held_out: dict[tuple[int, int], Batch] = {}
        self.corpus = build_corpus(cfg, self.run_dir if self.rank == 0 else None)
        self.tokenizer = self.corpus.tokenizer
        self.amp_dtype = self._run_autocast(resume)
        self.scaler = loss_scaler(self.amp_dtype, self.device)
        torch.manual_seed(cfg.seed)
        model_cfg = model_config or cfg.model_config(self.tokenizer.vocab_size)
        self.model = to_device(BertForPreTraining(model_cfg, nsp_head=cfg.nsp, pooler=cfg.nsp), self.device, "the model")
        self._make_optimizer()
        self.step, self.elapsed = 0, 0.0
        if resume:
            state = checkpoints.load_latest(self.run_dir, self.model, self.optimizer, self.scheduler,
                                            scaler=self.scaler)
            self.step, self.elapsed = state["step"], state["elapsed"]
            if self.threads is not None:
                self.threads.used.update(state["cpu_threads"])
        self.ddp = self.model
        if self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
            torch.manual_seed(cfg.seed + 1000 * self.rank)  # each rank its own dropout masks

    def _run_autocast(self, resume: bool) -> torch.dtype | None:
        """The run's autocast dtype. On the CPU "auto" is a timing (precision.cpu_bf16_is_faster), which a busy moment
        can flip, so a run resumed on the CPU keeps what its last checkpoint's card says it trained under there: a
        run does not change its arithmetic halfway. (A GPU's "auto" follows its hardware, so is asked again.)"""
        cpu_auto = resume and self.cfg.precision == "auto" and self.device.type == "cpu"
        recorded = checkpoints.recorded_autocast(self.run_dir, self.device) if cpu_auto else None
        if recorded is not None:
            return AUTOCAST_DTYPES[recorded]
        return autocast_dtype(self.cfg.precision, self.device)

    def batch(self, step: int, micro: int = 0, stream: int = TRAIN_STREAM) -> Batch:
        """A pure function of (seed, step, micro-batch, rank, stream); a held-out batch is made once. In `run`
        the training batches come from supply.py: kept by an earlier run or shipped, or made here."""
        if (step, stream) in self._held_out:
            return self._held_out[(step, stream)]
        index = step * self.cfg.grad_accum + micro
        supplied = stream == TRAIN_STREAM and self._supply is not None
        batch = (self._supply.get(index) if supplied else self.batches(stream)(index)).to(self.device)
        if stream != TRAIN_STREAM:  # the same at every evaluation
            self._held_out[(step, stream)] = batch
        return batch

    def batches(self, stream: int = TRAIN_STREAM):
        """The stream's batch of each micro-batch index (step * grad_accum + micro): data.batch_maker."""
        return batch_maker(self.corpus.train if stream == TRAIN_STREAM else self.corpus.held_out, self.tokenizer,
                           batch_size=self.cfg.batch_size, seq_len=self.cfg.seq_len, nsp=self.cfg.nsp,
                           mask_rate=self.cfg.mask_rate, random_tokens=self.cfg.random_tokens, rank=self.rank,
                           stream=stream)

    def run(self) -> Iterator[dict]:
        """Loop.run, with the training batches from supply.py: kept by an earlier run or shipped (`self.keep_batches`),
        or made here."""
        cfg, accum = self.cfg, self.cfg.grad_accum
        keep = (self.keep_batches and cfg.corpus == "builtin"
                and batch_cache.fits(cfg.steps * accum, cfg.batch_size, cfg.seq_len))
        self._supply = BatchSupply(self.batches(), self.step * accum, cfg.steps * accum,
                                   name=self.batch_file_name() if keep else None, seq_len=cfg.seq_len,
                                   batch_size=cfg.batch_size, vocab_size=self.tokenizer.vocab_size)
        supply = self._supply
        try:
            for record in super().run():
                if record["kind"] == END:  # kept before the last record: its reader need not ask for more
                    supply.close(keep=True)
                yield record
        finally:
            self._supply = None
            supply.close(keep=False)

    def batch_file_name(self) -> str:
        """The name of the file that keeps this run's training batches (batch_cache.py)."""
        cfg = self.cfg
        return batch_cache.key(seed=cfg.seed, rank=self.rank, vocabulary=self.tokenizer.vocab,
                               batch_size=cfg.batch_size, seq_len=cfg.seq_len, nsp=cfg.nsp, mask_rate=cfg.mask_rate,
                               random_tokens=cfg.random_tokens)

    def losses(self, model, batch: Batch) -> BatchLosses:
        """Forward one batch with the MLM head, and the last layer, only at the rows the losses read."""
        selected = batch.labels != IGNORE_INDEX  # (B, T)
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            out = model(batch.input_ids, batch.token_type_ids, batch.attention_mask, masked_positions=selected,
                        sparse_last_layer=True)
        targets = batch.labels[selected]  # (N,)
        logits = out.mlm_logits.float()  # (N, V)
        loss, guesses = masked_lm_loss(logits, targets)  # mlm_cross_entropy and argmax, fused (bert/fused.py)
        result = BatchLosses(loss, logits.detach(), targets, mlm_guesses=guesses)
        if batch.nsp_labels is not None:
            nsp_logits = out.nsp_logits.float()  # (B, 2)
            result.nsp_loss = nsp_cross_entropy(nsp_logits, batch.nsp_labels)
            result.nsp_correct = (nsp_logits.argmax(-1) == batch.nsp_labels).sum()
        return result

    def train_step(self) -> tuple[Metrics, bool] | None:
        """One optimizer step (over grad_accum micro-batches): its metrics, and False once the loss diverged.

        In one process a stop request is also seen between micro-batches, so a big model with many of
        them stops within one: the partial step is abandoned as if it never began (gradients dropped,
        random state put back) and None returned; `run` then saves the last whole step. Under torchrun
        every rank must run the same backward passes (DDP reduces gradients in each), so the ranks agree
        on stopping at step boundaries only (`_should_stop`)."""
        start = time.perf_counter()
        self.ddp.train()
        totals = StepTotals()
        rng = self._rng_state() if self.world == 1 and self.cfg.grad_accum > 1 else None
        for micro in range(self.cfg.grad_accum):
            if rng is not None and micro and self.stop_requested:
                self.optimizer.zero_grad(set_to_none=True)
                self._set_rng_state(rng)
                return None
            batch = self.batch(self.step, micro)
            out = self.losses(self.ddp, batch)
            self.scaler.scale(out.loss / self.cfg.grad_accum).backward()
            totals.add(out, batch)
        packed = totals.packed(self.device)  # (7,)
        if self.world > 1:
            StepTotals.all_reduce(packed, self.world)
        self.scaler.unscale_(self.optimizer)  # fp16: the true gradients, before they are clipped
        grad_norm = (torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
                     if self.cfg.grad_clip > 0 else torch.tensor(0.0))
        *values, grad_norm = torch.cat([packed, grad_norm.reshape(1).to(packed)]).tolist()  # the one host sync
        totals = StepTotals.unpacked(values)
        lr = self.scheduler.get_last_lr()[0]
        finite = all(math.isfinite(x) for x in (totals.mlm_loss, totals.nsp_loss, grad_norm))
        if self.scaler.is_enabled():  # fp16: overflowing gradients skip the step and lower the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
            # Diverged when the scale falls below 1: the gradients overflow unscaled, step after step.
            finite = math.isfinite(totals.mlm_loss + totals.nsp_loss) and self.scaler.get_scale() >= 1
            grad_norm = grad_norm if math.isfinite(grad_norm) else None  # a skipped step has none
        elif finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        seconds = time.perf_counter() - start
        self.elapsed += seconds
        nsp = dict(nsp_loss=totals.nsp_loss / self.cfg.grad_accum,
                   nsp_acc=totals.nsp_correct / max(totals.pairs, 1)) if self.cfg.nsp else {}
        metrics = Metrics(TRAIN, self.step, loss=totals.mlm_loss / self.cfg.grad_accum,
                          acc=totals.mlm_correct / max(totals.masked, 1), lr=lr, grad_norm=grad_norm,
                          tokens_per_s=totals.tokens / seconds, elapsed=self.elapsed, **nsp)
        # Diverged: a NaN/inf, or a loss far past chance level (uniform guessing scores ln V).
        return metrics, finite and metrics.loss < 3 * math.log(self.tokenizer.vocab_size)

    @torch.no_grad()
    def evaluate(self, batches: int | None = None) -> Metrics:
        """Held-out MLM loss, top-1 and top-5 accuracy, NSP accuracy (fixed batches: comparable over time)."""
        self.model.eval()
        totals = EvalTotals()
        for i in range(batches or self.cfg.eval_batches):
            batch = self.batch(i, stream=EVAL_STREAM)
            totals.add(self.losses(self.model, batch), pairs=len(batch.input_ids))
        return totals.record(self.step)

    def save(self) -> dict:
        path = checkpoints.save(self.run_dir, self.model, self.tokenizer, self.optimizer, self.scheduler,
                                step=self.step, elapsed=self.elapsed, card=self.card(),
                                threads_used=sorted(self.threads.used) if self.threads else None, scaler=self.scaler)
        return {"kind": CHECKPOINT, "step": self.step, "path": str(path)}

    def snapshot(self) -> dict | None:
        return snapshots.take(self.model, self.tokenizer, self.step)

    def card(self) -> dict:
        return {"trained_by": "bertviz_lab", "corpus": self.corpus.description, "steps": self.step,
                "train_config": self.cfg.to_dict(), "device": str(self.device), "autocast": self.autocast,
                **({"cpu_threads": self.threads.describe()} if self.threads else {}),
                "training_seconds": round(self.elapsed, 1)}

    def _rng_state(self) -> tuple:
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None

    def _set_rng_state(self, state: tuple) -> None:
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.device)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT's convention: no weight decay on biases and LayerNorm parameters. Frozen ones are left out."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

