"""The worked forward pass's hand computations (seed text 000), redone exactly: the attention softmax and the MLM loss.

Pure functions (no streamlit) that return every intermediate step as a table, so a page can
show the working. The figures the seeds printed are kept below as data, only to be compared
with the exact values: the software computes, it never copies a figure from a seed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from bertviz_lab.errors import InputError
from bertviz_lab.seeds import cite

MAX_VALUES = 64  # a worked example is read by a person; more values than this is a paste mistake
MAX_MAGNITUDE = 1e6  # larger scores only make the softmax one-hot; beyond ~1e300 even differences overflow
EXP_LIMIT = 700.0  # exp(x) overflows float64 just above x = 709.78 and underflows to 0 below about -745

# --- The seeds' inputs and, separately, what they printed -----------------------------------------------
SEED000_TOKENS = ("[CLS]", "The", "cat", "sat", "on", "[MASK]", "mat", "[SEP]")
SEED000_SCORES = (0.1, 1.8, 0.9, 0.4, 1.2, 0.0, 0.7, 0.1)
SEED000_WORDS = ("the", "a", "on", "mat", "cat", "sat")
SEED000_LOGITS = (2.5, 0.3, 0.8, 0.1, -0.2, 0.5)
SEED000_TRUE = 0  # "the"


@dataclass(frozen=True)
class Printed:
    """Figures as a seed printed them, as strings: their decimals say how far the seed rounded."""

    source: str  # the seed text, as `seeds.cite(number, parens=False)` names it
    per_token: dict[str, tuple[str, ...]]  # column of the step table -> one printed figure per row
    totals: dict[str, str]  # a single figure (a sum, a loss) -> its printed value


# As printed in seed text 000, step 2 (attention of [MASK] at position 5). For comparison only.
SEED000 = cite("000", parens=False)  # "the worked forward pass, seed text 000": the printed columns' source
SEED000_ATTENTION_PRINTED = Printed(
    SEED000,
    {"exp(score)": ("1.11", "6.05", "2.46", "1.49", "3.32", "1.00", "2.01", "1.11"),
     "weight": ("0.060", "0.326", "0.133", "0.080", "0.179", "0.054", "0.108", "0.060")},
    {"Σ exp": "18.55"})
# As printed in seed text 000, steps 3-4 (MLM head and loss); "1/6 ≈ 0.167" is its rounded uniform p.
SEED000_MLM_PRINTED = Printed(
    SEED000,
    {"exp(logit)": ("12.18", "1.35", "2.23", "1.11", "0.82", "1.65"),
     "probability": ("0.630", "0.070", "0.115", "0.057", "0.042", "0.085")},
    {"Σ exp": "19.34", "loss −ln p(true)": "0.462", "uniform p = 1/V": "0.167", "uniform loss −ln(1/V)": "1.789"})


# --- Input ------------------------------------------------------------------------------------------------
def parse_numbers(text: str, labels: list[str] | tuple[str, ...] | None = None, what: str = "numbers") -> np.ndarray:
    """'0.1, 1.8 0.9' -> array([0.1, 1.8, 0.9]); commas, semicolons and spaces all separate.

    Raises InputError with a message for a person: empty, not a number, NaN/inf, too many,
    too large, or a count that differs from the labels'.
    """
    parts = [p for p in re.split(r"[\s,;]+", text.strip()) if p]
    if not parts:
        raise InputError(f"Type some {what}, separated by spaces or commas (for example: 0.1 1.8 0.9).")
    if len(parts) > MAX_VALUES:
        raise InputError(f"{len(parts)} {what} is too many for a worked example: use at most {MAX_VALUES}.")
    values = []
    for part in parts:
        try:
            value = float(part.replace("−", "-"))  # the minus sign the seeds and this page print
        except ValueError:
            raise InputError(f"'{part}' is not a number. Use digits with a decimal point, e.g. 0.5 or -1.2.") from None
        if not math.isfinite(value):
            raise InputError(f"'{part}' is not a finite number: the softmax needs real numbers, not NaN or infinity.")
        if abs(value) > MAX_MAGNITUDE:
            raise InputError(f"{part} is too large: use numbers between -1,000,000 and 1,000,000. (Any score far "
                             "above the others already gets a weight of 1, so larger ones show nothing new.)")
        values.append(value)
    if labels is not None and len(values) != len(labels):
        raise InputError(f"{len(values)} {what} for {len(labels)} labels: give exactly one number per label.")
    return np.array(values, dtype=np.float64)


def parse_labels(text: str, what: str = "tokens") -> list[str]:
    """'[CLS] The cat' -> ['[CLS]', 'The', 'cat']: labels are separated by spaces."""
    labels = text.split()
    if not labels:
        raise InputError(f"Type the {what}, separated by spaces.")
    if len(labels) > MAX_VALUES:
        raise InputError(f"{len(labels)} {what} is too many for a worked example: use at most {MAX_VALUES}.")
    return labels


# --- Comparing a printed figure with the exact one ---------------------------------------------------------
def decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def within_rounding(exact: float, printed: str) -> bool:
    """True when `printed` is `exact` rounded to the printed decimals (half a unit of the last digit)."""
    return abs(exact - float(printed)) <= 0.5 * 10 ** -decimals(printed) + 1e-12


def verdict(exact: float, printed: str, from_rounded: float | None = None) -> str:
    """Which value is right, in a few words (the exact one, whenever they differ)."""
    d = decimals(printed)
    if within_rounding(exact, printed):
        return "✓ exact value, rounded"
    text = f"✗ should be {exact:.{d}f}"
    if from_rounded is not None and within_rounding(from_rounded, printed):
        return text + " (the seed used its rounded figures)"
    if from_rounded is not None:
        return text + f" (even its rounded figures give {from_rounded:.{d}f})"
    return text


def _check(figure: str, exact: float, printed: str, from_rounded: float | None = None) -> dict:
    """One row of a comparison; from_rounded: the figure recomputed from the seed's own rounded ones, if any."""
    return {"figure": figure, "as printed": printed, "exact": exact,
            "from the seed's rounded figures": np.nan if from_rounded is None else from_rounded,
            "within rounding?": within_rounding(exact, printed),
            "which is right": verdict(exact, printed, from_rounded)}


