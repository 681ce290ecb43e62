"""A time-lapse frame: one snapshot record (pretrain/snapshots.py) checked and typed, as the Time-lapse page reads it.

A snapshot record is data from a file: `Frame.of` turns its lists into numpy arrays, and gives None for a record
whose shapes do not add up (the page leaves it out, with a note). views/timelapse/history.py reads the frames of a run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # holds arrays: compared and hashed as the object it is
class ProbeAt:
    """One probe sentence at one step: every head's attention on it and the model's guesses at its [MASK]."""
    text: str
    tokens: list[str]  # T tokens, [CLS] and [SEP] included
    attention: np.ndarray  # (L, H, T, T) every head's weights; each row sums to 1
    masked: str  # the word the snapshot masked ("" for a sentence of the learner's: its true word is not known)
    top: list[tuple[str, float]]  # the best guesses at [MASK] with their probabilities, best first ([] without one)


@dataclass(frozen=True, eq=False)
class Frame:
    """What the model made of the probe set at one checkpoint step."""
    step: int
    layers: int  # L
    heads: int  # H
    probes: list[ProbeAt]
    roles: dict[str, np.ndarray]  # role -> (L, H): each head's score for it
    chance: dict[str, float]  # role -> what attention spread evenly over the tokens scores
    words: list[str]  # the word map's words (none: no map) ...
    groups: list[str]  # ... the group of each ...
    xy: np.ndarray  # (W, 2) ... and their token embeddings on the first two principal components
    explained: float  # the share of those embeddings' variance the two components hold

    @classmethod
    def of(cls, record: dict) -> Frame | None:
        """The frame of a snapshot record, or None when its shapes do not add up."""
        try:
            L, H = int(record["layers"]), int(record["heads"])
            probes = []
            for p in record["probes"]:
                tokens = [str(t) for t in p["tokens"]]
                attention = np.asarray(p["attention"], dtype=np.float64)
                if attention.shape != (L, H, len(tokens), len(tokens)) or not np.isfinite(attention).all():
                    return None
                top = [(str(t), float(v)) for t, v in p.get("top", [])]
                probes.append(ProbeAt(str(p["text"]), tokens, attention, str(p.get("masked", "")), top))
            roles = {str(r): np.asarray(s, dtype=np.float64) for r, s in record["roles"].items()}
            if not probes or any(s.shape != (L, H) for s in roles.values()):
                return None
            words = record.get("words") or {}
            xy = np.asarray(words.get("xy", []), dtype=np.float64).reshape(-1, 2)
            names, groups = [str(w) for w in words.get("words", [])], [str(g) for g in words.get("groups", [])]
            if not (len(names) == len(groups) == len(xy)):
                names, groups, xy = [], [], np.zeros((0, 2))
            return cls(int(record["step"]), L, H, probes, roles, _chance(record.get("chance"), roles, probes),
                       names, groups, xy, float(words.get("explained", 0.0)))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.probes]


def _chance(recorded, roles: dict, probes: list[ProbeAt]) -> dict[str, float]:
    """Each role's score under uniform attention: as the snapshot recorded it, else 1/T averaged over the
    sentences (exact for the positional roles; close for a linked role whose words are one token each)."""
    fallback = float(np.mean([1 / len(p.tokens) for p in probes]))
    recorded = recorded if isinstance(recorded, dict) else {}
    out = {}
    for role in roles:
        value = recorded.get(role)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1
        out[role] = float(value) if ok else fallback
    return out
