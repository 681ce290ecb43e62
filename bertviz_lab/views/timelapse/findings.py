"""What probing over training shows (the "probing" entries of views/timelapse/probing.py, step after step): the arrays
the Time-lapse's three probing charts draw, and one sentence for each, written from the numbers.

- The order of the layers (Tenney et al. 2019): the expected layer of each task at each step, and from which step on
  part of speech sits below the dependency label (the order BERT-base shows), if it ever does.
- Selectivity (Hewitt & Liang 2019): the linear probe's accuracy at its best hidden state minus its control task's.
- The amnesic effect (Elazar et al. 2021): how far agreement falls with noun number's directions removed, against
  random directions of the same rank; a drop no larger than the random one says the model does not use, for
  agreement, what the probe found.
"""

from __future__ import annotations

import numpy as np

from bertviz_lab.probing.records import TASK_NAMES, TASKS
from bertviz_lab.views.timelapse.probing import AMNESIC_TASK, AmnesicAt
from bertviz_lab.views.timelapse.syntax_file import SyntaxHistory

LOWER, UPPER = "pos", "dep"  # Tenney et al.'s order: part of speech below the dependency label


def tasks_shown(history: SyntaxHistory) -> list[str]:
    """The tasks any step probed, in TASKS order."""
    seen = {t for r in history.records if r.probing is not None for t in r.probing.tasks}
    return [t for t in TASKS if t in seen]


def series(history: SyntaxHistory) -> dict:
    """Arrays for the figures over the steps that have probing: steps (S,); tasks (T,); expected, centre,
    selectivity, accuracy, control (S, T) with NaN where a step did not probe a task (or no layer added accuracy:
    expected); layer (S, T) the best hidden state, -1 where none; and the amnesic effect: drop and random_drop (S,),
    pooled agreement before minus after (NaN where none), loss_rise and random_loss_rise (S,), rank (S,) -1 where
    none, amnesic_layer (S,)."""
    records = [r for r in history.records if r.probing is not None]
    tasks = tasks_shown(history)
    out: dict = {"steps": [r.step for r in records], "tasks": tasks}

    def table(name: str, default=np.nan) -> np.ndarray:
        return np.array([[default if t not in r.probing.tasks or getattr(r.probing.tasks[t], name) is None
                          else getattr(r.probing.tasks[t], name) for t in tasks] for r in records],
                        dtype=np.float64).reshape(len(records), len(tasks))

    for name in ("expected_layer", "centre", "selectivity", "accuracy", "control", "majority"):
        out["expected" if name == "expected_layer" else name] = table(name)
    out["layer"] = table("layer", -1).astype(np.int64)
    effects = [_effect(r.probing.amnesic) for r in records]
    for k, name in enumerate(("drop", "random_drop", "loss_rise", "random_loss_rise")):
        out[name] = np.array([e[k] for e in effects], dtype=np.float64)
    out["rank"] = np.array([-1 if r.probing.amnesic is None else r.probing.amnesic.rank for r in records])
    out["amnesic_layer"] = np.array([-1 if r.probing.amnesic is None else r.probing.amnesic.layer for r in records])
    return out


def _difference(a: float | None, b: float | None) -> float:
    return np.nan if a is None or b is None else a - b


def _effect(at: AmnesicAt | None) -> tuple[float, float, float, float]:
    """(agreement drop, random drop, loss rise, random loss rise): NaN where not measured, or nothing was removed (a
    linear probe read the property no better than the commonest label)."""
    if at is None or not at.rank:
        return (np.nan,) * 4
    before = at.pooled("before")
    return (_difference(before, at.pooled("after")), _difference(before, at.pooled("random")),
            _difference(at.loss_after, at.loss_before), _difference(at.loss_random, at.loss_before))


def _from(holds: np.ndarray) -> int | None:
    """The first index from which `holds` is true at every later index; None when the last is false."""
    if not len(holds) or not holds[-1]:
        return None
    below = np.flatnonzero(~holds)
    return int(below[-1]) + 1 if len(below) else 0


def _steps(steps: list[int]) -> str:
    return ", ".join(f"{s:,}" for s in steps)


