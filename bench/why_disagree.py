"""Where attention and occlusion disagree: the search behind the Why-this-guess page's examples (issue 35).

Samples SENTENCES sentences of the story world (seed SEED), hides one content word in each (a noun, a verb, a
pronoun, or a pronoun's antecedent: the sentence's first noun or name, which the pronoun agrees with) and explains
the shipped model's top guess there with every method (views/why/examples.py's `score`). Prints, per method, the
mean and median Spearman rho against occlusion and the share of sentences whose deletion curve beats all 20 random
orders (and the share that only ties the best of them); how often the most-attended word (last layer, mean over heads) is the one occlusion ranks first; and the
sentences where attention and occlusion disagree most (lowest rho), a pronoun sentence among them. Writes those
EXAMPLES sentences to bertviz_lab/views/why/found.py. About 100 s on one thread (one sentence's tensors are
small: a second thread buys little, and on a busy machine it waits for the first).

    .venv/bin/python -m bench.why_disagree [--threads 1] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import re
import statistics
import sys
import time
from pathlib import Path

from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.tokenizer import MASK
from bertviz_lab.corpus import generate_documents
from bertviz_lab.corpus.tables import CATEGORIES, VERB
from bertviz_lab.explain.checks import MIN_TESTED, RANDOM_ORDERS
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.examples import score

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
FOUND = ROOT / "bertviz_lab" / "views" / "why" / "found.py"
SEED, DOCUMENTS = 0, 1500  # the story world's first 1,500 stories: some 8,000 sentences to draw from
QUOTA = {"noun": 90, "verb": 90, "pronoun": 60, "antecedent": 60}  # sentences per kind of hidden word: 300
EXAMPLES = 5
MIN_WORDS = 6  # an example has at least this many words to rank: over 4 or 5, a rho of -1 is easily chance
PRONOUN_KINDS = ("pronoun", "antecedent")


def _singular(*names: str) -> set[str]:
    return {getattr(item, "sg", item) for name in names for item in CATEGORIES[name]}


NOUNS = {form for items in CATEGORIES.values() for item in items if hasattr(item, "sg")
         for form in (item.sg, item.pl) if form}
NAMES = _singular("male", "female")
VERBS = {form for verb in VERB.values() for form in (verb.base, verb.s, verb.ed, verb.ing)}
PEOPLE = _singular("job", "role")
# Which antecedent each pronoun agrees with ("her" only before a noun: there it is "his"'s twin).
AGREES = {"he": _singular("male", "man") | PEOPLE, "she": _singular("female", "woman") | PEOPLE,
          "it": _singular("animal"), "they": {item.pl for item in CATEGORIES["animal"] + CATEGORIES["role"]
                                              if item.pl}}
AGREES |= {"his": AGREES["he"], "her": AGREES["she"], "its": AGREES["it"], "their": AGREES["they"]}


def candidates(words: list[str]) -> dict[str, list[int]]:
    """The positions of `words` that each kind may hide."""
    found = {"noun": [i for i, w in enumerate(words) if (w in NOUNS or w in NAMES) and w not in VERBS],
             "verb": [i for i, w in enumerate(words) if w in VERBS and w not in NOUNS], "pronoun": [],
             "antecedent": []}
    first = next((i for i, w in enumerate(words) if w in NOUNS or w in NAMES), None)
    for i, w in enumerate(words):
        possessive_her = w != "her" or (i + 1 < len(words) and words[i + 1] in NOUNS)
        if first is not None and first < i and w in AGREES and words[first] in AGREES[w] and possessive_her:
            found["pronoun"].append(i)
            found["antecedent"] = [first]
    return found


def sample(tokenizer) -> list[tuple[str, str, str]]:
    """(masked text, kind, hidden word) for sum(QUOTA) sentences, each kind filled to its quota, the fullest
    remaining quota first; only words the model reads as one token."""
    sentences = sorted({s for story in generate_documents(DOCUMENTS, SEED) for s in story})
    rng = random.Random(SEED)
    rng.shuffle(sentences)
    left, chosen = dict(QUOTA), []
    for sentence in sentences:
        words = re.findall(r"\w+|[^\w\s]", sentence)
        offered = {k: v for k, v in candidates(words).items() if v and left[k]}
        if not offered:
            continue
        kind = max(offered, key=lambda k: left[k])
        at = rng.choice(offered[kind])
        masked = " ".join(MASK if i == at else w for i, w in enumerate(words))
        if len(tokenizer.encode(masked).ids) != len(tokenizer.encode(" ".join(words)).ids):
            continue  # the word is more than one token: one [MASK] would not hide it
        chosen.append((masked, kind, words[at]))
        left[kind] -= 1
        if not any(left.values()):
            return chosen
    raise RuntimeError(f"the story world ran out of sentences for {left}")


def pick(scored: list[dict]) -> list[dict]:
    """The EXAMPLES sentences of MIN_WORDS words or more with the lowest rho, the lowest pronoun sentence among
    them."""
    ranked = sorted((s for s in scored if s["rho"] is not None and s["words"] >= MIN_WORDS), key=lambda s: s["rho"])
    chosen = ranked[:EXAMPLES]
    if not any(s["kind"] in PRONOUN_KINDS for s in chosen):
        chosen[-1] = next(s for s in ranked if s["kind"] in PRONOUN_KINDS)
    return chosen


def write(chosen: list[dict], search: dict) -> None:
    def record(s: dict) -> str:
        return (f"    {{'text': {s['text']!r}, 'kind': {s['kind']!r}, 'word': {s['word']!r},\n"
                f"     'target': {s['target']!r}, 'rho': {s['rho']!r},\n     'note': {s['note']!r}}},\n")

    records = "".join(record(s) for s in chosen)
    FOUND.write_text(
        '"""The sentences where last-layer attention and occlusion disagree most on the shipped model, found by\n'
        "`python -m bench.why_disagree` (views/why/examples.py reads them). Written by that script: run it again to\n"
        'regenerate this file, never edit it by hand."""\n\n'
        f"SEARCH = {search!r}\n"
        f"FOUND = (\n{records})\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help=f"print only; leave {FOUND.name} as it is")
    args = parser.parse_args()
    pin_threads(args.threads)
    sys.stdout.reconfigure(line_buffering=True)
    start = time.perf_counter()
    ckpt = load_checkpoint(SHIPPED)
    scored, rho, same_top, tested = [], {k: [] for k in vw.TITLES}, 0, 0
    beats, ties = {k: 0 for k in vw.TITLES}, {k: 0 for k in vw.TITLES}
    for text, kind, word in sample(ckpt.tokenizer):
        s = score(ckpt.model, ckpt.tokenizer, text)
        for method, r in s.result.agreement["occlusion"].items():
            if r is not None:
                rho[method].append(r)
        deletion = vw.deletion_for(s.result)
        tested += deletion.tested  # 5 or more removable tokens: enough orders for a test against random ones
        for method in beats:
            beats[method] += deletion.verdict(method) == "beats"
            ties[method] += deletion.verdict(method) == "ties"  # equal to the best random order: not a win
        same_top += s.attended == s.occluded
        scored.append({"text": text, "kind": kind, "word": word, "target": s.result.target, "rho": s.rho,
                       "note": s.note,
                       "words": len(s.result.explanation.movable)})
    n, seconds = len(scored), time.perf_counter() - start
    counts = ", ".join(f"{q} {k}s" for k, q in QUOTA.items())
    print(f"bench.why_disagree, {dt.date.today()}: {n} story-world sentences (seed {SEED}; hidden: {counts}), "
          f"{SHIPPED.name}, the top guess explained, {args.threads} thread{'s' * (args.threads > 1)}, {seconds:.0f} s")
    print(f"{'method':<22} {'mean ρ':>7} {'median ρ':>9} {'beats random':>13} {'ties best':>10}   (ρ: Spearman against "
          f"occlusion; beats random, ties best: of the {tested} sentences with {MIN_TESTED} or more removable tokens; "
          f"chance: 1 in {RANDOM_ORDERS + 1}, {1 / (RANDOM_ORDERS + 1):.1%})")
    for method, title in vw.TITLES.items():
        r = rho[method]
        print(f"{title:<22} {statistics.mean(r):>7.3f} {statistics.median(r):>9.3f} {beats[method] / max(tested, 1):>13.1%}"
              f" {ties[method] / max(tested, 1):>10.1%}"
              + (f"   (ρ undefined on {n - len(r)})" if len(r) < n else ""))
    print(f"most-attended word (last layer, mean over heads) = occlusion's first: {same_top} of {n} "
          f"({same_top / n:.1%})")
    chosen = pick(scored)
    print(f"the {len(chosen)} sentences of {MIN_WORDS} words or more where attention and occlusion disagree most:")
    for s in chosen:
        print(f"  ρ = {s['rho']:+.3f}  [{s['kind']}: {s['word']}]  {s['text']}  (guess: {s['target']}; {s['note']})")
    if not args.no_write:
        write(chosen, {"date": str(dt.date.today()), "sentences": n, "seed": SEED,
                       "min_words": MIN_WORDS, "median_rho": statistics.median(rho["attention"])})
        print(f"wrote {FOUND.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
