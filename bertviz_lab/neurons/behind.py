"""The neurons a guess rests on: attribution of F (explain/score.py) to every feed-forward neuron's activation at the
score's position, and the causal test of what the attribution finds.

- "grad": activation x gradient, a_n dF/da_n, every layer from one forward and one backward (the position's
  activations are made leaves of the graph by a hook, so the gradient is F's total derivative by each).
- "ig": integrated gradients over the activation, as Dai et al. 2022 (knowledge neurons) do: for layer l alone, its
  activations a at the position are scaled by alpha from 0 to 1 (every other layer and position as the sentence
  makes them), and neuron n's attribution is a_n times the mean of dF/da_n over m = `steps` points. The points are
  the midpoint rule's, alpha_k = (k - 1/2) / m: its error falls as 1/m^2 where the right rule's (Dai et al.'s k/m)
  falls as 1/m, and it never evaluates alpha = 1, which the sentence's own forward already gives. Completeness:
  scores[l].sum() ~= F - F(layer l's activations at the position set to 0) = f - baseline[l]. One forward per layer,
  the m points (and the baseline, alpha = 0) as rows of one batch.
- The causal test: suppress the top k neurons (set to 0 at the position, as Dai et al. do) and compare the drop in F
  with k random neurons drawn with the same count per layer, never a top one (seeded draws, numpy's Generator). Every
  row of the test (the sentence, the top k, each draw) is one row of one batch, each with its own edit.
- `switch_off`: one neuron at every position set to 0, and to its corpus mean.

Edits and leaves are PyTorch forward hooks at a depth (read.run), so ALBERT's shared layer is edited at one depth,
and ELECTRA's discriminator is read on its replaced-token logit (Score target None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.explain.score import Score, frozen
from bertviz_lab.neurons.read import Hook, check_neuron, evaluate, run, sizes, twin

METHODS = ("ig", "grad")
MAX_STEPS = 512
MAX_DRAWS = 1000


@dataclass(frozen=True)
class Attribution:
    method: str  # "ig" or "grad"
    scores: np.ndarray  # (L, N) float64: each neuron's share of F at the score's position
    f: float  # F of the sentence
    p: float  # p(answer) (p(replaced) for the discriminator)
    baseline: np.ndarray  # (L,) F with layer l's activations at the position set to 0
    steps: int = 0  # IG's points (0 for "grad")

    def top(self, k: int) -> list[tuple[int, int, float]]:
        """The k neurons of largest attribution (most positive: they push F up), as (layer, neuron, score)."""
        flat = self.scores.ravel()
        order = np.argsort(-flat, kind="stable")[:k]
        width = self.scores.shape[1]
        return [(int(i // width), int(i % width), float(flat[i])) for i in order]

    @property
    def gaps(self) -> np.ndarray:
        """(L,) completeness: scores[l].sum() - (f - baseline[l]); IG's shrinks as the steps grow."""
        return self.scores.sum(1) - (self.f - self.baseline)


@dataclass(frozen=True)
class CausalTest:
    k: int
    neurons: tuple[tuple[int, int], ...]  # the top k, (layer, neuron)
    f: float
    p: float
    f_top: float  # F with the top k suppressed
    p_top: float
    f_random: np.ndarray  # (draws,) F with each draw's k random neurons suppressed
    p_random: np.ndarray  # (draws,)
    seed: int
    random_neurons: np.ndarray  # (draws, k, 2) each draw's (layer, neuron)

    @property
    def drop_top(self) -> float:
        return self.f - self.f_top

    @property
    def drops(self) -> np.ndarray:
        """(draws,) each random draw's drop in F."""
        return self.f - self.f_random

    @property
    def drop_random(self) -> float:
        return float(self.drops.mean())

    @property
    def spread(self) -> float:
        return float(self.drops.std())

    @property
    def beats_random(self) -> bool:
        """The top k move F down more than every one of the random draws."""
        return bool(self.drop_top > self.drops.max())


@dataclass(frozen=True)
class SwitchOff:
    f: float
    p: float
    f_zero: float  # F with the neuron 0 at every position
    p_zero: float
    f_mean: float  # F with the neuron at its corpus mean at every position
    p_mean: float
    top: int  # the top guess's id at the position (-1 for the discriminator)
    top_zero: int
    top_mean: int


def _check(model: BertForPreTraining, ids: torch.Tensor, score: Score) -> None:
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise InputError("one sentence at a time: ids must be (1, T)")
    if not 0 <= score.position < ids.shape[1]:
        raise InputError(f"position {score.position} is outside the sentence's {ids.shape[1]} tokens")
    if score.replaced and not model.has_rtd:
        raise InputError("this model has no replaced-token head: give the score a target word")
    if not score.replaced and not model.has_mlm:
        raise InputError("this model has no masked-language-model head to score a word with")


