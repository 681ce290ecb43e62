"""The attention explorer's numbers: one traced forward pass, then every view the page draws.

`explore` runs the model once on one input and keeps each layer's attention steps and
hidden states as numpy arrays (`AttentionView`). Everything else is cheap numpy on that
view: the matrix to show (one head or the mean over heads, [CLS]/[SEP] hidden, sentence
A->B blocks), the softmax of one query written out step by step, the context as a
weighted sum of values, the q.k dot product dimension by dimension (BertViz's neuron view
plus the division by sqrt(d_head) it leaves out), a temperature what-if, and the
masked-word predictions with and without some heads switched off. The rest of the layer
after the context (W_O, residual, LayerNorm, FFN) is in views/attention/layer.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.figures import token_labels
from bertviz_lab.head_id import HeadId
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr

BLOCKS = ("all", "A→B", "B→A")  # which queries (rows) and keys (columns) to show for a pair
# Column names of the softmax step table, in reading order.
KEY, DOT, MASK, MASKED = "key", "q·k", "+ mask", "= masked score"  # ÷√d_head = score: scaled_column(D)
TAU, EXP, SUM = "÷ τ (what-if)", "exp(x − max)", "Σ exp"
WEIGHT, MODEL_WEIGHT = "weight = exp ÷ Σ", "model weight"
GRID_MAX_CELLS = 2_000_000  # BERT-base's 144 heads up to ~118 tokens; beyond that a browser struggles
CONTEXT_ROW = "Σ = context"  # the last row of the context table: sum_j weight_j v_j
PRONOUNS = frozenset({"it", "he", "she", "they", "him", "her", "them", "its", "his", "their"})


@dataclass(frozen=True)
class AttentionView:
    """Every attention step of one input, all layers and heads (L layers, H heads, T tokens, D head dim)."""

    tokens: list[str]
    labels: list[str]  # "i token", plain text: tables, pickers, CSV
    axis_labels: list[str]  # the same, HTML-escaped for plotly axes
    segment_ids: list[int]
    sequence_ids: list[int | None]  # 0 sentence A, 1 sentence B, None [CLS]/[SEP]
    special: np.ndarray  # (T,) True for [CLS], [SEP], [PAD]
    q: np.ndarray  # (L, H, T, D)
    k: np.ndarray  # (L, H, T, D)
    v: np.ndarray  # (L, H, T, D)
    scores: np.ndarray  # (L, H, T, T) q.k / sqrt(D), before the mask
    mask: np.ndarray  # (L, 1, T, T) additive: 0 visible, -1e9 hidden; one per layer, shared by all its heads
    weights: np.ndarray  # (L, H, T, T) softmax(scores + mask), exactly as the model computed it
    context: np.ndarray  # (L, H, T, D) weights @ v, times 0 for a head switched off
    heads_on: np.ndarray  # (L, H) bool
    hidden: np.ndarray  # (L + 1, T, d) the model's hidden states: the embeddings, then each layer's output
    # (M, V) the MLM logits at each [MASK] from the same pass (so the prediction table needs no second
    # forward with these heads); None without a [MASK] or an MLM head
    mask_logits: np.ndarray | None = None

    def additive_mask(self, layer: int, head: int) -> np.ndarray:
        """(T, T) additive mask this head's softmax saw."""
        return self.mask[layer, 0]  # every head of a layer sees the same mask

    @property
    def num_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def num_heads(self) -> int:
        return self.weights.shape[1]

    @property
    def head_dim(self) -> int:
        return self.q.shape[-1]

    @property
    def is_pair(self) -> bool:
        return 1 in self.sequence_ids


@dataclass(frozen=True)
class MatrixSlice:
    """The part of an attention matrix on show; `rows`/`cols` index the full token list."""

    weights: np.ndarray  # (R, C), or (L, H, R, C) for the grid
    rows: list[int]
    cols: list[int]
    row_labels: list[str]
    col_labels: list[str]
    row_axis: list[str]  # HTML-escaped, for plotly
    col_axis: list[str]
    title: str
    name: str  # for exported files: "attention_L0_H1", "attention_L2_mean_AtoB", ...

    def frame(self) -> pd.DataFrame:
        """The matrix as a table, queries as the index and keys as columns (for CSV)."""
        return pd.DataFrame(self.weights, index=pd.Index(self.row_labels, name="query \\ key"),
                            columns=self.col_labels)


