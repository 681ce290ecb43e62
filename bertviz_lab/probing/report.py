"""Careful probing of one model over one corpus, in one call: what the Syntax page's "Probing, carefully" tab, the
`probe` command, `nb.probe` and the Time-lapse show.

`probe_corpus` reads the corpus once with the model (and once with a random-weights twin of the same shape, the
control for what a probe finds in an untrained network), then for each task: its examples and control labels, the
linear and MLP probes at every hidden state on both labellings (Hewitt & Liang), the linear probe on the twin, the
cumulative scalar mix (Tenney et al.) and the online codelength (Voita & Titov) on the task, its control and the twin.
Every fit is batched over hidden states and labellings (fit.py), so the cost is a few optimisations per task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from bertviz_lab.errors import InputError
from bertviz_lab.probing.features import read_features
from bertviz_lab.probing.fit import fit_layers, online_codelength, prepare, scalar_mix
from bertviz_lab.probing.records import KINDS, TASK_NAMES, TASKS, Amnesic, Codelength, Examples, Features, LayerFits, Probing, TaskProbes
from bertviz_lab.probing.tasks import MAX_TEST, MAX_TRAIN, control_labels, examples, majority
from bertviz_lab.syntax.report import Corpus, fitting, random_twin
from bertviz_lab.syntax.probe_fit import PROBE_THREADS, threads

Progress = Callable[[float, str], None]

# Seconds of one core per stage on the shipped model (4 layers, 256 wide) over story_corpus(1200), the four tasks
# together, and per reading (measured with probe_corpus's own `seconds`; 21.6 s in all). `seconds_needed` scales
# them; the progress bar gives each stage its share of the expected time, so the fraction rises at the pace of the work.
BASE_STAGES = {"linear": 3.0, "mlp": 4.1, "scalar mix": 3.2, "codelength": 3.5, "random weights": 1.9,
               "codelength (random weights)": 2.4}
BASE_READING, BASE_SENTENCES, BASE_LAYERS, BASE_HIDDEN = 1.3, 1_200, 4, 256
PAIR = 1.8  # a pair task's example costs this many one-word examples (two words, mostly distinct)


def _examples(sentences: int) -> float:
    """The story world's examples over `sentences`, pair examples counted PAIR times: part of speech (8.7 a sentence)
    and dependencies (7.8) up to their caps, nouns of known number (1.48) and pronoun pairs (0.36) without."""
    cap = MAX_TRAIN + MAX_TEST
    return min(cap, 8.7 * sentences) + PAIR * min(cap, 7.8 * sentences) + 1.48 * sentences + PAIR * 0.36 * sentences


BASE_EXAMPLES = _examples(BASE_SENTENCES)


def _reading_seconds(layers: int, hidden: int, sentences: int) -> float:
    """One reading of `sentences`: measured 1.3 s (shipped) and 26.5 s (12 layers, 768 wide), between layers * hidden
    and layers * hidden^2 (the token-level work has fixed costs): layers * hidden^1.75 meets both."""
    return BASE_READING * sentences / BASE_SENTENCES * layers * hidden**1.75 / (BASE_LAYERS * BASE_HIDDEN**1.75)


def _stage_seconds(stage: str, examples: float, states: int, hidden: int) -> float:
    """One stage for `examples` one-word examples at `states` hidden states of width `hidden` (the scalar mix by
    states^1.5: its mixes grow with the states too; measured 13 times the shipped model's at 12 layers, 768 wide)."""
    size = states * hidden / ((BASE_LAYERS + 1) * BASE_HIDDEN)
    if stage == "scalar mix":
        size *= (states / (BASE_LAYERS + 1)) ** 0.5
    return BASE_STAGES[stage] * examples / BASE_EXAMPLES * size


def _names(kinds: Sequence[str], mix: bool, codelength: bool, random_weights: bool) -> list[str]:
    """The stages of one task, in the order they run."""
    return (["linear"] + ["mlp"] * ("mlp" in kinds) + ["scalar mix"] * mix + ["codelength"] * codelength
            + ["random weights"] * random_weights + ["codelength (random weights)"] * (codelength and random_weights))


def _stages(ex: Examples, states: int, hidden: int, kinds: Sequence[str], mix: bool, codelength: bool,
            random_weights: bool) -> dict[str, float]:
    """Each stage of one task and its expected seconds."""
    examples = len(ex) * (1 if ex.second is None else PAIR)
    return {name: _stage_seconds(name, examples, states, hidden)
            for name in _names(kinds, mix, codelength, random_weights)}


def _check(tasks: Sequence[str], kinds: Sequence[str]) -> None:
    for task in tasks:
        if task not in TASKS:
            raise InputError(f"there is no probing task {task!r}: the tasks are {', '.join(TASKS)}")
    for kind in kinds:
        if kind not in KINDS:
            raise InputError(f"there is no probe {kind!r}: the probes are {', '.join(KINDS)}")


def _read(model, tokenizer, corpus: Corpus, report: Progress, share: tuple[float, float], what: str) -> Features:
    start, width = share
    n = len(corpus.trees)
    report(start, f"{what}reading the sentences: 0 of {n:,}")
    return read_features(model, tokenizer, corpus.trees, progress=lambda done, total: report(
        start + width * done / total, f"{what}reading the sentences: {done:,} of {total:,}"))


def probe_corpus(model, tokenizer, corpus: Corpus, tasks: Sequence[str] = TASKS, *, kinds: Sequence[str] = KINDS,
                 mix: bool = True, codelength: bool = True, random_weights: bool = True, seed: int = 0,
                 progress: Progress | None = None) -> Probing:
    """Every measure of careful probing for `tasks` over `corpus` (the first Corpus.split sentences train).

    The linear probe is always fitted; `kinds` may add "mlp". `progress(fraction, message)` hears each reading batch
    and each probe's optimisation as it goes, the fraction rising at the pace of the work. A task without enough
    examples goes to Probing.missing with its sentence; an unknown task or probe is an InputError before any work."""
    _check(tasks, kinds)

    def report(fraction: float, message: str) -> None:
        if progress:
            progress(min(1.0, max(0.0, fraction)), message)

    corpus = fitting(corpus, tokenizer, model.config.max_tokens)
    layers, width = model.config.num_hidden_layers, model.config.hidden_size
    reading = _reading_seconds(layers, width, len(corpus.trees)) * (1 + random_weights)
    guess = seconds_needed(layers, width, len(corpus.trees), kinds=kinds, mix=mix, codelength=codelength,
                           random_weights=random_weights)
    read_share = reading / max(guess, reading + 1e-9)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    features = _read(model, tokenizer, corpus, report, (0.0, read_share / (1 + random_weights)), "")
    seconds["reading"] = time.perf_counter() - t
    twin = None
    if random_weights:
        t = time.perf_counter()
        twin = _read(random_twin(model), tokenizer, corpus, report, (read_share / 2, read_share / 2),
                     "the random-weights twin: ")
        seconds["reading (random weights)"] = time.perf_counter() - t
    found, missing = {}, {}
    for task in tasks:
        try:
            found[task] = examples(task, corpus.trees, features, corpus.split, seed)
        except InputError as e:
            missing[task] = str(e)
    costs = {task: _stages(ex, features.layers, width, kinds, mix, codelength, random_weights)
             for task, ex in found.items()}
    total = sum(sum(c.values()) for c in costs.values()) or 1.0
    done = read_share
    probes = {}
    with threads(PROBE_THREADS):  # every fit and its preparation (the whitening's eigh too): the same bits whatever
        for task, ex in found.items():  # the caller's thread count, so the page and the command agree
            probes[task], took = _task(ex, features, twin, costs[task], seed,
                                       lambda f, m, start=done, task=task: report(start + (1 - read_share) * f / total,
                                                                                  f"{TASK_NAMES[task]}: {m}"))
            seconds.update({f"{task}: {stage}": s for stage, s in took.items()})
            done += (1 - read_share) * sum(costs[task].values()) / total
    report(1.0, "done")
    return Probing(corpus.name, len(corpus.trees), corpus.split, features.layers, probes, missing, seconds,
                   corpus.note)


def _note(ex: Examples) -> str:
    train, test = int(ex.train.sum()), int((~ex.train).sum())
    capped = [f"{name} examples capped at {cap:,} (a seeded draw)" for name, n, cap in
              (("training", train, MAX_TRAIN), ("test", test, MAX_TEST)) if n == cap]
    return "; ".join(capped)


def _task(ex: Examples, features: Features, twin: Features | None, costs: dict[str, float], seed: int,
          report: Callable[[float, str], None]) -> tuple[TaskProbes, dict[str, float]]:
    """One task's probes, the model's first, then the twin's, each model's words prepared once for all its probes;
    `report(expected seconds done, message)`."""
    labels = np.stack([ex.labels, control_labels(ex, seed)])  # (2, N): the task's labels, the control's
    c, first, second, train = len(ex.classes), ex.first, ex.second, ex.train
    seconds, done, out = {}, [0.0], {}

    def stage(name: str, message: str, run) -> None:
        if name in costs:
            t, cost = time.perf_counter(), costs[name]
            report(done[0], message)
            out[name] = run(lambda f: report(done[0] + cost * f, message))
            done[0] += cost
            seconds[name] = time.perf_counter() - t

    v = features.vectors
    words = [None]

    def model_words():
        words[0] = words[0] or prepare(v, first, second, train)
        return words[0]

    for kind in ("linear", "mlp"):
        stage(kind, f"{kind} probes at every hidden state, task and control", lambda p, kind=kind: fit_layers(
            v, first, second, labels, train, c, kind, seed, p, model_words()))
    stage("scalar mix", "the scalar mixes over hidden states", lambda p: scalar_mix(
        v, first, second, ex.labels, train, c, seed, p, model_words()))
    stage("codelength", "the online codelength, task and control", lambda p: online_codelength(
        v, first, second, labels, train, c, seed, p, model_words()))
    words = [None]  # the model's words are done with: the twin's take their place
    if twin is not None:
        tv = twin.vectors
        twin_words = [None]

        def twins():
            twin_words[0] = twin_words[0] or prepare(tv, first, second, train)
            return twin_words[0]

        stage("random weights", "linear probes on the random-weights twin", lambda p: fit_layers(
            tv, first, second, ex.labels[None], train, c, "linear", seed, p, twins())[0])
        stage("codelength (random weights)", "the online codelength on the random-weights twin", lambda p:
              online_codelength(tv, first, second, ex.labels[None], train, c, seed, p, twins())[0][0])
    code = None
    if "codelength" in out:
        bits, blocks, uniform = out["codelength"]
        code = Codelength(bits[0], bits[1], out.get("codelength (random weights)"), uniform, int(train.sum()), blocks)
    fits = {kind: LayerFits(kind, out[kind][0], out[kind][1]) for kind in ("linear", "mlp") if kind in out}
    probes = TaskProbes(ex.task, ex.classes, int(train.sum()), int((~train).sum()), majority(ex), fits["linear"],
                        fits.get("mlp"), out.get("random weights"), out.get("scalar mix"), code, _note(ex))
    return probes, seconds


def seconds_needed(layers: int, hidden: int, sentences: int, *, kinds: Sequence[str] = KINDS, mix: bool = True,
                   codelength: bool = True, random_weights: bool = True) -> float:
    """About how long `probe_corpus` takes on one core: the measured base (the shipped model, every stage) scaled by
    the sentences and the model's size: each reading by layers * hidden^1.5, each probe by the examples (which grow
    with the sentences until part of speech and dependencies reach their caps) and (layers + 1) * hidden."""
    examples = _examples(sentences)
    probing = sum(_stage_seconds(name, examples, layers + 1, hidden)
                  for name in _names(kinds, mix, codelength, random_weights))
    return _reading_seconds(layers, hidden, sentences) * (1 + random_weights) + probing


def _round(values) -> list:
    return [round(float(x), 6) for x in np.asarray(values).ravel()]


def _task_json(p: TaskProbes) -> dict:
    out = {"classes": list(p.classes), "train": p.train, "test": p.test, "majority": round(p.majority, 6)}
    for fits in (p.linear, p.mlp):
        if fits is not None:
            out[fits.kind] = {"accuracy": _round(fits.accuracy), "control": _round(fits.control),
                              "selectivity": _round(fits.selectivity)}
    out["random_weights"] = None if p.random_weights is None else _round(p.random_weights)
    out["mix"] = None if p.mix is None else {
        "weights": _round(p.mix.weights), "cumulative": _round(p.mix.cumulative),
        "expected_layer": None if p.mix.expected_layer is None else round(p.mix.expected_layer, 6),
        "centre": round(p.mix.centre, 6)}
    code = p.codelength
    out["codelength"] = None if code is None else {
        "online": _round(code.online), "control": _round(code.control),
        "random_weights": None if code.random_weights is None else _round(code.random_weights),
        "uniform": round(code.uniform, 6), "examples": code.examples, "blocks": list(code.blocks),
        "compression": _round(code.compression(code.online))}
    if p.note:
        out["note"] = p.note
    return out


def as_json(probing: Probing) -> dict:
    """The `probe` command's JSON. Hidden states are counted from 0 (the embeddings' output), so every list has
    `hidden_states` entries. Keys: corpus, sentences, train_sentences, hidden_states, tasks (task -> classes, train,
    test, majority; linear and mlp -> accuracy, control, selectivity per state; random_weights (the twin's linear
    accuracy per state or null); mix -> weights, cumulative, expected_layer (null: nothing gained beyond state 0),
    centre; codelength -> online, control, random_weights (bits per state), uniform (bits), examples, blocks (block
    ends), compression (uniform / online); note), missing (task -> why), seconds (stage -> seconds), note."""
    out = {"corpus": probing.corpus, "sentences": probing.sentences, "train_sentences": probing.train_sentences,
           "hidden_states": probing.hidden_states,
           "tasks": {task: _task_json(p) for task, p in probing.tasks.items()},
           "missing": dict(probing.missing), "seconds": {k: round(v, 3) for k, v in probing.seconds.items()}}
    if probing.note:
        out["note"] = probing.note
    return out


def _agreement(values: dict | None) -> dict | None:
    return None if values is None else {str(k): None if v is None else round(float(v), 6) for k, v in values.items()}


def amnesic_json(result: Amnesic) -> dict:
    """Amnesic probing's JSON: task, layer (the hidden state projected, 0 = the embeddings' output), rank, iterations,
    majority, probe_before/after/random, masked (tokens), loss_before/after (nats) and loss_random (one per draw),
    accuracy_before/after/random the same, agreement_before/after/random (attractors -> accuracy or null; null for a
    task other than number), agreement_pairs, draws, seed, note."""
    return {"task": result.task, "layer": result.layer, "rank": result.rank, "iterations": result.iterations,
            "majority": round(result.majority, 6), "probe_before": round(result.probe_before, 6),
            "probe_after": round(result.probe_after, 6), "probe_random": round(result.probe_random, 6),
            "masked": result.masked, "loss_before": round(result.loss_before, 6),
            "loss_after": round(result.loss_after, 6), "loss_random": _round(result.loss_random),
            "accuracy_before": round(result.accuracy_before, 6), "accuracy_after": round(result.accuracy_after, 6),
            "accuracy_random": _round(result.accuracy_random),
            "agreement_before": _agreement(result.agreement_before),
            "agreement_after": _agreement(result.agreement_after),
            "agreement_random": _agreement(result.agreement_random),
            "agreement_pairs": None if result.agreement_pairs is None else
            {str(k): int(v) for k, v in result.agreement_pairs.items()},
            "draws": result.draws, "seed": result.seed, **({"note": result.note} if result.note else {})}
