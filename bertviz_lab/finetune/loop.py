"""The fine-tuning loop: a pretrained (or random) BERT, a classifier on top, AdamW with warmup and decay.

`FineTuner` is a `pretrain.loop.Loop`, so it runs, stops, saves and resumes exactly as pretraining
does and the same background process (`pretrain/process.py`) drives it. Each example is tokenized
once; a step's batch is a pure function of (seed, step) (a fresh shuffle of the training set each
epoch), so a resumed run sees the batches it would have seen. Its records are the `Metrics`
pretraining writes too (bertviz_lab/metrics.py), with these fields set:

    train: step, loss, acc, lr, grad_norm, examples_per_s, elapsed
    eval:  step, loss, acc       on the first `eval_examples` dev examples (older runs wrote dev_loss, dev_acc)

For a token task, loss and accuracy count each word once (its first piece), as Hugging Face's
token-classification recipe does; the other pieces, [CLS], [SEP] and padding are ignored (IGNORE_INDEX).
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.device import resolve_device, to_device
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import ConfigError
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.tasks import TOKEN, Example, Task
from bertviz_lab.metrics import CHECKPOINT, EVAL, TRAIN, Metrics
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.pretrain.data import builtin_vocabulary
from bertviz_lab.pretrain.loop import Loop

EVAL_BATCH = 64
TASK_FILE = "task.json"  # the run's examples, as it trains on them: resume and the page read them here


@dataclass
class Encoded:
    """Examples tokenized once: ids and segment ids per example, and a label (or one per token)."""
    ids: list[list[int]]
    segments: list[list[int]]
    labels: list  # int per example, or a list of ints (IGNORE_INDEX where not scored) per token

    def batch(self, rows: list[int], pad_id: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(input_ids, token_type_ids, attention_mask, labels) of these rows, padded to the longest."""
        T = max(len(self.ids[r]) for r in rows)
        ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
        segments = torch.zeros((len(rows), T), dtype=torch.long)
        mask = torch.zeros((len(rows), T), dtype=torch.long)
        token_level = isinstance(self.labels[rows[0]], list)
        labels = torch.full((len(rows), T), IGNORE_INDEX, dtype=torch.long) if token_level else \
            torch.tensor([self.labels[r] for r in rows])
        for i, r in enumerate(rows):
            n = len(self.ids[r])
            ids[i, :n], segments[i, :n], mask[i, :n] = torch.tensor(self.ids[r]), torch.tensor(self.segments[r]), 1
            if token_level:
                labels[i, :n] = torch.tensor(self.labels[r])
        return tuple(t.to(device) for t in (ids, segments, mask, labels))


def word_labels(encoding, text: str, tags: list[int]) -> list[int]:
    """One label per token: each word's tag on its first piece, IGNORE_INDEX everywhere else.
    Words are `text.split(" ")`; a token starts a word when its offset is where that word starts."""
    starts, at = {}, 0
    for word, tag in zip(text.split(" "), tags):
        starts[at] = tag
        at += len(word) + 1
    labels, used = [], set()
    for (begin, _), seq in zip(encoding.offsets, encoding.sequence_ids):
        if seq == 0 and begin in starts and begin not in used:
            labels.append(starts[begin])
            used.add(begin)
        else:
            labels.append(IGNORE_INDEX)
    return labels


def encode(task: Task, examples: tuple[Example, ...], tokenizer: WordPieceTokenizer, seq_len: int) -> Encoded:
    index = {label: i for i, label in enumerate(task.labels)}
    out = Encoded([], [], [])
    for example in examples:
        encoding = tokenizer.encode(example.text, example.text_b, max_length=seq_len)
        out.ids.append(encoding.ids)
        out.segments.append(encoding.segment_ids)
        if task.kind == TOKEN:
            out.labels.append(word_labels(encoding, example.text, [index[t] for t in example.tags]))
        else:
            out.labels.append(index[example.label])
    return out


def builtin_tokenizer() -> WordPieceTokenizer:
    """The built-in world's vocabulary (whole words, letters as fallback): what a model from scratch reads."""
    return WordPieceTokenizer.from_vocab(builtin_vocabulary())


