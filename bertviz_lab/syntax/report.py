"""Everything the Syntax page, the `syntax` command and the Time-lapse measure, in one call per model.

A corpus is a list of gold trees: the story world's (corpus/trees.py, the same sentences for every model, since
they are plain English) or the user's CoNLL-U treebank. `analyse` reads it once with the model (word-level
attention and word vectors, sub-word pieces pooled per word), then scores the heads on every relation (Clark
et al.), trains the structural probes on the first three quarters and tests them on the rest (Hewitt &
Manning), trains the same probes on a model of the same shape with random weights (the paper's control: what
a probe finds without any training of the model), and scores the agreement pairs (Linzen et al.).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.corpus.agreement import agreement_pairs
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.corpus.trees import treebank
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.agreement import Agreement, score_pairs
from bertviz_lab.syntax.encode import SentenceReading, read_corpus
from bertviz_lab.syntax.probe import STEPS, ProbeReport, probe_layers
from bertviz_lab.syntax.relations import DIRECTIONS, Relations, relations_by_head
from bertviz_lab.syntax.words import encode_words, word_groups

STORY_SENTENCES = 1200  # the story world's sample: relations over all, the probe trained on 900, tested on 300
TEST_SHARE = 0.25
AGREEMENT_PAIRS = 100  # per number of attractors, 0..3
MIN_SENTENCES = 8
MAX_SENTENCES = 2_000  # analysed at most: word vectors and attention for every one are held while the probe trains
CONTROL_SEED = 1234

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Corpus:
    trees: list[Tree]
    name: str  # "the story world (seed 0)" or the treebank's file name
    note: str = ""  # sentences left out, and why

    @property
    def split(self) -> int:
        """Sentences before this index train the probes; the rest test them."""
        return len(self.trees) - max(2, round(TEST_SHARE * len(self.trees)))


def story_corpus(sentences: int = STORY_SENTENCES, seed: int = 0) -> Corpus:
    return Corpus(treebank(sentences, seed), f"the story world (seed {seed})")  # the count is said beside it


def _unreadable(tokenizer, tree: Tree, max_tokens: int) -> str:
    """Why this model cannot read the sentence word by word ("" when it can): too many tokens, or a word its
    tokenizer drops (a soft hyphen, a zero-width space: the normalizer removes them, leaving no token)."""
    try:
        encoding = encode_words(tokenizer, tree.words, max_tokens)
        if encoding.truncated:
            return f"longer than the model's {max_tokens} tokens"
        word_groups(tokenizer, encoding, list(tree.words))
    except InputError as e:
        return str(e)
    return ""


def fitting(corpus: Corpus, tokenizer, max_tokens: int) -> Corpus:
    """The corpus without the sentences this model cannot read whole, and at most MAX_SENTENCES, with a note."""
    kept, dropped, first = [], 0, ""
    for tree in corpus.trees:
        if len(kept) == MAX_SENTENCES:
            break
        why = _unreadable(tokenizer, tree, max_tokens)
        if why:
            dropped, first = dropped + 1, first or why
        else:
            kept.append(tree)
    if len(kept) < MIN_SENTENCES:
        raise InputError(f"{corpus.name} has {len(kept)} sentences this model can read word by word; the probe and "
                         f"the head scores need at least {MIN_SENTENCES}" + (f" (the first left out: {first})"
                                                                              if first else ""))
    notes = [corpus.note] if corpus.note else []
    if dropped:
        notes.append(f"{dropped:,} sentences this model cannot read word by word were left out (the first: {first})")
    unread = len(corpus.trees) - len(kept) - dropped
    if unread:
        notes.append(f"only the first {MAX_SENTENCES:,} readable sentences are analysed; {unread:,} more were not read")
    return Corpus(kept, corpus.name, "; ".join(notes))


@dataclass(frozen=True)
class SyntaxReport:
    corpus: Corpus
    readings: list[SentenceReading]  # word-level attention per sentence (no vectors: they are large)
    relations: Relations
    probe: ProbeReport
    control: ProbeReport | None  # the same probes on random weights of the same shape
    agreement: Agreement | None  # None for a model without a masked-LM head, or a vocabulary without the forms
    seconds: dict[str, float] = field(default_factory=dict)
    agreement_note: str = ""  # why there is no agreement, when there is none

    def best_uuas(self) -> tuple[int, float]:
        best = max(self.probe.layers, key=lambda s: s.uuas)
        return best.layer, best.uuas


def random_twin(model) -> BertForPreTraining:
    """A model of the same shape and family with freshly initialised weights (seeded), for the control."""
    with global_rng(CONTROL_SEED):
        twin = BertForPreTraining(model.config, mlm_head=False, nsp_head=False, pooler=False)
    return twin.to(next(model.parameters()).device).eval()


def _probe(model, tokenizer, corpus: Corpus, seed: int, report: Callable[[float, str], None], share: tuple,
           steps: int = STEPS, what: str = ""):
    """Read the corpus with `model` and train its probes, reporting over `share` = (start, width) of the whole;
    `what` starts each message ("the control (random weights): ")."""
    start, width = share
    n = len(corpus.trees)
    report(start, f"{what}reading the sentences: 0 of {n:,}")
    readings = read_corpus(model, tokenizer, corpus.trees, vectors=True, progress=lambda done, total: report(
        start + width * 0.3 * done / total, f"{what}reading the sentences: {done:,} of {total:,}"))
    train = [(r.vectors, t) for r, t in zip(readings[:corpus.split], corpus.trees[:corpus.split])]
    test = [(r.vectors, t) for r, t in zip(readings[corpus.split:], corpus.trees[corpus.split:])]
    probe = probe_layers(train, test, seed=seed, steps=steps, progress=lambda done, total, message: report(
        start + width * (0.3 + 0.7 * done / total), f"{what}training the structural probe: {message}"))
    return readings, probe


def analyse(model, tokenizer, corpus: Corpus, *, seed: int = 0, control: bool = True,
            agreement: bool = True, agreement_pairs_per_count: int = AGREEMENT_PAIRS, probe_steps: int = STEPS,
            progress: Progress | None = None) -> SyntaxReport:
    """Relations by head, the structural probe (and its random-weights control) and agreement for one model.

    `progress(fraction, message)` hears each stage as it starts and how far it is ("reading the sentences: 320 of
    1,200", "training the structural probe: layer 2 (2 of 5 layers done)"), from the first batch on; nothing is
    reported before the corpus is checked, so a corpus the model cannot read is one error and nothing else."""
    def report(fraction: float, message: str) -> None:
        if progress:
            progress(min(1.0, fraction), message)

    corpus = fitting(corpus, tokenizer, model.config.max_tokens)
    seconds = {}
    t = time.perf_counter()
    readings, probe = _probe(model, tokenizer, corpus, seed, report, (0.0, 0.55 if control else 0.85), probe_steps)
    seconds["reading and probe"] = time.perf_counter() - t
    readings = [SentenceReading(r.words, r.tokens, r.groups, r.attention, None) for r in readings]  # drop vectors
    t = time.perf_counter()
    report(0.55 if control else 0.85, "scoring every head on every relation")
    relations = relations_by_head(readings, corpus.trees)
    seconds["relations"] = time.perf_counter() - t
    controlled = None
    if control:
        t = time.perf_counter()
        report(0.6, "the control (random weights): making a model of the same shape")
        _, controlled = _probe(random_twin(model), tokenizer, corpus, seed, report, (0.6, 0.3), probe_steps,
                               "the control (random weights): ")
        seconds["control"] = time.perf_counter() - t
    agreed, note = None, ""
    if agreement:
        t = time.perf_counter()
        report(0.9, "scoring the agreement pairs")  # the last tenth
        try:
            agreed = score_pairs(model, tokenizer, agreement_pairs(agreement_pairs_per_count, seed), progress=lambda
                                 done, total: report(0.9 + 0.1 * done / total,
                                                     f"scoring the agreement pairs: {done:,} of {total:,}"))
        except InputError as e:  # no masked-LM head, or no one-token forms: the rest of the report stands
            note = str(e)
        seconds["agreement"] = time.perf_counter() - t
    report(1.0, "done")
    return SyntaxReport(corpus, readings, relations, probe, controlled, agreed, seconds, note)


def as_json(report: SyntaxReport) -> dict:
    """The `syntax` command's JSON: layers and heads counted from 0, as the app counts them."""
    relations = {}
    for name in report.relations.relations:
        entry = {}
        for key, direction in zip(("dependent_to_head", "head_to_dependent"), range(len(DIRECTIONS))):
            (layer, head), accuracy = report.relations.best(name, direction)
            entry[key] = {"head": [int(layer), int(head)], "accuracy": round(float(accuracy), 6)}
        offset, accuracy = report.relations.baseline[name]
        entry["baseline"] = {"offset": int(offset), "accuracy": round(float(accuracy), 6)}
        entry["count"] = int(report.relations.counts[report.relations.index(name)])
        relations[name] = entry
    probe = {"layers": [{"layer": s.layer, "uuas": round(s.uuas, 6), "spearman": round(s.spearman, 6),
                         "root_accuracy": round(s.root_accuracy, 6)} for s in report.probe.layers],
             "linear_baseline_uuas": round(report.probe.linear_uuas, 6),
             "train_sentences": report.probe.train_sentences, "test_sentences": report.probe.test_sentences,
             "rank": report.probe.rank}
    if report.control is not None:
        probe["random_weights"] = [{"layer": s.layer, "uuas": round(s.uuas, 6)} for s in report.control.layers]
    out = {"corpus": report.corpus.name, "sentences": len(report.corpus.trees), "relations": relations,
           "probe": probe}
    if report.corpus.note:
        out["note"] = report.corpus.note
    out["agreement"] = None
    if report.agreement_note:
        out["agreement_note"] = report.agreement_note
    if report.agreement is not None:
        out["agreement"] = {str(k): (None if a is None else round(a, 6))
                            for k, a in report.agreement.accuracy().items()}
        out["agreement_pairs"] = {str(k): n for k, (_, n) in report.agreement.counts().items()}
    return out
