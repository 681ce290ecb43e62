"""Does the model make the verb agree with its subject, across attractors? (Linzen et al. 2016; Goldberg 2019)

Each minimal pair (corpus/agreement.py) is read with its verb masked; the model agrees when the masked-LM's
probability of the right form ("were") is above the wrong one's ("was") at [MASK]. Accuracy is counted by the
number of attractors (nouns of the other number between subject and verb). Goldberg's rule: a pair whose forms
are not single tokens of the model's vocabulary is left out (and counted), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.corpus.agreement import MAX_ATTRACTORS, AgreementPair
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.words import word_groups

BATCH = 64


@dataclass(frozen=True)
class PairScore:
    text: str  # the sentence with the right form
    masked: str  # as the model read it
    right: str
    wrong: str
    attractors: int
    p_right: float
    p_wrong: float
    nearest_agrees: bool = True  # the noun nearest the verb has the subject's number (corpus/agreement.py)

    @property
    def agrees(self) -> bool:
        return self.p_right > self.p_wrong


@dataclass(frozen=True)
class Agreement:
    scores: list[PairScore]
    skipped: int  # pairs whose forms are not one token each in this vocabulary

    def counts(self) -> dict[int, tuple[int, int]]:
        """attractors -> (pairs the model agrees on, pairs)."""
        out = {}
        for k in range(MAX_ATTRACTORS + 1):
            these = [s for s in self.scores if s.attractors == k]
            out[k] = (sum(s.agrees for s in these), len(these))
        return out

    def accuracy(self) -> dict[int, float | None]:
        """attractors -> share of pairs where p(right) > p(wrong); None where no pair was scored."""
        return {k: (right / n if n else None) for k, (right, n) in self.counts().items()}


def _form_id(tokenizer, words: list[str], at: int) -> int | None:
    """The id of words[at] as the tokenizer writes it in this sentence, or None when it takes several tokens or
    the vocabulary does not know it (an unknown-word token would compare [UNK] with [UNK])."""
    encoding = tokenizer.encode(" ".join(words))
    group = word_groups(tokenizer, encoding, words)[at]
    if len(group) != 1 or encoding.ids[group[0]] == tokenizer.unk_id:
        return None
    return encoding.ids[group[0]]


@torch.no_grad()
def score_pairs(model, tokenizer, pairs: list[AgreementPair],
                progress: Callable[[int, int], None] | None = None) -> Agreement:
    """p(right) and p(wrong) at the masked verb of every pair, in batches of `BATCH`."""
    if not getattr(model, "has_mlm", False):
        raise InputError("agreement is read from the masked-word guesses, and this model has no masked-LM head")
    ready, skipped = [], 0
    for pair in pairs:
        words = list(pair.tree.words)
        right = _form_id(tokenizer, words, pair.verb)
        words[pair.verb] = pair.wrong
        wrong = _form_id(tokenizer, words, pair.verb)
        masked = pair.masked_words(tokenizer.mask_token)
        encoding = tokenizer.encode(" ".join(masked), max_length=model.config.max_tokens)
        at = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
        if right is None or wrong is None or len(at) != 1 or encoding.truncated:
            skipped += 1
            continue
        ready.append((pair, encoding, at[0], right, wrong))
    device = next(model.parameters()).device
    training = model.training
    model.eval()
    try:
        scores = _scores(model, tokenizer, ready, device, progress)
    finally:
        model.train(training)
    if not scores:
        raise InputError("none of the agreement pairs can be scored: this vocabulary does not write "
                         "was/were and is/are as one token each")
    return Agreement(scores, skipped)


def _scores(model, tokenizer, ready: list, device, progress) -> list[PairScore]:
    scores = []
    for start in range(0, len(ready), BATCH):
        chunk = ready[start:start + BATCH]
        T = max(len(e) for _, e, *_ in chunk)
        ids = torch.full((len(chunk), T), tokenizer.pad_id, dtype=torch.long)
        segments = torch.zeros_like(ids)
        attention = torch.zeros_like(ids)
        where = torch.zeros_like(ids, dtype=torch.bool)
        for row, (_, e, at, _, _) in enumerate(chunk):
            ids[row, :len(e)] = torch.tensor(e.ids)
            segments[row, :len(e)] = torch.tensor(e.segment_ids)
            attention[row, :len(e)] = 1
            where[row, at] = True
        out = model(ids.to(device), segments.to(device), attention.to(device), masked_positions=where.to(device))
        probs = torch.softmax(out.mlm_logits.float(), dim=-1).cpu().numpy()  # (N, V), rows in batch order
        for row, (pair, _, _, right, wrong) in enumerate(chunk):
            scores.append(PairScore(pair.tree.text, " ".join(pair.masked_words(tokenizer.mask_token)), pair.right,
                                    pair.wrong, pair.attractors, float(probs[row, right]), float(probs[row, wrong]),
                                    pair.nearest_agrees))
        if progress:
            progress(min(start + BATCH, len(ready)), len(ready))
    return scores


def chance_band(pairs: int) -> float:
    """Half the width of the 95% band around 50% for `pairs` coin flips (1.96 standard errors): an accuracy
    within it is at chance."""
    return 1.96 * float(np.sqrt(0.25 / pairs))


def standing(accuracy: float, pairs: int) -> str:
    """"above", "at" or "below" chance (50%, within `chance_band`)."""
    band = chance_band(pairs)
    return "above" if accuracy > 0.5 + band else "below" if accuracy < 0.5 - band else "at"


def nearest_noun(agreement: Agreement) -> dict[int, float]:
    """attractors -> the accuracy of a model that copies the number of the noun nearest the verb, on these pairs."""
    out = {}
    for k, (_, n) in agreement.counts().items():
        if n:
            out[k] = sum(s.nearest_agrees for s in agreement.scores if s.attractors == k) / n
    return out


def _span(shares: list[float]) -> str:
    low, high = f"{min(shares):.0%}", f"{max(shares):.0%}"
    return low if low == high else f"{low}-{high}"


def _counts(ks: list[int]) -> str:
    words = [str(k) for k in ks]
    told = ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
    return "no attractor" if ks == [0] else f"{told} attractor{'s' * (ks != [1])}"


def verdict(agreement: Agreement) -> str:
    """Chance and the nearest-noun baseline, then at each number of attractors whether the model is above, at or
    below chance, computed from its counts; below chance with attractors, it follows the attractor."""
    counts, nearest = agreement.counts(), nearest_noun(agreement)
    scored = {k: (right / n, n) for k, (right, n) in counts.items() if n}
    if not scored:
        return ""
    fewest = min(n for _, n in scored.values())
    attracted = [v for k, v in nearest.items() if k > 0]
    said = ("A model that ignored the subject would be right about half the time (50%: half the subjects are "
            f"plural; with {fewest:,} pairs, {50 - 100 * chance_band(fewest):.0f}-{50 + 100 * chance_band(fewest):.0f}"
            "% is still chance). One that copied the number of the noun nearest the verb would score "
            + (f"{nearest[0]:.0%} with no attractor" if 0 in nearest else "")
            + (" and " if 0 in nearest and attracted else "")
            + (f"{_span(attracted)} with attractors" if attracted else "") + ".")
    groups: dict[str, list[int]] = {}
    for k, (accuracy, n) in scored.items():
        groups.setdefault(standing(accuracy, n), []).append(k)
    parts = []
    for where in ("above", "at", "below"):
        if where in groups:
            ks = groups[where]
            shares = ", ".join(f"{scored[k][0]:.0%}" for k in ks)
            follows = where == "below" and 0 not in ks
            parts.append(f"with {_counts(ks)} {shares}, {where} chance"
                         + (": the model follows the attractor, agreeing with the nearer noun more often than with "
                            "its subject" if follows else ""))
    said += " Here: " + "; ".join(parts) + "."
    if any(k > 0 for k in groups.get("below", []) + groups.get("at", [])):
        said += " So across an attractor this model does not make the verb agree with its subject."
    return said
