"""The probing tasks' examples, read from gold trees, and their control tasks (Hewitt & Liang 2019).

- pos: each word -> its UPOS (punctuation included, as in the trees).
- dep: each word that has a head (the dependent, the head) -> the relation without its subtype (acl:relcl -> acl).
- coref: each pronoun with a recorded referent, paired with every noun and name of its sentence -> "referent" for the
  referent's head word, else "other" (Tenney et al.'s span pairs, one word a span). A CoNLL-U file has no
  coreference, so a treebank has no examples.
- number: each noun (UPOS NOUN) whose form the story world's lexicon knows as one number only -> "singular" or
  "plural" ("sheep" and "fish", the same in both, are left out). A treebank's nouns count where the lexicon knows them.

Examples of the corpus's first `split` sentences train, the rest test: the split is by sentence, so no test word was
seen in its sentence. Each split is capped (MAX_TRAIN, MAX_TEST), by a seeded draw, so a probe costs the same on a big
treebank; a test label the training split never shows is left out (no probe could name it). Too few examples, or a
single label, is one InputError sentence naming the task.

A control task gives each word type (`Examples.keys`: the word, or a pair task's dependent / candidate) one label,
drawn once from the task's training label distribution and fixed for every occurrence: a probe can only score on it by
memorising word types, so task accuracy minus control accuracy (selectivity) says how much of the accuracy the vectors,
not the probe, bring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from bertviz_lab.corpus.morph import Noun
from bertviz_lab.corpus.tables import CATEGORIES
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import TASK_NAMES, TASKS, Examples, Features

MAX_TRAIN, MAX_TEST = 2_000, 1_000  # examples per split: the story world's part of speech has ~7,800 and ~2,600
MIN_TRAIN, MIN_TEST = 40, 20
PRONOUNS = "PRON"
NOUNS = ("NOUN", "PROPN")
REFERENT, OTHER = "referent", "other"


def _numbers() -> dict[str, str]:
    """form -> "singular" / "plural" for every countable noun of the lexicon whose forms differ and mean one number."""
    seen: dict[str, set[str]] = {}
    for words in CATEGORIES.values():
        for noun in words:
            if isinstance(noun, Noun) and noun.pl is not None and noun.pl != noun.sg:
                seen.setdefault(noun.sg, set()).add("singular")
                seen.setdefault(noun.pl, set()).add("plural")
    return {form: next(iter(numbers)) for form, numbers in seen.items() if len(numbers) == 1}


NUMBER = _numbers()


def _raw(task: str, trees: Sequence[Tree], features: Features):
    """(label, key, first, second, text, sentence) for every example of `task`, in corpus order."""
    out = []
    for s, tree in enumerate(trees):
        base = int(features.start[s])
        for i, word in enumerate(tree.words):
            if task == "pos":
                out.append((tree.upos[i], word, base + i, -1, word, s))
            elif task == "dep" and tree.heads[i] >= 0:
                h = tree.heads[i]
                out.append((tree.base_relation(i), word, base + i, base + h, f"{word} -> {tree.words[h]}", s))
            elif task == "number" and tree.upos[i] == "NOUN" and word in NUMBER:
                out.append((NUMBER[word], word, base + i, -1, word, s))
        if task == "coref":
            for pronoun, referent in tree.coref:
                for j, upos in enumerate(tree.upos):
                    if upos in NOUNS and j != pronoun:
                        out.append((REFERENT if j == referent else OTHER, tree.words[j], base + pronoun, base + j,
                                    f"{tree.words[pronoun]} -> {tree.words[j]}", s))
    return out


def _why_none(task: str, trees: Sequence[Tree]) -> str:
    if task == "coref" and not any(t.coref for t in trees):
        return "these sentences record no pronoun's referent (a CoNLL-U treebank has no column for coreference)"
    if task == "number":
        return "none of these nouns is in the story world's lexicon, which the number labels come from"
    if task == "pos" and all(u == "X" for t in trees for u in t.upos):
        return "these trees give no part of speech (every UPOS is _)"
    return "these sentences have none"


def _capped(rows: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    return rows if len(rows) <= cap else np.sort(rng.choice(rows, size=cap, replace=False))


def examples(task: str, trees: Sequence[Tree], features: Features, split: int, seed: int = 0) -> Examples:
    """`task`'s examples over `trees` (read into `features`, sentence for sentence); the first `split` sentences
    train. An InputError sentence when the task has too few examples or a single label."""
    if task not in TASKS:
        raise InputError(f"there is no probing task {task!r}: the tasks are {', '.join(TASKS)}")
    if len(trees) != len(features.start) - 1:
        raise InputError(f"{len(trees)} trees for {len(features.start) - 1} sentences read: they must be the same")
    name = TASK_NAMES[task]
    raw = _raw(task, trees, features)
    if not raw:
        raise InputError(f"{name}: no examples, because {_why_none(task, trees)}")
    labels, keys, first, second, texts, sentence = zip(*raw)
    in_train = np.array(sentence) < split
    classes = tuple(sorted({lab for lab, t in zip(labels, in_train) if t}))
    known = np.array([t or lab in classes for lab, t in zip(labels, in_train)])
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = np.concatenate([_capped(np.flatnonzero(in_train), MAX_TRAIN, rng),
                           _capped(np.flatnonzero(~in_train & known), MAX_TEST, rng)])
    n_train, n_test = int(in_train[rows].sum()), int((~in_train[rows]).sum())
    if n_train < MIN_TRAIN or n_test < MIN_TEST:
        raise InputError(f"{name}: {n_train} training and {n_test} test examples; a probe needs at least "
                         f"{MIN_TRAIN} and {MIN_TEST}")
    if len(classes) < 2:
        raise InputError(f"{name}: every training example has the label {classes[0]!r}, so there is nothing to learn")
    index = {c: k for k, c in enumerate(classes)}
    pick = rows.tolist()
    return Examples(task, classes, np.array([index[labels[i]] for i in pick], dtype=np.int64),
                    tuple(keys[i] for i in pick), np.array([first[i] for i in pick], dtype=np.int64),
                    None if task in ("pos", "number") else np.array([second[i] for i in pick], dtype=np.int64),
                    in_train[rows].copy(), tuple(texts[i] for i in pick))


def control_labels(ex: Examples, seed: int = 0) -> np.ndarray:
    """(N,) int64: each word type's one label, drawn from the training labels' distribution (seeded by the sorted
    types, so the same corpus gives the same control whatever the order)."""
    counts = np.bincount(ex.labels[ex.train], minlength=len(ex.classes)).astype(np.float64)
    types = sorted(set(ex.keys))
    rng = np.random.Generator(np.random.PCG64(seed))
    drawn = dict(zip(types, rng.choice(len(ex.classes), size=len(types), p=counts / counts.sum())))
    return np.array([drawn[k] for k in ex.keys], dtype=np.int64)


def majority(ex: Examples, labels: np.ndarray | None = None) -> float:
    """Test accuracy of always guessing the commonest training label."""
    labels = ex.labels if labels is None else labels
    commonest = Counter(labels[ex.train].tolist()).most_common(1)[0][0]
    return float(np.mean(labels[~ex.train] == commonest))
