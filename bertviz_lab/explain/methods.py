"""Nine answers to "which tokens made BERT guess this?", one function each, every one a (T,) float64 array.

Read from attention (what the [MASK] looked at; they never read F: the same for any target or contrast):
- `attention`: one layer's weights from the explained position (mean over heads, or one head).
- `rollout` (Abnar & Zuidema, 2020): per layer A' = 0.5 mean_heads(A) + 0.5 I (the residual stream as half of
  the mixing), rows renormalised; R = A'_L ... A'_1; the explained position's row of R.
- `flow` (Abnar & Zuidema, 2020): the maximum flow from each input token to the explained position at the last
  layer through the layered graph whose edge capacities are those A' (solved by explain/flow.py).
- `value_norm` (Kobayashi et al., 2020), last layer: || sum_h alpha_h[m, j] f_h(x_j) ||, f_h(x) = (x W_V^h + b_V^h)
  W_O^h: the weight times the size of what token j actually sends.
Read from how each layer mixes the tokens (never F either):
- `value_zeroing` (Mohebbi et al., 2023): in layer l, token j's value vectors (every head) set to zero, and the cosine
  distance between each token i's output of layer l and that output as it was; each row normalised to sum 1, the
  layers' matrices multiplied through as rollout does (with no identity added: the residual stream is already in
  the layer's output), the explained position's row (explain/patch_grids.py computes it, with the hooks of
  explain/patching.py).
Read from F itself (what changes the score), on the word vectors e_j (position and segment vectors held fixed):
- `gradient`: || dF/de_j || (the rate of change of F in the steepest direction), `gradient_x_input`: e_j . dF/de_j
  (signed), both from one Captum backward.
- `integrated_gradients` (Sundararajan et al., 2017; Captum's LayerIntegratedGradients, 50 Gauss-Legendre steps):
  the path integral of the gradient from a baseline ([PAD] everywhere but [CLS], [SEP] and the explained
  position) to the input; its sum over tokens is F(x) - F(baseline) up to the convergence delta.
- `occlusion`: F(x) - F(x with token j replaced by [MASK]), one token at a time (so blind to tokens that matter only
  together, and itself a method to test, not ground truth); 0 for [CLS], [SEP] and the explained position.

Captum is imported inside the functions that use it: it costs over a second to import, and most pages never do.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining, BertOutput
from bertviz_lab.explain import patch_grids
from bertviz_lab.explain.flow import max_flows
from bertviz_lab.explain.score import Score, scorer

IG_STEPS = 50  # Captum's default n_steps for integrated gradients
IG_METHOD = "gausslegendre"  # and its default rule
DELTA_WARN = 0.05  # a convergence delta above this share of |F(x) - F(baseline)| is flagged
Progress = Callable[[float, str], None]  # (fraction done, what is running)


@dataclass(frozen=True)
class Case:
    """One input and the score explained: (1, T) ids and segments on the model's device, and which tokens
    are framing ([CLS], [SEP]: `special`, (T,) bool)."""

    model: BertForPreTraining
    ids: torch.Tensor
    segments: torch.Tensor
    score: Score
    special: np.ndarray
    mask_id: int
    pad_id: int

    @property
    def length(self) -> int:
        return self.ids.shape[1]

    @property
    def fixed(self) -> np.ndarray:
        """(T,) bool: [CLS], [SEP] and the explained position, which integrated gradients' baseline keeps and which
        occlusion never masks."""
        fixed = self.special.copy()
        fixed[self.score.position] = True
        return fixed

    @property
    def removable(self) -> np.ndarray:
        """(T,) bool: the tokens that can be removed (masked): not fixed, and not already a mask (another [MASK]
        of the sentence, which masking would not change). Agreement and the deletion curves range over these."""
        return ~self.fixed & (self.ids[0].cpu().numpy() != self.mask_id)


@dataclass(frozen=True)
class IntegratedGradients:
    values: np.ndarray  # (T,) attribution per token: the sum over the vector's dimensions
    steps: int
    score: float  # F(x)
    baseline_score: float  # F(baseline)
    delta: float  # sum(values) - (F(x) - F(baseline)): the integration's error

    @property
    def flagged(self) -> bool:
        """The delta is large against what it should add up to: the 50 steps did not converge."""
        return abs(self.delta) > DELTA_WARN * max(abs(self.score - self.baseline_score), 1e-6)


def trace(case: Case) -> BertOutput:
    """The traced forward every attention method reads (no gradient)."""
    case.model.eval()
    with torch.no_grad():
        return case.model(case.ids, case.segments, trace=True, encoder_only=True)


def weights(out: BertOutput) -> np.ndarray:
    """Every attention weight as (L, H, T, T) float64."""
    return np.stack([s.weights[0].double().cpu().numpy() for s in out.trace])


def attention(A: np.ndarray, position: int, layer: int = -1, head: int | None = None) -> np.ndarray:
    """Layer `layer`'s weights from `position` to every token: mean over heads, or head `head`."""
    rows = A[layer, :, position, :]  # (H, T)
    return rows.mean(0) if head is None else rows[head].copy()