@dataclass(frozen=True)
class ContextSteps:
    table: pd.DataFrame  # one row per key (weight, v[0..D-1]), then the weighted sum
    context: np.ndarray  # (D,) sum_j weight_j v_j, in float64
    model_context: np.ndarray  # (D,) the context the model passed on (zeros if the head is off)
    head_on: bool
    max_difference: float  # max |sum - model context| for a head that is on


@dataclass(frozen=True)
class DotProduct:
    table: pd.DataFrame  # one row per dimension: q, k, q × k
    dot: float  # sum of q × k
    sqrt_d: float
    score: float  # dot / sqrt_d


def explore(model: BertForPreTraining, encoding: Encoding, head_mask: torch.Tensor | None = None,
            mask_id: int | None = None) -> AttentionView:
    """One traced forward pass (eval, no grad) turned into numpy arrays; given the tokenizer's `mask_id`,
    with the MLM logits at each [MASK] too."""
    guessed = [i for i, t in enumerate(encoding.ids) if t == mask_id] if model.has_mlm else []  # the [MASK]s
    # The MLM head runs at those positions only (none: no T x V logits nobody reads).
    out = inputs.run(model, encoding, trace=True, head_mask=head_mask, masked_positions=guessed)
    trace = out.trace

    def stack(name: str) -> np.ndarray:
        return np.stack([getattr(steps, name)[0].float().cpu().numpy() for steps in trace])

    weights = stack("weights")
    L, H, T = weights.shape[:3]
    masks = [steps.mask[0].float().cpu().numpy() for steps in trace]  # each broadcastable to (H, T, T)
    mask = np.stack([np.broadcast_to(m, (m.shape[0], T, T)) for m in masks])  # (L, 1, T, T): one mask per layer, shared by its heads
    heads_on = np.ones((L, H), bool) if head_mask is None else head_mask.cpu().numpy().reshape(L, H) > 0
    return _read_only(AttentionView(
        tokens=list(encoding.tokens), labels=[f"{i} {tok}" for i, tok in enumerate(encoding.tokens)],
        axis_labels=token_labels(encoding.tokens), segment_ids=list(encoding.segment_ids),
        sequence_ids=list(encoding.sequence_ids), special=np.array(encoding.special_mask, bool),
        q=stack("q"), k=stack("k"), v=stack("v"), scores=stack("scores"), mask=mask, weights=weights,
        context=stack("context"), heads_on=heads_on,
        hidden=np.stack([h[0].float().cpu().numpy() for h in out.hidden_states]),
        mask_logits=out.mlm_logits.float().cpu().numpy() if guessed else None))


def _read_only(view: AttentionView) -> AttentionView:
    """Freeze the arrays too: a view may be cached and shared by every session."""
    for value in vars(view).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return view


def sqrt_head_dim(head_dim: int) -> str:
    """'√d_head (√64 = 8)': the scaling of the scores, with its value for this model (d_head = d / heads)."""
    return f"√d_head (√{head_dim} = {math.sqrt(head_dim):g})"


def scaled_column(head_dim: int) -> str:
    """The softmax table's score column, named with this model's √d_head."""
    return f"÷{sqrt_head_dim(head_dim)} = score"


def default_query(view: AttentionView) -> int:
    """The query to explain first: a pronoun if there is one (its referent is the classic demo), else token 1."""
    for i, tok in enumerate(view.tokens):
        if tok in PRONOUNS:
            return i
    return min(1, len(view.tokens) - 1)


def strongest_key(view: AttentionView, layer: int, head: int, query: int) -> int:
    """The key this query gives the most weight to."""
    return int(view.weights[layer, head, query].argmax())


def head_names(num_layers: int, num_heads: int) -> list[str]:
    """'L0 H0', 'L0 H1', ...: the names the head switch lists (counted from 0, like the code; see `HeadId`)."""
    return [str(head) for head in HeadId.every(num_layers, num_heads)]


def head_mask(off: list[str], num_layers: int, num_heads: int) -> torch.Tensor | None:
    """(L, H) tensor of 1s with 0 at each named head; None when every head is on."""
    names = head_names(num_layers, num_heads)
    chosen = [names.index(name) for name in off if name in names]
    if not chosen:
        return None
    return torch.ones(num_layers * num_heads).index_fill_(0, torch.tensor(chosen), 0.0).reshape(num_layers, num_heads)


def mean_over_heads(view: AttentionView) -> np.ndarray:
    """(L, T, T): each layer's weights averaged over its heads; rows still sum to 1."""
    return view.weights.mean(axis=1)


