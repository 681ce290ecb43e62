"""What the "Probing, carefully" tab says of an amnesic probe (probing/amnesic.py's `Amnesic`, Elazar et al. 2021): one
task's linear information removed from one hidden state by iterative nullspace projection, against random projections
of the same rank. Two results, side by side: whether a fresh probe still finds it (the removal worked or not), and
whether the model's masked-word guesses and agreement moved more than the random projections move them (used, or found
but not shown to be used). Each sentence turns around when its numbers do.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bertviz_lab.probing.records import Amnesic
from bertviz_lab.views.syntax.analysis import layer_label, points
from bertviz_lab.views.syntax.probing import name, share

REMOVED_WITHIN = 0.05  # a fresh probe within 5 points of the majority: the linear information counts as removed
NO_MLM = ("This model has no masked-language-model head, so its guesses cannot be scored with the property "
          "removed: what a probe finds here is found, and not tested for use.")


def removal_sentence(a: Amnesic) -> str:
    """Whether INLP removed the task's linear information at the layer: a fresh probe near the majority."""
    if a.rank == 0:
        return (f"A linear probe reads {name(a.task)} at hidden state {layer_label(a.layer)} no better than always "
                f"guessing the commonest label ({share(a.probe_before)} against {share(a.majority)}), so there was "
                "nothing to remove.")
    said = (f"Iterative nullspace projection took {a.iterations} round{'s' * (a.iterations != 1)} to remove "
            f"{a.rank} direction{'s' * (a.rank != 1)} at hidden state {layer_label(a.layer)}. A fresh linear probe "
            f"for {name(a.task)} there falls from {share(a.probe_before)} to {share(a.probe_after)}; always guessing "
            f"the commonest label gets {share(a.majority)}")
    if a.probe_after - a.majority <= REMOVED_WITHIN:
        said += ": what a linear probe can read of it is gone."
    else:
        said += (f": still {points(a.probe_after - a.majority)} above it, so part of it is left and the effects "
                 "below are of a partial removal.")
    return said + (f" Removing {a.rank} random direction{'s' * (a.rank != 1)} instead leaves the probe at "
                   f"{share(a.probe_random)} (the mean of {a.draws} draws).")


def _moved(after: float, before: float, random: np.ndarray, worse_is_higher: bool) -> str:
    """'beyond' when the removal moved the measure further (the worse way) than every random draw did, else 'within'."""
    random = np.asarray(random, dtype=np.float64)
    if len(random) == 0:
        return "within"
    beyond = after > random.max() if worse_is_higher else after < random.min()
    return "beyond" if beyond and (after - before) * (1 if worse_is_higher else -1) > 0 else "within"


def use_sentences(a: Amnesic) -> list[str]:
    """The masked-LM loss and accuracy before, after and after random projections, and the verdict: used (moved
    beyond every random draw), or found but not shown to be used."""
    if a.masked == 0:
        return [NO_MLM]
    if a.rank == 0:
        return [f"Nothing was removed, so the masked-LM loss stays {a.loss_before:.3f} nats on {a.masked:,} held-out "
                "tokens: whether the model uses this property cannot be tested where no probe finds it."]
    lo, hi = float(np.min(a.loss_random)), float(np.max(a.loss_random))
    low, high = float(np.min(a.accuracy_random)), float(np.max(a.accuracy_random))
    said = (f"On {a.masked:,} masked held-out tokens the masked-LM loss is {a.loss_before:.3f} nats with nothing "
            f"removed and {a.loss_after:.3f} with {name(a.task)} removed; removing random directions of the same "
            f"rank gives {float(np.mean(a.loss_random)):.3f} on average ({lo:.3f} to {hi:.3f} over {a.draws} draws). "
            f"Top-1 accuracy: {a.accuracy_before:.1%}, {a.accuracy_after:.1%} and "
            f"{float(np.mean(a.accuracy_random)):.1%} ({low:.1%} to {high:.1%}).")
    loss = _moved(a.loss_after, a.loss_before, a.loss_random, True)
    accuracy = _moved(a.accuracy_after, a.accuracy_before, a.accuracy_random, False)
    if loss == "beyond" or accuracy == "beyond":
        what = " and ".join(w for w, m in (("the loss", loss), ("the accuracy", accuracy)) if m == "beyond")
        verdict = (f"The removal moves {what} further than each of the {a.draws} random draws: the model's guesses "
                   f"lean on what hidden state {layer_label(a.layer)} holds of {name(a.task)}, found and used.")
    else:
        verdict = ("The removal moves the guesses no more than random directions do: found by a probe, but not "
                   "shown to be used for guessing words.")
    return [said, verdict]


