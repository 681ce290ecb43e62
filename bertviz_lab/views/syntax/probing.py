"""What the Syntax page's "Probing, carefully" tab shows: one careful probing of a corpus per model (probing/report.py's
`Probing`) read as tables and as sentences written from their numbers (the amnesic probe's: views/syntax/amnesic.py).

Every sentence says what was measured and turns around when the numbers do: which task a layer holds first (Tenney
et al. 2019), which probe is the more selective (Hewitt & Liang 2019), how short the labels' code is against its
baselines (Voita & Titov 2020), whether the removal worked and whether the model's guesses moved more than random
projections move them (Elazar et al. 2021). None claims more than a probe can show; LIMITS says what it cannot.
Hidden states are counted as on the rest of the page: 0 is the embeddings' output, l the output of encoder layer l.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bertviz_lab.probing.records import TASK_NAMES, Probing, TaskProbes
from bertviz_lab.views.syntax.analysis import layer_label, percent, points

TENNEY = ("pos", "dep", "coref")  # the order Tenney et al. found in BERT-base (part of speech, then syntax, then coreference)
LEVEL = 0.1  # expected layers closer than this are not told apart
MEMORISES = 0.1  # control accuracy this far above the majority: the probe learns word types by heart
BEATS = 0.02  # a probe's best accuracy this far above the majority counts as reading something
INTRO = (
    "A **probe** is a small classifier trained to read a property (a word's part of speech, the label of its "
    "dependency) from the model's vectors at one hidden state and tested on sentences it never saw. Its accuracy "
    "says the property can be read there, with three cautions the field has learned since 2019:\n"
    "1. **A strong probe can learn the task itself** (Hewitt & Liang 2019): the control task gives each word type a "
    "random label, which only memorising can score on; *selectivity* is task accuracy minus control accuracy.\n"
    "2. **Found is not used** (Elazar et al. 2021): removing what a probe reads, and seeing whether the model's own "
    "guesses suffer more than after removing random directions, is a separate test.\n"
    "3. **Accuracy hides how easily it is read** (Voita & Titov 2020): the *codelength* counts the bits needed to "
    "send the labels with the probe's help; an easy property compresses well.")
LIMITS = (
    "A probe's accuracy is not the model's use: a property can be read from vectors that nothing downstream reads. "
    "Removing it at one hidden state tests linear information only, at that depth only: a non-linear trace of it, or "
    "a copy at another layer, survives, so an unmoved masked-LM loss does not prove the model ignores the property. "
    "The control task, the random-weights model and random projections are baselines that tell an effect from "
    "chance and from the probe's own strength, not proof of what the model computes.")
NO_TREES = ("Probing needs gold labels, and your own sentences have none: pick the story world or a treebank above.")


def name(task: str) -> str:
    return TASK_NAMES.get(task, task)


def _names(tasks: list[str]) -> str:
    named = [name(t) for t in tasks]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def share(value: float) -> str:
    """A share with one decimal near the ends (99.6% is not 100%), whole otherwise."""
    return f"{value:.1%}" if value > 0.99 or value < 0.01 else percent(value)


def missing_sentences(probing: Probing) -> list[str]:
    """Each task that could not be probed, once, as the sentence its InputError gave."""
    said = dict.fromkeys(f"Not probed: {s}{'' if s.endswith('.') else '.'}" for s in probing.missing.values())
    return list(said)


# --- 1 Layer by layer (Tenney et al. 2019) -----------------------------------------------------------------------
def accuracy_curves(probing: Probing) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(task name -> the linear probe's accuracy (L + 1,), task name -> majority) for the chart."""
    return ({name(t): p.linear.accuracy for t, p in probing.tasks.items()},
            {name(t): p.majority for t, p in probing.tasks.items()})


