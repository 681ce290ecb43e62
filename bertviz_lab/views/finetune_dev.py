"""A fine-tuned model on its dev set: predictions, the confusion matrix, the examples it still gets
wrong (seed 002's failure check), and the dev set as the classifier sees it before and after fine-tuning.

One batched, eval-mode pass (`dev_pass`) gives every scored item's true label, class probabilities and
the vector the classifier reads: the pooled [CLS] for a sentence or pair task, the last hidden state
at each word's first piece for a token task (the pieces `finetune.loop.word_labels` scores). A run
is scored on the dev examples its curves use (the first `eval_examples`), so the accuracy here is the
last point of its dev-accuracy curve.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import EVAL_BATCH, Encoded, FineTuner, word_labels
from bertviz_lab.finetune.tasks import PAIR, TOKEN, Example, Task
from bertviz_lab.pretrain.config import max_threads
from bertviz_lab.views.representations import projection

MAX_DEV = 2_000  # dev examples read at most (a built-in task has 400)
MAX_WORDS = 600  # word vectors in the picture of a token task (a built-in dev set has ~5,000 words)


@dataclass(frozen=True)
class DevPass:
    """One model's reading of the dev set: one row per scored item (an example, or a tagged word)."""
    labels: tuple[str, ...]
    kind: str  # the task's kind: sequence, pair or token
    examples: tuple[Example, ...]  # the dev examples read
    true: np.ndarray  # (N,) label ids
    probs: np.ndarray  # (N, C) softmax of the classifier's logits
    example: np.ndarray  # (N,) which dev example
    word: np.ndarray  # (N,) token tasks: which word of example.text.split(" "); -1 otherwise
    features: np.ndarray  # (M, d) the vectors the classifier reads, for the first M = min(N, cap) items

    @property
    def pred(self) -> np.ndarray:
        return self.probs.argmax(-1)


def _encode(task: Task, examples: tuple[Example, ...], tokenizer: WordPieceTokenizer, seq_len: int
            ) -> tuple[Encoded, list[list[int]]]:
    """As `finetune.loop.encode`, and for a token task the word index of each scored position."""
    index = {label: i for i, label in enumerate(task.labels)}
    out, words = Encoded([], [], []), []
    for example in examples:
        encoding = tokenizer.encode(example.text, example.text_b, max_length=seq_len)
        out.ids.append(encoding.ids)
        out.segments.append(encoding.segment_ids)
        if task.kind != TOKEN:
            out.labels.append(index[example.label])
            continue
        labels = word_labels(encoding, example.text, [index[t] for t in example.tags])
        starts = np.cumsum([0] + [len(w) + 1 for w in example.text.split(" ")])
        word_at = {int(s): i for i, s in enumerate(starts)}
        out.labels.append(labels)
        words.append([word_at[encoding.offsets[p][0]] for p, y in enumerate(labels) if y != IGNORE_INDEX])
    return out, words


@torch.no_grad()
def dev_pass(model: BertClassifier, tokenizer: WordPieceTokenizer, task: Task, seq_len: int,
             limit: int = MAX_DEV, cap: int | None = None) -> DevPass:
    """The model on the first `limit` dev examples, EVAL_BATCH at a time; `cap` bounds the vectors kept
    (default: every example of a sentence task, MAX_WORDS words of a token task)."""
    examples = task.dev[:min(limit, MAX_DEV)]
    cap = cap if cap is not None else MAX_WORDS if task.kind == TOKEN else len(examples)
    encoded, words = _encode(task, examples, tokenizer, seq_len)
    device = next(model.parameters()).device
    model.eval()
    true, probs, example, word, features = [], [], [], [], []
    kept = 0
    for begin in range(0, len(examples), EVAL_BATCH):
        rows = list(range(begin, min(len(examples), begin + EVAL_BATCH)))
        ids, segments, mask, labels = encoded.batch(rows, tokenizer.pad_id, device)
        logits, hidden = model.classify(ids, segments, mask, return_hidden=True)  # (B, C) / (B, T, C); (B, [T,] d)
        if task.kind == TOKEN:
            scored = labels != IGNORE_INDEX  # (B, T): each word's first piece
            logits, hidden, labels = logits[scored], hidden[scored], labels[scored]
            example += [r for r in rows for _ in words[r]]
            word += [w for r in rows for w in words[r]]
        else:
            example += rows
            word += [-1] * len(rows)
        true.append(labels.cpu().numpy())
        probs.append(torch.softmax(logits.float(), -1).cpu().numpy())
        if kept < cap:
            features.append(hidden[:cap - kept].float().cpu().numpy())
            kept += len(features[-1])
    d = model.config.hidden_size
    return DevPass(task.labels, task.kind, examples, np.concatenate(true), np.concatenate(probs),
                   np.array(example), np.array(word), np.concatenate(features) if features else np.zeros((0, d)))


