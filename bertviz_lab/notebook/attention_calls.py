"""Attention, as the Attention page draws it: one head's matrix, every head of a layer, one query's softmax step by
step and the rest of its layer, from one traced forward pass (kept on the Lab, so the next figure of the same text
runs nothing); and each head's role scores over a few sentences (the `heads` command's numbers)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.figures import attention as fa
from bertviz_lab.head_id import HeadId
from bertviz_lab.notebook.lab import Lab, choice, encode, index, lab_of, positive, sentence_list
from bertviz_lab.pretrain.head_roles import ROLE_NAMES
from bertviz_lab.pretrain.head_roles import head_roles as role_scores
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.attention import layer as lv

HeadNames = Iterable[str | tuple[int, int]]  # heads switched off: "L0 H1" or (0, 1)


def attention(lab, text: str, layer: int | None = 0, head: int | str | None = 0, *, text_b: str | None = None,
              hide_specials: bool = False, block: str = "all", heads_off: HeadNames = ()) -> go.Figure:
    """Attention weights: queries down the side, keys along the bottom, each row one query's softmax over the keys.

    `head` a number: that head's matrix at `layer` (layers and heads count from 0). `head="mean"`: the layer's
    mean over its heads. `head=None`: every head of `layer` side by side; `layer=None` too: every head of every
    layer (the page's grid). `hide_specials` drops the [CLS] and [SEP] rows and columns without renormalising,
    so rows no longer sum to 1; with `text_b`, `block="A→B"` or `"B→A"` shows one sentence's queries to the
    other's keys. `heads_off` (["L0 H1"] or [(0, 1)]) switches heads off: their context is multiplied by 0, so
    the layers above change too.

    A weight says where a query looked, not why the model guessed what it did: one sentence's matrix can show
    anything (Why this guess? and `syntax` test what it means).
    """
    lab = lab_of(lab)
    view = _view(lab, text, text_b, heads_off)
    block = _block(view, block)
    if layer is None:
        if head is not None:
            raise InputError("a head needs its layer: give layer= too, or head=None for every head of every layer")
        grid = av.grid(view, hide_specials, block)
        return fa.attention_grid(grid.weights, grid.col_axis, grid.row_axis, view.heads_on, grid.title)
    layer = index(layer, view.num_layers, "layer")
    if head is None:
        rows, cols = av.shown_positions(view, hide_specials, block)
        if view.num_heads * len(rows) * len(cols) > av.GRID_MAX_CELLS:
            raise InputError(f"{view.num_heads} heads of {len(rows)} × {len(cols)} tokens are too many to draw at "
                             "once: shorten the text or pick one head")
        weights = view.weights[layer:layer + 1][:, :, rows][:, :, :, cols]  # (1, H, R, C)
        return fa.attention_grid(weights, [view.axis_labels[i] for i in cols], [view.axis_labels[i] for i in rows],
                                   view.heads_on[layer:layer + 1], f"Layer {layer} · every head", first_layer=layer)
    mean = isinstance(head, str) and head == "mean"
    shown = av.matrix(view, layer, None if mean else index(head, view.num_heads, "head"), hide_specials, block)
    return fa.attention_heatmap(shown.weights, shown.col_axis, shown.row_axis, shown.title)


def softmax_steps(lab, text: str, layer: int = 0, head: int = 0, query: int | str | None = None, *,
                  text_b: str | None = None, tau: float = 1.0, heads_off: HeadNames = (),
                  kind: str = "bars") -> go.Figure | pd.DataFrame:
    """One query's softmax, as the Attention page writes it out: kind "table" the steps, one row per key (a
    pandas DataFrame, the page's table): q·k, ÷√d_head (the score), + the mask (0 for every key of one unpadded
    text), exp(x − max x), Σ exp, and the weight = exp ÷ Σ exp; kind "bars" the weights, one bar per key (the
    page's chart). `query`: a token position, or a
    token as the model writes it (its first occurrence); default: a pronoun if the text has one, else token 1.
    `tau` ≠ 1 is a what-if, not what the model computes: the masked scores are divided by τ before the softmax,
    and the model's own weights are drawn beside. A large weight says where the query looked, not why.
    """
    lab = lab_of(lab)
    view = _view(lab, text, text_b, heads_off)
    layer, head = index(layer, view.num_layers, "layer"), index(head, view.num_heads, "head")
    query = _token(view, query)
    steps = av.softmax_steps(view, layer, head, query, positive(tau, "tau"))
    if choice(kind, ("bars", "table"), "kind") == "table":
        return steps
    return fa.softmax_bars(av.weights_by_key(view, steps), f"Layer {layer} · head {head} · query "
                                                             f"{view.axis_labels[query]}")


def layer_steps(lab, text: str, layer: int = 0, query: int | str | None = None, *, text_b: str | None = None,
                heads_off: HeadNames = ()) -> go.Figure:
    """The rest of the layer after attention, for one query token: the length (L2 norm) of each vector on the
    way from the layer's input to its output (the Attention page's last tab).

    Post-LN, as in the original BERT: the heads' contexts are concatenated (c), projected by W_O and added to the
    input x, then LayerNorm; the feed-forward network widens, applies its activation, narrows, adds its input and
    normalises again (orange bars: just normalised). Recomputed in float64 from the model's weights; the last step
    equals the model's own hidden state for this layer and token to rounding (views/attention/layer.py's layer_steps
    says by how much, with every vector's first entries). `query` as in `softmax_steps`.
    """
    lab = lab_of(lab)
    view = _view(lab, text, text_b, heads_off)
    layer = index(layer, view.num_layers, "layer")
    token = _token(view, query)
    steps = lv.layer_steps(lab.model, view, layer, token)
    return fa.step_norms(list(steps.table[lv.STEP]), steps.table[lv.NORM].to_numpy(),
                           f"Layer {layer} · query {view.axis_labels[token]}: the length of each vector (orange: "
                           "just normalised)")


def head_roles(lab, sentences: Iterable[str] | None = None, *, role: str = "previous") -> go.Figure:
    """Each head's score for one role, layers down the side and heads along the bottom (the `heads` command).

    A score is a mean attention weight (0 to 1): how much of each word token's attention goes to the previous
    token, the next, itself, [CLS] or [SEP] ("previous", "next", "self", "cls", "sep"), averaged over each
    sentence's words, then over the sentences. With no sentences, the built-in probe set is read and three
    syntactic roles are scored too ("det_noun", "verb_subject", "pronoun_referent"); on it every verb's subject is
    the word just before it, so a previous-token head scores high on verb → subject without knowing any syntax. A
    head that spreads its attention evenly already scores 1/T: a role is clear only well above that. Six sentences
    are a sample, not evidence of what a head does everywhere.
    """
    lab = lab_of(lab)
    texts = tuple(sentence_list(sentences)) if sentences is not None else ()
    roles = lab.remember(("head_roles", texts), lambda: role_scores(lab.model, lab.tokenizer, list(texts) or None))
    role = choice(role, list(roles.scores), "role")
    layer, head, best = roles.strongest(role)
    title = f"{role}: to {ROLE_NAMES[role]} (strongest: {HeadId(layer, head).in_words}, {best:.2f})"
    return fa.head_summary(roles.scores[role], title, ".3f", "mean weight")


def _view(lab: Lab, text: str, text_b: str | None, heads_off: HeadNames) -> av.AttentionView:
    """The traced pass of the text with these heads off, kept on the Lab."""
    encoding = encode(lab, text, text_b)
    off = _heads_off(lab, heads_off)
    L, H = lab.config.num_hidden_layers, lab.config.num_attention_heads
    return lab.remember(("attention", tuple(encoding.ids), tuple(encoding.segment_ids), off),
                        lambda: av.explore(lab.model, encoding, av.head_mask(list(off), L, H), lab.tokenizer.mask_id))


def _heads_off(lab: Lab, heads: HeadNames) -> tuple[str, ...]:
    """The heads' names ("L0 H1"), each checked, in the model's order."""
    names = av.head_names(lab.config.num_hidden_layers, lab.config.num_attention_heads)
    if isinstance(heads, str) or (isinstance(heads, tuple) and len(heads) == 2 and all(
            isinstance(h, numbers.Integral) for h in heads)):
        heads = [heads]  # one head: "L0 H1" or (0, 1)
    if not isinstance(heads, Iterable):
        raise InputError(f"heads_off must be a list of heads, e.g. [\"L0 H1\"] or [(0, 1)], got {heads!r}")
    chosen = set()
    for head in heads:
        try:
            name = head.strip() if isinstance(head, str) else str(HeadId(*head))
        except (TypeError, ValueError):
            name = None
        if name not in names:
            raise InputError(f"there is no head {head!r} to switch off: this model has {names[0]} to {names[-1]}")
        chosen.add(name)
    return tuple(n for n in names if n in chosen)


def _block(view: av.AttentionView, block: str) -> str:
    choice(block, av.BLOCKS, "block")
    if block != "all" and not view.is_pair:
        raise InputError(f"{block} needs a sentence pair: give text_b")
    return block


def _token(view: av.AttentionView, query: int | str | None) -> int:
    """A token position: the one given, the first one written `query`, or the page's default query."""
    if query is None:
        return av.default_query(view)
    if isinstance(query, str):
        if query not in view.tokens:
            raise InputError(f"the text has no token {query!r}; its tokens are {', '.join(map(repr, view.tokens))}")
        return view.tokens.index(query)
    return index(query, len(view.tokens), "token", owner="the text")