def placed(expected: float | None, states: int) -> float | None:
    """The expected layer where it says a depth (inside 0..L), else None: accuracy that falls as often as it rises
    with depth gives a weighted mean outside the hidden states, which places the task nowhere."""
    return expected if expected is not None and 0 <= expected <= states - 1 else None


def depths(probing: Probing) -> tuple[list[str], list[float | None], np.ndarray]:
    """(task names, expected layers (None: none, or outside 0..L), centres of gravity) of the tasks with a mix."""
    mixed = [(t, p.mix) for t, p in probing.tasks.items() if p.mix is not None]
    return ([name(t) for t, _ in mixed], [placed(m.expected_layer, probing.hidden_states) for _, m in mixed],
            np.array([m.centre for _, m in mixed], dtype=np.float64))


def mix_weights(probing: Probing) -> tuple[list[str], np.ndarray]:
    """(task names, (T, L + 1) the mix weights)."""
    mixed = [(t, p.mix) for t, p in probing.tasks.items() if p.mix is not None]
    return [name(t) for t, _ in mixed], np.array([m.weights for _, m in mixed], dtype=np.float64).reshape(
        len(mixed), probing.hidden_states)


def layer_table(probing: Probing) -> pd.DataFrame:
    """One row per task and hidden state: every number the tab draws (the handout's syntax_probing.csv)."""
    rows = []
    for task, p in probing.tasks.items():
        for layer in range(probing.hidden_states):
            row = {"task": name(task), "hidden state": layer, "majority": p.majority,
                   "linear accuracy": p.linear.accuracy[layer], "linear control": p.linear.control[layer],
                   "linear selectivity": p.linear.selectivity[layer]}
            if p.mlp is not None:
                row.update({"MLP accuracy": p.mlp.accuracy[layer], "MLP control": p.mlp.control[layer],
                            "MLP selectivity": p.mlp.selectivity[layer]})
            if p.random_weights is not None:
                row["linear accuracy, random weights"] = p.random_weights[layer]
            if p.mix is not None:
                row["mix weight"] = p.mix.weights[layer]
            if p.codelength is not None:
                cl = p.codelength
                row.update({"codelength (kbits)": cl.online[layer] / 1000,
                            "control codelength (kbits)": cl.control[layer] / 1000,
                            "compression": cl.compression(cl.online)[layer]})
                if cl.random_weights is not None:
                    row["random-weights codelength (kbits)"] = cl.random_weights[layer] / 1000
            rows.append(row)
    return pd.DataFrame(rows)


def task_sentence(task: str, p: TaskProbes) -> str:
    """One task's best hidden state against its majority baseline."""
    best = int(np.argmax(p.linear.accuracy))
    top = float(p.linear.accuracy[best])
    said = (f"{name(task)[:1].upper()}{name(task)[1:]} ({p.train:,} training and {p.test:,} test examples, "
            f"{len(p.classes)} labels): the linear probe reads it best at hidden state {layer_label(best)}, "
            f"{share(top)} right, against {share(p.majority)} for always guessing the commonest label")
    if top - p.majority < BEATS:
        return said + ": no hidden state beats that baseline by much, so where this task sits cannot be read here."
    if p.random_weights is not None and float(np.max(p.random_weights)) >= top - BEATS:
        return said + (f". A model of the same shape with random weights is read as well ({share(float(np.max(p.random_weights)))}"
                       "): the words themselves (which they are, where they stand) give the answer away, so this "
                       "accuracy is no evidence of what training put in the vectors.")
    return said + "."


