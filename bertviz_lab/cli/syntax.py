"""The `syntax` command: what a model knows of grammar over a whole corpus (syntax/report.py measures it): which
heads follow which dependency relation, the structural probe by layer against its controls, and subject-verb
agreement across attractors, as tables or as JSON."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, one_line, printable
from bertviz_lab.errors import InputError

MAX_SEED = 2**31 - 1
COUNTS = re.compile(r"\d[\d,]* of \d[\d,]*")  # "320 of 1,200" in a progress label: how far, not which stage
DESCRIPTION = """\
Read a corpus of gold dependency trees with a model once, then measure three things (syntax/report.py):

relations   for each relation (nsubj, det, obj, ...), the head whose attention follows it best, both ways: from the
            dependent to its head (the word it attends to most) and from the head to the dependent (the word that
            attends to it most), against the best fixed offset (Clark et al. 2019, "What Does BERT Look At?")
probe       a structural probe per layer (Hewitt & Manning 2019), trained on three quarters of the sentences and
            tested on the rest: UUAS (the tree its distances span against the gold tree), Spearman's rho of the
            distances and root accuracy; beside it the linear baseline (each word linked to the next) and the
            control: the same probe on a model of the same shape with random weights (skip it with --no-control)
agreement   minimal pairs like "the children in the park [MASK] happy .": does the model score "were" above
            "was"? Accuracy by the number of attractors (nouns of the other number in between; Linzen et al.
            2016); always the built-in pairs, also with --treebank; left out for a model without a masked-LM head