def losses(model: BertClassifier, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(mean loss, correct count, scored count) of one batch."""
    ids, segments, mask, labels = batch
    logits = model.classify(ids, segments, mask)  # (B, C) or (B, T, C)
    logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    scored = labels != IGNORE_INDEX
    loss = F.cross_entropy(logits[scored], labels[scored]) if scored.any() else logits.sum() * 0
    correct = (logits[scored].argmax(-1) == labels[scored]).sum()
    return loss, correct, int(scored.sum())



def check_family(model_cfg) -> None:
    """Fine-tuning starts from a BERT: a run saves BERT checkpoints, which other families' weights are not."""
    if model_cfg.family != "bert":
        raise ConfigError(f"fine-tuning starts from a BERT checkpoint; this is a {model_cfg.family} model, "
                          "which this lab can explore but not fine-tune")

class FineTuner(Loop):
    def __init__(self, cfg: FinetuneConfig, run_dir: str | os.PathLike | None = None, resume: bool = False,
                 task: Task | None = None):
        """`task` replaces the one cfg names (the bench and tests pass one); a resumed run reads its task.json."""
        self.cfg, self.run_dir = cfg, Path(run_dir) if run_dir else None
        self.rank, self.world = 0, 1
        self.device = resolve_device(cfg.device)
        self._use_threads()
        self.stop_requested = False
        saved = self.run_dir / TASK_FILE if self.run_dir else None
        if resume:
            self.task = ft_data.load_task(saved)
        else:
            self.task = task or ft_data.task_of(cfg)
            if saved is not None:
                ft_data.save_task(self.task, saved)
        # Where the weights come from: the run's own latest checkpoint (resume), a pretrained one, or none.
        base = self._latest() if resume else None if cfg.scratch else load_checkpoint(cfg.checkpoint)
        if base is not None:
            self.tokenizer, model_cfg = base.tokenizer, base.config
            check_family(model_cfg)
        else:
            self.tokenizer = builtin_tokenizer()
            model_cfg = cfg.scratch_config(self.tokenizer.vocab_size)
        if cfg.seq_len > model_cfg.max_position_embeddings:
            raise ConfigError(f"seq_len ({cfg.seq_len}) is longer than the model's "
                              f"{model_cfg.max_position_embeddings} positions; lower it")
        torch.manual_seed(cfg.seed)
        self.model = BertClassifier(model_cfg, self.task.labels, self.task.level)
        if base is not None and not resume:
            self.model.bert.load_state_dict(_encoder_weights(base.model, self.model), strict=True)
        to_device(self.model, self.device, "the model")
        if cfg.freeze_encoder:
            self.model.bert.requires_grad_(False)
        self._make_optimizer()
        self.step, self.elapsed = 0, 0.0
        if resume:
            state = checkpoints.load_latest(self.run_dir, self.model, self.optimizer, self.scheduler, loaded=base)
            self.step, self.elapsed = state["step"], state["elapsed"]
            if self.threads is not None:
                self.threads.used.update(state["cpu_threads"])
        self.train_set = encode(self.task, self.task.train, self.tokenizer, cfg.seq_len)
        self.dev_set = self.encode_dev(cfg.eval_examples)

    def _latest(self):
        """The run's latest checkpoint, loaded once: its tokenizer, shape and (in load_latest) weights."""
        latest = checkpoints.latest(self.run_dir)
        if latest is None:
            raise ConfigError(f"{self.run_dir} has no checkpoint to resume from")
        return load_checkpoint(latest)

    def encode_dev(self, n: int) -> Encoded:
        """The first n dev examples, tokenized as `evaluate` reads them."""
        return encode(self.task, self.task.dev[:n], self.tokenizer, self.cfg.seq_len)

    def rows(self, step: int) -> list[int]:
        """The training examples of one step: consecutive slices of a fresh shuffle per epoch."""
        n, size = len(self.train_set.ids), self.cfg.batch_size
        out = []
        for position in range(step * size, (step + 1) * size):
            epoch, i = divmod(position, n)
            out.append(_shuffle(self.cfg.seed, epoch, n)[i])
        return out

    def train_step(self) -> tuple[Metrics, bool]:
        start = time.perf_counter()
        self.model.train()
        if self.cfg.freeze_encoder:
            self.model.bert.eval()  # a probe reads fixed features: no dropout inside the frozen encoder
        batch = self.train_set.batch(self.rows(self.step), self.tokenizer.pad_id, self.device)
        loss, correct, scored = losses(self.model, batch)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad],
                                                         1.0))
        lr = self.scheduler.get_last_lr()[0]
        value = float(loss.detach())
        finite = math.isfinite(value) and math.isfinite(grad_norm)
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        seconds = time.perf_counter() - start
        self.elapsed += seconds
        metrics = Metrics(TRAIN, self.step, loss=value, acc=int(correct) / max(scored, 1), lr=lr, grad_norm=grad_norm,
                          examples_per_s=self.cfg.batch_size / seconds, elapsed=self.elapsed)
        return metrics, finite and value < 3 * math.log(len(self.task.labels)) + 10

    @torch.no_grad()
    def evaluate(self) -> Metrics:
        """Loss and accuracy on the dev examples (the same ones each time: comparable over steps)."""
        self.model.eval()
        total, correct, scored = 0.0, 0, 0
        n = len(self.dev_set.ids)
        for begin in range(0, n, EVAL_BATCH):
            batch = self.dev_set.batch(list(range(begin, min(n, begin + EVAL_BATCH))), self.tokenizer.pad_id,
                                       self.device)
            loss, right, count = losses(self.model, batch)
            total += float(loss) * count
            correct += int(right)
            scored += count
        return Metrics(EVAL, self.step, loss=total / max(scored, 1), acc=correct / max(scored, 1))

    def save(self) -> dict:
        path = checkpoints.save(self.run_dir, self.model, self.tokenizer, self.optimizer, self.scheduler,
                                step=self.step, elapsed=self.elapsed, card=self.card(),
                                threads_used=sorted(self.threads.used) if self.threads else None)
        return {"kind": CHECKPOINT, "step": self.step, "path": str(path)}

    def card(self) -> dict:
        task = self.task.name if self.task.source == "built-in" else self.task.source
        return {"trained_by": "bertviz_lab", "fine_tuned_on": task, "task_kind": self.task.kind,
                "started": self.cfg.start, "steps": self.step, "finetune_config": self.cfg.to_dict(),
                "device": str(self.device), "autocast": self.autocast, **({"cpu_threads": self.threads.describe()} if self.threads else {}),
                "training_seconds": round(self.elapsed, 1)}


def _encoder_weights(pretrained, model: BertClassifier) -> dict:
    """The pretrained encoder's weights for `model.bert`; a pooler it lacks (a run without NSP) stays random."""
    state = pretrained.bert.state_dict()
    own = model.bert.state_dict()
    return {k: state.get(k, own[k]) if k.startswith("pooler.") else state[k] for k in own}


_SHUFFLES: dict[tuple[int, int, int], list[int]] = {}


def _shuffle(seed: int, epoch: int, n: int) -> list[int]:
    key = (seed, epoch, n)
    if key not in _SHUFFLES:
        if len(_SHUFFLES) > 4:
            _SHUFFLES.clear()
        order = list(range(n))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        _SHUFFLES[key] = order
    return _SHUFFLES[key]
