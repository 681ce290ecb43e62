"""What a probe can and cannot show, in a notebook: one call, `probe`, returning a `Probed` record with the numbers of
the Syntax page's "Probing, carefully" tab (probing/: probes at every hidden state against control tasks, the MLP
beside the linear probe, the online codelength, the random-weights twin, the scalar mix) and, with an amnesic layer,
amnesic probing (is what the probe found used by the model?). The probing is kept on the Lab per corpus and settings,
and each amnesic run per task and layer, so asking again runs nothing."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.figures.probing import (accuracy_by_layer, agreement_removal, codelength_curves, control_curves,
                                         lm_effect, mix_heatmap, probe_removal, selectivity_bars, task_depths)
from bertviz_lab.notebook.grammar import file_changed, treebank_corpus
from bertviz_lab.notebook.lab import Bar, Lab, choice, flag, lab_of, whole
from bertviz_lab.probing.amnesic import MAX_DRAWS, amnesic
from bertviz_lab.probing.records import KINDS, TASK_NAMES, TASKS, Amnesic, Probing, TaskProbes
from bertviz_lab.probing.report import probe_corpus
from bertviz_lab.syntax.report import MAX_SENTENCES, MIN_SENTENCES, STORY_SENTENCES, Corpus, story_corpus

MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class Probed:
    """Careful probing of one model over one corpus: `probing` (probing.records.Probing: per task, the linear and MLP
    probes' accuracy and control accuracy at every hidden state, the random-weights twin's, the codelength, the
    scalar mix; `missing`: the tasks left out, each with its reason) and `amnesic` (task -> probing.records.Amnesic at
    the layer asked for; empty without `amnesic_layer`). `table(task)` is one task's numbers by hidden state."""

    probing: Probing
    amnesic: dict[str, Amnesic]

    @property
    def tasks(self) -> dict[str, TaskProbes]:
        return self.probing.tasks

    @property
    def missing(self) -> dict[str, str]:
        return self.probing.missing

    def _task(self, task: str) -> TaskProbes:
        if task not in self.tasks:
            why = self.missing.get(task, f"it was not asked for (the tasks probed: {', '.join(self.tasks)})")
            raise InputError(f"{task!r} was not probed: {why}")
        return self.tasks[task]

    def table(self, task: str) -> pd.DataFrame:
        """One row per hidden state (0 = the embeddings' output): each probe's accuracy, control accuracy and
        selectivity, the random-weights twin's accuracy and the codelengths in bits, as far as they were measured."""
        t = self._task(task)
        columns = {"linear": t.linear.accuracy, "linear control": t.linear.control,
                   "linear selectivity": t.linear.selectivity}
        if t.mlp is not None:
            columns |= {"MLP": t.mlp.accuracy, "MLP control": t.mlp.control, "MLP selectivity": t.mlp.selectivity}
        if t.random_weights is not None:
            columns["random weights"] = t.random_weights
        if t.codelength is not None:
            c = t.codelength
            columns |= {"codelength (bits)": c.online, "control codelength (bits)": c.control}
            if c.random_weights is not None:
                columns["random-weights codelength (bits)"] = c.random_weights
        if t.mix is not None:
            columns["mix weight"] = t.mix.weights
            columns["mix accuracy, states 0..l"] = t.mix.cumulative
        return pd.DataFrame(columns, index=pd.RangeIndex(len(t.linear.accuracy), name="hidden state"))

    def order(self) -> list[tuple[str, float]]:
        """(task, expected layer) for each task whose scalar mix gains accuracy past hidden state 0, lowest first."""
        placed = [(name, t.mix.expected_layer) for name, t in self.tasks.items()
                  if t.mix is not None and t.mix.expected_layer is not None]
        return sorted(placed, key=lambda pair: pair[1])

    def figures(self, task: str | None = None) -> list[go.Figure]:
        """The page's figures (figures/probing.py): with `task` None, every task's linear accuracy by hidden state,
        the tasks' expected layers and mix weights, then each task's; with a task, its own: accuracy against the
        control task per probe, selectivity, codelength, and the amnesic run at the layer asked for."""
        names = list(self.tasks) if task is None else [self._task(task).task]
        figs = []
        if task is None:
            figs.append(accuracy_by_layer({TASK_NAMES[n]: t.linear.accuracy for n, t in self.tasks.items()},
                                          {TASK_NAMES[n]: t.majority for n, t in self.tasks.items()},
                                          "Linear probe accuracy by hidden state (held-out examples)"))
            mixed = {n: t.mix for n, t in self.tasks.items() if t.mix is not None}
            if mixed:
                labels = [TASK_NAMES[n] for n in mixed]
                expected = np.array([np.nan if m.expected_layer is None else m.expected_layer for m in mixed.values()])
                figs.append(task_depths(labels, expected, np.array([m.centre for m in mixed.values()]),
                                        self.probing.hidden_states, "Expected layer and centre of gravity of each task"))
                figs.append(mix_heatmap(np.stack([m.weights for m in mixed.values()]), labels,
                                        "The scalar mix's weights over hidden states"))
        for name in names:
            figs += _task_figures(self.tasks[name])
            if name in self.amnesic:
                figs += _amnesic_figures(self.amnesic[name])
        return figs

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        for fig in self.figures():
            display(fig)
        display(HTML(f"<p>{html.escape(repr(self)[1:-1])}</p>"))

    def __repr__(self) -> str:
        p = self.probing
        parts = []
        for name, t in p.tasks.items():
            best = int(np.argmax(t.linear.selectivity))
            parts.append(f"{name}: linear {float(np.max(t.linear.accuracy)):.1%} at best, most selective at hidden "
                         f"state {best} ({float(t.linear.selectivity[best]):+.1%})")
        parts += [f"{name} left out: {why}" for name, why in p.missing.items()]
        for name, a in self.amnesic.items():
            parts.append(f"amnesic {name} at hidden state {a.layer}: probe {a.probe_before:.1%} -> {a.probe_after:.1%}"
                         + (f", masked-LM loss {a.loss_before:.3f} -> {a.loss_after:.3f} (random "
                            f"{float(np.mean(a.loss_random)):.3f})" if a.masked else ""))
        return (f"<Probed {p.corpus}: {p.sentences:,} sentences, {p.hidden_states} hidden states. "
                + "; ".join(parts) + ">")


