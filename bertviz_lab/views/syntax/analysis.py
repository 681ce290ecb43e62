"""What the Syntax page shows: one analysis of a corpus per model (syntax/report.py), read as tables and as
sentences written from its numbers.

Every sentence here says what was measured on these sentences and nothing more: "on these 1,200 sentences, the
word a subject attends to most in head L2 H1 is its head 66% of the time", beside what a fixed offset would get,
never that a head "does" syntax. Heads are named as the app names them (`HeadId`, "L2 H1", both from 0); the
probe's layers are hidden states (0 the embeddings' output, n the output of encoder layer n, whose heads are
L(n-1) H·).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bertviz_lab.corpus.agreement import EXAMPLE
from bertviz_lab.errors import InputError
from bertviz_lab.head_id import HeadId
from bertviz_lab.syntax.agreement import Agreement, PairScore
from bertviz_lab.syntax.encode import SentenceReading, read_corpus
from bertviz_lab.syntax.probe import predict
from bertviz_lab.syntax.relations import ALL, DIRECTIONS, MIN_COUNT, Example
from bertviz_lab.syntax.report import Corpus, Progress, SyntaxReport, fitting
from bertviz_lab.syntax.search import NO_RELATION, HeadSearch
from bertviz_lab.views import inputs

MAX_OWN = 500  # lines of the learner's own sentences searched
# fewer dependents than this and a relation's best head is not judged (syntax/relations.py says why)
TOO_FEW = "too few to tell"
# The probe chart's lines: a column of `probe_table` -> its name in the legend (the Syntax page's and the notebook's).
PROBE_CURVES = {"UUAS": "UUAS", "distance Spearman": "distance Spearman (DSpr)", "root accuracy": "root accuracy"}
# The analysis's time, scaled from the shipped model's (4 layers, hidden 256: 1,200 sentences read, probes trained on
# one thread, agreement scored; the control as long again) by the sentences and hidden states x their size. Measured
# by python -m bench.syntax; figures in docs/benchmarks.md, "Syntax".
BASE_SECONDS, BASE_SENTENCES, BASE_STATES, BASE_HIDDEN = 13.0, 1_200, 5, 256
NO_MLM = ("Agreement is read from the masked-word guesses (p(right form) against p(wrong form) at the masked verb), "
          "and this model has no masked-language-model head.")
DEFINITIONS = (  # how a head is read as a parser in each direction (Clark et al. 2019), as the page says it
    "dependent → head: the word the dependent attends to most (itself left out) is taken as its head.",
    "head → dependent: of all the words, the one that attends most to the dependent is taken as its head "
    "(Clark et al.'s code reads the column of the attention map).")
WORDS = {ALL: "word", "det": "determiner", "nsubj": "subject", "obj": "object", "iobj": "indirect object",
         "case": "case marker", "amod": "adjective", "advmod": "adverb", "aux": "auxiliary", "cop": "copula",
         "mark": "subordinating marker", "cc": "coordinating conjunction", "conj": "conjunct",
         "punct": "punctuation mark", "obl": "oblique", "nmod": "noun modifier", "nummod": "number",
         "acl": "clause modifying a noun", "advcl": "adverbial clause", "compound": "compound part",
         "xcomp": "open clausal complement", "ccomp": "clausal complement", "expl": "expletive",
         "appos": "apposition", "poss": "possessive", "nsubjpass": "passive subject", "obl:tmod": "temporal oblique",
         "nmod:poss": "possessive", "acl:relcl": "relative clause"}


def own_sentences(text: str, field: str = "your sentences") -> list[str]:
    """The learner's sentences, one a line (blank lines skipped): at least one, at most MAX_OWN; a line of characters
    that are not drawn (a zero-width space) is refused, naming the line and `field`, the box's label."""
    numbered = [(n, line.strip()) for n, line in enumerate((text or "").splitlines(), 1) if line.strip()]
    if not numbered:
        raise InputError("type at least one sentence, one a line")
    if len(numbered) > MAX_OWN:
        raise InputError(f"there are {len(numbered):,} lines; the search reads at most {MAX_OWN}")
    for n, line in numbered:
        if all(inputs.invisible(ch) or unicodedata.category(ch)[0] in "CZ" for ch in line):
            codes = ", ".join(dict.fromkeys(f"U+{ord(ch):04X}" for ch in line))
            raise InputError(f"line {n} of “{field}” holds only characters that are not drawn ({codes}): type a "
                             "sentence there or delete the line")
    return [line for _, line in numbered]


