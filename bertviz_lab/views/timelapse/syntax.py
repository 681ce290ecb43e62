"""Syntax as it forms: the Syntax page's measures (syntax/report.py) at every checkpoint a run kept.

For each kept checkpoint (RUN/checkpoints/step-NNNNNN/, in step order) a quick `analyse` on one fixed sample of the
story world, without the random-weights control (step 0 is the untrained model): the structural probe at every
layer, the head that follows each relation best, and agreement across attractors. Each step's record goes into
RUN/syntax.jsonl (the format: views/timelapse/syntax_file.py) as soon as it is measured, so a rerun measures only the
checkpoints the file lacks (a running run's new ones) and a measurement cut short keeps what it finished. A shipped
model keeps the file in history/ and has no checkpoints: the file is all there is.

The settings (`Settings`): 400 sentences, 100 probe steps, 50 agreement pairs per attractor count: on the shipped
model's shape (4 layers x 4 heads, hidden 256) a few seconds of one core a checkpoint, nearly all of it the probes,
and 100 probe steps find the UUAS that 200 do. Then, on the same sample, probing (views/timelapse/probing.py: the
linear probes of three tasks with their controls and scalar mix, and noun number removed) about as long again. Measuring takes `threads` torch threads (this thread's only): the page
gives it its share of the cores (ui/shell/turns.py), since two threads on a 2-core machine that is also training spin
and take several times as long. Figures in docs/benchmarks.md, "Syntax".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from bertviz_lab import files
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus.agreement import MAX_ATTRACTORS
from bertviz_lab.errors import CheckpointError, InputError, LabError
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.syntax.relations import ALL
from bertviz_lab.syntax.report import STORY_SENTENCES, TEST_SHARE, analyse, story_corpus
from bertviz_lab.views.syntax.analysis import MIN_COUNT
from bertviz_lab.views.timelapse.probing import measure as measure_probing
from bertviz_lab.views.timelapse.syntax_file import (BEFORE_PROBING, FILE, SETTINGS, Settings, SyntaxAt, SyntaxHistory,
                                                        as_record, file_of, join, read, write)

__all__ = ["BEFORE_PROBING", "FILE", "MIN_COUNT", "SETTINGS", "Settings", "SyntaxAt", "SyntaxHistory", "file_of",
           "measure", "measure_checkpoints", "read"]

MAIN = (ALL, "det", "nsubj", "obj", "amod", "advmod", "case", "obl", "nmod", "aux", "cop", "mark")  # drawn first
# MIN_COUNT (views/syntax/analysis.py): a relation with fewer dependents in the sample is not recorded (its accuracy is noise)
TREE_MARGIN = 0.1  # the tree "appears" once the best UUAS stays this far above what needs no training
SECONDS_MINI = 5.0  # one checkpoint of the shipped model's shape on one core (above); scaled for other shapes
PROBING_MINI = 6.0  # its probing (views/timelapse/probing.py, which says how measured), the same way
Progress = Callable[[float, str], None]


def record_of(step: int, report, seconds: float) -> dict:
    """The JSON record of one `analyse` report (numbers rounded to 6 decimals)."""
    relations = {}
    for name, count in zip(report.relations.relations, report.relations.counts):
        if name == ALL or count >= MIN_COUNT:
            (layer, head), accuracy = report.relations.best(name, 0)
            offset, baseline = report.relations.baseline[name]
            relations[name] = {"layer": layer, "head": head, "accuracy": round(accuracy, 6), "offset": int(offset),
                               "baseline": round(float(baseline), 6), "count": int(count)}
    accuracy = report.agreement.accuracy() if report.agreement is not None else {}
    return {"kind": "syntax", "step": step, "uuas": [round(s.uuas, 6) for s in report.probe.layers],
            "linear_uuas": round(report.probe.linear_uuas, 6), "sentences": len(report.corpus.trees),
            "train_sentences": report.probe.train_sentences, "test_sentences": report.probe.test_sentences,
            "seconds": round(seconds, 2), "relations": relations,
            "agreement": {str(k): None if a is None else round(a, 6) for k, a in accuracy.items()}}


def measure_checkpoints(dirs_by_step: dict[int, Path], out_path, progress: Progress | None = None,
                        settings: Settings | None = None, threads: int | None = None,
                        source: str = "") -> SyntaxHistory:
    """Measure the checkpoints (step -> folder) whose step `out_path` does not hold yet, writing each into it as soon
    as it is done; `progress(fraction, message)` all along; on `threads` torch threads (None: this thread's count).
    A file goes on with its own settings (InputError when others are asked for); a checkpoint of another shape than
    the file's steps is skipped, with a note. `source` says what was measured when it is not the run whose history
    the file sits in (a rerun of a shipped model's recipe); the page shows it."""
    with _threads(threads):
        return _measure(dirs_by_step, Path(out_path), progress, settings, source)


@contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """`count` torch threads for this thread while the block runs (OpenMP's count is per thread), then as before."""
    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _settled(held: SyntaxHistory, settings: Settings | None, out_path: Path) -> Settings:
    """The settings a measurement goes on with: the file's own, where it has them. A file measured before probing
    gains probing (the asked-for settings', else SETTINGS'), the rest of its settings kept; others asked: InputError."""
    ours = held.settings
    if ours is None:
        return settings or SETTINGS
    if ours.probing is None and (settings is None or settings.base() == ours.base()):
        return replace(ours, probing=(settings or SETTINGS).probing)
    if settings is not None and settings != ours:
        raise InputError(f"{out_path.name} was measured with other settings ({ours}); delete it to measure "
                         f"with {settings}")
    return ours


def _measure(dirs_by_step: dict[int, Path], out_path: Path, progress: Progress | None,
             settings: Settings | None, source: str = "") -> SyntaxHistory:
    held = read(out_path)
    settings = _settled(held, settings, out_path)
    shape, done = held.shape, {at.step: as_record(at) for at in held.records}
    todo = [s for s in sorted(dirs_by_step) if s not in done or (settings.probing and "probing" not in done[s])]
    corpus, skipped = story_corpus(settings.sentences, settings.seed), []
    for i, step in enumerate(todo):
        def report(fraction: float, message: str, i=i, step=step) -> None:
            if progress:
                progress((i + fraction) / len(todo), f"step {step:,} ({i + 1} of {len(todo)}): {message}")

        report(0.0, "loading the checkpoint")
        try:
            ckpt = load_checkpoint(dirs_by_step[step])
        except (CheckpointError, OSError):
            skipped.append(step)  # broken, or pruned by a running run while we read it
            continue
        config = ckpt.model.config
        here = (config.num_hidden_layers, config.num_attention_heads, config.hidden_size)
        if shape is not None and here != shape and done:
            skipped.append(step)
            continue
        shape, done[step] = here, _measure_step(ckpt, step, done.get(step), corpus, settings, report)
        write(out_path, settings, shape, done, held.source or source)
    if progress:
        progress(1.0, "done")
    out = read(out_path)
    missed = f"Checkpoints not measured (unreadable, or of another shape): steps {', '.join(map(str, skipped))}."
    return SyntaxHistory(out.records, out.settings, out.shape, join(out.note, missed if skipped else ""), out_path,
                         out.source)


def _measure_step(ckpt, step: int, held: dict | None, corpus, settings: Settings, report: Progress) -> dict:
    """One checkpoint's record: `analyse`'s numbers (unless `held` has them), then its probing entry, if asked."""
    share = 0.5 if settings.probing and held is None else 1.0  # of the step's progress: the rest of the record
    record = held
    if record is None:
        start = time.perf_counter()
        result = analyse(ckpt.model, ckpt.tokenizer, corpus, seed=settings.seed, control=False,
                         agreement_pairs_per_count=settings.agreement_pairs, probe_steps=settings.probe_steps,
                         progress=lambda f, m: report(f * share, m))
        record = record_of(step, result, time.perf_counter() - start)
    if settings.probing:
        rest = 0.0 if held is not None else share
        record["probing"] = measure_probing(ckpt.model, ckpt.tokenizer, corpus, settings.probing, settings.seed,
                                            lambda f, m: report(rest + (1 - rest) * f, m))
    return record


def measure(folder, progress: Progress | None = None, settings: Settings | None = None,
            threads: int | None = None) -> SyntaxHistory:
    """A run's kept checkpoints not yet measured, measured into its syntax.jsonl (`measure_checkpoints`); a shipped
    model's folder has no checkpoints: its history/syntax.jsonl is read as it is."""
    dirs = dict(checkpoints.kept(folder))
    if not dirs:
        return read(file_of(folder))
    return measure_checkpoints(dirs, file_of(folder), progress, settings, threads)


# --- What the page shows ----------------------------------------------------------------------------------------
def unmeasured(history: SyntaxHistory, kept: list[int]) -> list[int]:
    """The kept checkpoints' steps a measurement would measure: those the history does not hold, and those it holds
    without probing (a file measured before probing gains it; a probing entry that did not add up is measured again)."""
    held = {r.step: r for r in history.records}
    return [s for s in kept if s not in held or held[s].probing is None]


def seconds_needed(history: SyntaxHistory, steps: list[int], checkpoint: Path) -> float:
    """What measuring `steps` will take: each measured part as long as it took before, else the shipped model's
    times scaled to the checkpoint's shape (the probes' work: layers x hidden x rank); a step held without probing
    needs only its probing."""
    records = [r for r in history.records if r.seconds]
    probed = [r.probing.seconds for r in history.records if r.probing is not None]
    try:
        config = files.read_json(Path(checkpoint) / "config.json")
        layers, hidden = int(config["num_hidden_layers"]), int(config["hidden_size"])
    except (LabError, KeyError, TypeError, ValueError):
        layers, hidden = 4, 256
    scale = (layers + 1) / 5 * hidden * min(64, hidden) / (256 * 64)
    rest = float(np.mean([r.seconds for r in records])) if records else SECONDS_MINI * scale
    probing = float(np.mean(probed)) if probed else PROBING_MINI * scale
    held = set(history.steps)
    return max(1.0, sum(probing + (0.0 if s in held else rest) for s in steps))


def probe_split(at: SyntaxAt) -> tuple[int, int]:
    """(sentences the probe trained on, sentences it was tested on) at one step: the record's own counts, or for an
    older record without them syntax/report.py's split when it was written (a quarter tested, at least 2)."""
    if at.train_sentences and at.test_sentences:
        return at.train_sentences, at.test_sentences
    tested = max(2, round(at.sentences / 4))
    return at.sentences - tested, tested


def syntax_page_note(history: SyntaxHistory) -> str:
    """Why the UUAS here sits below the Syntax page's for a model of the same shape, from the actual counts: the
    page's probe trains on more sentences by default ("" when it does not)."""
    if not history.records:
        return ""
    trained, _ = probe_split(history.records[-1])
    page = STORY_SENTENCES - max(2, round(TEST_SHARE * STORY_SENTENCES))  # syntax/report.py's Corpus.split
    if trained >= page:
        return ""
    return (f"These UUAS are lower than the Syntax page's for a model of the same shape because the probe here trains "
            f"on {trained:,} sentences, there on {page:,} by default ({STORY_SENTENCES:,} read, a quarter kept to test): "
            f"a probe fitted on fewer sentences finds fewer edges, so step 0 here (untrained) scores below the page's "
            "random-weights control too.")


def reference(history: SyntaxHistory) -> float | None:
    """What a tree needs no training to reach: the untrained model's best UUAS (step 0), or the linear baseline if
    higher. None without a step-0 record: the linear baseline alone is no stand-in, since a probe on random weights
    already scores well above it (the Syntax page's control shows how far)."""
    first = history.records[0] if history.records else None
    if first is None or first.step != 0:
        return None
    return max(first.linear_uuas, first.best_uuas)


def tree_step(history: SyntaxHistory, margin: float = TREE_MARGIN) -> int | None:
    """The first step from which the best layer's UUAS stays `margin` or more above `reference` at every measured
    step; None when the last step is not there, or when there is no step 0 to compare with."""
    ref = reference(history)
    if ref is None:
        return None
    best = np.array([r.best_uuas for r in history.records])
    above = best >= ref + margin - 1e-9
    if not above[-1]:
        return None
    below = np.flatnonzero(~above)
    return history.steps[int(below[-1]) + 1 if len(below) else 0]


def tree_sentence(history: SyntaxHistory) -> str:
    """When the parse tree shows in the word vectors, computed from the numbers, in words that hold for any run."""
    if not history.records:
        return ""
    first, last, ref = history.records[0], history.records[-1], reference(history)
    if ref is None:
        return (f"At step {last.step:,} the structural probe's best layer (layer {last.best_layer}) scores a UUAS of "
                f"{last.best_uuas:.2f}, but this run kept no untrained checkpoint (step 0) to compare with, so no step "
                f"is named: the linear baseline's {first.linear_uuas:.2f} is no stand-in, since a probe on random "
                "weights already scores well above it.")
    what = (f"the linear baseline's {ref:.2f}" if ref == first.linear_uuas
            else f"the untrained model's {ref:.2f} (step 0)")
    step = tree_step(history)
    if step is None:
        return (f"No tree yet: at step {last.step:,} the structural probe's best layer (layer {last.best_layer}) scores "
                f"a UUAS of {last.best_uuas:.2f}; a tree shows from {ref + TREE_MARGIN:.2f} on ({TREE_MARGIN:.1f} above "
                f"{what}).")
    at = history.records[history.steps.index(step)]
    return (f"The tree appears at step **{step:,}**: from there on, at every measured step, the structural probe's best "
            f"layer scores a UUAS at least {TREE_MARGIN:.1f} above {what} ({at.best_uuas:.2f} at step {step:,}, "
            f"{last.best_uuas:.2f} at step {last.step:,} in layer {last.best_layer}).")


def relations_shown(history: SyntaxHistory, most: int = 8) -> list[str]:
    """The relations every record holds, one panel each: "all", then those of MAIN in its order, then the others
    by count."""
    if not history.records:
        return []
    common = set.intersection(*(set(r.relations) for r in history.records))
    last = history.records[-1].relations
    rank = {name: i for i, name in enumerate(MAIN)}
    return sorted(common, key=lambda n: (rank.get(n, len(MAIN)), -last[n].count, n))[:most]


def series(history: SyntaxHistory, relations: list[str]) -> dict[str, np.ndarray]:
    """Arrays for the figures: uuas (S, L+1); accuracy (S, R) and heads (S, R) as "L1 H2", of the relations'
    best heads; baseline (R,), the fixed-offset baselines of the last step; agreement (S, 4), NaN where no pair."""
    records = history.records
    return {"uuas": np.array([r.uuas for r in records]),
            "accuracy": np.array([[r.relations[n].accuracy for n in relations] for r in records]),
            "heads": np.array([[f"L{r.relations[n].layer} H{r.relations[n].head}" for n in relations]
                               for r in records], dtype=object),
            "baseline": np.array([records[-1].relations[n].baseline for n in relations]),
            "agreement": np.array([[np.nan if r.agreement.get(k) is None else r.agreement[k]
                                    for k in range(MAX_ATTRACTORS + 1)] for r in records])}