def probe(lab, task: str | None = None, *, treebank: str | os.PathLike | None = None,
          sentences: int = STORY_SENTENCES, seed: int = 0, amnesic_layer: int | None = None, draws: int = 5,
          mlp: bool = True, codelength: bool = True, random_weights: bool = True) -> Probed:
    """What a probe can and cannot show, over the story world's gold trees (`sentences` of them, `seed` picks them)
    or a CoNLL-U `treebank` file; the first three quarters of the sentences train the probes, the rest test them.

    `task` None probes every task: "pos" (a word's part of speech), "dep" (a dependent and its head -> the
    relation), "coref" (a pronoun and a noun of its sentence -> is it the referent; a CoNLL-U file has none) and
    "number" (a noun -> singular or plural). At every hidden state (0 = the embeddings' output): a linear probe and,
    with `mlp`, a small MLP, each against its control task (each word type a random label, fixed per type: Hewitt &
    Liang 2019; selectivity = accuracy - control accuracy); with `random_weights`, the linear probe on a model of the
    same shape with random weights; with `codelength`, the online code of the labels (Voita & Titov 2020); and the
    scalar mix's expected layer and centre of gravity (Tenney et al. 2019). A task without enough examples is left
    out with its reason (`Probed.missing`).

    With `amnesic_layer` (a hidden state, 0 to L): each probed task's linear directions removed there by INLP
    (Ravfogel et al. 2020), then the masked-LM loss and accuracy on the test sentences against `draws` random
    projections of the same rank, and for "number" subject-verb agreement across attractors (Elazar et al. 2021).
    A probe that reads a property shows it can be read, not that the model uses it: the amnesic run asks the second.
    """
    lab = lab_of(lab)
    tasks = TASKS if task is None else (choice(task, TASKS, "task"),)
    seed = whole(seed, 0, MAX_SEED, "seed")
    kinds = KINDS if flag(mlp, "mlp") else ("linear",)
    codelength, random_weights = flag(codelength, "codelength"), flag(random_weights, "random_weights")
    source, corpus = _source(treebank, sentences, seed)
    hidden = lab.config.num_hidden_layers + 1
    layer = None if amnesic_layer is None else whole(amnesic_layer, 0, hidden - 1, "amnesic_layer")
    draws = whole(draws, 1, MAX_DRAWS, "draws")

    def run() -> Probing:
        with Bar() as bar:
            return probe_corpus(lab.model, lab.tokenizer, corpus(), tasks, kinds=kinds, codelength=codelength,
                                random_weights=random_weights, seed=seed, progress=bar.fraction)

    probing = lab.remember(("probe", source, tasks, kinds, codelength, random_weights, seed), run)
    if not probing.tasks:
        raise InputError("; ".join(probing.missing.values()))
    removed = {} if layer is None else {name: _amnesic(lab, source, corpus, name, layer, draws, seed)
                                        for name in probing.tasks}
    return Probed(probing, removed)


