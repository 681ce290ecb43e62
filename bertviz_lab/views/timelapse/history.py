"""The time-lapse of a run: its snapshots as frames to scrub through, and what changed between them.

A run's frames are the records of RUN/snapshots.jsonl (see pretrain/snapshots.py), one per
checkpoint step, each a `Frame` (views/timelapse/frames.py); a run from before snapshots existed gets them
from the checkpoints it kept. The shipped model's history is the same two files in its folder's history/,
written by the run that trained it. Records are data from a file: a frame whose shapes do not add up, or
that is not of the model's shape (its run.json or config.json), is left out, with a note.

What each frame adds for the page: the role scores over the steps (and the step from which a head
plays a role for good), word positions aligned from frame to frame so a word moves only as much
as its place among the others does, and the difference between two frames: how far each head's
attention moved (total variation distance, averaged over the probe sentences' word tokens) and
which guesses at [MASK] changed. A head is said to play a role only when its score is well above
what uniform attention would give (`CLEAR` times it): at step 0 every head is near uniform, and
its highest score ("[SEP] 0.10") is noise, not a role. A grammatical role that is, on the frame's
probe sentences, the same attention as a positional one (`head_roles.twins`: every verb's subject is the
word just before it) is named with its positional reading first, so a previous-token head is not
read as a head that learned syntax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from bertviz_lab import files, metrics
from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.corpus.probes import PROBES
from bertviz_lab.errors import CheckpointError, LabError
from bertviz_lab.head_id import HeadId
from bertviz_lab.pretrain import checkpoints, head_roles, publish, records, snapshots
from bertviz_lab.pretrain.head_roles import CLEAR, ROLE_NAMES
from bertviz_lab.views import inputs
from bertviz_lab.views.timelapse.frames import Frame, ProbeAt

HISTORY = publish.HISTORY  # a shipped model's folder: history/snapshots.jsonl and history/metrics.jsonl
MAX_BACKFILL = 24  # checkpoints read for a run without snapshots
FORMED = 0.5  # a head "plays a role" once its score stays at or above this


@dataclass(frozen=True)
class TimeLapse:
    name: str
    frames: list[Frame]  # by step; every one of the run's shape
    train: pd.DataFrame = field(default_factory=pd.DataFrame)  # step, loss, ... (`metrics.frame`)
    eval: pd.DataFrame = field(default_factory=pd.DataFrame)
    note: str = ""  # where the frames came from, when not from the run's own snapshots; frames left out
    checkpoints: tuple[tuple[int, Path], ...] = ()  # a run's kept (step, folder): any sentence runs on these

    @property
    def steps(self) -> list[int]:
        return [f.step for f in self.frames]

    @property
    def texts(self) -> list[str]:
        return self.frames[-1].texts if self.frames else []

    @property
    def shape(self) -> tuple[int, int]:
        return (self.frames[-1].layers, self.frames[-1].heads) if self.frames else (0, 0)


def _frames(recorded: list[dict]) -> list[Frame]:
    return _consistent([f for f in map(Frame.of, recorded) if f is not None])


def _consistent(frames: list[Frame]) -> list[Frame]:
    if frames:  # one model shape throughout (a folder reused for another run would mix two)
        last = frames[-1]
        frames = [f for f in frames if (f.layers, f.heads, f.texts) == (last.layers, last.heads, last.texts)]
    return frames


def _curves(recorded: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The train and held-out curves, whatever names the run wrote (`metrics.table`)."""
    return metrics.table(recorded, metrics.TRAIN), metrics.table(recorded, metrics.EVAL)


def _shape(path: Path, of_run: bool) -> snapshots.Shape | None:
    """The model shape run.json's config (of_run) or a model's config.json gives; None when it says none."""
    try:
        data = files.read_json(path)
    except LabError:
        return None
    if not isinstance(data, dict):
        return None
    return snapshots.Shape.of_run(data.get("config")) if of_run else snapshots.Shape.of_model(data)


def _snapshots(path: Path, shape: snapshots.Shape | None, settings: str) -> tuple[list[Frame], str, str]:
    """(frames, note, why): the checked frames of a snapshots.jsonl, what the page should say of how it was
    read, and why none of its records is shown (empty when some are, or when it holds none). settings: the
    file that gives the model's shape."""
    if shape is None:
        return [], "", f"the model settings in its {settings} cannot be read" if path.is_file() else ""
    frames, note, refused = snapshots.load(path, shape, Frame.of)
    frames = _consistent([f for f in frames if f is not None])
    if frames:
        return frames, _join(note, f"Snapshots not shown: {refused}." if refused else ""), ""
    return [], note, refused or ("none of the records read is a snapshot" if note else "")