def readings(model, tokenizer, sentences: Corpus | list[str],
             progress: Progress | None = None) -> tuple[list[SentenceReading], list | None]:
    """Every sentence's word attention (no vectors), for the search when no analysis has read them, and the trees
    (None for the learner's own sentences). A corpus loses the sentences too long for the model, as `analyse` does."""
    trees = None
    if isinstance(sentences, Corpus):
        trees = fitting(sentences, tokenizer, model.config.max_tokens).trees
    read = read_corpus(model, tokenizer, trees or sentences, progress=None if progress is None else
                       lambda done, total: progress(done / total, f"reading the sentences: {done:,} of {total:,}"))
    return read, trees


def seconds_needed(layers: int, hidden: int, sentences: int) -> float:
    """About how long the analysis takes on one core, without the control (which doubles it): the measured base
    scaled by the sentences and by the probes' work ((layers + 1) hidden states of size `hidden`)."""
    return BASE_SECONDS * sentences / BASE_SENTENCES * (layers + 1) * hidden / (BASE_STATES * BASE_HIDDEN)


def duration(seconds: float) -> str:
    """"about 40 s" under a minute and a half, else "about 3 min"."""
    if seconds < 90:
        return f"about {max(5, 5 * round(seconds / 5))} s"
    return f"about {round(seconds / 60):,} min"


def percent(share: float) -> str:
    return f"{share:.0%}"


def points(gap: float) -> str:
    """A gap between two shares in percentage points: whole ones, or one decimal under one point."""
    shown = f"{100 * gap:.0f}" if abs(gap) >= 0.01 else f"{100 * gap:.1f}"
    return f"{shown} point{'' if shown == '1' else 's'}"


# --- Relations by head (Clark et al. 2019) ---------------------------------------------------------------
def offset_words(offset: int) -> str:
    """The baseline's fixed offset in words: "word 2 to the right", "word 1 to the left"."""
    return f"word {abs(offset)} to the {'right' if offset > 0 else 'left'}"


def dependent_name(relation: str) -> str:
    """'nsubj (subject)': the label and what the dependent is, where the label is a common one."""
    word = WORDS.get(relation)
    return "word" if relation == ALL else f"{relation} ({word})" if word else f"{relation} dependent"


def relation_table(report: SyntaxReport) -> pd.DataFrame:
    """One row per relation: its count, each direction's best head and accuracy, the offset baseline, and whether
    a head beats it ("yes", "no", or TOO_FEW under MIN_COUNT dependents)."""
    rel, rows = report.relations, []
    for k, name in enumerate(rel.relations):
        best = [rel.best(name, d) for d in range(len(DIRECTIONS))]
        offset, baseline = rel.baseline[name]
        count = int(rel.counts[k])
        beats = TOO_FEW if count < MIN_COUNT else "yes" if max(best[0][1], best[1][1]) > baseline else "no"
        rows.append({"relation": name, "dependents": count,
                     "best head, dependent → head": str(HeadId(*best[0][0])), "accuracy, dependent → head": best[0][1],
                     "best head, head → dependent": str(HeadId(*best[1][0])), "accuracy, head → dependent": best[1][1],
                     "baseline: always the": offset_words(offset), "baseline accuracy": baseline,
                     "a head beats the baseline": beats})
    return pd.DataFrame(rows)


