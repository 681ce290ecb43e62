"""The Representations page's "Shapes and padding" tab: sentences batched with [PAD], the shapes of
what BERT returns, and proof from the model's own numbers that padding changes nothing.

`shapes_tab(ckpt)` draws the whole tab. The random model is built once per config and the forward
pass once per model (`model_key`) and input (`st.cache_resource`, shared by every session), so a redraw only
reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.figures import shapes as fsh
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Shapes as K  # this tab's session-state keys
from bertviz_lab.ui.kit.widgets import chart, index_picker
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.representations import shapes as vsh

SOURCES = {"text": "Your sentences", "seed002": f"The batch of {cite('002')}"}
MAX_CHARS = 1_000  # four sentences of a classroom's length, and a forward pass that stays quick
SIZE_INPUTS = (  # (key, BertConfig field, step of the + / - buttons, what it means)
    (K.HIDDEN, "hidden_size", 32, "numbers in each token's vector"),
    (K.LAYERS, "num_hidden_layers", 1, "encoder layers stacked"),
    (K.HEADS, "num_attention_heads", 1, "attention heads per layer; they must divide hidden_size"),
    (K.INTERMEDIATE, "intermediate_size", 64, "width of the feed-forward network inside each layer"),
)


@dataclass(frozen=True)
class Inputs:
    """What the learner chose to run, besides the active model (whose tokenizer reads the sentences)."""
    lines: tuple[str, ...] | None  # the sentences; None: the BERT tutorial's batch (seed text 002)
    config: BertConfig | None  # the random model's config; None: the active model's weights


@st.cache_resource(max_entries=4, show_spinner="Building a random BERT…")
def random_model(config: BertConfig) -> BertForPreTraining:
    return vsh.random_model(config)


@st.cache_resource(max_entries=16, show_spinner=False)
def shapes_view(key: ModelKey, inputs: Inputs, row: int, _ckpt: Checkpoint) -> vsh.ShapesView:
    model = _ckpt.model if inputs.config is None else random_model(inputs.config)
    padded = vsh.seed002_batch() if inputs.lines is None else vsh.text_batch(_ckpt.tokenizer, model, list(inputs.lines))
    return vsh.shapes_of(model, padded, row)


def _sizes() -> dict[str, int]:
    """The four number boxes of the random model's config, as BertConfig field -> value."""
    cols = st.columns(len(SIZE_INPUTS))
    return {field: col.number_input(field, min_value=1, step=step, key=key.name, help=meaning)
            for col, (key, field, step, meaning) in zip(cols, SIZE_INPUTS)}


def _inputs(ckpt: Checkpoint) -> tuple[Inputs | None, list[str]]:
    """Draw the input and model widgets: what to run, or None and why not (each bad sentence or size)."""
    state.init(K.SOURCE, K.TEXT, K.MODEL, *(key for key, *_ in SIZE_INPUTS))
    state.keep(*K.INPUTS)  # the text box is not drawn for the tutorial's batch (seed text 002): its edits stay
    source = st.segmented_control("Input", list(SOURCES), format_func=SOURCES.get, required=True,
                                  key=K.SOURCE.name)
    text, use_random = None, True
    if source == "text":
        text = st.text_area("Sentences, one per line (2 to 4)", key=K.TEXT.name, height=110, max_chars=MAX_CHARS)
        models = {"random": "A random BERT of the sizes below", "active": f"The active model ({ckpt.path.name})"}
        use_random = st.segmented_control("Model", list(models), format_func=models.get, required=True,
                                          key=K.MODEL.name) == "random"
    else:
        st.caption(f"The hand-typed input_ids and attention_mask of {cite('002')}, with vocab_size=100: the 0s at the end "
                   "are padding. The seed gives no vocabulary, so each token is shown by its id, and the model is "
                   "a random one, as in the seed.")
    vocab, pad = (ckpt.tokenizer.vocab_size, ckpt.tokenizer.pad_id) if text is not None else (vsh.SEED002_VOCAB, 0)
    errors, config, lines = [], None, None
    if use_random:
        st.caption(f"Random weights (torch.manual_seed({vsh.SEED})): the numbers mean nothing, the shapes are what "
                   f"to read. vocab_size = {vocab:,}. {cite('002', start=True)}, exercise 2: change hidden_size from 32 to 64.")
        try:
            config = vsh.random_config(vocab, pad, **_sizes())
        except InputError as exc:
            errors.append(str(exc))
    if text is not None:
        try:
            lines = tuple(vsh.sentences(text))
        except InputError as exc:
            errors.append(str(exc))
    if not use_random:
        c = ckpt.config
        st.caption(f"Its trained weights, as loaded: hidden_size {c.hidden_size}, {c.num_hidden_layers} layers, "
                   f"{c.num_attention_heads} heads, intermediate_size {c.intermediate_size}, vocab_size "
                   f"{c.vocab_size:,}. Choose the random BERT to change the sizes.")
    if errors:
        return None, errors
    return Inputs(lines, config), []