def order_sentence(probing: Probing) -> str:
    """The tasks in order of expected layer (Tenney et al.'s reading), against the order they found in BERT-base,
    and which tasks have no expected layer."""
    names, expected, centre = depths(probing)
    mixes = {t: p.mix for t, p in probing.tasks.items() if p.mix is not None}
    ranked = sorted([(e, t) for t, e in zip(mixes, expected) if e is not None])
    none = [t for t, m in mixes.items() if m.expected_layer is None]
    outside = [t for t, m in mixes.items() if m.expected_layer is not None and t not in {t for _, t in ranked}]
    said = ""
    if ranked:
        said = ("By expected layer (the depth at which adding hidden states to the mix adds accuracy, on average), "
                + ("the one task placed is " if len(ranked) == 1 else "the tasks come in this order: ")
                + ", ".join(f"{name(t)} ({e:.2f})" for e, t in ranked) + ".")
        said += _tenney(dict((t, e) for e, t in ranked))
    if centre.size:
        by_centre = sorted(zip(centre.tolist(), names))
        said += (" By centre of gravity (where the full mix puts its weight): "
                 + ", ".join(f"{n} ({c:.2f})" for c, n in by_centre) + ".")
    if none:
        said += (f" {_names(none)[:1].upper()}{_names(none)[1:]} {'has' if len(none) == 1 else 'have'} no expected "
                 "layer: a mix over deeper hidden states is no more accurate than one over the embeddings alone.")
    for t in outside:
        said += (f" The expected layer of {name(t)} works out at {mixes[t].expected_layer:.2f}, outside hidden states "
                 f"0 to {probing.hidden_states - 1}: its accuracy falls with depth about as much as it rises, so it "
                 "places the task nowhere.")
    return said.strip() or "No task was probed with a scalar mix."


def _tenney(expected: dict[str, float]) -> str:
    """The order Tenney et al. found, held against these expected layers (pairs within LEVEL not told apart)."""
    known = [t for t in TENNEY if t in expected]
    if len(known) < 2:
        return ""
    pairs = list(zip(known, known[1:]))
    level = [(a, b) for a, b in pairs if abs(expected[a] - expected[b]) < LEVEL]
    reversed_ = [(a, b) for a, b in pairs if expected[b] <= expected[a] - LEVEL]
    said = f" Tenney et al. found {' before '.join(name(t) for t in known)} in BERT-base"
    if not level and not reversed_:
        return said + "; this model holds them in the same order."
    parts = [f"{name(b)} comes before {name(a)}" for a, b in reversed_]
    parts += [f"{name(a)} and {name(b)} are less than {LEVEL} of a layer apart" for a, b in level]
    return said + "; here " + "; ".join(parts) + "."


# --- 2 Control tasks (Hewitt & Liang 2019) -----------------------------------------------------------------------
def control_table(p: TaskProbes) -> pd.DataFrame:
    table = pd.DataFrame({"hidden state": range(len(p.linear.accuracy)), "linear accuracy": p.linear.accuracy,
                          "linear control": p.linear.control, "linear selectivity": p.linear.selectivity})
    if p.mlp is not None:
        table["MLP accuracy"], table["MLP control"] = p.mlp.accuracy, p.mlp.control
        table["MLP selectivity"] = p.mlp.selectivity
    return table


def selectivity_sentences(task: str, p: TaskProbes) -> list[str]:
    """Which probe is the more selective, where and by how much; and what the more memorising probe's control
    accuracy says (high accuracy with low selectivity is the probe learning the task)."""
    lin = p.linear.selectivity
    best = int(np.argmax(lin))
    if p.mlp is None:
        return [f"Only the linear probe was fitted: its selectivity on {name(task)} peaks at {points(lin[best])} at "
                f"hidden state {layer_label(best)}."]
    mlp = p.mlp.selectivity
    ahead = int(np.sum(lin > mlp)), int(np.sum(mlp > lin))
    if ahead[0] == ahead[1]:
        said = (f"On {name(task)}, neither probe is the more selective: the linear one is ahead at {ahead[0]} hidden "
                f"state{'s' * (ahead[0] != 1)} and the MLP at {ahead[1]} of {len(lin)}.")
    else:
        winner, loser = ("linear", "MLP") if ahead[0] > ahead[1] else ("MLP", "linear")
        gap = (lin - mlp) * (1 if winner == "linear" else -1)  # > 0 where the winner is ahead
        most = int(np.argmax(gap))
        said = (f"On {name(task)}, the {winner} probe is the more selective, at {max(ahead)} of {len(lin)} hidden "
                f"states; the widest gap is {points(gap[most])} at hidden state {layer_label(most)} (linear "
                f"{points(lin[most])}, MLP {points(mlp[most])}): there the {loser} probe owes more of its accuracy "
                "to what it learns by itself.")
    return [said, _memorising(p)]