def merged_note(report: SyntaxReport) -> str:
    """Which subtypes are counted under their base relation, too rare to stand alone ("" when none is)."""
    told = ", ".join(f"{name} ({n:,}) under {name.split(':')[0]}" for name, n in report.relations.merged.items())
    return "" if not told else (f"A subtype with {MIN_COUNT} dependents or more is a row of its own (obl:tmod beside obl); rarer ones are "
            f"counted under their base relation: {told}.")


def default_relation(relations: list[str]) -> str:
    return "nsubj" if "nsubj" in relations else relations[0]


def heatmap_title(report: SyntaxReport, relation: str, direction: int) -> str:
    offset, baseline = report.relations.baseline[relation]
    return (f"{relation}, {DIRECTIONS[direction]}: each head's accuracy (baseline: always the "
            f"{offset_words(offset)}, {percent(baseline)})")


def relation_sentence(report: SyntaxReport, relation: str, direction: int) -> str:
    """The best head in one direction against the baseline, in words, every number from the report."""
    rel = report.relations
    (layer, head), accuracy = rel.best(relation, direction)
    offset, baseline = rel.baseline[relation]
    n, sentences, name = int(rel.counts[rel.index(relation)]), len(report.corpus.trees), dependent_name(relation)
    name_of = HeadId(layer, head)
    if direction == 0:
        found = f"the word each {name} attends to most in head {name_of} is its head"
    else:
        found = f"the word that attends most to each {name} in head {name_of} is its head"
    if n < MIN_COUNT:  # too few dependents for the best head to be told from chance
        verdict = (f"But there {'is' if n == 1 else 'are'} only {n:,} dependent{'' if n == 1 else 's'}: too few to "
                   f"tell a head from chance (the best of {rel.accuracy.shape[2] * rel.accuracy.shape[3]} heads on so "
                   f"few words scores high by luck alone; a verdict needs {MIN_COUNT} or more).")
    elif accuracy <= baseline:
        verdict = "No head beats that offset in this direction here."
    else:
        verdict = f"That is {points(accuracy - baseline)} above the offset."
    return (f"On these {sentences:,} sentences, {found} {percent(accuracy)} of the time ({n:,} dependent{'s' * (n != 1)}); "
            f"always pointing at the {offset_words(offset)} would be right {percent(baseline)} of the time. "
            f"{verdict}")


@dataclass(frozen=True)
class Marked:
    """One dependent as the best head reads it: the sentence's words and the three words to mark."""
    words: tuple[str, ...]
    dependent: int
    head: int  # the gold head
    predicted: int  # the best head's pick

    @property
    def right(self) -> bool:
        return self.predicted == self.head


def examples(report: SyntaxReport, relation: str, direction: int) -> tuple[list[Marked], list[Marked]]:
    """The best head's first hits and first misses on `relation` in `direction`."""
    def marked(e: Example) -> Marked:
        return Marked(report.corpus.trees[e.sentence].words, e.dependent, e.head, e.predicted)
    key = (relation, direction)
    return [marked(e) for e in report.relations.hits[key]], [marked(e) for e in report.relations.misses[key]]


# --- Search by a head (exBERT) ---------------------------------------------------------------------
def marked_text(words: tuple[str, ...], query: int, key: int) -> str:
    """The sentence with the query word in [ ] and the word it attends to most in « »."""
    return " ".join(f"[{w}]" if i == query else f"«{w}»" if i == key else w for i, w in enumerate(words))


def search_table(search: HeadSearch) -> pd.DataFrame:
    return pd.DataFrame([{"sentence": marked_text(p.words, p.query, p.key), "query word": p.words[p.query],
                          "attends most to": p.words[p.key], "weight": p.weight, "relation": p.relation,
                          "kinds": f"{p.query_kind} → {p.key_kind}" if p.query_kind else ""} for p in search.picks])