def shown_positions(view: AttentionView, hide_specials: bool = False,
                    block: str = "all") -> tuple[list[int], list[int]]:
    """Query rows and key columns to show. Hiding drops [CLS]/[SEP] without renormalising."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {BLOCKS}, got {block!r}")
    if block != "all" and not view.is_pair:
        raise ValueError("A→B and B→A need a sentence pair")
    every = [i for i in range(len(view.tokens)) if not (hide_specials and view.special[i])]
    a = [i for i in every if view.sequence_ids[i] == 0]
    b = [i for i in every if view.sequence_ids[i] == 1]
    return {"all": (every, every), "A→B": (a, b), "B→A": (b, a)}[block]


def matrix(view: AttentionView, layer: int, head: int | None, hide_specials: bool = False,
           block: str = "all", window: tuple[int, int] | None = None) -> MatrixSlice:
    """One head's (R, C) weights, or the layer's mean over heads when `head` is None; with `window`
    (first, last), only the queries and keys of those tokens (a long input, views/attention/overview.py)."""
    full = mean_over_heads(view)[layer] if head is None else view.weights[layer, head]
    rows, cols = shown_positions(view, hide_specials, block)
    if window is not None:
        rows, cols = ([i for i in positions if window[0] <= i <= window[1]] for positions in (rows, cols))
    title = f"Layer {layer} · " + ("mean over heads" if head is None else f"head {head}")
    name = f"attention_L{layer}_" + ("mean" if head is None else f"H{head}") + ("_no_specials" if hide_specials else "")
    if block != "all":
        title, name = f"{title} · {block}", f"{name}_{block.replace('→', 'to')}"
    if window is not None:
        title, name = f"{title} · tokens {window[0]}–{window[1]}", f"{name}_{window[0]}-{window[1]}"
    return _slice(view, full[np.ix_(rows, cols)], rows, cols, title, name)


def grid(view: AttentionView, hide_specials: bool = False, block: str = "all") -> MatrixSlice:
    """All heads of all layers, (L, H, R, C), with the same rows and columns hidden."""
    rows, cols = shown_positions(view, hide_specials, block)
    if view.num_layers * view.num_heads * len(rows) * len(cols) > GRID_MAX_CELLS:
        raise InputError(f"{view.num_layers} × {view.num_heads} heads of {len(rows)} × {len(cols)} tokens are too "
                         "many to draw at once: shorten the text or pick one layer and head above.")
    return _slice(view, view.weights[:, :, rows][:, :, :, cols], rows, cols, "All layers × heads", "attention_grid")


def _slice(view: AttentionView, weights: np.ndarray, rows: list[int], cols: list[int], title: str,
           name: str) -> MatrixSlice:
    return MatrixSlice(weights, rows, cols, [view.labels[i] for i in rows], [view.labels[i] for i in cols],
                       [view.axis_labels[i] for i in rows], [view.axis_labels[i] for i in cols], title, name)


def what_if_weights(view: AttentionView, layer: int, head: int, temperature: float) -> np.ndarray:
    """WHAT-IF, not what the model computes: softmax((scores + mask) / τ) for one head, (T, T)."""
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature}")
    x = (view.scores[layer, head].astype(np.float64) + view.additive_mask(layer, head)) / temperature
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_steps(view: AttentionView, layer: int, head: int, query: int, temperature: float = 1.0) -> pd.DataFrame:
    """One row per key: q·k, ÷√d_head (the model's score), + mask, exp(x − max), Σ exp, weight.

    exp is taken of x minus the row's largest x (what every softmax implementation does
    so exp cannot overflow); the shift cancels in the ratio, and exp(-1e9 - max) is 0.
    With τ ≠ 1 a what-if column divides by τ first and the model's weight is kept beside.
    """
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature}")
    q = view.q[layer, head, query].astype(np.float64)  # (D,)
    scaled = view.scores[layer, head, query].astype(np.float64)  # (T,)
    mask = view.additive_mask(layer, head)[query].astype(np.float64)
    df = pd.DataFrame({KEY: view.labels, DOT: view.k[layer, head].astype(np.float64) @ q,
                       scaled_column(view.head_dim): scaled, MASK: mask, MASKED: scaled + mask})
    if temperature != 1.0:
        df[TAU] = df[MASKED] / temperature
    x = df[TAU] if temperature != 1.0 else df[MASKED]
    df[EXP] = np.exp(x - x.max())
    df[SUM] = df[EXP].sum()
    df[WEIGHT] = df[EXP] / df[SUM]
    if temperature != 1.0:
        df[MODEL_WEIGHT] = view.weights[layer, head, query].astype(np.float64)
    df.index.name = "position"
    return df


def weights_by_key(view: AttentionView, steps: pd.DataFrame) -> pd.DataFrame:
    """A softmax_steps table's weights ready for bars: index = axis labels, one column per series."""
    if MODEL_WEIGHT in steps:
        return pd.DataFrame({"model (τ = 1)": steps[MODEL_WEIGHT].to_numpy(),
                             "what-if": steps[WEIGHT].to_numpy()}, index=view.axis_labels)
    return pd.DataFrame({"weight": steps[WEIGHT].to_numpy()}, index=view.axis_labels)


