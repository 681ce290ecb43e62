"""One encoder layer after attention, for one token: the heads' contexts on to the layer's output.

The Attention page explains one head's context; the layer goes on. The academic manual (seed text 001, 6.2)
lists the post-LN block: concatenate the heads, project with W_O, add the input and normalise, then a
two-layer feed-forward network, add and normalise again. The mathematical formulation (seed text 004) writes
the two sublayers as
    H̃ = LayerNorm(A + H⁽ℓ⁻¹⁾),   H⁽ℓ⁾ = LayerNorm(FFN(H̃) + H̃),   FFN(x) = act(x W₁ + b₁) W₂ + b₂
(its A leaves out W_O, which BERT has). `layer_steps` recomputes every step for one token in
float64 from the model's own weights and the traced forward (an `AttentionView`), and measures
the result against the model's hidden state, so the page can show the equations hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from bertviz_lab.bert.config import ACTIVATIONS
from bertviz_lab.bert.activations import ACT_FNS
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.views.attention.explorer import AttentionView
from bertviz_lab.views.inputs import subscript

STEP, EQUATION, SIZE, NORM = "step", "equation", "size", "‖·‖ (L2 norm)"  # the table's first columns
DIMS_SHOWN = 8  # each vector is shown by its first dimensions; the norm covers all of them


@dataclass(frozen=True)
class LayerSteps:
    """The rest of one layer for one token, every vector in float64."""

    table: pd.DataFrame  # one row per step: step, equation, size, norm, dim 0 .. dim 7
    output: np.ndarray  # (d,) the layer's output computed here
    model_output: np.ndarray  # (d,) the model's own hidden_states[layer + 1][0, token]
    max_difference: float  # max |output - model_output|
    concat_difference: float  # max |heads concatenated here - the contexts the model passed on|
    activation: str  # the activation in words, e.g. "GELU, exact: x · Φ(x) = ..."
    eps: float  # LayerNorm's ε
    heads_off: tuple[int, ...]  # heads of this layer switched off (zeros in the concatenation)


def activation_name(hidden_act: str) -> str:
    """'GELU' or 'ReLU': the short name that heads config.ACTIVATIONS' sentence."""
    return ACTIVATIONS[hidden_act].split(",")[0].split(":")[0]


def _linear(module: nn.Linear, x: np.ndarray) -> np.ndarray:
    """W x + b in float64 with the module's own weights: (d_in,) -> (d_out,)."""
    weight = module.weight.detach().cpu().double().numpy()  # (d_out, d_in)
    return weight @ x + module.bias.detach().cpu().double().numpy()


def _layer_norm(module: nn.LayerNorm, x: np.ndarray) -> np.ndarray:
    """γ ⊙ (x − mean) ÷ √(var + ε) + β in float64 (var with 1/d, as nn.LayerNorm)."""
    gamma, beta = (p.detach().cpu().double().numpy() for p in (module.weight, module.bias))
    return gamma * (x - x.mean()) / np.sqrt(x.var() + module.eps) + beta


def layer_steps(model: BertForPreTraining, view: AttentionView, layer: int, token: int) -> LayerSteps:
    """Layer `layer`'s output for `token`, from its heads' contexts, one step per row.

    The heads' contexts are rebuilt here as Σ weight × v from the traced weights and values
    (zeros for a head switched off); x is the layer's input from the same forward.
    """
    cfg, block = model.config, model.bert.encoder.layer[layer]
    x = view.hidden[layer, token].astype(np.float64)  # (d,)
    weights = view.weights[layer, :, token].astype(np.float64)  # (H, T)
    heads = np.einsum("ht,htd->hd", weights, view.v[layer].astype(np.float64))  # (H, D)
    heads *= view.heads_on[layer][:, None]  # a switched-off head passes on zeros
    concat = heads.reshape(-1)  # (d,) [head_0; ...; head_{H-1}]
    o = _linear(block.attention.output.dense, concat)
    a = _layer_norm(block.attention.output.LayerNorm, x + o)
    u = _linear(block.intermediate.dense, a)  # (d_ff,)
    g = ACT_FNS[cfg.hidden_act](torch.from_numpy(u)).numpy()
    f = _linear(block.output.dense, g)  # (d,)
    h = _layer_norm(block.output.LayerNorm, a + f)
    last = subscript(view.num_heads - 1)
    act = activation_name(cfg.hidden_act)
    rows = [
        ("input x", "x = H⁽ℓ⁻¹⁾ₜ, the layer's input", "d", x),
        ("heads concatenated", f"c = [head₀; …; head{last}]", "d", concat),
        ("output projection", "o = W_O c + b_O", "d", o),
        ("add x (residual)", "x + o", "d", x + o),
        ("LayerNorm → a", "a = H̃ₜ = LayerNorm(x + o)", "d", a),
        ("FFN: widen", "u = W₁ a + b₁", "d_ff", u),
        (f"activation: {act}", f"g = {act}(u), each entry", "d_ff", g),
        ("FFN: narrow", "f = W₂ g + b₂", "d", f),
        ("add a (residual)", "a + f", "d", a + f),
        ("LayerNorm → output", "H⁽ℓ⁾ₜ = LayerNorm(a + f)", "d", h),
    ]
    model_output = view.hidden[layer + 1, token].astype(np.float64)
    model_concat = view.context[layer, :, token].astype(np.float64).reshape(-1)
    return LayerSteps(
        table=_table(rows), output=h, model_output=model_output,
        max_difference=float(np.abs(h - model_output).max()),
        concat_difference=float(np.abs(concat - model_concat).max()), activation=ACTIVATIONS[cfg.hidden_act],
        eps=float(block.output.LayerNorm.eps), heads_off=tuple(int(i) for i in np.flatnonzero(~view.heads_on[layer])))


def _table(rows: list[tuple[str, str, str, np.ndarray]]) -> pd.DataFrame:
    """step, equation, size ("d = 256"), L2 norm and the first DIMS_SHOWN entries of each vector."""
    return pd.DataFrame([{STEP: step, EQUATION: equation, SIZE: f"{size} = {len(v)}", NORM: float(np.linalg.norm(v)),
                          **{f"dim {i}": float(v[i]) for i in range(min(DIMS_SHOWN, len(v)))}}
                         for step, equation, size, v in rows])