def _per_token_columns(table: pd.DataFrame, printed: Printed) -> pd.DataFrame:
    """Add 'column (as printed in seed N)' columns and one flag: every printed figure of the row within rounding."""
    ok = np.ones(len(table), dtype=bool)
    for column, figures in printed.per_token.items():
        if len(figures) != len(table):
            raise InputError(f"The {printed.source} figures are for {len(figures)} rows, not {len(table)}.")
        table[f"{column} (as printed in {printed.source})"] = [float(f) for f in figures]
        ok &= [within_rounding(e, f) for e, f in zip(table[column], figures)]
    table["matches print?"] = ok
    return table


# --- Softmax of attention scores (seed text 000, step 2) -----------------------------------------------------
SCORES_SCALED, SCORES_DOT = "scaled", "dot"  # what a learner's scores are: already ÷ √d_head, or plain q·k
MAX_D_HEAD = 100_000


@dataclass(frozen=True)
class SoftmaxSteps:
    table: pd.DataFrame  # token, [q·k,] score, exp(score) [or exp(score − max)], weight, printed columns when given
    total: float  # Σ of the exp column
    shift: float  # subtracted from every score before exp: 0 unless exp(score) would overflow or underflow
    checks: pd.DataFrame | None  # every printed figure next to the exact one
    d_head: int | None = None  # the scores were q·k and this page divided them by √d_head

    @property
    def exp_column(self) -> str:
        return next(c for c in self.table.columns if c.startswith("exp("))


def exponentials(scores: np.ndarray) -> tuple[np.ndarray, float]:
    """exp(scores − shift) and the shift. The shift cancels in exp / Σ exp; it is the largest score only
    when plain exp would overflow (score > 700) or every exp would underflow to 0, so the seeds' own
    exp values stay visible whenever they can be computed."""
    top = float(np.max(scores))
    shift = top if abs(top) > EXP_LIMIT else 0.0
    return np.exp(scores - shift), shift


def check_d_head(d_head) -> int:
    """d_head must be a whole number of dimensions, 1 to 100,000 (BERT-base: 64)."""
    if isinstance(d_head, bool) or not isinstance(d_head, (int, np.integer, float)) or d_head != int(d_head) \
            or not 1 <= d_head <= MAX_D_HEAD:
        raise InputError(f"d_head is the number of dimensions of one head's q and k: a whole number from 1 to "
                         f"{MAX_D_HEAD:,} (64 in BERT-base), not {d_head!r}.")
    return int(d_head)


