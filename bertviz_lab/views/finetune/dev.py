"""A fine-tuned model on its dev set: predictions, the confusion matrix, the examples it still gets
wrong (the BERT tutorial's failure check, seed text 002), and the dev set as the classifier sees it before and
after fine-tuning.

One batched, eval-mode pass (`dev_pass`) gives every scored item's true label, class probabilities and
the vector the classifier reads: the pooled [CLS] for a sentence or pair task, the last hidden state
at each word's first piece for a token task (the pieces `finetune.loop.word_labels` scores). A run
is scored on the dev examples its curves use (the first `eval_examples`), so the accuracy here is the
last point of its dev-accuracy curve.

Also here, what the numbers allow a page to say: `chance` (the accuracy of always giving the commonest
label, with the noise of the dev set's size), the notes under an overlay of runs (`compare_notes`: each
run against chance, pretrained against random, NSP against none), and what the "before" picture can
mean for the run's start (`start_note`: random weights, a pooler NSP trained, or a random pooler).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import EVAL_BATCH, Encoded, FineTuner, word_labels
from bertviz_lab.finetune.tasks import PAIR, TOKEN, Example, Task
from bertviz_lab.pretrain.config import max_threads
from bertviz_lab.views.finetune.classifier import NO_NSP, RANDOM, WITH_NSP
from bertviz_lab.views.representations.vectors import projection

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
    with global_rng():
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


# --- What the numbers allow us to say ---------------------------------------------------------------------
NOISE_SE = 2  # a gap within this many standard errors (about a 95% band) could be which items the dev set holds


def noise_band(*accuracies: float, n: int) -> float:
    """NOISE_SE standard errors of one accuracy measured on n items, or of the difference of two, each a share
    of the same n items, taken as independent (scored on the same items they tend to agree, which makes the
    gap's true spread smaller, so the band errs wide): NOISE_SE * sqrt(sum of a(1 - a) / n)."""
    return NOISE_SE * math.sqrt(sum(a * (1 - a) for a in accuracies) / max(n, 1))


@dataclass(frozen=True)
class Chance:
    """The accuracy to beat: always giving the commonest label of the scored dev items."""
    label: str
    share: float
    items: int

    @property
    def noise(self) -> float:
        """Two standard errors of an accuracy near `share` on `items` items (about: a tag task's words are
        not independent): a difference this small could come from which examples the dev set holds."""
        return noise_band(self.share, n=self.items)


def chance(task: Task, n: int) -> Chance:
    """Chance on the first n dev examples, the ones a run's curves score (a tag task: over their words)."""
    labels = [t for e in task.dev[:n] for t in e.tags] if task.kind == TOKEN else [e.label for e in task.dev[:n]]
    label, count = Counter(labels).most_common(1)[0]
    return Chance(label, count / len(labels), len(labels))


def _side(accuracy: float, base: Chance) -> str:
    gap = accuracy - base.share
    return "near" if abs(gap) <= base.noise else "above" if gap > 0 else "below"


def versus_chance(accuracy: float, base: Chance) -> str:
    """'12.5 points above chance', 'near chance (within 2.5 points)' or '3.0 points below chance'."""
    side = _side(accuracy, base)
    if side == "near":
        return f"near chance (within {100 * base.noise:.1f} points, the noise of {base.items:,} dev items)"
    return f"{100 * abs(accuracy - base.share):.1f} points {side} chance"


@dataclass(frozen=True)
class Outcome:
    """One run of an overlay: where its dev accuracy started and ended, against its task's chance."""
    legend: str
    task: str  # the built-in task's name or the CSV's
    start: str  # views.finetune.classifier.start_kind: random, pretrained with / without NSP, pretrained
    first: tuple[int, float]  # (step, dev accuracy) of the first evaluation
    last: tuple[int, float]
    chance: Chance


COHERENCE_NOTE = ("Coherence is built like NSP, by the same story generator: B is the next sentence of A's story, "
                  "or a sentence of another story. A start pretrained with NSP has practised this very task, so its "
                  "gain here is no evidence that pretraining helps tasks in general.")


def _difference(a: Outcome, b: Outcome) -> tuple[float, float]:
    """a's last accuracy minus b's, and two standard errors of that difference on the dev items."""
    return a.last[1] - b.last[1], noise_band(a.last[1], b.last[1], n=a.chance.items)


def _gap(a: Outcome, b: Outcome) -> str:
    """a's last accuracy against b's, in points, or 'no clear difference' within two standard errors."""
    (gap, noise), text = _difference(a, b), f"{a.last[1]:.1%} vs {b.last[1]:.1%}"
    return f"{text}, no clear difference (within {100 * noise:.1f} points)" if abs(gap) <= noise else \
        f"{text}, {100 * gap:+.1f} points"


def _scratch_note(task: str, r: Outcome, pretrained: list[Outcome]) -> str:
    """What a random start's end says about the task: only a pretrained run as good (within the noise)
    makes it a task that shows little of what pretraining is worth."""
    side = _side(r.last[1], r.chance)
    if side != "above":
        return (f"Random weights end {side} chance on {task} after {r.last[0]:,} steps: with these settings "
                "its training examples alone did not teach it.")
    above = f"from its training examples alone ({100 * (r.last[1] - r.chance.share):.1f} points above chance)"
    if not pretrained:
        return f"Random weights learn some of {task} {above}; overlay a pretrained run to see what pretraining adds."
    best = max(pretrained, key=lambda o: o.last[1])
    gap, noise = _difference(best, r)
    if gap > noise:
        return (f"Random weights learn some of {task} {above}, but the {best.start} start ends {100 * gap:.1f} "
                "points higher.")
    if gap < -noise:
        return f"Random weights learn {task} {above}, and end {-100 * gap:.1f} points above the {best.start} start."
    return (f"Random weights learn {task} too, as well as the {best.start} start (within {100 * noise:.1f} "
            "points): its training examples alone teach it, so this task shows little of what pretraining is worth.")


def compare_notes(outcomes: list[Outcome]) -> list[str]:
    """What the overlaid runs show, each sentence true of these runs' own numbers and starts."""
    notes = [f"{o.legend}: {o.first[1]:.1%} at step {o.first[0]:,}, {o.last[1]:.1%} at step {o.last[0]:,}; "
             f"always answering \u201c{o.chance.label}\u201d scores {o.chance.share:.1%}, so it ends "
             f"{versus_chance(o.last[1], o.chance)}." for o in outcomes]
    for task in dict.fromkeys(o.task for o in outcomes):
        runs = [o for o in outcomes if o.task == task]
        scratch = [o for o in runs if o.start == RANDOM]
        pretrained = [o for o in runs if o.start != RANDOM]
        notes += [_scratch_note(task, r, pretrained) for r in scratch]
        for p in pretrained:
            notes += [f"On {task}, {p.start} against random weights: {_gap(p, r)}." for r in scratch]
        notes += [f"On {task}, with NSP against without: {_gap(a, b)}." for a in runs if a.start == WITH_NSP
                  for b in runs if b.start == NO_NSP]
    if any(o.task == "coherence" and o.start != RANDOM for o in outcomes):
        notes.append(COHERENCE_NOTE)
    return notes


@dataclass(frozen=True)
class StartFacts:
    """What a run's start brings to the classifier."""
    pretrained: bool  # False: random weights of the same shape
    pooler: bool  # the start has a pooler from pretraining (NSP trains it); else the classifier reads a random one
    nsp: bool  # the start was pretrained with NSP (its checkpoint has the NSP head, or its records say so)


def start_note(kind: str, task: str, start: StartFacts, cls: str = "[CLS]") -> str:
    """What colours apart in the "before" picture can mean, for this start and task."""
    if not start.pretrained:
        return "Before is random weights: whatever separates the colours there owes nothing to pretraining."
    note = "Colours already apart before fine-tuning mean the vectors it started from held the answer."
    if kind == TOKEN:
        return note
    if not start.pooler:
        return note + (f" This start has no pooler from pretraining (NSP trains it; a model pretrained without NSP "
                       f"has none): the vector is {cls} after the last layer through a random tanh layer, as "
                       "transformers builds a missing pooler.")
    if not start.nsp:
        return note
    return note + " NSP trained its pooler on sentence pairs" + (
        ". " + COHERENCE_NOTE if task == "coherence" else " (the next sentence, or one from another text).")