The corpus is the story world's sentences, written with their trees (--sentences, --seed), or a CoNLL-U file of
your own (--treebank; sentences that are not trees, or are longer than the model reads, are left out with a
note). A word split into several tokens is one word: its pieces' vectors averaged, its attention pooled.
Layers and heads are counted from 0 (layer 0 of the probe is the embeddings' output), heads written L2 H1.

With --json: {"corpus", "sentences", "relations": {relation: {"dependent_to_head": {"head": [layer, head],
"accuracy"}, "head_to_dependent": {...}, "baseline": {"offset", "accuracy"}, "count"}}, "probe": {"layers": [{"layer",
"uuas", "spearman", "root_accuracy"}, ...], "linear_baseline_uuas", "random_weights": [{"layer", "uuas"}, ...],
"train_sentences", "test_sentences", "rank"}, "agreement": {"0": accuracy, ...} or null, "agreement_pairs":
{"0": pairs, ...}, "agreement_example": {"text", "right", "wrong", "p_right", "p_wrong"}} and "note" when
sentences or the agreement were left out.

How far it is goes to stderr, never stdout: a bar on a terminal, else a line as each stage starts (reading the
sentences, each layer's probe, the control, agreement) and every tenth of the way."""


def add_parser(sub) -> None:
    syntax = sub.add_parser("syntax", help="what the model knows of grammar: heads that follow dependency "
                                           "relations, the structural probe by layer, agreement with attractors",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    syntax.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    syntax.add_argument("--treebank", metavar="FILE", help="a CoNLL-U file to read instead of the story world")
    syntax.add_argument("--sentences", type=int, metavar="N",
                        help="story-world sentences to read (default: 1200; the probe trains on three quarters)")
    syntax.add_argument("--seed", type=int, default=0, metavar="S",
                        help="picks the story-world sentences, the agreement pairs and the probes' start (default: 0)")
    syntax.add_argument("--no-control", dest="control", action="store_false",
                        help="skip the control (the probe on random weights): about half the time")
    syntax.add_argument("--device", default="auto", help="auto, cpu or cuda")
    syntax.add_argument("--json", action="store_true", help="print JSON instead of tables")


def cmd_syntax(args) -> int:
    from bertviz_lab.syntax.report import analyse

    _check_options(args)
    with Bar() as bar:
        corpus = syntax_corpus(args, bar)  # a broken treebank is refused before the model is loaded
        ckpt = load(args)
        report = analyse(ckpt.model, ckpt.tokenizer, corpus, seed=args.seed, control=args.control, progress=bar)
    note = f"no agreement scores: {report.agreement_note}" if report.agreement_note else ""
    if args.json:
        print(json.dumps(json_report(report, note), indent=2, ensure_ascii=False))
        return 0
    print("\n".join(report_lines(report, note)))
    return 0


def _check_options(args) -> None:
    from bertviz_lab.syntax.report import MAX_SENTENCES, MIN_SENTENCES

    if args.treebank is not None and args.sentences is not None:
        raise InputError("--sentences picks how much of the story world to read; with --treebank every sentence "
                         "of the file is read (the first 2,000 it can read)")
    if args.sentences is not None and not MIN_SENTENCES <= args.sentences <= MAX_SENTENCES:
        raise InputError(f"--sentences must be from {MIN_SENTENCES} to {MAX_SENTENCES:,} (the probe needs some to "
                         f"train on and some to test on), got {args.sentences:,}")
    if not 0 <= args.seed <= MAX_SEED:
        raise InputError(f"--seed must be from 0 to {MAX_SEED:,}, got {args.seed:,}")


def syntax_corpus(args, progress=None):
    """The story world's sentences, or the treebank's, with a note on the sentences left out (`progress` hears how
    far a big treebank's reading is)."""
    from bertviz_lab.syntax.report import STORY_SENTENCES, Corpus, story_corpus
    from bertviz_lab.syntax.treebank import read_treebank

    if args.treebank is None:
        return story_corpus(args.sentences or STORY_SENTENCES, args.seed)
    bank = read_treebank(args.treebank, progress=progress)
    first = [f"{bank.n_skipped:,} left out, the first because {bank.skipped[0]}"] if bank.skipped else []
    return Corpus(bank.trees, bank.name, "; ".join(one_line(n) for n in [*first, *bank.notes]))


def example(report):
    """The issue's own pair ("the children in the park [MASK] happy .") as the model scored it, or None."""
    from bertviz_lab.corpus.agreement import EXAMPLE

    scores = report.agreement.scores if report.agreement is not None else []
    return next((s for s in scores if s.text == EXAMPLE), None)


def json_report(report, note: str = "") -> dict:
    """`syntax.report.as_json`, with "agreement": null and a note when it was left out, and the example."""
    from bertviz_lab.syntax.report import as_json

    out = as_json(report)
    out.pop("agreement_note", None)  # said in "note"
    pair = example(report)
    if pair is not None:
        out["agreement_example"] = {"text": pair.masked, "right": pair.right, "wrong": pair.wrong,
                                    "p_right": round(pair.p_right, 6), "p_wrong": round(pair.p_wrong, 6)}
    notes = [n for n in (out.get("note", ""), note) if n]
    if notes:
        out["note"] = "; ".join(notes)
    return out


def report_lines(report, note: str = "") -> list[str]:
    """The readable report: the corpus, then relations, probe and agreement tables, then the time taken."""
    probe = report.probe
    lines = [f"{printable(report.corpus.name)}: {len(report.corpus.trees):,} sentences; the probe trained on "
             f"{probe.train_sentences:,} ({probe.dev_sentences:,} of them to pick its step) and tested on "
             f"{probe.test_sentences:,}"]
    lines += [f"note: {printable(n)}" for n in (report.corpus.note, note) if n]
    lines += ["", *relation_lines(report.relations), "", *probe_lines(report), "", *agreement_lines(report)]
    seconds = ", ".join(f"{phase} {s:.1f} s" for phase, s in report.seconds.items())
    return [*lines, "", f"took {sum(report.seconds.values()):.1f} s ({seconds})"]


def relation_lines(relations) -> list[str]:
    """One row per relation: its dependents, the best head each way with its accuracy, the best offset's."""
    from bertviz_lab.head_id import HeadId
    from bertviz_lab.syntax.relations import DIRECTIONS, MIN_COUNT

    names = [printable(r)[:16] for r in relations.relations]
    width = max(map(len, [*names, "relation"]))
    rows = ["relations: the head that follows each relation best (its accuracy), and the best fixed offset",
            f"{'relation':<{width}} {'count':>7}   {DIRECTIONS[0]:<18} {DIRECTIONS[1]:<18} baseline"]
    for name, shown in zip(relations.relations, names):
        cells = []
        for direction in range(len(DIRECTIONS)):
            head, accuracy = relations.best(name, direction)
            cells.append(f"{str(HeadId(*head)):<8} {accuracy:>7.1%}  ")
        offset, accuracy = relations.baseline[name]
        count = int(relations.counts[relations.index(name)])
        rows.append(f"{shown:<{width}} {count:>7,}   {''.join(cells)} {offset:+d} {accuracy:>7.1%}"
                    + ("  (too few to tell)" if count < MIN_COUNT else ""))
    return rows


def probe_lines(report) -> list[str]:
    """UUAS, Spearman and root accuracy per layer, the control's UUAS beside them, and the linear baseline."""
    probe, control = report.probe, report.control
    rows = [f"structural probe (rank {probe.rank}, {probe.steps} steps), on the {probe.test_sentences:,} test "
            f"sentences; layer 0 is the embeddings' output",
            f"{'layer':>5} {'UUAS':>7} {'Spearman':>9} {'root':>7}" + (f" {'random weights UUAS':>20}" if control
                                                                       else "")]
    for n, score in enumerate(probe.layers):
        rows.append(f"{score.layer:>5} {score.uuas:>7.3f} {score.spearman:>9.3f} {score.root_accuracy:>7.1%}" +
                    (f" {control.layers[n].uuas:>20.3f}" if control else ""))
    layer, uuas = report.best_uuas()
    best = f"best: layer {layer}, UUAS {uuas:.3f}; linear baseline (each word linked to the next) {probe.linear_uuas:.3f}"
    if control:
        top = max(control.layers, key=lambda s: s.uuas)
        best += f"; random weights at best {top.uuas:.3f} (layer {top.layer})"
    unfitted = [f"not fitted at layer {layer}{' (random weights)' if what is control else ''}: {why}"
                for what in (probe, control) if what for layer, why in what.unfitted().items()]
    return [*rows, best, *unfitted]


def agreement_lines(report) -> list[str]:
    """Accuracy by number of attractors with the pairs counted, and the example's two probabilities."""
    from bertviz_lab.syntax.agreement import verdict

    agreement = report.agreement
    if agreement is None:
        return ["agreement: left out (see the note above)"]
    rows = ["agreement: p(right form) > p(wrong form) at the masked verb, by attractors (nouns of the other number "
            "in between)", f"{'attractors':>10} {'accuracy':>9} {'pairs':>7}"]
    for k, (right, n) in agreement.counts().items():
        rows.append(f"{k:>10} {f'{right / n:.1%}' if n else '-':>9} {n:>7,}")
    if agreement.skipped:
        rows.append(f"{agreement.skipped:,} pairs left out: their forms are not one token each in this vocabulary")
    pair = example(report)
    if pair is not None:
        rows.append(f"{printable(pair.masked)}   p({pair.right}) = {pair.p_right:.4f}, p({pair.wrong}) = "
                    f"{pair.p_wrong:.4f}")
    return [*rows, verdict(agreement)]


class Bar:
    """`analyse`'s progress (and a big treebank's reading) on stderr, so stdout holds the report alone (--json stays
    JSON): on a terminal one tqdm bar whose label follows the stage; elsewhere (a pipe, a log, a CI job) plain
    lines, one as each stage starts and one each LINE_STEP of the way, "syntax:  27% reading the sentences: 320 of
    1,200 (4 s)". A stage is the label without its counts ("320 of 1,200"): each layer of the probe is one."""

    LINE_STEP = 0.1

    def __init__(self) -> None:
        self.bar, self.stage, self.shown = None, None, 0.0
        self.start = time.perf_counter()

    def __call__(self, fraction: float, label: str) -> None:
        fraction = max(0.0, min(1.0, fraction))
        if sys.stderr.isatty():
            self._draw(fraction, label)
            return
        stage = COUNTS.sub("", label)
        if stage != self.stage or fraction >= self.shown + self.LINE_STEP or fraction < self.shown:
            self.stage, self.shown = stage, fraction
            print(f"syntax: {fraction:4.0%} {label} ({time.perf_counter() - self.start:.0f} s)", file=sys.stderr,
                  flush=True)

    def _draw(self, fraction: float, label: str) -> None:
        from tqdm import tqdm

        if self.bar is not None and round(100 * fraction) < self.bar.n:  # the treebank read, the analysis starts
            self.bar.close()
            self.bar = None
        if self.bar is None:
            self.bar = tqdm(total=100, desc=label, file=sys.stderr, leave=False,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")
        self.bar.set_description_str(label, refresh=False)
        self.bar.update(round(100 * fraction) - self.bar.n)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


COMMANDS = {"syntax": cmd_syntax}