def _count(value, name: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{name} must be a whole number from {low} to {high}; got {value!r}")


def _edited(position: int | None, where: torch.Tensor, values: torch.Tensor) -> Hook:
    """A hook setting, row by row, the neurons `where` (B, N) to `values` (B, N) at `position` (None: all tokens)."""
    def fn(out: torch.Tensor) -> torch.Tensor:  # (B, T, N)
        mask = where[:, None, :].expand_as(out)
        if position is not None:
            at = torch.zeros(out.shape[1], dtype=torch.bool, device=out.device)
            at[position] = True
            mask = mask & at[None, :, None]
        return torch.where(mask, values[:, None, :].to(out.dtype), out)

    return fn


@torch.no_grad()
def _rows(hooked: BertForPreTraining, ids, segments, score: Score, where: torch.Tensor,
          values: torch.Tensor | None = None, position: int | None = -1) -> tuple[torch.Tensor, ...]:
    """(F, p, last hidden) of B rows of one sentence, row b with its neurons `where[b]` (B, L, N) set to `values`
    (zeros by default) at the score's position (`position` -1) or at every token (None)."""
    values = torch.zeros(where.shape, dtype=torch.float32) if values is None else values
    at = score.position if position == -1 else position
    hooks = {depth: _edited(at, where[:, depth], values[:, depth]) for depth in range(where.shape[1])
             if where[:, depth].any()}
    out = run(hooked, ids.expand(where.shape[0], -1), segments, hooks=hooks, keep=False)
    f, p = evaluate(hooked, out.hidden, score)
    return f, p, out.hidden


def _baselines(hooked, ids, segments, score) -> np.ndarray:
    """(L,) F with layer l's activations at the position all 0, row l of one batch."""
    layers, width = sizes(hooked)
    where = torch.zeros(layers, layers, width, dtype=torch.bool)
    for depth in range(layers):
        where[depth, depth] = True
    return _rows(hooked, ids, segments, score, where)[0].numpy()


def _gradient(hooked, ids, segments, score) -> Attribution:
    leaves: dict[int, torch.Tensor] = {}  # depth -> a zero (1, N) added to the position's activations
    acts: dict[int, torch.Tensor] = {}

    def leaf(depth: int) -> Hook:
        # a + 0, the 0 a leaf: dF/d0 is F's total derivative by a, through the layers above and their neurons too
        # (a detached copy of a as the leaf would cut a lower layer's path through this one's neurons)
        def fn(out: torch.Tensor) -> torch.Tensor:
            acts[depth] = out[:, score.position].detach()
            leaves[depth] = torch.zeros_like(acts[depth], requires_grad=True)
            at = out[:, score.position] + leaves[depth]
            return torch.cat([out[:, :score.position], at[:, None], out[:, score.position + 1:]], 1)
        return fn

    layers, _ = sizes(hooked)
    with torch.enable_grad():
        out = run(hooked, ids, segments, hooks={d: leaf(d) for d in range(layers)}, keep=False)
        f, p = evaluate(hooked, out.hidden, score)
        grads = torch.autograd.grad(f.sum(), [leaves[d] for d in range(layers)])
    f, p = f.detach(), p.detach()
    scores = np.stack([(acts[d] * g).double()[0].numpy() for d, g in enumerate(grads)])
    return Attribution("grad", scores, float(f[0]), float(p[0]), _baselines(hooked, ids, segments, score))


def _integrated(hooked, ids, segments, score, steps: int) -> Attribution:
    alphas = (torch.arange(steps, dtype=torch.float64) + 0.5) / steps  # the midpoint rule's points
    alphas = torch.cat([alphas, torch.zeros(1, dtype=torch.float64)])  # and the baseline, alpha = 0: (m + 1,)
    layers, _ = sizes(hooked)
    rows, baseline, f, p = [], [], None, None
    for depth in range(layers):
        kept: dict[str, torch.Tensor] = {}

        def fn(out: torch.Tensor, kept=kept) -> torch.Tensor:  # (m + 1, T, N)
            kept["a"] = out[0, score.position].detach()  # (N,) the sentence's activations
            kept["leaf"] = (alphas.to(out.dtype)[:, None] * kept["a"]).requires_grad_(True)  # (m + 1, N)
            return torch.cat([out[:, :score.position], kept["leaf"][:, None], out[:, score.position + 1:]], 1)

        with torch.enable_grad():
            out = run(hooked, ids.expand(steps + 1, -1), segments, hooks={depth: fn}, keep=False)
            fs, ps = evaluate(hooked, out.hidden, score)
            (grad,) = torch.autograd.grad(fs.sum(), [kept["leaf"]])  # (m + 1, N)
        fs = fs.detach()
        rows.append((kept["a"].double() * grad[:steps].double().mean(0)).numpy())
        baseline.append(float(fs[steps]))
        if f is None:  # the sentence itself: no layer scaled
            with torch.no_grad():
                f, p = evaluate(hooked, run(hooked, ids, segments, keep=False).hidden, score)
    return Attribution("ig", np.stack(rows), float(f[0]), float(p[0]), np.array(baseline), steps)


def attribute(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor | None, score: Score,
              method: str = "ig", steps: int = 20) -> Attribution:
    """F of one sentence (1, T) attributed to every neuron of every layer at the score's position (module note)."""
    _check(model, ids, score)
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    _count(steps, "steps", 1, MAX_STEPS)
    hooked = twin(frozen(model))  # weights that ask for no gradient: only the activations' is computed
    if method == "grad":
        return _gradient(hooked, ids, segments, score)
    return _integrated(hooked, ids, segments, score, steps)


def random_neurons(top: tuple[tuple[int, int], ...], width: int, draws: int, seed: int) -> np.ndarray:
    """(draws, k, 2): per draw, as many neurons of each layer as `top` has there, none of them a top one."""
    rng = np.random.Generator(np.random.PCG64(seed))
    layers = sorted({layer for layer, _ in top})
    out = np.zeros((draws, len(top), 2), dtype=np.int64)
    for d in range(draws):
        i = 0
        for layer in layers:
            taken = {n for l_, n in top if l_ == layer}
            pool = np.array([n for n in range(width) if n not in taken])
            picked = rng.choice(pool, size=len(taken), replace=False)
            out[d, i:i + len(taken), 0], out[d, i:i + len(taken), 1] = layer, np.sort(picked)
            i += len(taken)
    return out


def causal_test(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor | None, score: Score,
                attribution: Attribution, k: int = 10, draws: int = 20, seed: int = 0) -> CausalTest:
    """The top k neurons by `attribution` suppressed (0 at the score's position) against `draws` sets of k random
    neurons, the same count per layer, never a top one: one batch of draws + 2 rows (the sentence, the top k, each
    draw)."""
    _check(model, ids, score)
    layers, width = sizes(model)
    if attribution.scores.shape != (layers, width):
        raise InputError("the attribution was made for another model: its neurons do not match this one's")
    _count(k, "k", 1, width - 1)
    _count(draws, "draws", 1, MAX_DRAWS)
    _count(seed, "seed", 0, 2**63 - 1)
    top = tuple((layer, neuron) for layer, neuron, _ in attribution.top(k))
    drawn = random_neurons(top, width, draws, seed)
    where = torch.zeros(draws + 2, layers, width, dtype=torch.bool)
    for layer, neuron in top:
        where[1, layer, neuron] = True
    for d in range(draws):
        where[2 + d, drawn[d, :, 0], drawn[d, :, 1]] = True
    f, p, _ = _rows(twin(model), ids, segments, score, where)
    f, p = f.numpy(), p.numpy()
    return CausalTest(k, top, float(f[0]), float(p[0]), float(f[1]), float(p[1]), f[2:].copy(), p[2:].copy(), seed,
                      drawn)


def switch_off(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor | None, score: Score,
               layer: int, neuron: int, mean: float) -> SwitchOff:
    """One neuron set to 0, and to its corpus mean `mean`, at every token: F, p and the top guess each (one batch
    of three rows: the sentence, zeroed, at its mean)."""
    _check(model, ids, score)
    check_neuron(model, layer, neuron)
    layers, width = sizes(model)
    where = torch.zeros(3, layers, width, dtype=torch.bool)
    where[1:, layer, neuron] = True
    values = torch.zeros(3, layers, width)
    values[2, layer, neuron] = float(mean)
    hooked = twin(model)
    f, p, hidden = _rows(hooked, ids, segments, score, where, values, position=None)
    if score.replaced:
        guesses = [-1, -1, -1]
    else:
        with torch.no_grad():
            logits = hooked.mlm_head(hidden[:, score.position])[:, : score.vocab_size or None]  # (3, V)
        guesses = [int(i) for i in logits.argmax(-1)]
    return SwitchOff(float(f[0]), float(p[0]), float(f[1]), float(p[1]), float(f[2]), float(p[2]), *guesses)
