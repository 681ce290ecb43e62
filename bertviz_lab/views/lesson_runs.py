"""The lesson's two live runs, small enough to finish in seconds on two CPU cores, in the app's own process.

`train_tiny` pretrains a tiny BERT from scratch on the built-in corpus with the pretraining loop itself
(`pretrain.loop.Trainer`, no run folder: nothing is written) and yields its records; `start_loss` asks
where the loss starts. `compare_probes` reads a built-in fine-tuning task with the active model and with
random weights of the same shape (`views.shapes.random_model`), each word-averaged last-layer vector a
fixed feature, and trains a linear probe (logistic regression) on each: the Fine-tune page's linear
probe, in miniature. Both leave the process's random numbers and thread count as they found them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.finetune import tasks
from bertviz_lab.pretrain.config import TrainConfig, max_threads
from bertviz_lab.pretrain.data import builtin_vocabulary
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.views.lesson import Question, Quiz
from bertviz_lab.views.representations import piece_means
from bertviz_lab.views.shapes import random_model

# About 5 s on 2 CPU cores: the held-out loss falls from ln V (~7.7) to ~6 as the model learns word frequencies.
TINY = dict(preset="tiny", hidden=64, heads=2, layers=2, batch_size=16, seq_len=32, steps=60, lr=5e-3, warmup=5,
            eval_every=10, eval_batches=2, checkpoint_every=10**6, device="cpu")
PROBE_TASKS = ("acceptability", "coherence")  # the built-in tasks with one label per input
PROBE_TRAIN, PROBE_DEV = 400, 200  # examples read: a few seconds for each model
PROBE_STEPS, PROBE_LR = 300, 0.01  # full-batch Adam on standardized features
TIE = 0.02  # accuracies closer than this count as a tie
PRETRAINED, RANDOM = "the pretrained model", "random weights of the same shape"


# --- 8. A short training run -------------------------------------------------------------------------
@lru_cache(maxsize=1)
def tiny_vocab_size() -> int:
    """The built-in corpus's vocabulary, which the tiny model learns to predict over."""
    return WordPieceTokenizer.from_vocab(builtin_vocabulary()).vocab_size


def tiny_config(seed: int = 0) -> TrainConfig:
    """TINY on this process's current CPU threads (the loop would otherwise set its own for the whole app)."""
    return TrainConfig(**TINY, seed=seed, threads=min(torch.get_num_threads(), max_threads()))


def train_tiny(seed: int = 0) -> Iterator[dict]:
    """The pretraining loop's records ("train", "eval", then "end") for a tiny BERT trained from scratch."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        try:
            yield from Trainer(tiny_config(seed)).run()
        finally:
            torch.set_num_threads(threads)


def start_question(vocab_size: int) -> tuple[Question, dict[str, float]]:
    """Where will the MLM loss start, before any learning? The options and the loss each one names."""
    levels = {f"near ln V = ln {vocab_size:,} = {math.log(vocab_size):.2f}": math.log(vocab_size),
              "near 1": 1.0, "near 0": 0.0}
    return Question("Before any training step (step 0), what will the held-out MLM loss be?", tuple(levels)), levels


def start_loss(vocab_size: int, held_out: list[dict]) -> Quiz:
    """The option nearest the loss the run measured at step 0."""
    question, levels = start_question(vocab_size)
    first, last = held_out[0], held_out[-1]
    answer = min(levels, key=lambda label: abs(levels[label] - first["mlm_loss"]))
    return Quiz(question, answer,
                f"At step {first['step']} the held-out loss was {first['mlm_loss']:.3f}, and ln {vocab_size:,} = "
                f"{math.log(vocab_size):.3f}: random weights give every word about the same probability, 1/V. "
                f"After {last['step']} steps it was {last['mlm_loss']:.3f}.")


# --- 9. Fine-tuning: a linear probe, pretrained vs random weights ------------------------------------
@dataclass(frozen=True)
class ProbeResult:
    task: str
    accuracy: dict[str, float]  # PRETRAINED, RANDOM -> dev accuracy of the linear probe
    majority: float  # the dev share of the commonest label: what always guessing it scores
    examples: tuple[int, int]  # (train, dev) examples read


@torch.no_grad()
def features(model: BertForPreTraining, tokenizer: WordPieceTokenizer, examples) -> np.ndarray:
    """(N, d): each example's last-layer vectors averaged over its tokens ([CLS] and [SEP] included)."""
    encodings = [tokenizer.encode(e.text, e.text_b, max_length=model.config.max_tokens) for e in examples]
    return piece_means(model, tokenizer.pad_id, encodings, [tuple(range(len(e))) for e in encodings])[-1]


def fit_probe(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray,
              classes: int) -> float:
    """Logistic regression on the features (standardized by the training set's statistics); dev accuracy."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    x, dev = (torch.tensor((a - mean) / std, dtype=torch.float32) for a in (train_x, dev_x))
    y = torch.tensor(train_y)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        torch.manual_seed(0)
        probe = torch.nn.Linear(x.shape[1], classes)
        optimizer = torch.optim.Adam(probe.parameters(), lr=PROBE_LR, weight_decay=1e-3)
        for _ in range(PROBE_STEPS):
            optimizer.zero_grad()
            F.cross_entropy(probe(x), y).backward()
            optimizer.step()
    return float((probe(dev).argmax(-1).numpy() == dev_y).mean())


def compare_probes(model: BertForPreTraining, tokenizer: WordPieceTokenizer, task_name: str,
                   progress: Callable[[float, str], None] = lambda share, text: None) -> ProbeResult:
    """A linear probe on the active model's features and on random weights' of the same shape."""
    task = tasks.builtin(task_name)
    labels = {label: i for i, label in enumerate(task.labels)}
    train, dev = task.train[:PROBE_TRAIN], task.dev[:PROBE_DEV]
    train_y, dev_y = (np.array([labels[e.label] for e in split]) for split in (train, dev))
    device = next(model.parameters()).device
    accuracy = {}
    for n, (name, build) in enumerate(((PRETRAINED, lambda: model), (RANDOM, lambda: random_model(model.config)))):
        progress(n / 2, f"Reading {len(train) + len(dev)} {task_name} examples with {name}…")
        encoder = build().to(device)
        accuracy[name] = fit_probe(features(encoder, tokenizer, train), train_y, features(encoder, tokenizer, dev),
                                   dev_y, len(task.labels))
    progress(1.0, "Done.")
    return ProbeResult(task_name, accuracy, float(np.bincount(dev_y).max() / len(dev_y)), (len(train), len(dev)))


def probe_question() -> Question:
    return Question("A linear probe reads the vectors of the active model, or of the same model with random "
                    "weights. Which scores higher on the dev set?", (PRETRAINED, RANDOM, f"a tie (within "
                                                                      f"{TIE:.0%})"))


def probe_quiz(result: ProbeResult) -> Quiz:
    question = probe_question()
    pre, rnd = result.accuracy[PRETRAINED], result.accuracy[RANDOM]
    answer = question.options[2] if abs(pre - rnd) < TIE else PRETRAINED if pre > rnd else RANDOM
    return Quiz(question, answer, f"Dev accuracy on {result.examples[1]} {result.task} examples: {pre:.1%} from the "
                                  f"pretrained model, {rnd:.1%} from random weights; always guessing the commonest "
                                  f"label scores {result.majority:.1%}.")
