"""The feed-forward neurons' activations, read and edited with PyTorch's own forward hooks.

A neuron's activation is an entry of the output of a layer's `intermediate` module (HF's name: act(W_1 a + b_1),
(B, T, d_ff), after the activation function), on every family: DistilBERT's `ffn.lin1` + activation and ALBERT's
`ffn` + activation load into the same module (bert/distilbert.py, bert/albert.py). A hook on that module keeps it,
or replaces some of its entries (`Edit`: a neuron switched off, or set to its corpus mean) before W_2 reads them.

`run` goes through the layers one depth at a time on a twin of the model (`ops.twin`: the textbook path, so the
module is called, and hooks touch no other page or session), the hook added for that depth's call only: ALBERT's
one layer serves every depth, and an edit is at a depth, not in the shared weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from bertviz_lab.bert.attention import AttentionOptions, visibility
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import twin
from bertviz_lab.errors import InputError
from bertviz_lab.explain.score import Score

Hook = Callable[[torch.Tensor], torch.Tensor]  # (B, T, d_ff) -> (B, T, d_ff): what W_2 reads instead

__all__ = ["Edit", "Pass", "run", "evaluate", "twin", "sizes", "check_neuron"]


def sizes(model: BertForPreTraining) -> tuple[int, int]:
    """(layers, neurons per layer)."""
    return model.config.num_hidden_layers, model.config.intermediate_size


def check_neuron(model: BertForPreTraining, layer, neuron=None) -> None:
    """An InputError sentence unless `layer` (and `neuron`) exist in this model (both counted from 0)."""
    layers, width = sizes(model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < layers:
        raise InputError(f"layer {layer!r} does not exist: this model's layers are 0 to {layers - 1}")
    if neuron is not None and (isinstance(neuron, bool) or not isinstance(neuron, int) or not 0 <= neuron < width):
        raise InputError(f"neuron {neuron!r} does not exist: each layer has neurons 0 to {width - 1}")


@dataclass(frozen=True)
class Edit:
    """Neurons of one layer set to values before W_2 reads them: `neurons` (ids in the layer), `values` (one per
    neuron; None: zeros, switched off), at token `positions` (None: every token)."""

    layer: int
    neurons: tuple[int, ...]
    values: tuple[float, ...] | None = None
    positions: tuple[int, ...] | None = None

    def __call__(self, act: torch.Tensor) -> torch.Tensor:
        """(B, T, d_ff) -> the same with the edited entries replaced (a new tensor; gradients flow elsewhere)."""
        index = torch.as_tensor(self.neurons, dtype=torch.long, device=act.device)
        if self.values is None:
            values = torch.zeros(len(self.neurons), dtype=act.dtype, device=act.device)
        else:
            values = torch.as_tensor(self.values, dtype=act.dtype, device=act.device)
        where = torch.zeros(act.shape[1:], dtype=torch.bool, device=act.device)  # (T, d_ff)
        if self.positions is None:
            where[:, index] = True
        else:  # every (position, neuron) pair: (P, 1) against (n,), not the positions zipped with the neurons
            where[torch.as_tensor(self.positions, dtype=torch.long, device=act.device)[:, None], index] = True
        full = torch.zeros(act.shape[-1], dtype=act.dtype, device=act.device).index_copy(0, index, values)
        return torch.where(where, full, act)


@dataclass
class Pass:
    """One forward: `activations[l]` (B, T, d_ff) after the activation function (after any edit, as W_2 read it),
    empty unless kept; `hidden` (B, T, d) the last layer's output."""

    activations: list[torch.Tensor]
    hidden: torch.Tensor


def run(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None, *, edits: Sequence[Edit] = (),
        hooks: dict[int, Hook] | None = None, keep: bool = True) -> Pass:
    """The model (a twin: `twin(model)`) on (B, T) ids, the hook at each depth applying that depth's `edits`, then
    its `hooks` entry, and (`keep`) keeping what W_2 read. Gradients flow unless the caller turns them off."""
    if model.fast:
        raise ValueError("run hooks the textbook path: give it twin(model), not the model itself")
    bert = model.bert
    segments = torch.zeros_like(ids) if segments is None else segments.expand_as(ids)
    x = bert.embeddings(ids, segments)
    if bert.embeddings_project is not None:
        x = bert.embeddings_project(x)
    options = AttentionOptions(visible=visibility(attention_mask, False, ids.shape[1], ids.device))
    by_depth: dict[int, list[Hook]] = {}
    for edit in edits:
        by_depth.setdefault(edit.layer, []).append(edit)
    for depth, fn in (hooks or {}).items():
        by_depth.setdefault(depth, []).append(fn)
    kept: list[torch.Tensor] = []
    for depth, layer in enumerate(bert.encoder.layer):
        fns = by_depth.get(depth, ())

        def hook(_module, _args, out, fns=fns):
            for fn in fns:
                out = fn(out)
            if keep:
                kept.append(out)
            return out

        handle = layer.intermediate.register_forward_hook(hook)
        try:
            x, _ = layer(x, options)
        finally:
            handle.remove()
    return Pass(kept, x)


def evaluate(model: BertForPreTraining, hidden: torch.Tensor, score: Score) -> tuple[torch.Tensor, torch.Tensor]:
    """(F, p) per row from the last layer's output (B, T, d) at the score's position, in float64, differentiable:
    F = logit(answer) - logit(foil) (the answer's logit without a foil), p = p(answer); for ELECTRA's discriminator
    F is the replaced-token logit and p its sigmoid."""
    f, p, _ = score.read(model, hidden[:, score.position])  # from (B, d)
    return f, p


def one_sentence(model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor | None = None) -> list:
    """Every layer's activations for one sentence (1, T): L arrays (T, d_ff) float32, on the CPU."""
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise InputError("one sentence at a time: ids must be (1, T)")
    with torch.no_grad():
        out = run(twin(model), ids, segments)
    return [a[0].float().cpu().numpy() for a in out.activations]
