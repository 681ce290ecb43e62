"""The lesson's two live runs, small enough to finish in seconds on two CPU cores, in the app's own process.

`train_tiny` pretrains a tiny BERT from scratch on the built-in corpus with the pretraining loop itself
(`pretrain.loop.Trainer`, no run folder: nothing is written) and returns its records, each reported as it
comes; `start_loss` asks where the loss starts, and `frequency_note` sets where it ends against a guess by the
corpus's token frequencies alone, on the same held-out masks. The run's settings are `TINY`, a TrainConfig
(`tiny_config` adds the seed and the threads). `compare_probes` reads a built-in fine-tuning task with the
active model and with random weights of the same shape (`views.representations.shapes.random_model`), each word-averaged
last-layer vector a fixed feature, and trains a linear probe on each (finetune/linear_probe.py's logistic
regression): the feature-based approach, the encoder frozen, as the Fine-tune page's linear probe does, in
miniature. Two accuracies closer than two standard errors of their difference count as a tie (`tie_band`). Both
runs leave the process's random numbers and thread count as they found them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import torch

from bertviz_lab.bert.device import to_device
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.finetune import tasks
from bertviz_lab.metrics import Metrics
from bertviz_lab.finetune.linear_probe import fit_probe
from bertviz_lab.pretrain.config import TrainConfig, max_threads
from bertviz_lab.pretrain.data import builtin_vocabulary
from bertviz_lab.pretrain.loop import EVAL_STREAM, Trainer
from bertviz_lab.views.finetune.dev import NOISE_SE, noise_band
from bertviz_lab.views.lesson.questions import Question, Quiz
from bertviz_lab.views.representations.vectors import piece_means
from bertviz_lab.views.representations.shapes import random_model

# About 2 s on one CPU thread (TINY_THREADS): the held-out loss falls from ln V (~7.7) to ~5.9, near the ~5.7 that
# the corpus's token frequencies alone score on the same masks (`frequency_loss`).
TINY = TrainConfig(preset="tiny", hidden=64, heads=2, layers=2, batch_size=16, seq_len=32, steps=60, lr=5e-3,
                   warmup=5, eval_every=10, eval_batches=2, checkpoint_every=10**6, device="cpu")
# One CPU thread: the tiny model's matrices are too small to share out. On a busy 2-core machine (`python -m
# bench.lesson_run`, load average 3-7 from other work), with the server's sleeping OpenMP threads (ui/shell/serve.py): the
# run alone 1.0-2.9 s on one thread, 1.9-3.5 s on two; while the Attention page redraws nonstop (median 67-102 ms
# idle), 3.6-7.2 s on one and 6.5-9.2 s on two, the redraws' median 130-167 ms and 115-122 ms. With OpenMP's default
# spinning threads (a bare `streamlit run`, the tests): 1.9-2.2 s on one thread, 14-26 s on two.
TINY_THREADS = 1
PROBE_TASKS = ("acceptability", "coherence")  # the built-in tasks with one label per input
PROBE_TRAIN, PROBE_DEV = 400, 200  # examples read: a few seconds for each model
PRETRAINED, RANDOM = "the pretrained model", "random weights of the same shape"
# Full fine-tuning of the shipped bertviz-mini (every weight trained, 200 steps; dev accuracy on all 400 dev
# examples), pretrained and from random weights of the same shape: `python -m bench.finetune_gain`
# (docs/benchmarks.md, "What pretraining buys"). Measured for that model only: no other model is given a figure. The pretrained
# run trains at lr 1e-4; the random start was given the better of 1e-4 and 5e-4, as a random init often wants more.
SHIPPED_FULL_FINE_TUNING = {"acceptability": (0.935, 0.685), "coherence": (0.902, 0.550)}
FULL_FINE_TUNING_LR, RANDOM_START_LRS = 1e-4, (1e-4, 5e-4)


# --- A short training run -------------------------------------------------------------------------
@lru_cache(maxsize=1)
def tiny_vocab_size() -> int:
    """The built-in corpus's vocabulary, which the tiny model learns to predict over."""
    return WordPieceTokenizer.from_vocab(builtin_vocabulary()).vocab_size


def tiny_config(seed: int = 0, threads: int | None = None) -> TrainConfig:
    """TINY with `seed`, on `threads` CPU threads, else this thread's current count (the loop would otherwise set
    its own)."""
    return replace(TINY, seed=seed, threads=min(threads or torch.get_num_threads(), max_threads()))


