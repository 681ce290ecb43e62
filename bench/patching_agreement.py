"""Where the shipped model makes number agreement: activation patching over many agreement pairs (issue 54's finding,
written in docs/guide.md, "Where is the answer made?").

For each number of attractors 0..3, the first PAIRS pairs of corpus/agreement.py whose every noun between the
subject and the verb is an attractor, each made a minimal pair by putting the subject in the other number (as
corpus/minimal_pairs.py does): clean "the children in the park [MASK] happy ." (were - was), corrupted "the child in
the park [MASK] happy .". Per pair: whether the model agrees (F = logit(right) - logit(wrong) > 0 on the clean
sentence) and the residual-stream grid, denoising, summed over the pairs as a ratio of sums (`measure`).

Prints, per attractor count and depth, the mean share of the logit difference restored by patching the subject's
position and the [MASK]'s, and the depth at which the [MASK] first carries more than the subject (the median over
pairs). Deterministic: no sampling beyond the seeded pairs, one thread.

    .venv/bin/python -m bench.patching_agreement [--pairs 50]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
from pathlib import Path

import numpy as np

from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus.agreement import MAX_ATTRACTORS, agreement_pairs
from bertviz_lab.corpus.minimal_pairs import MASK, _numbers
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.patching.runs import grid, prepare

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"


def pairs_with(attractors: int, count: int) -> list[tuple[str, str, str, str]]:
    """(clean, corrupt, right, wrong) for `count` pairs with `attractors` attractors and nothing else in between."""
    numbers = _numbers()
    out = []
    for pair in agreement_pairs(per_count=max(4 * count, 20)):
        words = pair.masked_words(MASK)
        if pair.attractors != attractors or words[1] not in numbers or words.count("the") != attractors + 1:
            continue
        flipped = [*words[:1], numbers[words[1]], *words[2:]]
        out.append((" ".join(words), " ".join(flipped), pair.right, pair.wrong))
        if len(out) == count:
            break
    return out


def measure(model, tokenizer, attractors: int, count: int) -> dict:
    """One attractor count: agreement accuracy, the mean gap F(clean) - F(corrupted), and the share of that gap the
    subject's and the [MASK]'s residual stream restore at each depth, as a ratio of sums over the pairs (sum of
    F(patched) - F(corrupted) over sum of F(clean) - F(corrupted)): a pair whose own gap is tiny then weighs little,
    where a mean of per-pair shares would be ruled by it."""
    right, gaps, moved, skipped = 0, [], {"subject": [], "mask": []}, 0
    pairs = pairs_with(attractors, count)
    for clean, corrupt, good, bad in pairs:
        try:
            patching = prepare(model, tokenizer, PatchAsk(clean, corrupt, answer=good, foil=bad))
        except InputError:  # the two runs score alike: nothing to restore
            skipped += 1
            continue
        right += patching.f_clean > 0
        f = grid(patching, "resid", "denoise").f  # (L + 1, T): F of each patched run
        gaps.append(patching.f_clean - patching.f_corrupt)
        moved["subject"].append(f[:, 2] - patching.f_corrupt)  # [CLS] the <subject> ...
        moved["mask"].append(f[:, patching.position] - patching.f_corrupt)
    total = sum(gaps)
    share = {where: np.sum(rows, 0) / total for where, rows in moved.items()}
    ahead = np.flatnonzero(share["mask"] > share["subject"])
    return dict(attractors=attractors, pairs=len(pairs), agree=right / max(len(pairs), 1), used=len(gaps),
                skipped=skipped, gap=statistics.mean(gaps), subject=share["subject"], mask=share["mask"],
                crossing=int(ahead[0]) if len(ahead) else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=50, help="pairs per attractor count (default 50)")
    args = parser.parse_args(argv)
    pin_threads(1)
    ck = load_checkpoint(SHIPPED)
    print(f"# bertviz-mini, {args.pairs} pairs per attractor count, denoising the residual stream, "
          f"{dt.date.today()}")
    layers = ck.model.config.num_hidden_layers
    depths = ["emb", *(f"L{i + 1}" for i in range(layers))]
    print("attractors | agrees | mean gap (logits) | where | " + " | ".join(depths) + " | [MASK] ahead from")
    for attractors in range(MAX_ATTRACTORS + 1):
        r = measure(ck.model, ck.tokenizer, attractors, args.pairs)
        for where in ("subject", "mask"):
            cells = " | ".join(f"{v:.2f}" for v in r[where])
            crossing = "" if where == "subject" else depths[r["crossing"]] if r["crossing"] is not None else "never"
            print(f"{attractors} | {r['agree']:.0%} | {r['gap']:.2f} ({r['used']}/{r['pairs']} pairs) | {where} | "
                  f"{cells} | {crossing}")


if __name__ == "__main__":
    main()
