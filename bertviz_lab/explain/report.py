"""Every method on one input, as one record: `case_for` puts an encoded input and its score in the form the methods
read, `explain` runs them, `Explanation` holds what they said.

The methods' names, titles and one-line definitions are here once (`METHODS`), for the page, the CLI's JSON
and the tests alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.explain import methods
from bertviz_lab.explain.checks import agreement
from bertviz_lab.explain.score import Score, frozen


@dataclass(frozen=True)
class Method:
    key: str  # as the CLI's JSON names it
    title: str
    signed: bool  # can be negative (a token that argues against the guess): drawn on a diverging scale
    definition: str  # one line, under its strip
    kind: str  # "attention" (read from the weights) or "mixing" (from how a layer mixes the tokens' vectors): neither
    # reads F, so both are the same for any target or contrast; or "score" (read from F)


METHODS = {x.key: x for x in (
    Method("attention", "attention", False, "the weights from the [MASK] to each token in one layer (mean over "
           "heads unless one head is picked): where it looked, a clue to test", "attention"),
    Method("rollout", "rollout", False, "attention multiplied through every layer, each layer's weights averaged "
           "with the identity for the residual stream (Abnar & Zuidema 2020)", "attention"),
    Method("flow", "attention flow", False, "the most 'attention' that can flow from each token to the [MASK] "
           "through the layers, capacities as in rollout (Abnar & Zuidema 2020)", "attention"),
    Method("value_norm", "value-weighted norm", False, "last layer: the size of what each token sends the [MASK], "
           "|| Σ_h α_h f_h(x_j) ||, weight times transformed value (Kobayashi et al. 2020)", "attention"),
    Method("value_zeroing", "value zeroing", False, "token j's value vectors zeroed in one layer: how far each token's "
           "output of that layer moves (cosine distance); the layers multiplied through as in rollout, the [MASK]'s "
           "row (Mohebbi et al. 2023)", "mixing"),
    Method("gradient", "gradient", False, "|| dF/de_j ||: how fast the score changes when the token's word vector "
           "moves in the steepest direction (the gradient's length)", "score"),
    Method("gradient_x_input", "gradient × input", True, "e_j · dF/de_j: the first-order guess at what the "
           "token's word vector adds to the score (signed)", "score"),
    Method("integrated_gradients", "integrated gradients", True, "the gradient averaged along the path from a "
           "[PAD] sentence to this one, times the difference: adds up to F(x) - F(baseline) (signed)", "score"),
    Method("occlusion", "occlusion", True, "F(x) - F(x with this one token replaced by [MASK]), one token at a "
           "time: blind to tokens that matter only together (signed)", "score"),
)}


@dataclass(frozen=True)
class Explanation:
    """What every method said about one score on one input."""

    tokens: list[str]
    score: Score
    value: float  # F(x)
    prob: float  # p(target), or p(replaced)
    values: dict[str, np.ndarray]  # METHODS key -> (T,)
    ig: methods.IntegratedGradients
    fixed: np.ndarray  # (T,) bool: [CLS], [SEP] and the explained position, which no method may remove
    removable: np.ndarray  # (T,) bool: the tokens that can be masked (not fixed, not already a mask)
    layer: int  # the attention strip's layer (0-based) and head (None: mean over heads)
    head: int | None
    weights: np.ndarray  # (L, H, T, T) every attention weight, float64: another layer's or head's strip is a lookup
    seconds: dict[str, float] = field(default_factory=dict)  # method -> time it took (the bench prints these)

    @property
    def movable(self) -> np.ndarray:
        """The tokens that can be removed (masked): what agreement and the deletion curves range over."""
        return np.flatnonzero(self.removable)

    @property
    def agreement(self) -> dict[str, dict[str, float | None]]:
        return agreement(self.values, self.movable)


def case_for(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, score: Score) -> methods.Case:
    """`score` on `encoding` as the methods read it: its ids and segments on the model's device, its framing tokens,
    and the tokenizer's [MASK] (occlusion's stand-in) and [PAD] (integrated gradients' baseline)."""
    device = next(model.parameters()).device
    return methods.Case(frozen(model), torch.tensor([encoding.ids], device=device),
                        torch.tensor([encoding.segment_ids], device=device), score,
                        np.asarray(encoding.special_mask, bool), tokenizer.mask_id, tokenizer.pad_id)


def explain(case: methods.Case, tokens: list[str], *, layer: int = -1, head: int | None = None, ig_steps: int = methods.IG_STEPS,
            progress: methods.Progress | None = None) -> Explanation:
    """All nine methods on `case`. `layer` and `head`: which attention the attention strip shows. `progress` hears
    (0, what) as each method starts, and the fraction done as attention flow, integrated gradients and occlusion go."""
    case.model.eval()
    seconds, values = {}, {}
    said = progress or (lambda done, what: None)

    def timed(name: str, what: str, fn):
        said(0.0, what)  # before the method starts: a page draws its bar from the first second
        start = time.perf_counter()
        result = fn()
        seconds[name] = time.perf_counter() - start
        return result

    out = timed("forward (traced)", "the model", lambda: methods.trace(case))
    A = methods.weights(out)
    layer = layer % A.shape[0]
    values["attention"] = timed("attention", "attention", lambda: methods.attention(A, case.score.position, layer, head))
    values["rollout"] = timed("rollout", "rollout", lambda: methods.rollout(A, case.score.position))
    values["flow"] = timed("flow", "attention flow", lambda: methods.flow(A, case.score.position, progress))
    values["value_norm"] = timed("value_norm", "value-weighted norm", lambda: methods.value_norm(case, out, A))
    values["value_zeroing"] = timed("value_zeroing", "value zeroing", lambda: methods.value_zeroing(case))
    values["gradient"], values["gradient_x_input"] = timed("gradient", "gradients", lambda: methods.gradients(case))
    ig = timed("integrated_gradients", "integrated gradients", lambda: methods.integrated_gradients(case, ig_steps, progress))
    values["integrated_gradients"] = ig.values
    values["occlusion"] = timed("occlusion", "occlusion", lambda: methods.occlusion(case, progress))
    with torch.no_grad():
        f, p = case.score.evaluate(case.model, case.ids, case.segments)
    values = {key: values[key] for key in METHODS}  # the table's order
    return Explanation(list(tokens), case.score, float(f[0]), float(p[0]), values, ig, case.fixed, case.removable,
                       layer, head, A,
                       seconds)