def from_run(run_dir, name: str | None = None) -> TimeLapse:
    """A run's frames: its snapshots (those of its model's shape), or (for an older run, or one whose
    snapshots cannot be shown) snapshots taken now from the checkpoints it kept."""
    run_dir = Path(run_dir)
    train, held_out = _curves(records.read_metrics(run_dir))
    frames, note, why = _snapshots(run_dir / snapshots.FILE, _shape(run_dir / "run.json", of_run=True), "run.json")
    whose = f"This run's snapshots cannot be shown: {why}" if why else "This run has no snapshots"
    if not frames:
        taken = []
        for step, folder in checkpoints.kept(run_dir)[-MAX_BACKFILL:]:
            try:
                ckpt = load_checkpoint(folder)
            except (CheckpointError, OSError):
                continue  # broken, or pruned while read (a folder appears whole: checkpoints.save renames it)
            record = snapshots.take(ckpt.model, ckpt.tokenizer, step)
            if record is not None:
                taken.append(record)
        frames = _frames(taken)
        if frames:
            note = _join(note, f"{whose}; its {len(frames)} kept checkpoints were read instead.")
        elif why:
            note = _join(note, f"{whose}.")
    return TimeLapse(name or run_dir.name, frames, train, held_out, _join(note, records.metrics_note(run_dir)),
                     tuple(checkpoints.kept(run_dir)))


def from_history(model_dir, name: str | None = None) -> TimeLapse:
    """A shipped model's training history (history/ in its folder); no frames when it has none."""
    folder = Path(model_dir) / HISTORY
    train, held_out = _curves(records.read_metrics(folder))
    shape = _shape(Path(model_dir) / "config.json", of_run=False)
    frames, note, why = _snapshots(folder / snapshots.FILE, shape, "config.json")
    note = _join(note, f"This model's snapshots cannot be shown: {why}." if why else "", records.metrics_note(folder))
    return TimeLapse(name or Path(model_dir).name, frames, train, held_out, note)


def _join(*notes: str) -> str:
    return " ".join(n.strip() for n in notes if n.strip())


def role_series(lapse: TimeLapse, role: str) -> np.ndarray:
    """(S, L, H): the role's score at every frame (NaN where a frame lacks it)."""
    L, H = lapse.shape
    return np.stack([f.roles.get(role, np.full((L, H), np.nan)) for f in lapse.frames])


@dataclass(frozen=True)
class Formed:
    layer: int
    head: int
    step: int  # the first frame from which the score stays >= FORMED
    score: float  # at the last frame


def formed(lapse: TimeLapse, role: str, threshold: float = FORMED) -> list[Formed]:
    """The heads that end up playing `role` (score >= threshold at the last frame), with the step from
    which they keep playing it, earliest first."""
    series = role_series(lapse, role)
    out = []
    if not len(series):
        return out
    for layer, head in zip(*np.nonzero(series[-1] >= threshold)):
        below = np.nonzero(~(series[:, layer, head] >= threshold))[0]
        first = 0 if not len(below) else int(below[-1]) + 1
        out.append(Formed(int(layer), int(head), lapse.steps[first], float(series[-1, layer, head])))
    return sorted(out, key=lambda f: (f.step, -f.score))


def formed_lines(lapse: TimeLapse, role: str) -> list[str]:
    """One markdown line per head that ends up playing `role` (see `formed`); for a grammatical role that is a
    positional one on these probes, the line says so and gives the head's positional score too."""
    found = formed(lapse, role)
    if not found:
        return []
    last = lapse.frames[-1]
    twin, name, lines = twins(last).get(role), ROLE_NAMES.get(role, role), []
    for f in found:
        head, when = f"**{HeadId(f.layer, f.head).in_words}**", f"around step **{f.step:,}**"
        score = f"{f.score:.0%} at step {lapse.steps[-1]:,}"
        if twin is None or twin not in last.roles:
            lines.append(f"- {head} becomes a *{name}* head {when} ({score})")
            continue
        lines.append(f"- {head} scores {FORMED:.0%} or more on *{name}* from {when} ({score}); on these probes every "
                     f"such link goes to the {ROLE_NAMES[twin]} (its *{ROLE_NAMES[twin]}* score over all words: "
                     f"{last.roles[twin][f.layer, f.head]:.0%})")
    return lines


