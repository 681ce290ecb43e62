"""What the shipped model's vectors hold, and what it uses (issue 56, for docs/guide.md): deterministic, one command.

On the story world's 1,200 gold trees (the Syntax page's default: the probes train on the first 900 sentences and are
tested on the last 300), `probing.report.probe_corpus` with everything on, then `probing.amnesic.amnesic`:
(a) layer by layer (Tenney et al. 2019): each task's linear probe accuracy at every hidden state, the majority rate and
    the random-weights twin's accuracy; the expected layer and the centre of gravity, and the tasks in that order;
(b) control tasks (Hewitt & Liang 2019): selectivity of the linear and the MLP probe at every hidden state;
(c) description length (Voita & Titov 2020): the online codelength of the task, of its control task, and of the task on
    the random-weights twin, with the compression over the uniform code;
(d) amnesic probing (Elazar et al. 2021): noun number removed by INLP from each hidden state in turn, against 5 random
    projections of the same rank: a fresh probe, the masked-word loss on the 300 test sentences, and agreement across
    attractors (100 pairs per count); part of speech and dependency label removed at the middle state.

    PYTHONPATH=. .venv/bin/python -m bench.probing_findings [--threads 2] [--skip-amnesic]
"""

from __future__ import annotations

import argparse
import time


from bench.attribution import SHIPPED
from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.probing.amnesic import amnesic, default_layer
from bertviz_lab.probing.records import TASK_NAMES
from bertviz_lab.probing.report import probe_corpus
from bertviz_lab.syntax.report import story_corpus

DRAWS, PAIRS = 5, 100


def row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header: list[str], rows: list[list]) -> None:
    print(row(header))
    print(row(["---"] + ["---:"] * (len(header) - 1)))
    for cells in rows:
        print(row(cells))
    print()


def layers_table(probing) -> None:
    states = probing.hidden_states
    print("(a) Linear probe test accuracy at each hidden state (0 = embeddings), majority rate, random weights\n")
    rows = []
    for task, p in probing.tasks.items():
        rows.append([TASK_NAMES[task], *(f"{a:.3f}" for a in p.linear.accuracy), f"{p.majority:.3f}",
                     " ".join(f"{a:.3f}" for a in p.random_weights) if p.random_weights is not None else "-"])
    table(["task", *(str(s) for s in range(states)), "majority", "random weights 0..L"], rows)
    rows = [[TASK_NAMES[t], "-" if p.mix.expected_layer is None else f"{p.mix.expected_layer:.2f}",
             f"{p.mix.centre:.2f}", " ".join(f"{w:.2f}" for w in p.mix.weights),
             " ".join(f"{a:.3f}" for a in p.mix.cumulative)] for t, p in probing.tasks.items()]
    table(["task", "expected layer", "centre of gravity", "mix weights 0..L", "cumulative mix accuracy 0..L"], rows)
    ordered = sorted((p.mix.expected_layer, t) for t, p in probing.tasks.items() if p.mix.expected_layer is not None)
    print("order by expected layer: " + " < ".join(f"{TASK_NAMES[t]} ({e:.2f})" for e, t in ordered) + "\n")
    for task, why in probing.missing.items():
        print(f"not probed: {task}: {why}")


def control_table(probing) -> None:
    print("\n(b) Selectivity (task accuracy - control accuracy) at each hidden state\n")
    rows = []
    for task, p in probing.tasks.items():
        for fits in (p.linear, p.mlp):
            if fits is not None:
                rows.append([f"{TASK_NAMES[task]}, {fits.kind}",
                             *(f"{a:.3f} / {c:.3f} / {s:+.3f}" for a, c, s in
                               zip(fits.accuracy, fits.control, fits.selectivity)),
                             f"{fits.selectivity.mean():+.3f}"])
    table(["task, probe", *(f"{s}: task / control / selectivity" for s in range(probing.hidden_states)), "mean"],
          rows)


def codelength_table(probing) -> None:
    print("(c) Online codelength (kbits) of the linear probe: task / control task / random weights; compression\n")
    rows = []
    for task, p in probing.tasks.items():
        c = p.codelength
        cells = []
        for s in range(probing.hidden_states):
            random = "-" if c.random_weights is None else f"{c.random_weights[s] / 1000:.2f}"
            cells.append(f"{c.online[s] / 1000:.2f} / {c.control[s] / 1000:.2f} / {random} "
                         f"({c.compression(c.online)[s]:.2f}x)")
        rows.append([TASK_NAMES[task], f"{c.uniform / 1000:.2f}", c.examples, *cells])
    table(["task", "uniform", "examples", *(str(s) for s in range(probing.hidden_states))], rows)


def amnesic_rows(model, tokenizer, corpus, runs: list[tuple[str, int]]) -> None:
    print("(d) Amnesic probing: removed by INLP vs 5 random projections of the same rank\n")
    rows, agreement = [], []
    for task, layer in runs:
        t = time.perf_counter()
        a = amnesic(model, tokenizer, corpus, task, layer, draws=DRAWS, agreement_pairs=PAIRS)
        rows.append([TASK_NAMES[task], layer, a.rank, a.iterations, f"{a.probe_before:.3f}", f"{a.probe_after:.3f}",
                     f"{a.probe_random:.3f}", f"{a.majority:.3f}", f"{a.loss_before:.4f}", f"{a.loss_after:.4f}",
                     f"{a.loss_random.mean():.4f} ± {a.loss_random.std():.4f}", f"{a.accuracy_before:.3f}",
                     f"{a.accuracy_after:.3f}", f"{a.accuracy_random.mean():.3f}", f"{time.perf_counter() - t:.0f}"])
        if a.agreement_before is not None:
            for k in sorted(a.agreement_before):
                agreement.append([layer, k, a.agreement_pairs[k], *(f"{v[k]:.3f}" if v[k] is not None else "-" for v in
                                  (a.agreement_before, a.agreement_after, a.agreement_random))])
        if a.note:
            print(f"note ({task}, layer {layer}): {a.note}")
    table(["task", "state", "rank", "rounds", "probe before", "after", "random", "majority", "MLM loss before",
           "after", "random (mean ± sd)", "MLM acc before", "after", "random", "seconds"], rows)
    if agreement:
        print("Agreement with number removed, by attractors\n")
        table(["state", "attractors", "pairs", "before", "number removed", "random (mean)"], agreement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-amnesic", action="store_true")
    args = parser.parse_args()
    pin_threads(args.threads)
    ckpt = load_checkpoint(SHIPPED)
    corpus = story_corpus()
    t = time.perf_counter()
    probing = probe_corpus(ckpt.model, ckpt.tokenizer, corpus)
    print(f"{SHIPPED.name} on {probing.corpus}: {probing.sentences:,} sentences, the first {probing.train_sentences:,} "
          f"train; probe_corpus {time.perf_counter() - t:.0f} s\n")
    layers_table(probing)
    control_table(probing)
    codelength_table(probing)
    if not args.skip_amnesic:
        middle = default_layer(ckpt.config.num_hidden_layers)
        runs = [("number", s) for s in range(probing.hidden_states)] + [("pos", middle), ("dep", middle)]
        amnesic_rows(ckpt.model, ckpt.tokenizer, corpus, runs)


if __name__ == "__main__":
    main()