def context_steps(view: AttentionView, layer: int, head: int, query: int) -> ContextSteps:
    """The query's context vector as sum_j weight_j v_j, beside the one the model computed."""
    weights = view.weights[layer, head, query].astype(np.float64)  # (T,)
    values = view.v[layer, head].astype(np.float64)  # (T, D)
    context = weights @ values
    columns = [f"v[{i}]" for i in range(view.head_dim)]
    table = pd.DataFrame(values, index=view.labels, columns=columns)
    table.insert(0, "weight", weights)
    table.loc[CONTEXT_ROW] = [weights.sum(), *context]
    table.index.name = "key"
    model_context = view.context[layer, head, query].astype(np.float64)
    on = bool(view.heads_on[layer, head])
    return ContextSteps(table, context, model_context, on,
                        float(np.abs(context - model_context).max()) if on else 0.0)


def dot_product(view: AttentionView, layer: int, head: int, query: int, key: int) -> DotProduct:
    """q·k dimension by dimension (BertViz's neuron view), then the ÷√d_head it leaves out."""
    q = view.q[layer, head, query].astype(np.float64)
    k = view.k[layer, head, key].astype(np.float64)
    table = pd.DataFrame({"q": q, "k": k, "q × k": q * k}, index=pd.RangeIndex(len(q), name="dimension"))
    dot, sqrt_d = float((q * k).sum()), math.sqrt(len(q))
    return DotProduct(table, dot, sqrt_d, dot / sqrt_d)


def prediction_change(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding,
                      heads_off: torch.Tensor | None = None, top_k: int = 5,
                      view: AttentionView | None = None) -> pd.DataFrame:
    """Top-k guesses for every [MASK] with all heads, and with `heads_off` applied when given. `view`: this
    encoding's `explore` (with the tokenizer's mask id): its pass serves whichever of the two it ran as."""
    if not model.has_mlm:
        raise InputError("This model has no MLM head, so it cannot guess masked words "
                         "(the attention views above still work).")
    if tokenizer.mask_id not in encoding.ids:
        raise InputError("Add [MASK] to the text to see the predictions change when heads are switched off.")
    top_k = min(top_k, tokenizer.vocab_size)

    def ran_as(head_mask: torch.Tensor | None) -> bool:
        """True when `view`'s pass had exactly these heads on and kept its logits at the masks."""
        if view is None or view.mask_logits is None:
            return False
        shape = view.heads_on.shape
        on = np.ones(shape, bool) if head_mask is None else head_mask.cpu().numpy().reshape(shape) > 0
        return np.array_equal(on, view.heads_on)

    def predicted(head_mask: torch.Tensor | None) -> vpr.Prediction:
        """With these heads on: read from `view` when it ran with them (the same numbers), else one forward."""
        if ran_as(head_mask):
            positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
            return vpr.read_logits(tokenizer, encoding, positions, torch.tensor(view.mask_logits),
                                       vpr.ReadOptions(top_k))
        return vpr.predict_masks(model, tokenizer, encoding, top_k=top_k, head_mask=head_mask)

    runs = {"all heads": predicted(None)}
    if heads_off is not None:
        runs["heads off"] = predicted(heads_off)
    rows = []
    for m, mask in enumerate(runs["all heads"].masks):
        for rank in range(len(mask.candidates)):
            row = {"[MASK] at": f"{mask.position} [MASK]", "rank": rank + 1}
            for name, prediction in runs.items():
                candidate = prediction.masks[m].candidates[rank]
                row[name], row[f"p ({name})"] = candidate.token, candidate.prob
            rows.append(row)
    return pd.DataFrame(rows)