def softmax_table(labels, scores, printed: Printed | None = None, d_head: int | None = None) -> SoftmaxSteps:
    """Each token's score, its exp, the sum and exp / sum = its attention weight.

    With `d_head`, `scores` are the plain dot products q·k and the table first divides them
    by √d_head, as BERT does; without it they are taken as already divided (as seed text 000 does).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if len(labels) != len(scores):
        raise InputError(f"{len(scores)} scores for {len(labels)} tokens: give exactly one score per token.")
    columns = {"token": list(labels)}
    if d_head is not None:
        d_head = check_d_head(d_head)
        columns["q·k"] = scores
        scores = scores / math.sqrt(d_head)
    exps, shift = exponentials(scores)
    total = float(exps.sum())
    table = pd.DataFrame({**columns, "score": scores,
                          "exp(score)" if shift == 0 else "exp(score − max)": exps, "weight": exps / total})
    checks = None
    if printed is not None:
        table = _per_token_columns(table, printed)
        checks = _softmax_checks(table, total, printed)
    return SoftmaxSteps(table, total, shift, checks, d_head)


def _softmax_checks(table: pd.DataFrame, total: float, printed: Printed) -> pd.DataFrame:
    exp_col = next(c for c in table.columns if c.startswith("exp("))
    p_exps, p_weights = printed.per_token[exp_col], printed.per_token["weight"]
    p_total = printed.totals["Σ exp"]
    rows = [_check(f"exp({s:g}) for {t}", e, p) for t, s, e, p in zip(table["token"], table["score"], table[exp_col],
                                                                       p_exps)]
    rows.append(_check("Σ exp", total, p_total, sum(float(p) for p in p_exps)))
    rows += [_check(f"weight of {t}", w, p, float(pe) / float(p_total))
             for t, w, p, pe in zip(table["token"], table["weight"], p_weights, p_exps)]
    return pd.DataFrame(rows)


# --- MLM head: softmax over the vocabulary and the loss (seed text 000, steps 3-4) ---------------------------
@dataclass(frozen=True)
class MlmLoss:
    table: pd.DataFrame  # word, logit, exp(logit), probability, true word?, printed columns when given
    total: float  # Σ of the exp column
    shift: float
    true_index: int
    p_true: float
    loss: float  # −ln p(true), computed as log Σ exp − logit so it stays finite when p underflows
    uniform: float  # −ln(1/V): the loss of a model that guesses every word equally
    checks: pd.DataFrame | None

    @property
    def vocab_size(self) -> int:
        return len(self.table)


def mlm_loss_table(labels, logits, true_index: int, printed: Printed | None = None) -> MlmLoss:
    """Logits -> exp -> probabilities; the loss is −ln p(true word), next to the uniform baseline ln V."""
    logits = np.asarray(logits, dtype=np.float64)
    if len(labels) != len(logits):
        raise InputError(f"{len(logits)} logits for {len(labels)} words: give exactly one logit per word.")
    if len(labels) < 2:
        raise InputError("Give at least two words: with one word its probability is always 1 and the loss 0.")
    if not 0 <= true_index < len(labels):
        raise InputError(f"The true word must be one of the {len(labels)} words.")
    exps, shift = exponentials(logits)
    total = float(exps.sum())
    probs = exps / total
    loss = float(shift + math.log(total) - logits[true_index])
    table = pd.DataFrame({"word": list(labels), "logit": logits,
                          "exp(logit)" if shift == 0 else "exp(logit − max)": exps, "probability": probs,
                          "true word?": [i == true_index for i in range(len(labels))]})
    result = MlmLoss(table, total, shift, true_index, float(probs[true_index]), loss, math.log(len(labels)), None)
    if printed is None:
        return result
    result = replace(result, table=_per_token_columns(table, printed))
    return replace(result, checks=_mlm_checks(result, printed))


def _mlm_checks(result: MlmLoss, printed: Printed) -> pd.DataFrame:
    table = result.table
    exp_col = table.columns[2]
    p_exps, p_probs, t = printed.per_token[exp_col], printed.per_token["probability"], printed.totals
    rows = [_check(f"exp({x:g}) for {w}", e, p) for w, x, e, p in zip(table["word"], table["logit"], table[exp_col],
                                                                       p_exps)]
    rows.append(_check("Σ exp", result.total, t["Σ exp"], sum(float(p) for p in p_exps)))
    rows += [_check(f"p({w})", q, p, float(pe) / float(t["Σ exp"]))
             for w, q, p, pe in zip(table["word"], table["probability"], p_probs, p_exps)]
    rows.append(_check("loss −ln p(true)", result.loss, t["loss −ln p(true)"],
                       -math.log(float(p_probs[result.true_index]))))
    rows.append(_check("uniform p = 1/V", 1 / len(table), t["uniform p = 1/V"]))
    rows.append(_check("uniform loss −ln(1/V)", result.uniform, t["uniform loss −ln(1/V)"],
                       -math.log(float(t["uniform p = 1/V"]))))
    return pd.DataFrame(rows)
