"""What the shipped model's feed-forward neurons hold (issue 55, for docs/guide.md): deterministic, one command.

(a) The causal test (neurons/behind.py: integrated gradients, 20 steps; the top k = 10 neurons suppressed at the
    [MASK] against 20 seeded draws of 10 random neurons, the same count per layer) on two kinds of guess:
    - grammatical: number agreement, 50 story-world pairs with no attractor (corpus/agreement.py), F = logit(right
      form) - logit(wrong form) ("were" - "was", "is" - "are", ...);
    - word knowledge: held-out story sentences with one noun masked where the model guesses that noun first with
      p >= 0.5, F = logit(noun) - logit(the noun of the same category, same number, it ranks next): 50 sentences, at
      most 2 per noun.
    Niu et al. (2024): if "knowledge neurons" were specific to facts, the test would single out the second kind.
(b) Outlier LayerNorm dimensions (neurons/outliers.py, Kovaleva et al. 2021) and the MLM loss with them zeroed, on 300
    held-out story sentences that never occur in the shipped model's 5,000 training steps (checked against every
    document those steps drew), against 20 random pairs.
(c) With neurons/index.py: for the 5 neurons of largest mean attribution in each kind, the tokens they fire on most
    over 2,000 held-out story sentences (their top 12 contexts).

    PYTHONPATH=. .venv/bin/python -m bench.neurons_findings [--threads 2]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import time

import numpy as np
import torch

from bench.attribution import SHIPPED
from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus.agreement import agreement_pairs
from bertviz_lab.corpus.tables import CATEGORIES
from bertviz_lab.explain.score import Score
from bertviz_lab.neurons.behind import attribute, causal_test
from bertviz_lab.neurons.outliers import held_out, outlier_dims, outlier_test
from bertviz_lab.pretrain.data import DocumentSource, _mix

K, DRAWS, STEPS, PAIRS, TRAIN_STEPS, BATCH = 10, 20, 20, 50, 5000, 32


def agreement(tok) -> list[tuple[str, str, str]]:
    pairs = [p for p in agreement_pairs(per_count=200, seed=0) if p.attractors == 0]
    return [(" ".join(p.masked_words("[MASK]")), p.right, p.wrong) for p in pairs[:PAIRS]]


def _categories(tok) -> dict[str, list[list[str]]]:
    """word -> the noun lists (same number) of each category holding it, smallest first."""
    out = collections.defaultdict(list)
    for nouns in sorted(CATEGORIES.values(), key=len):
        for form in ("sg", "pl"):
            words = [getattr(n, form, None) for n in nouns if hasattr(n, form)]
            words = [w for w in words if w and tok.token_to_id(w) is not None]
            if len(set(words)) >= 3:
                for w in words:
                    out[w].append(sorted(set(words)))
    return out


@torch.no_grad()
def knowledge(model, tok, sentences) -> list[tuple[str, str, str]]:
    """Held-out sentences with one category noun masked that the model guesses first with p >= 0.5."""
    found, per_answer = [], collections.Counter()
    by_word = _categories(tok)
    for sentence in sentences:
        words = tok.encode(sentence).tokens[1:-1]
        for i, word in enumerate(words):
            if word not in by_word or per_answer[word] >= 2:
                continue
            masked = words[:i] + ["[MASK]"] + words[i + 1:]
            enc = tok.encode(" ".join(masked))
            logits = model(torch.tensor([enc.ids]))
            logits = logits.mlm_logits[0, i + 1, : tok.vocab_size]
            p = logits.softmax(-1)
            if int(p.argmax()) != tok.token_to_id(word) or float(p.max()) < 0.5:
                continue
            others = [w for w in by_word[word][0] if w != word]
            foil = max(others, key=lambda w: float(logits[tok.token_to_id(w)]))
            found.append((" ".join(masked), word, foil))
            per_answer[word] += 1
            break
        if len(found) == PAIRS:
            break
    return found


def causal(model, tok, items) -> dict:
    drops, randoms, beats, scores, fs = [], [], [], [], []
    for text, answer, foil in items:
        enc = tok.encode(text)
        ids = torch.tensor([enc.ids])
        score = Score(enc.tokens.index("[MASK]"), tok.token_to_id(answer), tok.token_to_id(foil), tok.vocab_size)
        found = attribute(model, ids, None, score, "ig", STEPS)
        test = causal_test(model, ids, None, score, found, k=K, draws=DRAWS, seed=0)
        drops.append(test.drop_top)
        fs.append(test.f)
        randoms.append(test.drop_random)
        beats.append(test.beats_random)
        scores.append(found.scores)
    return {"n": len(items), "drop_top": np.array(drops), "drop_random": np.array(randoms), "beats": np.array(beats),
            "f": np.array(fs), "examples": items[:3], "mean_scores": np.mean(scores, 0)}


def training_sentences() -> set[str]:
    """Every sentence of every document the shipped model's 5,000 training steps drew (seed 0, rank 0)."""
    source, seen = DocumentSource(None, seed=0), set()
    for step in range(TRAIN_STEPS):
        for doc in source.sample(2 * BATCH, _mix(0, step, 0)):
            seen.update(doc)
    return seen


