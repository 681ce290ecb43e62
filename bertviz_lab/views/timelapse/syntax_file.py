"""The syntax history of a run or a shipped model as a file: RUN/syntax.jsonl, or MODEL/history/syntax.jsonl.

A first line holds the settings the steps were measured with and the model's shape, then one record a step
(views/timelapse/syntax.py measures them):

    {"kind": "syntax-settings", "version": 2, "layers": L, "heads": H, "hidden": d, "sentences": 400, "seed": 0,
     "probe_steps": 100, "agreement_pairs": 50, "probing": {"tasks": ["pos", "dep", "number"], "draws": 3,
     "amnesic_pairs": 20}}
    {"kind": "syntax", "step": 200, "uuas": [L + 1], "linear_uuas": u, "sentences": n, "train_sentences": t,
     "test_sentences": e, "seconds": s, "relations": {"det": {"layer": l, "head": h, "accuracy": a, "offset": o, "baseline": b, "count": n}, ...},
     "agreement": {"0": accuracy or null, ..., "3": ...}, "probing": {...}}

uuas: the structural probe's score at each layer (0 = the embeddings' output); train_sentences and
test_sentences: the probe's split of the n sentences read (older records lack them); relations: the head that follows
each relation best from dependent to head, with the relation's best fixed-offset baseline; agreement: the share
of pairs agreed on by number of attractors; probing: the probes and the amnesic effect at that step (its format:
views/timelapse/probing.py). A file of version 1 (its header without "probing") was measured before probing over
training was added: it is read as it is, its records without probing (`BEFORE_PROBING` says so), and measuring it
again adds probing to each step whose checkpoint is still there. A file is data from disk: `read` skips a line that does not add up,
with a note (a record whose probing entry does not add up is kept without it, with a note), and refuses a file of
another model shape, never raising for what the file holds. The writer
rewrites the whole file (atomic.py), so a reader sees the old file or the new one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bertviz_lab import atomic, files
from bertviz_lab.corpus.agreement import MAX_ATTRACTORS
from bertviz_lab.errors import LabError
from bertviz_lab.pretrain import publish
from bertviz_lab.syntax.relations import ALL
from bertviz_lab.views.timelapse.probing import Probes, ProbingAt, as_entry
from bertviz_lab.views.timelapse.probing import parse as parse_probing

FILE = publish.SYNTAX_FILE  # RUN/syntax.jsonl; a shipped model keeps it in history/
VERSION, VERSION_BEFORE_PROBING = 2, 1  # a header with "probing", and one written before probing over training
BEFORE_PROBING = ("This history was measured before probing over training was added; measure again to see it.")
MAX_FILE_BYTES = 4 * 2**20  # a record is 2-3 kB: a thousand steps fit many times over
MAX_RECORDS, MAX_RELATIONS = 2000, 64


@dataclass(frozen=True)
class Settings:
    """What each step is measured with (views/timelapse/syntax.py says why these): the same for every step of a file."""
    sentences: int = 400  # of the story world: the first three quarters train the probes, the rest test them
    seed: int = 0  # the sample's, the probes' and the agreement pairs'
    probe_steps: int = 100  # Adam steps per probe (the Syntax page takes syntax.probe.STEPS, 100 too)
    agreement_pairs: int = 50  # per number of attractors, 0..3
    probing: Probes | None = Probes()  # None: measured before probing over training was added (a version 1 file)

    @classmethod
    def of(cls, record: dict) -> Settings | None:
        """The settings of a header, or None when they do not add up (a version 2 header needs its "probing")."""
        try:
            values = {name: record[name] for name in BASE}
        except (KeyError, TypeError):
            return None
        ok = all(_whole(v, 0, 100_000) for v in values.values()) and values["sentences"] >= 8
        probes = Probes.of(record.get("probing")) if record.get("version") == VERSION else None
        if record.get("version") == VERSION and probes is None:
            return None
        return cls(**values, probing=probes) if ok and values["probe_steps"] >= 1 else None

    def base(self) -> tuple[int, ...]:
        """The settings of the rest of the record: a file measured before probing goes on with these."""
        return tuple(getattr(self, name) for name in BASE)

    def as_json(self) -> dict:
        probing = {"probing": self.probing.as_json()} if self.probing else {}
        return {**dict(zip(BASE, self.base())), **probing}


BASE = ("sentences", "seed", "probe_steps", "agreement_pairs")


SETTINGS = Settings()


class HeadScore(NamedTuple):
    """The head that follows one relation best, dependent → head, and the relation's fixed-offset baseline."""
    layer: int
    head: int
    accuracy: float
    offset: int
    baseline: float
    count: int  # dependents with this relation in the sample