def _memorising(p: TaskProbes) -> str:
    """The probe and hidden state with the highest control accuracy, read: what it says about the probe."""
    fits = [f for f in (p.linear, p.mlp) if f is not None]
    fit, layer = max(((f, int(np.argmax(f.control))) for f in fits), key=lambda fl: fl[0].control[fl[1]])
    probe = "linear" if fit.kind == "linear" else "MLP"
    acc, ctl = float(fit.accuracy[layer]), float(fit.control[layer])
    said = (f"The {probe} probe at hidden state {layer_label(layer)} is right {share(acc)} of the time on the task and "
            f"{share(ctl)} on the control task, where only memorising word types can help "
            f"(selectivity {points(acc - ctl)}).")
    if ctl - p.majority >= MEMORISES:
        return said + (f" Scoring {points(ctl - p.majority)} above the commonest label ({share(p.majority)}) on labels "
                       "that are random per word type, the probe learns by heart: part of its accuracy on the task "
                       "may be its own learning, not the vectors'. That is what a high accuracy with a low "
                       "selectivity means.")
    return said + (f" That is within {points(MEMORISES)} of the commonest label's {share(p.majority)}: these probes "
                   "learn little by heart here, so their accuracy on the task is mostly what the vectors bring.")


# --- 3 Description length (Voita & Titov 2020) -------------------------------------------------------------------
def codelength_table(p: TaskProbes) -> pd.DataFrame:
    cl = p.codelength
    table = pd.DataFrame({"hidden state": range(len(cl.online)), "codelength (kbits)": cl.online / 1000,
                          "compression": cl.compression(cl.online), "control (kbits)": cl.control / 1000,
                          "control compression": cl.compression(cl.control)})
    if cl.random_weights is not None:
        table["random weights (kbits)"] = cl.random_weights / 1000
        table["random-weights compression"] = cl.compression(cl.random_weights)
    return table


def codelength_sentence(task: str, p: TaskProbes) -> str:
    """The shortest code's hidden state, its compression, and the control task and random-weights model there."""
    cl = p.codelength
    best = int(np.argmin(cl.online))
    bits, ctl = float(cl.online[best]), float(cl.control[best])
    said = (f"Sending the {cl.examples:,} training labels of {name(task)} with the probe's help takes "
            f"{bits / 1000:.2f} kbits at hidden state {layer_label(best)}, the shortest of any: "
            f"{cl.uniform / bits:.1f} times shorter than with no vector ({cl.uniform / 1000:.2f} kbits).")
    if bits < ctl:
        said += f" Its control task needs {ctl / 1000:.2f} kbits there, {ctl / bits:.1f} times as many"
    else:
        said += (f" Its control task needs {ctl / 1000:.2f} kbits there, no more than the task: these vectors make "
                 "the labels no easier to read than labels fixed per word type")
    if cl.random_weights is not None:
        rnd = float(cl.random_weights[best])
        said += (f"; the random-weights model's vectors need {rnd / 1000:.2f} kbits "
                 + (f"({rnd / bits:.1f} times as many)." if rnd > bits else
                    "(no more: training made the labels no easier to read here)."))
    else:
        said += "."
    if p.random_weights is not None:
        said += (f" Accuracy alone says less: the linear probe is right {share(float(p.linear.accuracy[best]))} there "
                 f"on this model and {share(float(p.random_weights[best]))} on random weights.")
    return said
