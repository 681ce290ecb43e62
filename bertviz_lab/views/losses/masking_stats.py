"""The masking rule checked over many draws: each share with the standard error of what it measures.

`masking_frequencies` masks one input `draws` times and reports four shares: picked /
eligible, and [MASK] / random / kept among the picked tokens. Each comes with two
standard errors (SE):

- `se_rule`, what the rule predicts. The picked share of one draw is K/n, where K is
  the number of picks: B ~ Binomial(n, rate), plus one when B = 0 (the at-least-one
  rule). The picks of one draw are not independent, so the SE over D draws is
  sqrt(Var K / D) / n with Var K from `masking.picks_variance`, not sqrt(p(1 − p) / (n·D)).
  Given the M tokens picked in all draws, each action count is Binomial(M, share),
  so the three action shares have SE sqrt(q(1 − q) / M).
- `se_draws`, the same SE estimated from the draws themselves: the sample SD of the
  per-draw picks, and for the action shares (ratios of two per-draw counts) the
  delta-method SE of a ratio estimator.

`low` / `high` is the 95% interval expected ± 1.96·se_rule and `inside` says whether
the empirical share falls in it (about 1 time in 20 it does not, by chance). `random_draws` says
which tokens a random replacement can be for one tokenizer, and names those it never is.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert import masking
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError

BERT_RATES = (0.15, 0.8, 0.1, 0.1)  # mask rate; [MASK] / random / kept shares of the picked tokens
FREQUENCY_ROWS = ("picked / eligible", "[MASK] / picked", "random / picked", "kept / picked")
Z95 = 1.959964  # two-sided 95% quantile of the standard normal


def masking_frequencies(tokenizer: WordPieceTokenizer, encoding: Encoding | list[int], *, draws: int = 2000,
                        seed: int = 0, rates: tuple[float, float, float] = BERT_RATES[:3]) -> pd.DataFrame:
    """Apply the masking rule `draws` times to one input; empirical shares against the rule's.

    Columns: quantity, count, out_of, empirical, expected, target, bert, se_rule,
    se_draws, low, high, inside (see the module docstring). `expected` of the
    picked share includes the at-least-one rule: E[K] / n = rate + (1 − rate)^n / n.
    """
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= 100_000:
        raise InputError(f"draws must be a whole number from 1 to 100,000, got {draws!r}")
    ids = torch.tensor(encoding.ids if isinstance(encoding, Encoding) else list(encoding)).expand(draws, -1)
    mask_rate, mask_prob, random_prob = rates
    result = masking.mask_tokens(ids, special_ids=tokenizer.special_ids, vocab_size=tokenizer.vocab_size,
                                 mask_id=tokenizer.mask_id, generator=torch.Generator().manual_seed(seed),
                                 mask_rate=mask_rate, mask_prob=mask_prob, random_prob=random_prob)
    n = int((~torch.isin(ids[0], torch.tensor(sorted(tokenizer.special_ids)))).sum())
    if n == 0:
        raise InputError("the input has no token that can be picked (only special tokens such as [CLS] and [SEP])")
    picks = result.selected.sum(dim=1).numpy().astype(float)  # (D,) K per draw
    actions = [(result.actions == a).sum(dim=1).numpy().astype(float)  # (D,) per draw, one per action
               for a in (masking.ACTION_MASK, masking.ACTION_RANDOM, masking.ACTION_KEEP)]
    picked = int(picks.sum())
    shares = [mask_prob, random_prob, 1.0 - mask_prob - random_prob]
    table = pd.DataFrame({
        "quantity": FREQUENCY_ROWS, "count": [picked] + [int(x.sum()) for x in actions],
        "out_of": [n * draws] + [picked] * 3,
        "expected": [masking.expected_picks(n, mask_rate) / n] + shares,
        "target": [mask_rate] + shares, "bert": list(BERT_RATES),
        "se_rule": [math.sqrt(masking.picks_variance(n, mask_rate) / draws) / n]
                   + [math.sqrt(q * (1 - q) / picked) for q in shares],
        "se_draws": [_mean_se(picks) / n] + [_ratio_se(x, picks) for x in actions]})
    table.insert(3, "empirical", table["count"] / table["out_of"])
    table["low"] = table["expected"] - Z95 * table["se_rule"]
    table["high"] = table["expected"] + Z95 * table["se_rule"]
    table["inside"] = (table["low"] <= table["empirical"]) & (table["empirical"] <= table["high"])
    return table


def _mean_se(values: np.ndarray) -> float:
    """SE of the mean of independent draws, from their sample SD (NaN for a single draw)."""
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan


def _ratio_se(numerator: np.ndarray, denominator: np.ndarray) -> float:
    """Delta-method SE of R = Σx / Σk over independent draws: sqrt(Σ(x − R·k)² / (D(D − 1))) / mean(k)."""
    if len(numerator) < 2:
        return math.nan
    ratio = numerator.sum() / denominator.sum()
    residual = numerator - ratio * denominator  # (D,)
    d = len(numerator)
    return float(math.sqrt((residual ** 2).sum() / (d * (d - 1))) / denominator.mean())


def random_draws(tokenizer: WordPieceTokenizer, random_tokens: str) -> str:
    """What the 10% random replacements can be under `random_tokens`, for this tokenizer (Markdown-free text): the
    tokens the rule never draws named, from `masking.never_drawn`, or that there are none."""
    never = masking.never_drawn(tokenizer.vocab_size, tokenizer.special_ids, random_tokens)
    specials = _listed(tokenizer.id_to_token(i) for i in sorted(tokenizer.special_ids))
    if not never:
        return (f"a random replacement can be any of this tokenizer's {tokenizer.vocab_size:,} tokens, its special "
                f"tokens {specials} included: every token can be drawn")
    return (f"a random replacement is one of the {tokenizer.vocab_size - len(never):,} other tokens of this "
            f"tokenizer: {_listed(tokenizer.id_to_token(i) for i in never)} are never drawn")


def _listed(tokens) -> str:
    tokens = list(tokens)
    return tokens[0] if len(tokens) == 1 else f"{', '.join(tokens[:-1])} and {tokens[-1]}"