@dataclass(frozen=True)
class SyntaxAt:
    """The measures at one checkpoint step."""
    step: int
    uuas: tuple[float, ...]  # per layer, 0 = the embeddings' output, then 1..L
    linear_uuas: float  # each word linked to the next: what needs no model at all
    relations: dict[str, HeadScore]  # "all" and the relations with MIN_COUNT dependents or more
    agreement: dict[int, float | None]  # attractors (0..3) -> share of pairs agreed on; None: no pair scored
    sentences: int = 0  # the sample's sentences the model could read whole
    seconds: float = 0.0
    train_sentences: int = 0  # the probe's split of `sentences`; 0: a record written before they were kept
    test_sentences: int = 0
    probing: ProbingAt | None = None  # None: measured before probing was added, or its entry did not add up

    @property
    def best_layer(self) -> int:
        return int(np.argmax(self.uuas))

    @property
    def best_uuas(self) -> float:
        return max(self.uuas)


@dataclass(frozen=True)
class SyntaxHistory:
    records: tuple[SyntaxAt, ...] = ()  # in step order, one a step
    settings: Settings | None = None
    shape: tuple[int, int, int] | None = None  # (layers, heads, hidden) of the model measured
    note: str = ""  # lines skipped, checkpoints that could not be read, a file refused
    path: Path | None = field(default=None, compare=False)
    source: str = ""  # what was measured when it is not the run itself (the header's "source"; shown on the page)

    @property
    def steps(self) -> list[int]:
        return [r.step for r in self.records]

    @property
    def before_probing(self) -> bool:
        """Measured before probing over training was added (a version 1 file): BEFORE_PROBING says so."""
        return self.settings is not None and self.settings.probing is None


def file_of(folder) -> Path:
    """Where a folder keeps its syntax history: a run's in the run folder, a shipped model's in its history/."""
    folder = Path(folder)
    is_run = (folder / "run.json").exists() or (folder / "checkpoints").is_dir()
    return folder / FILE if is_run else folder / publish.HISTORY / FILE