def residual_mixing(A: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema's A' per layer, (L, T, T): 0.5 mean_heads(A) + 0.5 I, each row renormalised to sum 1."""
    eye = np.eye(A.shape[-1])
    mixed = 0.5 * A.mean(1) + 0.5 * eye
    return mixed / mixed.sum(-1, keepdims=True)


def rollout(A: np.ndarray, position: int) -> np.ndarray:
    """R = A'_L ... A'_1 (the first layer rightmost); the explained position's row: how much of each input token
    reaches it through every layer, if attention were all that mixes tokens."""
    R = np.eye(A.shape[-1])
    for mixed in residual_mixing(A):
        R = mixed @ R
    return R[position]


def flow(A: np.ndarray, position: int, progress: Progress | None = None) -> np.ndarray:
    """The maximum flow from each input token to `position` at the top of the layered graph: nodes (layer,
    token) for layers 0..L, an edge from (l - 1, j) to (l, i) of capacity A'_l[i, j]; the top layer keeps only
    the explained node (no flow ends anywhere else). Solved block by block on that graph (explain/flow.py), one
    source after another, `progress` told after each."""
    report = None if progress is None else (lambda done: progress(done, "attention flow"))
    return max_flows(residual_mixing(A), position, report)


def value_norm(case: Case, out: BertOutput, A: np.ndarray) -> np.ndarray:
    """|| sum_h alpha_h[m, j] f_h(x_j) || at the last layer, f_h(x) = (x W_V^h + b_V^h) W_O^h (the output
    projection's bias left out, as Kobayashi et al. do: it is the same for every token)."""
    steps = out.trace[-1]
    v = steps.v[0].detach().double()  # (H, T, D): x W_V^h + b_V^h, x the last layer's input
    H, _, D = v.shape
    w_o = case.model.bert.encoder.layer[-1].attention.output.dense.weight.detach().double()  # (d, d): out = ctx W_O^T
    w_o_heads = w_o.T.reshape(H, D, -1)  # (H, D, d): head h's rows of W_O
    f = torch.einsum("htd,hde->hte", v, w_o_heads)  # (H, T, d): f_h(x_j)
    alpha = torch.from_numpy(A[-1, :, case.score.position, :]).to(f.device)  # (H, T)
    return torch.linalg.vector_norm((alpha[..., None] * f).sum(0), dim=-1).cpu().numpy()  # (T,)


def value_zeroing(case: Case) -> np.ndarray:
    """Value zeroing at every layer, rolled out to the explained position: one batched run per layer, a row per
    token zeroed."""
    mixing = patch_grids.value_zeroing(case.model, case.ids, case.segments)  # (L, T, T)
    return patch_grids.value_zeroing_rollout(mixing, case.score.position)


def captum_attr():
    """captum.attr, imported only when asked (it is slow to import), without the warning that its import of
    tqdm.auto prints in a Jupyter kernel that has no ipywidgets ("IProgress not found")."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import captum.attr

    return captum.attr


def gradients(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(gradient, gradient x input): || dF/de_j || and e_j . dF/de_j, from one Captum backward."""
    LayerGradientXActivation = captum_attr().LayerGradientXActivation

    vectors, forward = scorer(case.model, case.score, case.segments)
    grads = LayerGradientXActivation(forward, vectors, multiply_by_inputs=False).attribute(case.ids)  # (1, T, e)
    with torch.no_grad():
        e = vectors(case.ids)
    grads = grads[0].double()
    return (torch.linalg.vector_norm(grads, dim=-1).cpu().numpy(),
            (grads * e[0].double()).sum(-1).cpu().numpy())


def baseline_ids(case: Case) -> torch.Tensor:
    """Integrated gradients' starting point: [PAD] everywhere but [CLS], [SEP] and the explained position."""
    keep = torch.from_numpy(case.fixed).to(case.ids.device)[None]
    return torch.where(keep, case.ids, torch.full_like(case.ids, case.pad_id))


def integrated_gradients(case: Case, steps: int = IG_STEPS, progress: Progress | None = None,
                         chunk: int = 10) -> IntegratedGradients:
    """Captum's LayerIntegratedGradients on the word vectors, `steps` Gauss-Legendre points, `chunk` of them a
    forward (so `progress` can move)."""
    LayerIntegratedGradients = captum_attr().LayerIntegratedGradients

    vectors, forward = scorer(case.model, case.score, case.segments)
    done = [0]

    def counted(ids: torch.Tensor) -> torch.Tensor:
        result = forward(ids)
        done[0] += ids.shape[0]
        if progress is not None and ids.shape[0] > 1:
            progress(min(done[0] / steps, 1.0), "integrated gradients")
        return result

    base = baseline_ids(case)
    attributions = LayerIntegratedGradients(counted, vectors).attribute(
        case.ids, baselines=base, n_steps=steps, method=IG_METHOD, internal_batch_size=chunk)
    with torch.no_grad():
        # F at the two ends of the path: only the word vectors move, the positions stay the input's. Captum's own
        # delta runs the baseline's ids, and RoBERTa numbers positions past [PAD]s, so its F(baseline) is off the path.
        ends = torch.cat([vectors(case.ids), vectors(base)])  # (2, T, e)
        f_x, f_b = (float(v) for v in case.score(case.model, case.ids.repeat(2, 1), case.segments, inputs_embeds=ends))
    values = attributions[0].double().sum(-1).cpu().numpy()
    return IntegratedGradients(values, steps, f_x, f_b, float(values.sum() - (f_x - f_b)))


def occlusion(case: Case, progress: Progress | None = None, chunk: int = 32) -> np.ndarray:
    """F(x) - F(x with token j replaced by [MASK]) for every token j that may be removed; 0 for the others."""
    movable = np.flatnonzero(case.removable)
    values = np.zeros(case.length)
    if not len(movable):
        return values
    rows = case.ids.repeat(len(movable), 1)  # (N, T): row r masks token movable[r]
    rows[torch.arange(len(movable)), torch.from_numpy(movable).to(rows.device)] = case.mask_id
    with torch.no_grad():
        f_x = float(case.score(case.model, case.ids, case.segments)[0])
        scores = []
        for start in range(0, len(movable), chunk):
            scores.append(case.score(case.model, rows[start:start + chunk], case.segments).double().cpu())
            if progress is not None:
                progress(min(start + chunk, len(movable)) / len(movable), "occlusion")
    values[movable] = f_x - torch.cat(scores).numpy()
    return values