def _procrustes(moving: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """`moving` rotated (or reflected) to lie as close as it can to `fixed`; no stretching."""
    u, _, vt = np.linalg.svd(moving.T @ fixed)
    return moving @ (u @ vt)


def positions(lapse: TimeLapse) -> list[np.ndarray]:
    """Each frame's word positions, (W, 2): centred, scaled to a root-mean-square distance of 1 from the
    centre (the arrangement, not the size, is what changes meaning), and each frame turned to match
    the next one, back from the last, so the plot moves only as the arrangement does."""
    words = lapse.frames[-1].words if lapse.frames else []
    out = []
    for frame in lapse.frames:
        xy = frame.xy if frame.words == words else np.zeros((len(words), 2))
        xy = xy - xy.mean(0) if len(xy) else xy
        scale = math.sqrt(float((xy**2).sum(1).mean())) if len(xy) else 0.0
        out.append(xy / scale if scale > 0 else xy)
    for i in range(len(out) - 2, -1, -1):
        if len(out[i]) and np.any(out[i]):
            out[i] = _procrustes(out[i], out[i + 1])
    return out


def own_probe(ckpt: Checkpoint, text: str) -> ProbeAt:
    """A frame's probe for a sentence the snapshots do not hold, run on a kept checkpoint: every head's
    attention on the sentence as written and the top guesses at its first [MASK] (none without one; the true
    word is not known). An InputError (its message for the page) when the sentence does not fit the model."""
    encoding = head_roles.encode(ckpt.tokenizer, ckpt.model.config.max_tokens, text)
    masks = [i for i, t in enumerate(encoding.ids) if t == ckpt.tokenizer.mask_id][:1]
    out = inputs.run(ckpt.model, encoding, trace=True, masked_positions=masks or None, encoder_only=not masks)
    top = []
    if masks and out.mlm_logits is not None:
        p = out.mlm_logits[0].float().softmax(-1)
        values, ids = p.topk(min(snapshots.TOP_K, p.numel()))
        top = [(ckpt.tokenizer.id_to_token(int(i)), float(v)) for v, i in zip(values, ids)]
    attention = inputs.attention_matrices(out).astype(np.float64)  # (L, H, T, T)
    return ProbeAt(text, list(encoding.tokens), attention, "", top)


def probe(frame: Frame, text: str) -> ProbeAt | None:
    return next((p for p in frame.probes if p.text == text), None)


@lru_cache(maxsize=8)
def _twins(texts: frozenset[str]) -> tuple[dict[str, str], str]:
    probes = [p for p in PROBES if p.text in texts]  # a sentence the probe set no longer holds: links unknown
    return head_roles.twins(probes), head_roles.twins_note(probes)


def twins(frame: Frame) -> dict[str, str]:
    """Grammatical role -> the positional role it is on every link of the frame's probe sentences."""
    return _twins(frozenset(frame.texts))[0]


def twins_note(frame: Frame | None = None) -> str:
    """The sentence that says which grammatical roles are positional ones on the frame's probes (default: on
    the whole probe set, the one a new run records); empty when none is."""
    texts = frame.texts if frame is not None else [p.text for p in PROBES]
    return _twins(frozenset(texts))[1]


NO_ROLE = "no clear role"


def role_text(frame: Frame, layer: int, head: int) -> str:
    """'previous token 0.88': the role a head plays most, among the roles it scores at CLEAR times uniform
    attention's score or more; 'no clear role (best 0.10, uniform 0.09)' when it plays none. A grammatical
    role that is a positional one on these probes gives the positional reading first: 'previous token 0.88
    (= verb → subject 0.98)' (short, for a table cell of a laptop's width: `twins_note` says why they are one)."""
    scores = {role: float(s[layer, head]) for role, s in frame.roles.items()}
    chance = frame.chance
    clear = [r for r, v in scores.items() if v >= CLEAR * chance.get(r, 0.0)]
    if clear:
        role = max(clear, key=scores.get)
        twin = twins(frame).get(role)
        if twin in scores:
            return f"{ROLE_NAMES[twin]} {scores[twin]:.2f} (= {ROLE_NAMES[role]} {scores[role]:.2f})"
        return f"{ROLE_NAMES.get(role, role)} {scores[role]:.2f}"
    best = max(scores, key=scores.get)
    return f"{NO_ROLE} (best {scores[best]:.2f}, uniform {chance.get(best, 0.0):.2f})"


def head_changes(a: Frame, b: Frame) -> pd.DataFrame:
    """How far each head's attention moved from frame a to frame b: the total variation distance between
    its rows (half the sum of absolute differences, 0 same .. 1 disjoint), averaged over the probe
    sentences' word tokens; most changed first, with the role it plays before and after (`role_text`)."""
    per_probe = []
    for pa, pb in zip(a.probes, b.probes):
        rows = slice(1, len(pa.tokens) - 1)
        per_probe.append(0.5 * np.abs(pa.attention[:, :, rows] - pb.attention[:, :, rows]).sum(-1).mean(-1))
    distance = np.mean(per_probe, axis=0)  # (L, H)
    rows = []
    for layer in range(distance.shape[0]):
        for head in range(distance.shape[1]):
            rows.append({"head": HeadId(layer, head).in_words, "layer": layer, "index": head,
                         "distance": float(distance[layer, head]),
                         "before": role_text(a, layer, head), "after": role_text(b, layer, head)})
    return pd.DataFrame(rows).sort_values("distance", ascending=False, kind="stable").reset_index(drop=True)


def prediction_changes(a: Frame, b: Frame) -> pd.DataFrame:
    """For each probe sentence: the masked word, and the top guess with its probability at both steps (a
    snapshot keeps the top 5 guesses only, so the true word's probability is not always known)."""
    rows = []
    for pa, pb in zip(a.probes, b.probes):
        top_a, top_b = (pa.top or [("", 0.0)])[0], (pb.top or [("", 0.0)])[0]
        rows.append({"sentence": pa.text.replace(f" {pa.masked} ", " [MASK] ", 1), "true word": pa.masked,
                     f"guess at {a.step}": top_a[0], f"p(guess) at {a.step}": top_a[1],
                     f"guess at {b.step}": top_b[0], f"p(guess) at {b.step}": top_b[1],
                     "changed": top_a[0] != top_b[0]})
    return pd.DataFrame(rows)