def _batch(view: vsh.ShapesView) -> None:
    st.subheader("The batch")
    T, pad = len(view.tokens[0]), plain(view.pad_token)  # Markdown: RoBERTa's <pad> would read as a tag
    st.caption(f"One row per sentence, one column per position. Every row is {T} positions long, the longest "
               f"sentence's length; shorter ones are filled up on the right with {pad}. The attention_mask says "
               f"which positions are real: 1 for a real token, 0 for {pad}.")
    for what in ("tokens", "input_ids", "attention_mask"):
        st.markdown(f"**{what}**")
        st.dataframe(view.frame(what), height="content")


def _shapes(view: vsh.ShapesView) -> None:
    st.subheader("The shapes")
    st.code(view.printout(), language=None)
    B, T, d = view.shapes["last_hidden_state"]
    heads = view.shapes["attentions"][1]
    cls = plain(view.cls_token)
    pooler = (f"pooler_output is one vector per sentence: tanh(W · h{cls} + b), from the first token's ({cls}'s) "
              "last hidden state." if view.has_pooler else
              "This model has no pooler: it returns no pooler_output, only the vectors per token; a sentence-level "
              f"head built on it starts from {cls}'s vector or from all of them.")
    st.caption(f"{B} = sentences in the batch · {T} = positions (the longest sentence) · {d} = hidden_size, the "
               f"numbers in each token's vector · {heads} = attention heads. last_hidden_state is hidden_states[-1]: "
               f"one vector per token. {pooler}")


def _attention(view: vsh.ShapesView) -> None:
    pad = plain(view.pad_token)
    st.subheader(f"Attention never looks at {pad}")
    L, H = view.weights.shape[:2]
    B = len(view.tokens)
    cols = st.columns(3)
    row = cols[0].segmented_control("Sentence", list(range(B)), format_func=lambda b: str(b + 1), required=True,
                                    key=K.ROW.name)
    layer = index_picker(cols[1], "Layer", L, K.LAYER.name)
    head = index_picker(cols[2], "Head", H, K.HEAD.name)
    real, T = view.lengths[row], len(view.tokens[row])
    title = f"Sentence {row + 1} · layer {layer} · head {head}"
    chart(fsh.padded_attention(view.weights[layer, head], list(view.tokens[row]), real, title),
          f"padding_s{row + 1}_L{layer}_H{head}")
    st.caption("Each row is one query (the token looking) and sums to 1; the columns are the keys (the tokens "
               f"looked at). Layers and heads count from 0, as in the code. The {pad} rows are computed too, but "
               "no real token ever reads them.")
    if view.evenly_spread(layer, head):
        st.caption(f"Here every query spreads its weight almost evenly over the {real} real tokens, about 1/{real} ≈ "
                   f"{1 / real:.2f} each, because its scores q·k are all nearly equal. Small random weights do this; "
                   "a trained model has sharper patterns.")
    if real == T:
        st.info(f"Sentence {row + 1} is the longest, so it has no {pad}: pick a shorter one.")
    if view.pad_weight is None:
        st.info("Every sentence has the same length, so nothing was padded: make one sentence shorter.")
    else:
        value = "exactly 0" if view.pad_weight == 0.0 else f"{view.pad_weight:.3g}"
        st.markdown(f"The largest weight any query puts on any {pad} key, over all {B} sentences, {L} layers "
                    f"and {H} heads: **{value}**.")


def _padding_changes_nothing(view: vsh.ShapesView) -> None:
    if view.alone_difference is None:
        return
    st.subheader("Padding changes nothing")
    gap = "exactly 0" if view.alone_difference == 0.0 else f"{view.alone_difference:.1e}"
    pad, pooled = plain(view.pad_token), ", and its pooler_output" if view.has_pooler else ""
    st.markdown("The largest |difference| between a padded sentence's real tokens (every hidden state, in every "
                f"layer{pooled}) and the same sentence run alone, without {pad}: **{gap}**.")
    st.caption(f"Why: the attention_mask replaces the score of every {pad} key with −1e9 before the softmax, and "
               f"exp(−1e9) is 0, so {pad} keys get weight 0 and no real token reads them; the {pad} rows' own "
               "outputs are computed but ignored. What is left is float rounding: the same sums in another order.")


def shapes_tab(ckpt: Checkpoint) -> None:
    """The whole tab: inputs and sizes, then the batch, its shapes, its attention and the padding check."""
    st.caption("Sentences of different lengths go through BERT together, as one batch: the shorter ones are "
               "padded with a pad token ([PAD] in BERT), and the attention_mask tells the model to ignore the "
               "padding. Every shape and number below is read from one forward pass of a real model.")
    inputs, errors = _inputs(ckpt)
    for message in errors:
        st.warning(plain(message))
    if inputs is None:
        return
    config = inputs.config or ckpt.config
    B = 2 if inputs.lines is None else len(inputs.lines)
    for key, options in ((K.ROW, range(B)), (K.LAYER, range(config.num_hidden_layers)),
                         (K.HEAD, range(config.num_attention_heads))):
        state.keep_valid(key, options)  # fewer sentences, layers or heads than the remembered choice
        state.init(key)
    try:
        view = shapes_view(model_key(ckpt), inputs, state.get(K.ROW), ckpt)
    except InputError as exc:  # a sentence longer than the model reads
        st.warning(plain(str(exc)))
        return
    _batch(view)
    _shapes(view)
    _attention(view)
    _padding_changes_nothing(view)