# --- What it gets right and wrong ------------------------------------------------------------------------
@dataclass(frozen=True)
class DevReport:
    labels: tuple[str, ...]
    kind: str
    examples: int  # dev examples read
    items: int  # scored items: examples, or words of a token task
    confusion: np.ndarray  # (C, C) counts: row = true label, column = predicted
    wrong: pd.DataFrame  # the examples it gets wrong, most confident mistakes first

    @property
    def accuracy(self) -> float:
        return float(np.trace(self.confusion) / max(self.confusion.sum(), 1))


def per_label(report: DevReport) -> pd.DataFrame:
    """Per label: how many have it, how many it predicted, the right ones, recall and precision."""
    counts = report.confusion
    right, truth, said = np.diag(counts), counts.sum(axis=1), counts.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return pd.DataFrame({"label": report.labels, "true": truth, "predicted": said, "right": right,
                             "recall": np.where(truth > 0, right / truth, np.nan),
                             "precision": np.where(said > 0, right / said, np.nan)})


def confusion(true: np.ndarray, pred: np.ndarray, classes: int) -> np.ndarray:
    return np.bincount(true * classes + pred, minlength=classes * classes).reshape(classes, classes)


def report(dev: DevPass) -> DevReport:
    C = len(dev.labels)
    return DevReport(dev.labels, dev.kind, len(dev.examples), len(dev.true), confusion(dev.true, dev.pred, C),
                     _wrong_words(dev) if dev.kind == TOKEN else _wrong_examples(dev))


def _wrong_examples(dev: DevPass) -> pd.DataFrame:
    pred, confidence = dev.pred, dev.probs.max(-1)
    rows = []
    for i in np.flatnonzero(pred != dev.true):
        e = dev.examples[dev.example[i]]
        rows.append({"#": int(dev.example[i]) + 1, "true": dev.labels[dev.true[i]], "predicted": dev.labels[pred[i]],
                     "confidence": float(confidence[i]), "text": e.text,
                     **({"text_b": e.text_b} if dev.kind == PAIR else {})})
    columns = ["#", "true", "predicted", "confidence", "text", *(["text_b"] if dev.kind == PAIR else [])]
    return pd.DataFrame(rows, columns=columns).sort_values("confidence", ascending=False, kind="stable")


def _wrong_words(dev: DevPass) -> pd.DataFrame:
    """One row per sentence with a wrong tag: the sentence with those words in [brackets], and each
    wrong word as 'word: true → predicted (confidence)'."""
    pred, confidence = dev.pred, dev.probs.max(-1)
    wrong = np.flatnonzero(pred != dev.true)
    rows = []
    for n in dict.fromkeys(dev.example[wrong].tolist()):
        mine = wrong[dev.example[wrong] == n]
        words = dev.examples[n].text.split(" ")
        marked = {int(dev.word[i]) for i in mine}
        rows.append({"#": n + 1, "errors": len(mine), "confidence": float(confidence[mine].max()),
                     "sentence": " ".join(f"[{w}]" if j in marked else w for j, w in enumerate(words)),
                     "wrong words": "; ".join(f"{words[dev.word[i]]}: {dev.labels[dev.true[i]]} → "
                                             f"{dev.labels[pred[i]]} ({confidence[i]:.0%})" for i in mine)})
    columns = ["#", "errors", "confidence", "sentence", "wrong words"]
    return pd.DataFrame(rows, columns=columns).sort_values("confidence", ascending=False, kind="stable")


# --- Before and after ----------------------------------------------------------------------------------
def initial_model(cfg: FinetuneConfig, task: Task, device: str = "cpu") -> tuple[BertClassifier, WordPieceTokenizer]:
    """The run's model before its first step, rebuilt exactly as the run built it (its seed, its start:
    the pretrained encoder and a fresh classifier, or a random model), without touching this process's
    random state or thread count."""
    cfg = dataclasses.replace(cfg, device=device, threads=min(torch.get_num_threads(), max_threads()))
    with torch.random.fork_rng(devices=[]):
        tuner = FineTuner(cfg, task=task)
    return tuner.model.eval(), tuner.tokenizer


@dataclass(frozen=True)
class Picture:
    """The classifier's input vectors of the same dev items before and after, each set projected by PCA."""
    points: np.ndarray  # (2, M, 2): before, after
    explained: np.ndarray  # (2, 2) variance ratio of each picture's two axes
    labels: list[str]  # each point's true label
    texts: list[str]  # what each point is: the sentence (pair), or "word · sentence"


def picture(before: DevPass, after: DevPass) -> Picture:
    M = min(len(before.features), len(after.features))
    points, explained = projection(np.stack([before.features[:M], after.features[:M]]))
    labels = [after.labels[y] for y in after.true[:M]]
    texts = []
    for n, w in zip(after.example[:M], after.word[:M]):
        e = after.examples[n]
        texts.append(f"{e.text.split(' ')[w]} · {e.text}" if w >= 0 else
                     e.text + (f" | {e.text_b}" if e.text_b is not None else ""))
    return Picture(points, explained, labels, texts)