def _task_figures(t: TaskProbes) -> list[go.Figure]:
    """One task: accuracy against the control task per probe (and the random-weights twin), selectivity, codelength."""
    name = TASK_NAMES[t.task]
    fits = {f.kind: f for f in (t.linear, t.mlp) if f is not None}
    figs = [control_curves({k: f.accuracy for k, f in fits.items()}, {k: f.control for k, f in fits.items()},
                           t.majority, f"{name}: the task against its control task", t.random_weights),
            selectivity_bars({k: f.selectivity for k, f in fits.items()}, f"{name}: selectivity (task - control)")]
    if t.codelength is not None:
        c = t.codelength
        figs.append(codelength_curves(c.online, c.control, c.random_weights, c.uniform,
                                      f"{name}: online codelength of {c.examples:,} training labels"))
    return figs


def _amnesic_figures(a: Amnesic) -> list[go.Figure]:
    """One amnesic run: the probe after the removal, the masked-LM loss and accuracy, agreement for number."""
    where = f"{TASK_NAMES[a.task]} removed at hidden state {a.layer} ({a.rank} directions)"
    figs = [probe_removal(a.probe_before, a.probe_after, a.probe_random, a.majority, f"A fresh probe: {where}")]
    if a.masked:
        figs += [lm_effect(a.loss_before, a.loss_after, a.loss_random, "masked-LM loss (nats)",
                           f"Masked-LM loss on {a.masked:,} held-out tokens: {where}"),
                 lm_effect(a.accuracy_before, a.accuracy_after, a.accuracy_random, "masked-LM accuracy",
                           f"Masked-LM accuracy: {where}")]
    if a.agreement_before is not None:
        ks = list(a.agreement_pairs)

        def values(found: dict) -> np.ndarray:
            return np.array([np.nan if found.get(k) is None else found[k] for k in ks], dtype=np.float64)

        figs.append(agreement_removal(ks, values(a.agreement_before), values(a.agreement_after),
                                      values(a.agreement_random), [a.agreement_pairs[k] for k in ks],
                                      f"Subject-verb agreement: {where}"))
    return figs


def _amnesic(lab: Lab, source: tuple, corpus, task: str, layer: int, draws: int, seed: int) -> Amnesic:
    def run() -> Amnesic:
        with Bar() as bar:
            return amnesic(lab.model, lab.tokenizer, corpus(), task, layer, draws=draws, seed=seed,
                           progress=lambda f, what: bar.fraction(f, f"amnesic {TASK_NAMES[task]}: {what}"))

    return lab.remember(("amnesic", source, task, layer, draws, seed), run)


def _source(treebank, sentences, seed: int) -> tuple[tuple, object]:
    """(a key for the corpus, a function that reads it): the story world's `sentences`, or the treebank file."""
    if treebank is None:
        count = whole(sentences, MIN_SENTENCES, MAX_SENTENCES, "sentences")
        return ("story", count, seed), lambda: story_corpus(count, seed)
    if sentences != STORY_SENTENCES:
        raise InputError("sentences picks how much of the story world to read; with a treebank every sentence of "
                         "the file is read (the first 2,000 it can read)")
    if not isinstance(treebank, (str, os.PathLike)):
        raise InputError(f"treebank must be the path of a CoNLL-U file, got {type(treebank).__name__}")
    path = os.fspath(treebank)
    read: list[Corpus] = []

    def corpus() -> Corpus:  # read once, when a run first needs it
        if not read:
            read.append(treebank_corpus(path))
        return read[0]

    return ("treebank", path, file_changed(path)), corpus