def order_sentence(history: SyntaxHistory) -> str:
    """The tasks' order by expected layer at the last step, and from which step part of speech sits below the
    dependency label (Tenney et al.'s order), if it does."""
    data = series(history)
    if not data["steps"]:
        return ""
    steps, tasks, expected = data["steps"], data["tasks"], data["expected"]
    last = sorted((expected[-1, k], t) for k, t in enumerate(tasks) if not np.isnan(expected[-1, k]))
    none = [TASK_NAMES[t] for k, t in enumerate(tasks) if np.isnan(expected[-1, k])]
    beyond = "no hidden state adds accuracy beyond the embeddings' output"
    text = f"At step {steps[-1]:,} " + (
        f"the expected layers run {' < '.join(f'{TASK_NAMES[t]} {e:.2f}' for e, t in last)}" if len(last) > 1 else
        f"{TASK_NAMES[last[0][1]]}'s expected layer is {last[0][0]:.2f}" if last else f"no task has an expected "
                                                                                      f"layer: {beyond}")
    if none and last:
        text += f"; {_names(none)} {'has' if len(none) == 1 else 'have'} none ({beyond})"
    text += "."
    if LOWER not in tasks or UPPER not in tasks:
        return text
    low, high = expected[:, tasks.index(LOWER)], expected[:, tasks.index(UPPER)]
    both = ~np.isnan(low) & ~np.isnan(high)
    holds = both & (np.nan_to_num(low) < np.nan_to_num(high))
    first, lower, upper = _from(holds), TASK_NAMES[LOWER], TASK_NAMES[UPPER]
    earlier = [s for s, h in zip(steps, holds) if h]
    if first is not None:
        since = "at every measured step" if first == 0 else f"from step **{steps[first]:,}** on"
        return (f"{text} {lower.capitalize()} sits below {upper} (the order Tenney et al. found in BERT) {since} "
                f"({low[first]:.2f} against {high[first]:.2f} at step {steps[first]:,}).")
    without = [name for name, e in ((lower, low[-1]), (upper, high[-1])) if np.isnan(e)]
    why = (f"{lower} is not below {upper}" if both[-1] else
           f"the order of {lower} and {upper} cannot be read, as {_names(without)} "
           f"{'has' if len(without) == 1 else 'have'} no expected layer")
    return (f"{text} At step {steps[-1]:,} {why}: Tenney et al.'s order "
            + (f"held at step{'s' * (len(earlier) > 1)} {_steps(earlier)} only." if earlier else
               "has not appeared at any measured step."))


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def selectivity_sentence(history: SyntaxHistory) -> str:
    """Which task the linear probe is most selective on at the last step, and how each task's selectivity moved."""
    data = series(history)
    if not data["steps"]:
        return ""
    steps, tasks, sel = data["steps"], data["tasks"], data["selectivity"]
    now = [(sel[-1, k], k) for k in range(len(tasks)) if not np.isnan(sel[-1, k])]
    if not now:
        return f"At step {steps[-1]:,} no task was probed."
    best, k = max(now)
    text = (f"At step {steps[-1]:,} the linear probe is most selective on {TASK_NAMES[tasks[k]]}: "
            f"{data['accuracy'][-1, k]:.2f} against its control task's {data['control'][-1, k]:.2f} at hidden state "
            f"{data['layer'][-1, k]} (selectivity {best:.2f}).")
    moves = [f"{TASK_NAMES[t]} {sel[~np.isnan(sel[:, j]), j][0]:.2f} → {sel[-1, j]:.2f}"
             for j, t in enumerate(tasks) if not np.isnan(sel[-1, j])]
    if len(steps) > 1:
        text += f" From step {steps[0]:,} to {steps[-1]:,}: {', '.join(moves)}."
    flat = [TASK_NAMES[tasks[j]] for s, j in now if s <= 0]
    if flat:
        text += (f" Not selective on {_names(flat)}: the control task, which only word types can give, scores as "
                 "well or better, so that accuracy says nothing about the vectors.")
    return text


def _moves(drop: float, what: str, s: str) -> str:
    """"lowers `what` by 5.0 points" ("lower" where `s` is ""), "raises ...", or "leaves `what` as it was"."""
    if not drop:
        return f"leave{s} {what} as it was"
    return f"{'lower' if drop > 0 else 'raise'}{s} {what} by {abs(drop) * 100:.1f} points"


def amnesic_sentence(history: SyntaxHistory) -> str:
    """How far agreement falls with noun number removed at the last step, against random directions of the same
    rank, and at which steps the drop exceeds the random one, if any."""
    data = series(history)
    shown = ~np.isnan(data["drop"]) & ~np.isnan(data["random_drop"])
    bare = [r.probing.amnesic for r in history.records if r.probing and r.probing.amnesic and not r.probing.amnesic.rank]
    nothing = ("" if not bare else f"a linear probe read {TASK_NAMES[bare[-1].task]} at hidden state {bare[-1].layer} "
               "no better than the commonest label, so there was nothing to remove")
    if not shown.any():
        probed = [r for r in history.records if r.probing is not None]
        if bare:
            return f"At no measured step could anything be removed: {nothing}."
        return (f"At step {probed[-1].step:,} {TASK_NAMES[AMNESIC_TASK]} was not removed: {probed[-1].probing.note}."
                if probed and probed[-1].probing.note else "")
    steps = [s for s, k in zip(data["steps"], shown) if k]
    drop, random = data["drop"][shown], data["random_drop"][shown]
    last = [r for r in history.records if r.step == steps[-1]][0].probing.amnesic
    text = (f"At step {steps[-1]:,}, removing {TASK_NAMES[last.task]}'s {last.rank} direction"
            f"{'s' * (last.rank != 1)} at hidden state {last.layer} {_moves(drop[-1], 'agreement', 's')} (from "
            f"{last.pooled('before'):.0%} to {last.pooled('after'):.0%}); {last.rank} random directions "
            f"{_moves(random[-1], 'it', '')} (mean of {last.draws}).")
    above = drop > random
    if above.all():
        verdict = ("The drop exceeds the random one at every measured step" if len(steps) > 1 else
                   "The drop exceeds the random one")
    elif above.any():
        verdict = (f"The drop exceeds the random one at step{'s' * int(above.sum() > 1)} "
                   f"{_steps([s for s, a in zip(steps, above) if a])} of the {len(steps)} measured")
    else:
        verdict = ("The drop never exceeds the random one: by this measure the model does not use, for agreement, the "
                   "number the probe finds")
    pairs = last.pairs_scored
    grain = f" ({pairs} pairs: one pair is {100 / pairs:.1f} points)" if pairs else ""
    zero = [r.step for r in history.records if r.probing and r.probing.amnesic and not r.probing.amnesic.rank]
    late = f" At step{'s' * (len(zero) > 1)} {_steps(zero)} {nothing}." if zero and zero[-1] > steps[-1] else ""
    return f"{text} {verdict}{grain}.{late}"
