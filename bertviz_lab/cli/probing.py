"""The `probe` command: what a probe can and cannot show (probing/ measures it). Probes for part of speech, dependency
label, pronoun and referent, and noun number at every hidden state, each against its control task (selectivity), a
small MLP beside the linear probe, the online codelength, a random-weights twin and the scalar mix's expected layer;
with --amnesic, whether the model uses what the probe found (INLP against random projections). Tables or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

import numpy as np

from bertviz_lab.cli.common import CHECKPOINT_HELP, load, printable
from bertviz_lab.cli.explain import Bar
from bertviz_lab.cli.syntax import MAX_SEED, syntax_corpus
from bertviz_lab.errors import InputError

DRAWS = 5  # amnesic probing's random projections by default (probing/amnesic.py's MAX_DRAWS at most)
SAY_ESTIMATE_S = 60.0  # a run expected to take longer says so on stderr before it starts

DESCRIPTION = """\
Read a corpus of gold trees with the model once (every word at every hidden state: 0 is the embeddings' output, then
layers 1..L), then fit probes on the first three quarters of the sentences and test them on the rest (probing/):

tasks        pos (a word's part of speech), dep (a dependent and its head -> the relation), coref (a pronoun and a
             noun of its sentence -> is it the referent), number (a noun -> singular or plural); --task picks one
control      each word type gets a random label with the task's label distribution, fixed per type (Hewitt & Liang
             2019): selectivity = task accuracy - control accuracy, for the linear probe and a small MLP (--no-mlp)