def search_sentence(search: HeadSearch, sentences: int) -> str:
    """How often the head's picks hold a relation, against the base rate, in words."""
    name = HeadId(search.layer, search.head)
    said = (f"On these {sentences:,} sentences head {name} makes {search.total:,} picks (one per word: the word it "
            "attends to most, itself left out).")
    if not search.relations:
        return said + " Your own sentences have no trees, so the picks carry no relation."
    shares = {s.label: s for s in search.relations}
    if NO_RELATION in shares:
        none = shares[NO_RELATION]
        said += (f" {percent(none.share)} of them join two words with no dependency between them; of all ordered "
                 f"pairs of words, {percent(none.base)} are such pairs (the base rate: what a head picking one of the "
                 "other words at random would pick).")
    linked = [s for s in search.relations if s.label != NO_RELATION and s.share > 0]
    if linked:
        top = linked[0]
        said += (f" The relation it picks most is {top.label}: {top.share:.1%} of its picks, against a base rate "
                 f"of {top.base:.1%}.")
    return said


# --- The structural probe (Hewitt & Manning 2019) -------------------------------------------------------
def layer_label(layer: int) -> str:
    return "0 (embeddings)" if layer == 0 else str(layer)


def probe_table(report: SyntaxReport) -> pd.DataFrame:
    table = pd.DataFrame({"layer": [s.layer for s in report.probe.layers],
                          "UUAS": [s.uuas for s in report.probe.layers],
                          "distance Spearman": [s.spearman for s in report.probe.layers],
                          "root accuracy": [s.root_accuracy for s in report.probe.layers]})
    if report.control is not None:
        table["UUAS, random weights"] = [s.uuas for s in report.control.layers]
    return table


def _layers(layers: list[int]) -> str:
    named = [layer_label(layer) for layer in layers]
    return f"layer{'s' * (len(named) > 1)} " + (", ".join(named[:-1]) + " and " if len(named) > 1 else "") + named[-1]


def probe_sentence(report: SyntaxReport) -> str:
    """What the probe finds, from its numbers: the best layer's UUAS against LINEAR's, and no finding where no layer
    beats LINEAR or where the probe did not fit at the best layer (its own dev loss says so: syntax/probe_fit.py)."""
    probe = report.probe
    layer, uuas = report.best_uuas()
    root, unfitted = probe.layers[layer].root_accuracy, probe.unfitted()
    linear = f"linking each word to the next (LINEAR) finds {percent(probe.linear_uuas)}"
    said = f"Trained on {probe.train_sentences:,} sentences and tested on {probe.test_sentences:,} others, "
    if layer in unfitted:
        said += (f"the probe did not fit at layer {layer_label(layer)}, where it scores best (UUAS {percent(uuas)}; "
                 f"{linear}): {unfitted[layer]}. So no layer is named as where the tree is: with more sentences "
                 "the probe has more to learn from.")
    elif uuas <= probe.linear_uuas:
        said += (f"no layer's probe finds more of the gold trees' edges than {linear}: the best, layer "
                 f"{layer_label(layer)}, finds {percent(uuas)}. On these numbers the probe reads no tree from the "
                 "vectors beyond the words' order.")
    else:
        said += (f"the probe reading layer {layer_label(layer)} finds {percent(uuas)} of the gold trees' edges "
                 f"(UUAS), the most of any layer; {linear}. Its depth probe picks the gold root as the shallowest "
                 f"word in {percent(root)} of the test sentences.")
    others = sorted(set(unfitted) - {layer})
    if others:
        said += (f" Nor did it fit at {_layers(others)}." if layer in unfitted else f" The probe did not fit at "
                 f"{_layers(others)} (at layer {layer_label(others[0])}, {unfitted[others[0]]}).")
    if report.control is not None:
        control = report.control
        best = max(control.layers, key=lambda s: s.uuas)
        said += (f" The same probe on random weights of the same shape finds at most {percent(best.uuas)} (layer "
                 f"{layer_label(best.layer)}): what a probe finds without any training of the model.")
        if control.unfitted():
            said += f" On random weights it did not fit at {_layers(sorted(control.unfitted()))}."
    return said