_TINY_TRAINER = threading.Lock()


@contextmanager
def _tiny_trainer() -> Iterator[None]:
    """Around a tiny Trainer's life, inside one call (never across a yield to a caller, so the thread that takes the
    lock lets it go): the thread count it sets, for the whole process, put back after. One at a time, so each puts
    back the count the process had, not another run's."""
    with _TINY_TRAINER:
        threads = torch.get_num_threads()
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _build(seed: int, threads: int | None = None) -> Trainer:
    """A tiny Trainer, its weights drawn from torch's global generator seeded with `seed` under bert/rng.py's
    `global_rng`, which every app thread that seeds that generator holds: the run is a pure function of its seed.
    (A checkpoint loading meanwhile still draws from it unlocked: bert/checkpoint.py initialises a model before
    loading its weights.) TINY trains without dropout (TrainConfig's default): nothing after this draws from it."""
    with global_rng():
        return Trainer(tiny_config(seed, threads))


def train_tiny(seed: int = 0, report: Callable[[dict], None] = lambda record: None) -> list[dict]:
    """The pretraining loop's records ("train", "eval", then "end") for a tiny BERT trained from scratch, each handed
    to `report` as it comes: one call runs the whole loop (a generator would hold the lock across its yields)."""
    records = []
    with _tiny_trainer():
        for record in _build(seed, TINY_THREADS).run():
            records.append(record)
            report(record)
    return records


START_SHARES = (1.5, 1.0, 0.45, 0.1)  # the start question's options: these multiples of ln V, high to low


def start_question(vocab_size: int) -> tuple[Question, dict[str, float]]:
    """Where will the MLM loss start, before any learning? Options of one form ("about 11.5", "about 7.7", "about
    3.5", "about 0.8": one decimal each), multiples of ln V for this vocabulary, one of them ln V itself; the loss
    each one names."""
    chance = math.log(vocab_size)
    levels = {f"about {share * chance:.1f}": share * chance for share in START_SHARES}
    return (Question("Before any training step (step 0), what will the held-out MLM loss be, in nats (natural "
                     f"log)? The vocabulary has V = {vocab_size:,} tokens.", tuple(levels)), levels)


def start_loss(vocab_size: int, held_out: list[Metrics]) -> Quiz:
    """The option nearest the loss the run measured at step 0."""
    question, levels = start_question(vocab_size)
    first, last = held_out[0], held_out[-1]
    chance = math.log(vocab_size)
    answer = min(levels, key=lambda label: abs(levels[label] - first.loss))
    gap = first.loss - chance
    reading = ("these random weights start close to that" if abs(gap) < 0.5 else
               f"this start is {abs(gap):.2f} {'above' if gap > 0 else 'below'} that")
    return Quiz(question, answer,
                f"At step {first.step} the held-out loss was {first.loss:.3f}, and ln {vocab_size:,} = "
                f"{chance:.3f}. A model that gives every token the same probability, 1/V, scores ln V; {reading}. "
                f"After {last.step} steps it was {last.loss:.3f}.")


FREQUENCY_STORIES = 1_000  # generated stories counted for the corpus's token frequencies (about 44,000 tokens)


_FREQUENCY = threading.Lock()


def frequency_loss() -> tuple[float, int]:
    """The held-out MLM loss of a guess that knows only how often each token occurs in the corpus (its frequency
    over FREQUENCY_STORIES stories of the training stream, one count added to every ordinary token so none has
    p = 0), on the very masks the tiny run is evaluated on: the mean of −ln p_freq(true token). With the tokens
    counted. The held-out batches do not depend on the run's seed, so one number serves every run: the Lesson's
    shared run computes it (ui/lesson/stepper.py), once, and the sessions that waited on the run only read it."""
    with _FREQUENCY:  # a second first caller waits for the first one's answer instead of computing it again
        return _frequency_loss()


@lru_cache(maxsize=1)
def _frequency_loss() -> tuple[float, int]:
    with _tiny_trainer():
        trainer = _build(0)
        tokenizer = trainer.tokenizer
        sentences = [(s, None) for story in trainer.corpus.train.sample(FREQUENCY_STORIES, key=0) for s in story]
        targets = torch.cat([trainer.batch(i, stream=EVAL_STREAM).labels.flatten().cpu()
                             for i in range(trainer.cfg.eval_batches)])
    counts = np.ones(tokenizer.vocab_size)
    for ids, _ in tokenizer.encode_ids(sentences):
        np.add.at(counts, ids, 1)
    counts[sorted(tokenizer.special_ids)] = 0  # never a masked token
    log_p = np.log(counts / counts.sum(), where=counts > 0, out=np.full(len(counts), -np.inf))
    targets = targets[targets != IGNORE_INDEX].numpy()
    return float(-log_p[targets].mean()), int(counts.sum() - (counts > 0).sum())