random       the linear probe on a model of the same shape with random weights (--no-random-weights)
codelength   the online code of the labels given the vectors, in kbits (Voita & Titov 2020; --no-codelength)
mix          a linear probe over a learned softmax mix of the hidden states (Tenney et al. 2019): the expected
             layer (where accuracy is gained) and the centre of gravity (where the mix's weight sits)
amnesic      with --amnesic [LAYER] (default: the middle hidden state): the task's linear directions removed from that
             hidden state by INLP (Ravfogel et al. 2020), then the masked-LM loss and accuracy on the test sentences,
             against --draws random projections of the same rank (Elazar et al. 2021); for number, subject-verb
             agreement across attractors before and after. Found by a probe and used by the model are two results.

The corpus is the story world's sentences (--sentences, --seed) or a CoNLL-U file (--treebank): a CoNLL-U file has no
coreference, and a task without enough examples is left out with its reason. With --json: probing.report's as_json,
and "amnesic": {task: amnesic_json} (null without --amnesic). Progress goes to stderr, never stdout. A mistake (a
task that does not exist, a file that cannot be read, a layer the model lacks, a treebank without the labels): one
line on stderr, exit status 2."""


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="probes at every hidden state against control tasks, codelength, the scalar "
                                     "mix's expected layer, and amnesic probing: is what is found used?",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    p.add_argument("--task", metavar="T", help="pos, dep, coref or number (default: every task)")
    p.add_argument("--treebank", metavar="FILE", help="a CoNLL-U file to read instead of the story world")
    p.add_argument("--sentences", type=int, metavar="N", help="story-world sentences to read (default: 1200)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="picks the story-world sentences, the control labels and the probes' start (default: 0)")
    p.add_argument("--amnesic", nargs="?", const="middle", metavar="LAYER",
                   help="also remove the task from hidden state LAYER (0 = the embeddings' output; no value: the "
                        "middle one) and measure the masked-LM and agreement")
    p.add_argument("--draws", type=int, metavar="N", help=f"with --amnesic: random projections (default: {DRAWS})")
    p.add_argument("--no-mlp", dest="mlp", action="store_false", help="skip the MLP probe")
    p.add_argument("--no-codelength", dest="codelength", action="store_false", help="skip the online codelength")
    p.add_argument("--no-random-weights", dest="random_weights", action="store_false",
                   help="skip the random-weights twin (its reading and its probes)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def check_options(args) -> tuple[str, ...]:
    """The tasks asked for; every wrong option one InputError sentence, before the model is loaded."""
    from bertviz_lab.probing.amnesic import MAX_DRAWS
    from bertviz_lab.probing.records import TASKS
    from bertviz_lab.syntax.report import MAX_SENTENCES, MIN_SENTENCES

    if args.task is not None and args.task not in TASKS:
        raise InputError(f"there is no probing task {args.task!r}: --task takes {', '.join(TASKS)}")
    if args.treebank is not None and args.sentences is not None:
        raise InputError("--sentences picks how much of the story world to read; with --treebank every sentence "
                         "of the file is read (the first 2,000 it can read)")
    if args.sentences is not None and not MIN_SENTENCES <= args.sentences <= MAX_SENTENCES:
        raise InputError(f"--sentences must be from {MIN_SENTENCES} to {MAX_SENTENCES:,}, got {args.sentences:,}")
    if not 0 <= args.seed <= MAX_SEED:
        raise InputError(f"--seed must be from 0 to {MAX_SEED:,}, got {args.seed:,}")
    if args.draws is not None and args.amnesic is None:
        raise InputError("--draws counts amnesic probing's random projections: add --amnesic [LAYER]")
    if args.draws is not None and not 1 <= args.draws <= MAX_DRAWS:
        raise InputError(f"--draws must be from 1 to {MAX_DRAWS}, got {args.draws:,}")
    if args.amnesic not in (None, "middle") and not args.amnesic.lstrip("-").isdigit():
        raise InputError(f"--amnesic takes a hidden state's number (0 = the embeddings' output), got "
                         f"{printable(args.amnesic)!r}")
    return TASKS if args.task is None else (args.task,)


def amnesic_layer(asked: str, hidden_states: int) -> int:
    """The hidden state --amnesic names: a number from 0 to L, or the middle one."""
    from bertviz_lab.probing.amnesic import default_layer

    if asked == "middle":
        return default_layer(hidden_states - 1)
    layer = int(asked)
    if not 0 <= layer < hidden_states:
        raise InputError(f"--amnesic {layer}: this model has hidden states 0 (the embeddings' output) to "
                         f"{hidden_states - 1}")
    return layer


def cmd_probe(args) -> int:
    from bertviz_lab.probing.records import KINDS
    from bertviz_lab.probing.report import probe_corpus, seconds_needed

    tasks = check_options(args)
    with Bar("probe") as bar:
        corpus = syntax_corpus(args, bar)  # a broken treebank is refused before the model is loaded
        ckpt = load(args)
        cfg, kinds = ckpt.model.config, KINDS if args.mlp else ("linear",)
        layer = None if args.amnesic is None else amnesic_layer(args.amnesic, cfg.num_hidden_layers + 1)
        expected = seconds_needed(cfg.num_hidden_layers, cfg.hidden_size, len(corpus.trees), kinds=kinds,
                                  codelength=args.codelength, random_weights=args.random_weights)
        if expected > SAY_ESTIMATE_S:
            print(f"probe: about {expected / 60:.0f} min on one core", file=sys.stderr, flush=True)
        probing = probe_corpus(ckpt.model, ckpt.tokenizer, corpus, tasks, kinds=kinds, codelength=args.codelength,
                               random_weights=args.random_weights, seed=args.seed, progress=bar)
        if not probing.tasks:
            raise InputError("; ".join(f"{printable(why)}" for why in probing.missing.values()))
        removed = None if layer is None else amnesic_runs(ckpt, corpus, probing, layer, args, bar)
    if args.json:
        print(json.dumps(json_report(probing, removed), indent=2, ensure_ascii=False))
    else:
        print("\n".join(report_lines(probing, removed)))
    return 0


def amnesic_runs(ckpt, corpus, probing, layer: int, args, bar) -> dict:
    """task -> Amnesic at `layer`, for every task that was probed (a task left out is said in the report)."""
    from bertviz_lab.probing.amnesic import amnesic

    draws = DRAWS if args.draws is None else args.draws
    out = {}
    for task in probing.tasks:
        out[task] = amnesic(ckpt.model, ckpt.tokenizer, corpus, task, layer, draws=draws, seed=args.seed,
                            progress=lambda f, what, t=task: bar(f, f"amnesic {t}: {what}"))
    return out


def json_report(probing, removed: dict | None) -> dict:
    """probing.report's as_json, with "amnesic": {task: amnesic_json} (None when not asked for)."""
    from bertviz_lab.probing.report import amnesic_json, as_json

    out = as_json(probing)
    out["amnesic"] = None if removed is None else {task: amnesic_json(a) for task, a in removed.items()}
    return out


def _wrapped(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, 116, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def columns(t) -> list[tuple[str, object, str]]:
    """(header, values by hidden state, format) of every measure this task has: what was left out has no column."""
    out = []
    for fits in (t.linear, t.mlp):
        if fits is not None:
            out += [(fits.kind if fits.kind == "linear" else "MLP", fits.accuracy, ".1%"),
                    ("control", fits.control, ".1%"), ("select.", fits.selectivity, "+.1%")]
    if t.random_weights is not None:
        out.append(("random", t.random_weights, ".1%"))
    code = t.codelength
    if code is not None:
        out += [("kbits", code.online / 1000, ".2f"), ("control", code.control / 1000, ".2f")]
        out += [("random", code.random_weights / 1000, ".2f")] if code.random_weights is not None else []
    return out


def table_lines(t) -> list[str]:
    """A row per hidden state, a column per measure, aligned."""
    cols = columns(t)
    lines = [f"{'state':>5}  " + " ".join(f"{header:>8}" for header, _, _ in cols)]
    for n in range(len(t.linear.accuracy)):
        lines.append(f"{n:>5}  " + " ".join(f"{format(float(values[n]), form):>8}" for _, values, form in cols))
    return lines


def task_lines(t) -> list[str]:
    """One task: its examples, a row per hidden state (linear, MLP, random weights, codelength), its mix, and the
    Syntax page's sentences on it."""
    from bertviz_lab.probing.records import TASK_NAMES
    from bertviz_lab.views.syntax.probing import codelength_sentence, selectivity_sentences, task_sentence

    lines = _wrapped(f"{TASK_NAMES[t.task]} ({t.task}): {t.train:,} training and {t.test:,} test examples, "
                     f"{len(t.classes)} labels; always guessing the commonest label scores {t.majority:.1%}")
    lines += _wrapped(f"note: {printable(t.note)}") if t.note else []
    lines += table_lines(t)
    if t.codelength is not None:
        lines.append(f"codelength with no vector at all (the uniform code): {t.codelength.uniform / 1000:.2f} kbits")
    if t.mix is not None:
        expected = "none" if t.mix.expected_layer is None else f"{t.mix.expected_layer:.2f}"
        lines.append(f"scalar mix: expected layer {expected}, centre of gravity {t.mix.centre:.2f}; weights "
                     + " ".join(f"{w:.2f}" for w in t.mix.weights))
    said = [task_sentence(t.task, t), *selectivity_sentences(t.task, t)]
    said += [codelength_sentence(t.task, t)] if t.codelength is not None else []
    return lines + [line for sentence in said for line in _wrapped(printable(sentence))]


def order_lines(probing) -> list[str]:
    """The tasks in the order of their expected layers (Tenney et al.'s pipeline, read off this model)."""
    from bertviz_lab.views.syntax.probing import order_sentence

    placed = sorted((t.mix.expected_layer, name) for name, t in probing.tasks.items()
                    if t.mix is not None and t.mix.expected_layer is not None)
    if not any(t.mix is not None for t in probing.tasks.values()):
        return []
    order = " < ".join(f"{name} {layer:.2f}" for layer, name in placed) or "none gains accuracy past hidden state 0"
    return [f"order by expected layer: {order}", *_wrapped(printable(order_sentence(probing)))]


def amnesic_lines(a) -> list[str]:
    """One amnesic run: the probe before and after, the masked-LM before, after and after random projections, the
    agreement by attractors for number, and the page's sentences on them."""
    from bertviz_lab.views.syntax.amnesic import agreement_sentence, notes, removal_sentence, use_sentences

    lines = _wrapped(f"amnesic probing of {a.task} at hidden state {a.layer}: {a.rank} directions removed in "
                     f"{a.iterations} rounds of INLP, against {a.draws} random projections of the same rank (seed "
                     f"{a.seed})")
    lines += [f"  a fresh linear probe: {a.probe_before:.1%} before, {a.probe_after:.1%} after, {a.probe_random:.1%} "
             f"after a random projection; the commonest label {a.majority:.1%}"]
    if a.masked:
        lines += [f"  masked-LM on {a.masked:,} held-out tokens: loss {a.loss_before:.4f} before, {a.loss_after:.4f} "
                  f"after, {np.mean(a.loss_random):.4f} after random (+- {np.std(a.loss_random):.4f})",
                  f"  masked-LM accuracy: {a.accuracy_before:.1%} before, {a.accuracy_after:.1%} after, "
                  f"{np.mean(a.accuracy_random):.1%} after random"]
    said = [removal_sentence(a), *use_sentences(a)]
    if a.agreement_before is not None:
        lines.append(f"  {'attractors':>10} {'pairs':>6} {'before':>7} {'after':>7} {'random':>7}")
        for k, pairs in a.agreement_pairs.items():
            cells = [f"{'-' if v is None else format(v, '.1%'):>7}" for v in
                     (a.agreement_before.get(k), a.agreement_after.get(k), a.agreement_random.get(k))]
            lines.append(f"  {k:>10} {pairs:>6,} {' '.join(cells)}")
        said.append(agreement_sentence(a))
    return lines + [line for sentence in [*said, *notes(a)] for line in _wrapped(printable(sentence), "  ")]


def report_lines(probing, removed: dict | None = None) -> list[str]:
    """The readable report: the corpus, each task's table, the order of the tasks, what was left out, the amnesic
    runs, the limits of it all, the time taken."""
    from bertviz_lab.views.syntax.probing import LIMITS, missing_sentences

    lines = _wrapped(f"{printable(probing.corpus)}: {probing.sentences:,} sentences, the probes trained on the first "
                     f"{probing.train_sentences:,} and tested on the rest; {probing.hidden_states} hidden states (0 is "
                     "the embeddings' output); select. = accuracy - control accuracy; random = the linear probe on "
                     "random weights of the same shape; kbits = the online codelength")
    lines += _wrapped(f"note: {printable(probing.note)}") if probing.note else []
    for t in probing.tasks.values():
        lines += ["", *task_lines(t)]
    lines += ["", *order_lines(probing)]
    lines += [line for s in missing_sentences(probing) for line in _wrapped("left out: " + printable(s))]
    for a in (removed or {}).values():
        lines += ["", *amnesic_lines(a)]
    lines += ["", *_wrapped(LIMITS)]
    if probing.seconds:
        parts = ", ".join(f"{stage} {s:.1f} s" for stage, s in probing.seconds.items())
        lines += ["", *_wrapped(f"took {sum(probing.seconds.values()):.1f} s ({parts})")]
    return lines


COMMANDS = {"probe": cmd_probe}