def held_out(report: SyntaxReport) -> list[int]:
    """The held-out sentences (their indices in the corpus): the probe never trained on them."""
    return list(range(report.corpus.split, len(report.corpus.trees)))


@dataclass(frozen=True)
class ProbeTree:
    words: tuple[str, ...]
    gold: set[frozenset[int]]  # the gold tree's edges between words that are not punctuation
    predicted: set[frozenset[int]]  # the minimum spanning tree of the probe's distances over the same words

    @property
    def right(self) -> int:
        return len(self.gold & self.predicted)


def sentence_vectors(model, tokenizer, report: SyntaxReport, index: int) -> np.ndarray:
    """(L + 1, W, d) sentence `index`'s word vectors at every layer (0: the embeddings' output)."""
    return read_corpus(model, tokenizer, [report.corpus.trees[index]], vectors=True)[0].vectors


def probe_tree(report: SyntaxReport, layer: int, index: int, vectors: np.ndarray) -> ProbeTree:
    """The tree the probe at `layer` reads from sentence `index`'s vectors (`sentence_vectors`), beside its gold
    tree."""
    tree = report.corpus.trees[index]
    found = predict(report.probe, layer, vectors[layer], tree)
    return ProbeTree(tree.words, tree.edges(skip_punct=True), found.edges)


# --- Agreement (Linzen et al. 2016) --------------------------------------------------------------------
def agreement_table(agreement: Agreement, attractors: int | str = "all") -> pd.DataFrame:
    scores = [s for s in agreement.scores if attractors == "all" or s.attractors == attractors]
    return pd.DataFrame([{"sentence": s.masked, "right": s.right, "wrong": s.wrong, "attractors": s.attractors,
                          "p(right)": s.p_right, "p(wrong)": s.p_wrong, "agrees": s.agrees} for s in scores],
                        columns=["sentence", "right", "wrong", "attractors", "p(right)", "p(wrong)", "agrees"])


def example_pair(agreement: Agreement) -> PairScore | None:
    """The issue's own pair ("the children in the park were happy ."), unless this vocabulary left it out."""
    return next((s for s in agreement.scores if s.text == EXAMPLE), None)


def example_sentence(pair: PairScore) -> str:
    said = f"p({pair.right}) = {pair.p_right:.3f} and p({pair.wrong}) = {pair.p_wrong:.3f}: "
    if pair.p_right == pair.p_wrong:
        return said + "the model scores both forms alike, so on this pair it is **not right** (a tie is not a win)."
    picked, other = (pair.right, pair.wrong) if pair.agrees else (pair.wrong, pair.right)
    return said + f"the model prefers **{picked}** to {other}, so on this pair it is **{'right' if pair.agrees else 'wrong'}**."


def agreement_sentence(agreement: Agreement) -> str:
    counts = agreement.counts()
    parts = [f"{right:,} of {n:,} with {k} attractor{'' if k == 1 else 's'} ({percent(right / n)})"
             for k, (right, n) in counts.items() if n]
    said = "The model scores the right form above the wrong one on " + "; ".join(parts) + "."
    if agreement.skipped:
        said += (f" {agreement.skipped:,} pairs were left out: this vocabulary writes one of their forms as several "
                 "tokens, and a form of several tokens is not guessed at one mask.")
    return said


def accuracies(agreement: Agreement) -> tuple[list[int], np.ndarray, list[int], list[int]]:
    """(attractor counts, accuracy (NaN without pairs), pairs agreed, pairs) for the bar chart."""
    counts = agreement.counts()
    ks = list(counts)
    return (ks, np.array([right / n if n else np.nan for right, n in counts.values()]),
            [right for right, _ in counts.values()], [n for _, n in counts.values()])
