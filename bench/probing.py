"""What a probe can and cannot show (issue 56): how long careful probing takes, stage by stage, on the shipped model and
on a random BERT-base-sized model (12 layers, 768 wide, the shipped tokenizer), and against the tutorial way of doing
each part in the same run.

For each size, on story_corpus(--sentences) (seed 0: the first three quarters train, the rest test):
1. `probing.report.probe_corpus` with everything (both probes, the scalar mix, the codelength, the random-weights
   twin): the seconds of each stage as it records them and the total, beside `seconds_needed`'s estimate. Goals
   (issue 56): under 30 s for the shipped model (its Syntax page with this tab under 60 s on 2 cores) and under
   5 minutes for the base-sized one.
2. Reading the features: ours (`probing.features.read_features`) against a transformers BertModel holding the same
   weights (bench/common.py `hf_twin`), `output_hidden_states=True`, each word the mean of its pieces, in the same
   batches of 32 sorted by length. Both tokenize inside the timed call; the two arrays are checked equal first.
3. The linear probes: ours (`probing.fit.fit_layers`: every hidden state in one batched L-BFGS, the task and its
   control together) against scikit-learn's LogisticRegression fitted once per hidden state on the same examples
   (each hidden state standardised by its training words, C = 1 / (PENALTY * training examples): the same
   objective), the task's labels only. The accuracies side by side: they should agree within a point or two.
4. Amnesic probing of noun number at `default_layer` with 5 random draws: its seconds and its numbers.

A ratio below 1.0: we are faster. One thread by default (the probes run on one thread whatever the caller's count).

    .venv/bin/python -m bench.probing [--threads 1] [--sizes shipped,base] [--sentences 1200] [--tasks pos,dep]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import time
import warnings

import numpy as np
import torch

from bench.attribution import SHIPPED, cpu_name
from bench.common import hf_twin, pin_threads
from bertviz_lab.probing.features import read_features, stacked
from bertviz_lab.probing.records import Examples, Features
from bertviz_lab.syntax.encode import _encode, _padded

GOALS = {"shipped": 30.0, "base": 300.0}  # seconds for probe_corpus with everything (issue 56)
SIZES = ("shipped", "base")


def subject(size: str):
    """(title, model, tokenizer): the shipped model, or a random 12 x 768 model (seeded) with its tokenizer."""
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.bert.model import BertForPreTraining

    ckpt = load_checkpoint(SHIPPED, device=torch.device("cpu"))
    if size == "shipped":
        model = ckpt.model
    else:
        cfg = dataclasses.replace(ckpt.config, num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                                  intermediate_size=3072)
        torch.manual_seed(0)
        model = BertForPreTraining(cfg).eval()
    cfg = model.config
    title = (f"{'the shipped model ' + SHIPPED.name if size == 'shipped' else 'a random BERT-base-sized model'} "
             f"({cfg.num_hidden_layers} layers, {cfg.hidden_size} wide, vocabulary {cfg.vocab_size})")
    return title, model, ckpt.tokenizer


@torch.no_grad()
def hf_features(hf, tokenizer, trees, batch_size: int = 32) -> Features:
    """Every word at every hidden state the tutorial way: transformers' `output_hidden_states`, each word the mean
    of its pieces, batches of similar length as ours makes them."""
    max_tokens = hf.config.max_position_embeddings
    encoded = [_encode(tokenizer, max_tokens, n, tree) for n, tree in enumerate(trees, 1)]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][1]))
    vectors: list[np.ndarray | None] = [None] * len(encoded)
    bert = hf.bert if hasattr(hf, "bert") else hf
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batch = _padded([encoded[i] for i in chunk], tokenizer.pad_id, "cpu")
        out = bert(input_ids=batch["ids"], token_type_ids=batch["segments"], attention_mask=batch["mask"],
                   output_hidden_states=True)
        hidden = torch.stack(out.hidden_states, dim=1)  # (B, L + 1, T, d)
        for row, i in enumerate(chunk):
            groups = encoded[i][2]
            vectors[i] = np.stack([hidden[row, :, list(g)].mean(1).numpy() for g in groups], axis=1)  # (L + 1, W, d)
    return stacked(vectors)


def standardised(vectors: np.ndarray, ex: Examples) -> np.ndarray:
    """(S, N, parts * d) float64: each example's word (and a pair's second word) at every hidden state, each hidden
    state centred and scaled by the words the training examples read."""
    fit = ex.first[ex.train] if ex.second is None else np.concatenate([ex.first[ex.train], ex.second[ex.train]])
    seen = np.unique(fit)
    mean = vectors[seen].mean(0, dtype=np.float64)  # (S, d)
    std = np.maximum(vectors[seen].std(0, ddof=1, dtype=np.float64), 1e-6)
    parts = [(vectors[ex.first] - mean) / std]
    if ex.second is not None:
        parts.append((vectors[ex.second] - mean) / std)
    return np.concatenate(parts, axis=-1).transpose(1, 0, 2)  # (S, N, parts * d)


def sklearn_accuracies(vectors: np.ndarray, ex: Examples, threads: int = 1) -> np.ndarray:
    """(S,) test accuracy of scikit-learn's LogisticRegression fitted at each hidden state on `ex`'s training
    examples, with the objective of fit.py's linear probe (mean cross-entropy + PENALTY / 2 * |W|^2)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    from bertviz_lab.probing.fit import PENALTY

    z = standardised(vectors, ex)
    train, test = ex.train, ~ex.train
    out = []
    with threadpool_limits(threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for state in z:  # (N, parts * d)
            probe = LogisticRegression(C=1 / (PENALTY * int(train.sum())), max_iter=100, tol=1e-4)
            probe.fit(state[train], ex.labels[train])
            out.append(float((probe.predict(state[test]) == ex.labels[test]).mean()))
    return np.array(out)


def ours_accuracies(vectors: np.ndarray, ex: Examples) -> np.ndarray:
    """(S,) our batched linear probe's test accuracy, the task's labels only."""
    from bertviz_lab.probing.fit import fit_layers

    return fit_layers(vectors, ex.first, ex.second, ex.labels[None], ex.train, len(ex.classes), "linear")[0]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def cpu_timed(fn):
    """(result, wall seconds, CPU seconds of this process): on a shared machine the CPU time says what the work
    cost, the wall time what the user waited."""
    cpu = time.process_time()
    out, wall = timed(fn)
    return out, wall, time.process_time() - cpu


def probing_figures(size: str, title: str, model, tokenizer, corpus) -> bool:
    from bertviz_lab.probing.report import probe_corpus, seconds_needed

    cfg = model.config
    probing, took, cpu = cpu_timed(lambda: probe_corpus(model, tokenizer, corpus))
    guess = seconds_needed(cfg.num_hidden_layers, cfg.hidden_size, probing.sentences)
    met = took < GOALS[size]
    print(f"\n{title}, {probing.sentences:,} story sentences")
    print(f"1. probe_corpus, everything: {took:.1f} s ({cpu:.1f} s of CPU; estimate {guess:.1f} s); goal < "
          f"{GOALS[size]:g} s: {'met' if met else 'MISSED'}")
    width = max(map(len, probing.seconds), default=0)
    for stage, seconds in probing.seconds.items():
        print(f"   {stage:<{width}} {seconds:7.2f} s")
    for task, t in probing.tasks.items():
        best = int(np.argmax(t.linear.accuracy))
        expected = "-" if t.mix is None or t.mix.expected_layer is None else f"{t.mix.expected_layer:.2f}"
        print(f"   {task}: {t.train:,} train / {t.test:,} test; linear best {t.linear.accuracy[best]:.1%} at state "
              f"{best}, selectivity {t.linear.selectivity[best]:+.1%}; expected layer {expected}")
    for task, why in probing.missing.items():
        print(f"   {task} left out: {why}")
    return met


def reading_figures(model, tokenizer, trees) -> Features:
    hf = hf_twin(model).eval()
    ours, mine = timed(lambda: read_features(model, tokenizer, trees))
    theirs, their = timed(lambda: hf_features(hf, tokenizer, trees))
    diff = float(np.abs(ours.vectors - theirs.vectors).max())
    scale = float(np.abs(ours.vectors).max())
    print(f"2. reading {len(trees):,} sentences ({ours.vectors.shape[0]:,} words, {ours.layers} hidden states): "
          f"ours {mine:.2f} s, transformers + output_hidden_states {their:.2f} s, ratio ours / theirs "
          f"{mine / their:.3f}; largest |difference| {diff:.2e} (largest |value| {scale:.1f})")
    assert diff <= 1e-4 * max(1.0, scale), "the two readings disagree"
    return ours


def fit_figures(features: Features, trees, split: int, tasks: list[str], threads: int) -> None:
    from bertviz_lab.probing.tasks import examples

    print("3. linear probes at every hidden state, the task's labels: ours (one batched fit) against scikit-learn "
          "(one fit per hidden state)")
    for task in tasks:
        ex = examples(task, trees, features, split)
        mine, ours_s = timed(lambda ex=ex: ours_accuracies(features.vectors, ex))
        theirs, theirs_s = timed(lambda ex=ex: sklearn_accuracies(features.vectors, ex, threads))
        print(f"   {task}: {int(ex.train.sum()):,} train / {int((~ex.train).sum()):,} test, {len(ex.classes)} labels: "
              f"ours {ours_s:.2f} s, scikit-learn {theirs_s:.2f} s, ratio {ours_s / theirs_s:.3f}; largest "
              f"accuracy gap {float(np.abs(mine - theirs).max()):.1%}")
        print("     ours:         " + " ".join(f"{a:6.1%}" for a in mine))
        print("     scikit-learn: " + " ".join(f"{a:6.1%}" for a in theirs))


def amnesic_figures(model, tokenizer, corpus) -> None:
    from bertviz_lab.probing.amnesic import amnesic, default_layer

    layer = default_layer(model.config.num_hidden_layers)
    a, took, cpu = cpu_timed(lambda: amnesic(model, tokenizer, corpus, "number", layer, draws=5))
    print(f"4. amnesic probing of number at hidden state {layer}, 5 draws: {took:.1f} s ({cpu:.1f} s of CPU); {a.rank} directions in "
          f"{a.iterations} rounds; probe {a.probe_before:.1%} -> {a.probe_after:.1%} (random {a.probe_random:.1%}, "
          f"majority {a.majority:.1%})" + (f"; masked-LM loss {a.loss_before:.3f} -> {a.loss_after:.3f} (random "
                                           f"{float(np.mean(a.loss_random)):.3f}) on {a.masked:,} tokens"
                                           if a.masked else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default=",".join(SIZES), help="shipped, base or both (default shipped,base)")
    parser.add_argument("--sentences", type=int, default=1200, help="story-world sentences (default 1200)")
    parser.add_argument("--tasks", default="pos,dep,coref,number", help="tasks of the scikit-learn comparison")
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    if not set(sizes) <= set(SIZES):
        parser.error(f"--sizes takes {' and '.join(SIZES)}, got {args.sizes}")
    pin_threads(args.threads)
    from bertviz_lab.syntax.report import fitting, story_corpus

    print(f"{dt.date.today()} · {platform.node()} · {cpu_name()} · {os.cpu_count()} cores, {args.threads} torch "
          f"thread{'s' * (args.threads != 1)}, CPU, torch {torch.__version__} · load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    missed = 0
    for size in sizes:
        title, model, tokenizer = subject(size)
        corpus = fitting(story_corpus(args.sentences), tokenizer, model.config.max_tokens)
        missed += not probing_figures(size, title, model, tokenizer, corpus)
        features = reading_figures(model, tokenizer, corpus.trees)
        fit_figures(features, corpus.trees, corpus.split, args.tasks.split(","), args.threads)
        amnesic_figures(model, tokenizer, corpus)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    print("\nevery goal met" if not missed else f"\n{missed} goal(s) MISSED")


if __name__ == "__main__":
    main()