def report_causal(name: str, r: dict) -> None:
    print(f"  {name:<16} n={r['n']:>3}  F {r['f'].mean():6.3f}  drop top-{K} {r['drop_top'].mean():7.3f} (median "
          f"{np.median(r['drop_top']):.3f})  drop random {r['drop_random'].mean():7.3f}  "
          f"beats random {int(r['beats'].sum())}/{r['n']}; e.g. " + "; ".join(f"{t} -> {a} (not {f})"
                                                                          for t, a, f in r["examples"]))


def firing(model, tok, kinds: dict) -> None:
    if importlib.util.find_spec("bertviz_lab.neurons.index") is None:
        print("(c) neurons/index.py is not there yet")
        return
    from bertviz_lab.neurons.index import build

    index = build(model, tok, held_out(2000))
    print("(c) the 5 neurons of largest mean attribution, and the tokens of their top 12 contexts")
    for name, r in kinds.items():
        flat = np.argsort(-r["mean_scores"].ravel(), kind="stable")[:5]
        for i in flat:
            layer, neuron = divmod(int(i), r["mean_scores"].shape[1])
            tokens = collections.Counter(c.tokens[c.position] for c in index.contexts(layer, neuron))
            words = ", ".join(f"{w} x{n}" if n > 1 else w for w, n in tokens.most_common(6))
            print(f"  {name:<14} L{layer} n{neuron:<5} mean IG {r['mean_scores'][layer, neuron]:.4f}   {words}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    pin_threads(args.threads)
    start = time.time()
    ckpt = load_checkpoint(SHIPPED)
    model, tok = ckpt.model, ckpt.tokenizer
    seen = training_sentences()
    pool = held_out(6000)
    unseen = [s for s in pool if s not in seen]
    print(f"held-out story sentences: {len(pool)} drawn, {len(unseen)} never in the 5,000 training steps "
          f"({len(seen):,} distinct training sentences)")
    kinds = {"agreement": causal(model, tok, agreement(tok)),
             "word knowledge": causal(model, tok, knowledge(model, tok, unseen))}
    print(f"(a) the causal test: IG ({STEPS} steps), top {K} suppressed at the [MASK] vs {DRAWS} random draws")
    for name, r in kinds.items():
        report_causal(name, r)
    found = outlier_dims(model)
    print(f"(b) outlier dims {found.dims}; per layer gamma dims {found.weight_dims.tolist()} "
          f"z {np.round(found.weight_z, 2).tolist()}; beta dims {found.bias_dims.tolist()} "
          f"z {np.round(found.bias_z, 2).tolist()}; most slots held by one dim: {found.counts.max()}")
    test = outlier_test(model, tok, unseen[:300], draws=20, seed=0)
    print(f"  MLM on 300 unseen sentences ({test.masked} masked): loss {test.loss:.4f} acc {test.accuracy:.4f}; "
          f"dims {test.dims} off: loss {test.loss_off:.4f} acc {test.accuracy_off:.4f}; 20 random pairs: loss "
          f"{test.random_loss.mean():.4f} +- {test.random_loss.std():.4f} (max {test.random_loss.max():.4f}) acc "
          f"{test.random_accuracy.mean():.4f} +- {test.random_accuracy.std():.4f}; beats random {test.beats_random}")
    firing(model, tok, kinds)
    print(f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
