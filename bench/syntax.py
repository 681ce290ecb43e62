"""What the shipped model knows of grammar (issue 36): `syntax.report.analyse` on the story world, as the tables of docs/reference.md.

Loads checkpoints/bertviz-mini, reads the default story corpus (1,200 sentences, seed 0: the probe trains on 900,
tests on 300) with the control (the same probes on random weights of the same shape) and the agreement pairs, and
prints Markdown tables:

(a) per relation with at least --min-count dependents: the best dependent → head head and its accuracy, the best
    head → dependent head and its accuracy, the best fixed offset and its accuracy (Clark et al. 2019);
(b) the structural probe by layer (layer 0: the embeddings' output): UUAS, Spearman, root accuracy, and the
    control's UUAS; the linear baseline (each word linked to the next) below (Hewitt & Manning 2019);
(c) agreement accuracy by attractors with the pairs counted, and the example "the children in the park [MASK]
    happy ." with p(were) and p(was) (Linzen et al. 2016);
(d) the seconds of each phase and the total, on the date, machine and torch threads named on the first line.

One thread by default: the probes' full-batch steps are small, and on a busy machine a second thread waits for
the first (the conftest's one_thread says why).

    .venv/bin/python -m bench.syntax [--threads 1] [--sentences 1200] [--seed 0] [--min-count 50]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from pathlib import Path

import torch

from bench.attribution import cpu_name
from bench.common import pin_threads
from bertviz_lab.syntax.report import STORY_SENTENCES

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "bertviz-mini"
MIN_COUNT = 50


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table: the first column left-aligned, the numbers after it right-aligned."""
    rule = ["---"] + ["---:"] * (len(header) - 1)
    return [f"| {' | '.join(cells)} |" for cells in (header, rule, *rows)]


def relation_rows(relations, min_count: int) -> list[list[str]]:
    from bertviz_lab.head_id import HeadId

    rows = []
    for name in relations.relations:
        count = int(relations.counts[relations.index(name)])
        if count < min_count:
            continue
        cells = [name, f"{count:,}"]
        for direction in (0, 1):
            head, accuracy = relations.best(name, direction)
            cells += [str(HeadId(*head)), f"{accuracy:.1%}"]
        offset, accuracy = relations.baseline[name]
        rows.append([*cells, f"{offset:+d}", f"{accuracy:.1%}"])
    return rows


def probe_rows(report) -> list[list[str]]:
    control = report.control.layers if report.control is not None else [None] * len(report.probe.layers)
    return [[str(s.layer) + (" (embeddings)" if s.layer == 0 else ""), f"{s.uuas:.3f}", f"{s.spearman:.3f}",
             f"{s.root_accuracy:.1%}", "-" if c is None else f"{c.uuas:.3f}"]
            for s, c in zip(report.probe.layers, control)]


def agreement_rows(agreement) -> list[list[str]]:
    return [[str(k), f"{right / n:.1%}" if n else "-", f"{right:,} of {n:,}"]
            for k, (right, n) in agreement.counts().items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=STORY_SENTENCES, help="story-world sentences (default 1200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-count", type=int, default=MIN_COUNT, help="relations with fewer dependents are not "
                                                                         "listed (default 50)")
    args = parser.parse_args()
    pin_threads(args.threads)
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.cli.syntax import example
    from bertviz_lab.syntax.report import analyse, story_corpus

    print(f"{dt.date.today()} · {platform.node()} · {cpu_name()} · {os.cpu_count()} cores, "
          f"{torch.get_num_threads()} torch thread{'s' * (torch.get_num_threads() != 1)}, CPU, torch "
          f"{torch.__version__} · load average {os.getloadavg()[0]:.1f} at the start")
    start = time.perf_counter()
    ckpt = load_checkpoint(SHIPPED, device=torch.device("cpu"))
    loading = time.perf_counter() - start
    corpus = story_corpus(args.sentences, args.seed)
    start = time.perf_counter()
    report = analyse(ckpt.model, ckpt.tokenizer, corpus, seed=args.seed)
    total = time.perf_counter() - start
    probe, cfg = report.probe, ckpt.config
    print(f"\n{SHIPPED.name} ({cfg.num_hidden_layers} layers x {cfg.num_attention_heads} heads, hidden "
          f"{cfg.hidden_size}) on {report.corpus.name}: probe rank {probe.rank}, {probe.steps} steps, trained on "
          f"{probe.train_sentences:,} sentences ({probe.dev_sentences:,} of them to pick the step), tested on "
          f"{probe.test_sentences:,}" + (f"; {report.corpus.note}" if report.corpus.note else ""))

    print(f"\n(a) Relations with at least {args.min_count} dependents: the head that follows each best, both ways, "
          f"and the best fixed offset\n")
    print("\n".join(table(["relation", "dependents", "dependent → head", "accuracy", "head → dependent",
                           "accuracy", "baseline offset", "accuracy"], relation_rows(report.relations,
                                                                                   args.min_count))))

    print(f"\n(b) Structural probe by layer, on the {probe.test_sentences:,} test sentences\n")
    print("\n".join(table(["layer", "UUAS", "Spearman", "root accuracy", "control UUAS (random weights)"],
                          probe_rows(report))))
    layer, uuas = report.best_uuas()
    control = max(report.control.layers, key=lambda s: s.uuas)
    print(f"\nlinear baseline (each word linked to the next): UUAS {probe.linear_uuas:.3f}; best layer {layer}: UUAS "
          f"{uuas:.3f}; the control's best: {control.uuas:.3f} (layer {control.layer})")

    agreement = report.agreement
    print("\n(c) Agreement: p(right form) > p(wrong form) at the masked verb, by attractors\n")
    print("\n".join(table(["attractors", "accuracy", "pairs right"], agreement_rows(agreement))))
    if agreement.skipped:
        print(f"\n{agreement.skipped:,} pairs left out: their forms are not one token each in this vocabulary")
    pair = example(report)
    if pair is not None:
        print(f"\nexample: \"{pair.masked}\": p({pair.right}) = {pair.p_right:.4f}, p({pair.wrong}) = "
              f"{pair.p_wrong:.4f}")

    print("\n(d) Seconds\n")
    rows = [["loading the checkpoint", f"{loading:.1f}"],
            *[[phase, f"{seconds:.1f}"] for phase, seconds in report.seconds.items()],
            ["total (analyse)", f"{total:.1f}"]]
    print("\n".join(table(["phase", "seconds"], rows)))


if __name__ == "__main__":
    main()
