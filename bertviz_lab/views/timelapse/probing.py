"""Probing as a run trains: the "probing" entry of each step's record in syntax.jsonl (views/timelapse/syntax_file.py).

At each kept checkpoint, on the same sample of the story world as the rest of the record (Settings: 400 sentences; the
probes read its first `Probes.sentences`, 200: 150 train, 50 test), probing/report.py's `probe_corpus` with the linear probe only and the scalar mix (no MLP, no codelength, no
random-weights twin) gives, for each task of `Probes.tasks`: Tenney et al.'s expected layer and centre of gravity,
the linear probe's best hidden state with its accuracy and its control task's there (selectivity, Hewitt & Liang),
and the majority rate. probing/amnesic.py's `amnesic` removes noun number's directions by INLP at the middle hidden
state (`default_layer`) and measures agreement across attractors and the masked-LM loss on the held-out sentences
before, after, and after random directions of the same rank (the mean of `draws`): Elazar et al.'s amnesic probing.

The tasks: part of speech, dependency label and noun number. Coreference is left out: 400 sentences hold 128
training and 22 test pronoun-noun pairs (1,200 hold 311 and 117), so one test pair moves its accuracy by 4.5
points; 200 hold fewer still. The cost, on the shipped model (4 layers x 4 heads, hidden 256), seconds of one core
(process time, one torch thread, 2026-12-05, a busy 2-core machine): the record as before (`analyse`) 6.0 s, its
probing 6.0 s, so measuring a checkpoint takes twice what it did. On all 400 sentences the probes alone took 13.5 s
and the amnesic part 2.8 s (16.3 s, 2.7 times the rest): the scalar mixes of part of speech and dependency label
are most of it (2,000 training examples each, capped by probing/tasks.py), hence the first 200. Three random draws
and 20 agreement pairs per attractor count (80 in all: one pair is 1.25 points) keep the amnesic part near 1.4 s.

    PYTHONPATH=. .venv/bin/python -m bench.syntax_history --time checkpoints/bertviz-mini

An entry (numbers rounded to 6 decimals; hidden states counted 0 = the embeddings' output .. L):

    "probing": {"seconds": s, "note": "",
                "tasks": {"pos": {"expected_layer": x or null, "centre": c, "layer": l, "accuracy": a, "control": k,
                                  "majority": m, "train": n, "test": n}, ...},
                "missing": {"task": "why it was not probed"},
                "amnesic": null or {"task": "number", "layer": l, "rank": r, "draws": k, "masked": n,
                                    "pairs": {"0": n, ..}, "before": {"0": a or null, ..}, "after": {..},
                                    "random": {..}, "loss_before": x or null, "loss_after": .., "loss_random": ..}}
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import TASKS, Amnesic, Probing
from bertviz_lab.syntax.report import Corpus

AMNESIC_TASK = "number"  # the property removed: agreement with attractors tells whether the model uses it
TASKS_OVER_TRAINING = ("pos", "dep", "number")  # coreference: too few test pairs in 400 sentences (above)
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Probes:
    """What probing measures at each step (the header's "probing"; the same for every step of a file)."""
    tasks: tuple[str, ...] = TASKS_OVER_TRAINING
    draws: int = 3  # random projections of the same rank, against the task's
    amnesic_pairs: int = 20  # agreement pairs per number of attractors (0..3), scored before/after/random
    sentences: int = 200  # the sample's first sentences the probes read (all of it, where it has fewer): the cost

    def as_json(self) -> dict:
        return {"tasks": list(self.tasks), "draws": self.draws, "amnesic_pairs": self.amnesic_pairs,
                "sentences": self.sentences}

    @classmethod
    def of(cls, entry) -> Probes | None:
        """The settings of a header's "probing" entry, or None when it does not add up."""
        if not isinstance(entry, dict):
            return None
        tasks, draws, pairs = entry.get("tasks"), entry.get("draws"), entry.get("amnesic_pairs")
        sentences = entry.get("sentences")
        ok = (isinstance(tasks, list) and 0 < len(tasks) <= len(TASKS) and len(set(tasks)) == len(tasks)
              and all(t in TASKS for t in tasks) and _whole(draws, 1, 100) and _whole(pairs, 1, 10_000)
              and _whole(sentences, 8, 100_000))
        return cls(tuple(tasks), draws, pairs, sentences) if ok else None


@dataclass(frozen=True)
class TaskAt:
    """One task at one step."""
    expected_layer: float | None  # Tenney et al.'s, from the mix's cumulative accuracies; None: no layer adds any
    # (outside 0..L where the cumulative accuracy falls somewhere: a negative delta in the weighted sum)
    centre: float  # the mix weights' centre of gravity
    layer: int  # the hidden state where the linear probe scores best
    accuracy: float  # its test accuracy there
    control: float  # the control task's test accuracy at that hidden state
    majority: float  # always guessing the commonest training label
    train: int
    test: int

    @property
    def selectivity(self) -> float:
        return self.accuracy - self.control


@dataclass(frozen=True)
class AmnesicAt:
    """Noun number removed at one hidden state, at one step."""
    task: str
    layer: int
    rank: int  # directions removed
    draws: int
    masked: int  # held-out tokens of the masked-LM loss (0: no masked-LM head)
    pairs: dict[int, int]  # attractors -> agreement pairs scored
    before: dict[int, float | None]  # attractors -> agreement accuracy; None: no pair
    after: dict[int, float | None]
    random: dict[int, float | None]  # the mean over the draws
    loss_before: float | None  # mean masked-LM loss (nats); None without a masked-LM head
    loss_after: float | None
    loss_random: float | None  # the mean over the draws

    def pooled(self, which: str) -> float | None:
        """Agreement over every attractor count, each weighted by its pairs ("before", "after", "random")."""
        shares = getattr(self, which)
        pairs = [(a, self.pairs.get(k, 0)) for k, a in shares.items() if a is not None and self.pairs.get(k, 0)]
        total = sum(n for _, n in pairs)
        return sum(a * n for a, n in pairs) / total if total else None

    @property
    def pairs_scored(self) -> int:
        return sum(n for k, n in self.pairs.items() if self.before.get(k) is not None)


@dataclass(frozen=True)
class ProbingAt:
    tasks: dict[str, TaskAt]  # in the settings' order, the tasks that could be probed
    missing: dict[str, str]  # task -> why it was not probed
    amnesic: AmnesicAt | None
    seconds: float
    note: str = ""  # why there is no amnesic result, or what to know about it (some of the property left)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _shares(values: dict | None) -> dict[str, float | None]:
    return {str(k): _round(v) for k, v in (values or {}).items()}


def task_entry(probes) -> dict:
    """The numbers kept of one TaskProbes: the linear probe at its best hidden state, and the mix."""
    accuracy = np.asarray(probes.linear.accuracy)
    best = int(np.argmax(accuracy))
    return {"expected_layer": _round(probes.mix.expected_layer), "centre": _round(probes.mix.centre), "layer": best,
            "accuracy": _round(accuracy[best]), "control": _round(probes.linear.control[best]),
            "majority": _round(probes.majority), "train": int(probes.train), "test": int(probes.test)}


def amnesic_entry(result: Amnesic) -> dict:
    losses = ({"loss_before": _round(result.loss_before), "loss_after": _round(result.loss_after),
               "loss_random": _round(np.mean(result.loss_random))} if result.masked else
              {"loss_before": None, "loss_after": None, "loss_random": None})
    return {"task": result.task, "layer": int(result.layer), "rank": int(result.rank), "draws": int(result.draws),
            "masked": int(result.masked), "pairs": {str(k): int(n) for k, n in (result.agreement_pairs or {}).items()},
            "before": _shares(result.agreement_before), "after": _shares(result.agreement_after),
            "random": _shares(result.agreement_random), **losses}


def entry_of(probing: Probing, result: Amnesic | None, seconds: float, note: str = "") -> dict:
    """The record's "probing" entry from what probe_corpus and amnesic gave."""
    return {"seconds": round(seconds, 2), "note": note,
            "tasks": {task: task_entry(p) for task, p in probing.tasks.items() if p.mix is not None},
            "missing": dict(probing.missing), "amnesic": None if result is None else amnesic_entry(result)}


def measure(model, tokenizer, corpus, probes: Probes, seed: int, progress: Progress | None = None) -> dict:
    """The "probing" entry of one checkpoint: the tasks' probes, then noun number removed (`progress(fraction,
    message)` all along)."""
    # imported here: scikit-learn (probing/inlp.py) takes seconds to import, and a page that only reads the file
    # (every redraw of the Time-lapse) needs none of it
    from bertviz_lab.probing.amnesic import amnesic, default_layer
    from bertviz_lab.probing.report import probe_corpus

    def part(start: float, width: float, what: str) -> Progress:
        return lambda fraction, message: progress(start + width * fraction, f"{what}: {message}") if progress else None

    start = time.perf_counter()
    corpus = Corpus(corpus.trees[:probes.sentences], corpus.name, corpus.note)  # the sample's first sentences
    probing = probe_corpus(model, tokenizer, corpus, probes.tasks, kinds=("linear",), mix=True, codelength=False,
                           random_weights=False, seed=seed, progress=part(0.0, 0.5, "probing"))
    result, note = None, ""
    try:
        result = amnesic(model, tokenizer, corpus, AMNESIC_TASK, default_layer(model.config.num_hidden_layers),
                         draws=probes.draws, seed=seed, agreement_pairs=probes.amnesic_pairs,
                         progress=part(0.5, 0.5, f"removing {AMNESIC_TASK}"))
    except InputError as exc:  # too few nouns, a model that cannot read the sample: the probes stand
        note = str(exc)
    return entry_of(probing, result, time.perf_counter() - start, note or (result.note if result else ""))


# --- Reading an entry back ------------------------------------------------------------------------------------
def _whole(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _number(value, low: float, high: float) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and low <= value <= high)


def _text(value, most: int = 400) -> str | None:
    return " ".join(value.split())[:most] if isinstance(value, str) and value.isprintable() else None


def _task(entry, layers: int) -> TaskAt | None:
    if not isinstance(entry, dict):
        return None
    at = TaskAt(*(entry.get(k) for k in TaskAt.__dataclass_fields__))
    # the expected layer may leave 0..L: a cumulative accuracy that falls gives a negative delta (Tenney et al.'s sum)
    ok = ((at.expected_layer is None or _number(at.expected_layer, -100, 100)) and _number(at.centre, 0, layers)
          and _whole(at.layer, 0, layers) and all(_number(v, 0, 1) for v in (at.accuracy, at.control, at.majority))
          and _whole(at.train, 0, 10**7) and _whole(at.test, 0, 10**7))
    return at if ok else None


def _by_count(values, ok) -> dict[int, float | None] | None:
    if not isinstance(values, dict) or len(values) > 16:  # empty: no pair scored (no masked-LM head)
        return None
    if not all(isinstance(k, str) and k.isdigit() and len(k) < 3 and (v is None or ok(v)) for k, v in values.items()):
        return None
    return {int(k): v for k, v in values.items()}


def _amnesic(entry, layers: int) -> AmnesicAt | None:
    if not isinstance(entry, dict):
        return None
    pairs = _by_count(entry.get("pairs"), lambda n: _whole(n, 0, 10**6))
    shares = [_by_count(entry.get(k), lambda a: _number(a, 0, 1)) for k in ("before", "after", "random")]
    losses = [entry.get(k) for k in ("loss_before", "loss_after", "loss_random")]
    if (entry.get("task") not in TASKS or not _whole(entry.get("layer"), 0, layers)
            or not _whole(entry.get("rank"), 0, 10**5) or not _whole(entry.get("draws"), 1, 100)
            or not _whole(entry.get("masked"), 0, 10**9) or pairs is None or None in shares or None in pairs.values()
            or not all(v is None or _number(v, 0, 1e4) for v in losses)):
        return None
    return AmnesicAt(entry["task"], entry["layer"], entry["rank"], entry["draws"], entry["masked"], pairs, *shares,
                     *losses)


def parse(entry, layers: int) -> ProbingAt | None:
    """A record's "probing" entry for a model of `layers` layers (hidden states 0..layers), or None when it does not
    add up."""
    if not isinstance(entry, dict):
        return None
    tasks, missing, seconds = entry.get("tasks"), entry.get("missing", {}), entry.get("seconds")
    if not (isinstance(tasks, dict) and isinstance(missing, dict) and _number(seconds, 0, 1e6)
            and set(tasks) | set(missing) <= set(TASKS) and _text(entry.get("note", "")) is not None):
        return None
    read = {task: _task(value, layers) for task, value in tasks.items()}
    why = {task: _text(value) for task, value in missing.items()}
    amnesic = None if entry.get("amnesic") is None else _amnesic(entry["amnesic"], layers)
    if None in read.values() or None in why.values() or (entry.get("amnesic") is not None and amnesic is None):
        return None
    return ProbingAt(read, why, amnesic, float(seconds), _text(entry.get("note", "")))


def as_entry(at: ProbingAt) -> dict:
    """The entry `parse` read, as it was written."""
    return {"seconds": at.seconds, "note": at.note,
            "tasks": {task: vars(t).copy() for task, t in at.tasks.items()}, "missing": dict(at.missing),
            "amnesic": None if at.amnesic is None else {
                **{k: v for k, v in vars(at.amnesic).items() if k not in ("pairs", "before", "after", "random")},
                **{k: {str(c): v for c, v in getattr(at.amnesic, k).items()}
                   for k in ("pairs", "before", "after", "random")}}}
