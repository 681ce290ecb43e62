"""Syntax across a corpus, as the Syntax page draws it: which heads follow which dependency relation, the structural
probe layer by layer, and subject-verb agreement across attractors. One analysis (syntax/report.py, tens of
seconds to minutes) serves all three figures; it is kept on the Lab per corpus and seed, so asking for another
figure or another relation runs nothing again."""

from __future__ import annotations

import os

import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.figures import syntax as fsy
from bertviz_lab.notebook.lab import Bar, Lab, choice, flag, lab_of, whole
from bertviz_lab.syntax.relations import DIRECTIONS
from bertviz_lab.syntax.report import (MAX_SENTENCES, MIN_SENTENCES, STORY_SENTENCES, Corpus, SyntaxReport, analyse,
                                       story_corpus)
from bertviz_lab.syntax.treebank import read_treebank
from bertviz_lab.views.syntax import analysis as vs

KINDS = ("relations", "probe", "agreement")
MAX_SEED = 2**31 - 1


def syntax(lab, *, kind: str = "relations", sentences: int = STORY_SENTENCES, seed: int = 0,
           treebank: str | os.PathLike | None = None, control: bool = True, relation: str | None = None,
           direction: int = 0) -> go.Figure:
    """Evidence over many sentences rather than one, each number beside a baseline that needs no model.

    The corpus: `sentences` of the story world, written with their dependency trees (`seed` picks them, the
    agreement pairs and the probes' start), or a CoNLL-U `treebank` file (every sentence the model can read, at
    most 2,000). Heads and layers count from 0; layer 0 of the probe is the embeddings' output.

    kind "relations" (Clark et al. 2019): each head read as a parser for one `relation` (default: nsubj where the
    corpus has it): `direction` 0, dependent → head (the word the dependent attends to most is taken as its
    head), or 1, head → dependent; each cell a head's accuracy, the title the best fixed-offset baseline. Under a
    few dozen dependents the best of all heads scores high by luck alone.
    kind "probe" (Hewitt & Manning 2019): a linear map per layer trained so that distances between word vectors
    match distances in the gold tree, tested on held-out sentences: UUAS, distance Spearman and root accuracy,
    with the linear baseline and, with `control`, the same probe on random weights of the same shape (what a probe
    finds with no training at all). A probe that finds a tree shows the tree can be read from the vectors with a
    map trained for it, not that the model uses it.
    kind "agreement" (Linzen et al. 2016): with the verb masked, how often the model scores the right form above
    the wrong one, by the number of attractors (nouns of the other number in between); chance is 50%.
    """
    lab = lab_of(lab)
    kind = choice(kind, KINDS, "kind")
    report = _report(lab, sentences, seed, treebank, flag(control, "control"))
    if kind == "probe":
        table = vs.probe_table(report)
        curves = {name: table[column].to_numpy() for column, name in vs.PROBE_CURVES.items()}
        return fsy.probe_curves(curves, report.probe.linear_uuas, "The structural probe, layer by layer "
                                 "(held-out sentences)", None if report.control is None else
                                 table["UUAS, random weights"].to_numpy())
    if kind == "agreement":
        if report.agreement is None:
            raise InputError(f"{vs.NO_MLM[:-1]}: {lab.no_mlm()}." if not lab.model.has_mlm else
                             f"agreement could not be scored here: {report.agreement_note}")
        return fsy.agreement_bars(*vs.accuracies(report.agreement), "Right form scored higher, by number of "
                                                                     "attractors")
    rel = report.relations
    relation = vs.default_relation(rel.relations) if relation is None else choice(relation, rel.relations, "relation")
    direction = whole(direction, 0, len(DIRECTIONS) - 1, "direction")
    return fsy.accuracy_heatmap(rel.accuracy[rel.index(relation), direction],
                                 vs.heatmap_title(report, relation, direction))


def _report(lab: Lab, sentences: int, seed: int, treebank, control: bool) -> SyntaxReport:
    """The analysis of the corpus, kept on the Lab; one with the control serves a request without it."""
    seed = whole(seed, 0, MAX_SEED, "seed")
    if treebank is not None:
        if sentences != STORY_SENTENCES:
            raise InputError("sentences picks how much of the story world to read; with a treebank every sentence "
                             "of the file is read (the first 2,000 it can read)")
        if not isinstance(treebank, (str, os.PathLike)):
            raise InputError(f"treebank must be the path of a CoNLL-U file, got {type(treebank).__name__}")
        source = ("treebank", os.fspath(treebank), file_changed(treebank))
    else:
        source = ("story", whole(sentences, MIN_SENTENCES, MAX_SENTENCES, "sentences"))
    full = ("syntax", source, seed, True)
    key = full if control or lab.kept(full) else ("syntax", source, seed, False)

    def run() -> SyntaxReport:
        corpus = treebank_corpus(treebank) if treebank is not None else story_corpus(source[1], seed)
        with Bar() as bar:
            return analyse(lab.model, lab.tokenizer, corpus, seed=seed, control=key[-1], progress=bar.fraction)

    return lab.remember(key, run)


def file_changed(path) -> int | None:
    """When the file last changed (an edited treebank is read again), None if it cannot be read: read_treebank
    says why."""
    try:
        return os.stat(path).st_mtime_ns
    except (OSError, ValueError):
        return None


def treebank_corpus(path) -> Corpus:
    bank = read_treebank(path)
    first = [f"{bank.n_skipped:,} left out, the first because {bank.skipped[0]}"] if bank.skipped else []
    return Corpus(bank.trees, bank.name, "; ".join([*first, *bank.notes]))