def frequency_note(held_out: list[Metrics], vocab_size: int) -> str:
    """What the run learned, against two guesses without context, on the same held-out masks: uniform (ln V)
    and the corpus's token frequencies."""
    frequency, counted = frequency_loss()
    chance, first, last = math.log(vocab_size), held_out[0], held_out[-1]
    loss = last.loss
    if loss <= frequency:
        where = "below the frequency guess: on these masks it already does better than knowing how common each token is"
    elif loss >= chance:
        where = "no better than the uniform guess yet"
    else:
        where = f"{(chance - loss) / (chance - frequency):.0%} of the way from the uniform guess to the frequency guess"
    return (f"Two guesses that ignore the sentence, on the same held-out masks: the same probability for every token "
            f"scores ln V = {chance:.2f}; each token's frequency in the corpus ({counted:,} tokens counted) scores "
            f"{frequency:.2f}. This run's held-out loss went from {first.loss:.2f} at step {first.step} to "
            f"{last.loss:.2f} after {last.step} steps: {where}.")


# --- A linear probe, pretrained vs random weights ------------------------------------------------
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
        encoder = to_device(build(), device, "the random model")
        accuracy[name] = fit_probe(features(encoder, tokenizer, train), train_y, features(encoder, tokenizer, dev),
                                   dev_y, len(task.labels))
    progress(1.0, "Done.")
    return ProbeResult(task_name, accuracy, float(np.bincount(dev_y).max() / len(dev_y)), (len(train), len(dev)))


def tie_band(result: ProbeResult) -> float:
    """NOISE_SE standard errors of the difference of the two dev accuracies on the same n dev examples."""
    return noise_band(*result.accuracy.values(), n=result.examples[1])


def probe_question() -> Question:
    return Question("A linear probe reads the vectors of the active model, or of the same model with random "
                    "weights. Which scores higher on the dev set?",
                    (PRETRAINED, RANDOM, f"a tie (a gap within {NOISE_SE} standard errors)"))


def probe_quiz(result: ProbeResult) -> Quiz:
    question = probe_question()
    pre, rnd = result.accuracy[PRETRAINED], result.accuracy[RANDOM]
    band, n = tie_band(result), result.examples[1]
    tie = abs(pre - rnd) <= band
    answer = question.options[2] if tie else PRETRAINED if pre > rnd else RANDOM
    return Quiz(question, answer,
                f"Dev accuracy on {n} {result.task} examples: {pre:.1%} from the pretrained model, {rnd:.1%} from "
                f"random weights, a gap of {abs(pre - rnd) * 100:.1f} points; {NOISE_SE} standard errors of that gap "
                f"on {n} examples are {band * 100:.1f} points, so it {'is' if tie else 'is not'} a tie. Always "
                f"guessing the commonest label scores {result.majority:.1%}.")


def _rate(lr: float) -> str:
    """A learning rate as the docs and the bench's settings write it: 1e-4."""
    return f"{lr:.0e}".replace("e-0", "e-")


def full_fine_tuning(task: str, shipped: bool) -> str:
    """A sentence on full fine-tuning beside the probe: measured figures for the shipped model only."""
    if shipped and task in SHIPPED_FULL_FINE_TUNING:
        pre, rnd = SHIPPED_FULL_FINE_TUNING[task]
        rates = " and ".join(_rate(lr) for lr in RANDOM_START_LRS)
        return (f"Full fine-tuning trains every weight, not just a probe: on {task}, the shipped bertviz-mini "
                f"fine-tuned for 200 steps (learning rate {_rate(FULL_FINE_TUNING_LR)}) scores {pre:.1%} on all 400 "
                f"dev examples, and random weights of its shape {rnd:.1%}, the better of two runs at learning rates "
                f"{rates} (measured with python -m bench.finetune_gain). The Fine-tune page runs it in the "
                "background and compares runs on one chart.")
    return ("Full fine-tuning trains every weight, not just a probe; the Fine-tune page runs it on this model in the "
            "background and compares runs on one chart.")