def notes(a: Amnesic) -> list[str]:
    """The amnesic probe's notes as sentences, less the ones the sentences above already say (no masked-LM head,
    nothing to remove)."""
    said = ("masked-language-model head", "nothing to remove")
    return [f"{n[:1].upper()}{n[1:]}." for n in a.note.split("; ") if n and not any(s in n for s in said)]


def agreement_rows(a: Amnesic) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(attractor counts, before, after, random (NaN: no pairs), pairs) for the chart."""
    ks = sorted(a.agreement_pairs or {})

    def values(d):
        return np.array([np.nan if (d or {}).get(k) is None else d[k] for k in ks], dtype=np.float64)

    return ks, values(a.agreement_before), values(a.agreement_after), values(a.agreement_random), \
        [int(a.agreement_pairs[k]) for k in ks]


def standard_error(pairs: int) -> float:
    """The largest standard error a share of `pairs` pairs can have (at 50%): 0.5 / sqrt(pairs)."""
    return 0.5 / math.sqrt(pairs)


def agreement_sentence(a: Amnesic) -> str:
    """Agreement by attractors before and after, against random projections: a fall below their mean by more than
    twice `standard_error` of the pairs scored counts, else found but not shown to be used for agreement."""
    ks, before, after, random, pairs = agreement_rows(a)
    scored = [(k, b, f, r, n) for k, b, f, r, n in zip(ks, before, after, random, pairs) if n and np.isfinite(b)]
    if not scored:
        return "No agreement pair could be scored with this vocabulary."
    if a.rank == 0:
        return "Nothing was removed, so agreement stays as it was: " + "; ".join(
            f"{share(b)} with {k} attractor{'' if k == 1 else 's'}" for k, b, _, _, _ in scored) + "."
    parts = [f"{k} attractor{'' if k == 1 else 's'}: {share(b)} → {share(f)} (random {share(r)})"
             for k, b, f, r, _ in scored]
    said = "Agreement, right form above the wrong one, before → after removing number: " + "; ".join(parts) + "."
    falls = [(k, r - f, n) for k, b, f, r, n in scored if r - f > 2 * standard_error(n)]
    if falls:
        k, fall, n = max(falls, key=lambda x: x[1])
        return said + (f" With {k} attractor{'' if k == 1 else 's'} it falls {points(fall)} below the random "
                       f"projections' mean, more than twice the standard error of {n} pairs: the model uses number "
                       "for agreement at this depth.")
    return said + (" Nowhere does it fall below the random projections' mean by more than twice the standard error "
                   "of its pairs: number is found here, but not shown to be used for agreement.")


def amnesic_table(a: Amnesic) -> pd.DataFrame:
    """The amnesic probe's numbers, one row a measure (the handout's CSV)."""
    rows = [("probe accuracy", a.probe_before, a.probe_after, a.probe_random, a.majority)]
    if a.masked:
        rows += [("masked-LM loss (nats)", a.loss_before, a.loss_after, float(np.mean(a.loss_random)), None),
                 ("masked-LM accuracy", a.accuracy_before, a.accuracy_after, float(np.mean(a.accuracy_random)), None)]
    ks, before, after, random, pairs = agreement_rows(a)
    rows += [(f"agreement, {k} attractors ({n} pairs)", b, f, r, 0.5)
             for k, b, f, r, n in zip(ks, before, after, random, pairs)]
    return pd.DataFrame(rows, columns=["measure", "before", "task removed", "random removed (mean)", "baseline"])