def _whole(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _share(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


MAX_SOURCE = 600  # characters of the header's "source" shown


def _header(record: dict) -> tuple[Settings, tuple[int, int, int], str] | None:
    shape = tuple(record.get(k) for k in ("layers", "heads", "hidden"))
    if record.get("version") not in (VERSION, VERSION_BEFORE_PROBING) or not all(_whole(v, 1, 4096) for v in shape):
        return None
    settings = Settings.of(record)
    source = record.get("source", "")
    source = " ".join(source.split())[:MAX_SOURCE] if isinstance(source, str) and source.isprintable() else ""
    return (settings, shape, source) if settings else None


def _relation(entry, layers: int, heads: int) -> HeadScore | None:
    if not isinstance(entry, dict):
        return None
    score = HeadScore(*(entry.get(k) for k in HeadScore._fields))
    ok = (_whole(score.layer, 0, layers - 1) and _whole(score.head, 0, heads - 1) and _share(score.accuracy)
          and _whole(score.offset, -100, 100) and _share(score.baseline) and _whole(score.count, 0, 10**9))
    return score._replace(accuracy=float(score.accuracy), baseline=float(score.baseline)) if ok else None


def parse(record: dict, shape: tuple[int, int, int]) -> SyntaxAt | None:
    """The measures of one record, or None when it does not add up for a model of `shape`."""
    layers, heads, _ = shape
    uuas, relations, agreement = record.get("uuas"), record.get("relations"), record.get("agreement")
    if not (_whole(record.get("step"), 0, 10**12) and isinstance(uuas, list) and len(uuas) == layers + 1
            and all(map(_share, uuas)) and _share(record.get("linear_uuas")) and isinstance(relations, dict)
            and 0 < len(relations) <= MAX_RELATIONS and isinstance(agreement, dict)):
        return None
    scores = {str(name)[:40]: _relation(entry, layers, heads) for name, entry in relations.items()}
    counts = {k: agreement.get(str(k)) for k in range(MAX_ATTRACTORS + 1)}
    seconds, sentences = record.get("seconds", 0.0), record.get("sentences", 0)
    split = record.get("train_sentences", 0), record.get("test_sentences", 0)
    if (None in scores.values() or ALL not in scores or any(v is not None and not _share(v) for v in counts.values())
            or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e6 or not _whole(sentences, 0, 10**6)
            or not all(_whole(n, 0, sentences) for n in split) or sum(split) > sentences):
        return None
    probes = parse_probing(record["probing"], layers) if record.get("probing") is not None else None
    return SyntaxAt(record["step"], tuple(map(float, uuas)), float(record["linear_uuas"]), scores,
                    {k: None if v is None else float(v) for k, v in counts.items()}, sentences, float(seconds), *split,
                    probes)


def read(path, shape: tuple[int, int] | None = None) -> SyntaxHistory:
    """A syntax history from a file (a run's syntax.jsonl or a shipped model's history/syntax.jsonl); `shape`,
    (layers, heads) of the model it must be of. Never raises for what the file holds: a line that cannot be read is
    skipped with a note; a file that is not one, or of another shape, gives no records and says why."""
    path = Path(path)
    if not path.exists():
        return SyntaxHistory(path=path)
    try:
        text = files.read_text(path, FILE, MAX_FILE_BYTES)
    except LabError as exc:
        return SyntaxHistory(note=f"The syntax history cannot be read: {exc}.", path=path)
    head, found, bad, first_bad, no_probing = None, {}, 0, "", []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind == "syntax-settings" and head is None:
            head = _header(record)
            why = "" if head else "its settings cannot be read"
        elif kind == "syntax" and head is not None and len(found) < MAX_RECORDS:
            at = parse(record, head[1])
            why = "" if at else "its numbers do not add up for this model"
            found.update({at.step: at} if at else {})  # a step measured twice: the later record
            if at and at.probing is None and record.get("probing") is not None:
                no_probing.append(at.step)
        else:
            why = ("not JSON" if record is None else "before the settings line" if kind == "syntax" and head is None
                   else "not a syntax record")
        if why:
            bad, first_bad = bad + 1, first_bad or f"line {number}: {why}"
    skipped = f"{bad} line{'s' * (bad != 1)} of {path.name} skipped ({first_bad})." if bad else ""
    if no_probing:
        skipped = join(skipped, f"The probing of step{'s' * (len(no_probing) != 1)} "
                                f"{', '.join(f'{s:,}' for s in no_probing)} does not add up and is not shown.")
    if head is None:
        return SyntaxHistory(note=join(skipped, f"{path.name} has no settings line: not shown."), path=path)
    settings, measured, source = head
    if shape is not None and tuple(shape) != measured[:2]:
        return SyntaxHistory(note=f"The syntax history was measured on a model of {measured[0]} layers x "
                                  f"{measured[1]} heads, not this one's {shape[0]} x {shape[1]}: not shown.",
                             path=path)
    return SyntaxHistory(tuple(found[s] for s in sorted(found)), settings, measured, skipped, path, source)


def join(*notes: str) -> str:
    return " ".join(n.strip() for n in notes if n and n.strip())


def header_record(settings: Settings, shape: tuple[int, int, int], source: str = "") -> dict:
    version = VERSION if settings.probing else VERSION_BEFORE_PROBING
    return {"kind": "syntax-settings", "version": version, **dict(zip(("layers", "heads", "hidden"), shape)),
            **settings.as_json(), **({"source": source} if source else {})}


def write(path: Path, settings: Settings, shape, records: dict[int, dict], source: str = "") -> None:
    lines = [header_record(settings, shape, source)] + [records[s] for s in sorted(records)]
    atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in lines))


def as_record(at: SyntaxAt) -> dict:
    split = ({"train_sentences": at.train_sentences, "test_sentences": at.test_sentences}
             if at.train_sentences and at.test_sentences else {})  # an older record stays without them
    return {"kind": "syntax", "step": at.step, "uuas": list(at.uuas), "linear_uuas": at.linear_uuas,
            "sentences": at.sentences, **split, "seconds": at.seconds,
            "relations": {name: score._asdict() for name, score in at.relations.items()},
            "agreement": {str(k): v for k, v in at.agreement.items()},
            **({"probing": as_entry(at.probing)} if at.probing else {})}
