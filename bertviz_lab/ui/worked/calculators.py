"""The Worked examples page's three calculators (the worked forward pass's attention softmax and its MLM head and
loss, seed text 000; the academic manual's one-hot attention, seed text 001), each with its inputs, its Reset
button, its table and chart, and the check of the figures the seed printed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.figures.worked import weight_bars
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import Worked as K
from bertviz_lab.ui.kit.tables import MAX_ROWS_IN_FULL, number
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.worked import onehot
from bertviz_lab.views.worked import forward_pass as worked

EMBEDDINGS = pd.DataFrame({"token": list(onehot.SEED001_TOKENS),
                           **{f"dim {j}": [row[j] for row in onehot.SEED001_EMBEDDINGS] for j in range(3)}})


def reset(*keys: state.Key) -> None:
    state.reset(*keys)
    if K.ONEHOT_QUERY in keys:
        state.put(K.ONEHOT_VERSION, state.get(K.ONEHOT_VERSION) + 1)  # a fresh, unedited matrix


# --- Tables ----------------------------------------------------------------------------------
def formats(df: pd.DataFrame) -> dict:
    """Exact columns to 4 decimals (exp in scientific notation when huge); printed ones as the seed printed."""
    config = {}
    for c in df.columns:
        if "(as printed" in c:  # a short header: the long name stays in the data and the CSV
            fmt = "%.2f" if c.startswith("exp") else "%.3f" if worked.SEED000 in c else "%.4f"
            config[c] = number(fmt, c.split(" (as printed")[0] + " · printed")
        elif pd.api.types.is_float_dtype(df[c]):
            config[c] = number("%.4e" if df[c].abs().max() >= 1e6 else "%.4f")
    return config


def table(df: pd.DataFrame, key: str) -> None:
    config = formats(df)
    if "which is right" in df:
        config["which is right"] = st.column_config.TextColumn(width="large")
        config["from the seed's rounded figures"] = number("%.4f", "from its rounded figures")
    st.dataframe(df, hide_index=True, column_config=config,
                 height="content" if len(df) <= MAX_ROWS_IN_FULL else 600, key=key)


def comparison(checks: pd.DataFrame, key: str) -> None:
    """The printed figures that are off, first; every printed figure in an expander."""
    wrong = checks[~checks["within rounding?"]]
    st.markdown("**Printed in the seed vs exact**")
    if len(wrong):
        st.warning(f"{len(wrong)} of the {len(checks)} printed figures {'differs' if len(wrong) == 1 else 'differ'} "
                   "from the exact value by more than their rounding. The exact values are the right ones:")
        table(wrong.drop(columns="within rounding?"), f"{key}.wrong")
    else:
        st.success("Every printed figure is the exact value, rounded.")
    with st.expander(f"All {len(checks)} printed figures, checked"):
        table(checks, key)


def edited(note: str) -> None:
    st.caption(f"Your inputs differ from the seed's ({note}), so there are no printed figures to compare with. "
               "Press Reset to get the seed's numbers back.")


def inputs(left: tuple[str, state.Key], right: tuple[str, state.Key], reset_key: state.Key, *resets: state.Key):
    """Two text inputs and a Reset button that puts back the seed's values of `resets`."""
    cols = st.columns([4, 4, 1], vertical_alignment="bottom")
    for col, (label, key) in zip(cols, (left, right)):
        col.text_input(label, key=key.name)
    cols[2].button("Reset", key=reset_key.name, on_click=reset, args=resets)


# --- The calculators -------------------------------------------------------------------------
SCORE_KINDS = {worked.SCORES_SCALED: f"already ÷ √d_head (as {cite('000')} uses them)",
               worked.SCORES_DOT: "plain q·k: divide them by √d_head here"}


def attention_section() -> None:
    st.caption(f"{cite('000', start=True)}, step 2: how much the [MASK] at position 5 attends to each token of "
               "“[CLS] The cat sat on [MASK] mat [SEP]”. The seed says score = q·k / √d_head, then calls its "
               "numbers “raw scores” and applies the softmax to them directly: it treats them as already divided "
               "by √d_head. Say below which yours are.")
    inputs(("Tokens (separated by spaces)", K.ATTN_TOKENS), ("Scores, one per token", K.ATTN_SCORES),
           K.ATTN_RESET, K.ATTN_TOKENS, K.ATTN_SCORES, K.ATTN_KIND, K.ATTN_D_HEAD)
    kind_col, d_col = st.columns([3, 1], vertical_alignment="bottom")
    kind = kind_col.radio("These scores are", list(SCORE_KINDS), format_func=SCORE_KINDS.get, horizontal=True,
                          key=K.ATTN_KIND.name)
    d_head = None
    if kind == worked.SCORES_DOT:
        d_head = d_col.number_input("d_head", 1, worked.MAX_D_HEAD, step=1, key=K.ATTN_D_HEAD.name,
                                    help="Dimensions of one head's q and k: hidden size ÷ heads (768 ÷ 12 = 64 "
                                         "in BERT-base).")
    try:
        tokens = worked.parse_labels(state.get(K.ATTN_TOKENS))
        scores = worked.parse_numbers(state.get(K.ATTN_SCORES), tokens, "scores")
        seed = tokens == list(worked.SEED000_TOKENS) and np.array_equal(scores, worked.SEED000_SCORES) and d_head is None
        steps = worked.softmax_table(tokens, scores, worked.SEED000_ATTENTION_PRINTED if seed else None, d_head)
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    first = ("1. **score = q·k / √d_head**: how well the query matches each key. Your numbers are the scores.\n"
             if d_head is None else
             f"1. **score = q·k / √{d_head}** = q·k / {d_head ** 0.5:g}: how well the query matches each key, "
             "scaled so it does not grow with the number of dimensions.\n")
    st.markdown(first + "2. **exp(score)**: makes every score positive; a bigger score gets a much bigger number.\n"
                "3. **Σ exp**: add them all up.\n"
                "4. **weight = exp / Σ**: each token's share. The weights add up to 1.")
    if steps.shift:
        st.info(f"Your largest score is {steps.shift:g}: exp of a number above about 709 is too big for the "
                "computer (over 10^308), so this table shows exp(score − max) instead. Subtracting the same number "
                "from every score multiplies every exp by the same factor, which cancels in exp / Σ: the weights "
                "are exactly the same.")
    table(steps.table, "worked.attn.table")
    a, b = st.columns(2)
    a.metric("Σ exp", f"{steps.total:.4f}" if steps.total < 1e6 else f"{steps.total:.4e}")
    b.metric("Largest weight", f"{steps.table['weight'].max():.4f}")
    printed = steps.table.get(f"weight (as printed in {worked.SEED000})")
    chart(weight_bars(tokens, steps.table["weight"], "Attention weights of the [MASK] query",
                      other=printed, other_name=f"as printed in {worked.SEED000}"), "worked_attention", key="worked.attn.chart")
    if seed:
        comparison(steps.checks, "worked.attn.checks")
    elif d_head is not None:
        st.caption(f"{cite('000', start=True)} used its numbers as scores already divided by √d_head, so its printed figures are "
                   "compared only in that reading. Press Reset to get the seed's numbers back.")
    else:
        edited("tokens or scores")


def mlm_section() -> None:
    st.caption(f"{cite('000', start=True)}, steps 3–4: the MLM head turns the hidden state of [MASK] into one logit per word; "
               "softmax makes them probabilities, and the loss is −ln of the true word's probability.")
    inputs(("Vocabulary words (separated by spaces)", K.MLM_WORDS), ("Logits, one per word", K.MLM_LOGITS),
           K.MLM_RESET, K.MLM_WORDS, K.MLM_LOGITS, K.MLM_TRUE)
    try:
        words = worked.parse_labels(state.get(K.MLM_WORDS), "words")
        logits = worked.parse_numbers(state.get(K.MLM_LOGITS), words, "logits")
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    state.keep_valid(K.MLM_TRUE, range(len(words)))  # fewer words: back to the first
    true = st.selectbox("True (hidden) word", range(len(words)), format_func=lambda i: f"{i} · {words[i]}",
                        key=K.MLM_TRUE.name)
    seed = words == list(worked.SEED000_WORDS) and np.array_equal(logits, worked.SEED000_LOGITS) and true == worked.SEED000_TRUE
    try:
        result = worked.mlm_loss_table(words, logits, true, worked.SEED000_MLM_PRINTED if seed else None)
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    st.markdown("1. **logit**: the MLM head's raw score for each word.\n"
                "2. **exp, Σ, probability = exp / Σ**: the same softmax as attention, now over the vocabulary.\n"
                "3. **loss = −ln p(true word)**: 0 when the model is sure and right; larger the less probable "
                "it found the true word.\n"
                "4. **uniform baseline = −ln(1/V) = ln V**: the loss of guessing every word equally. "
                "Below it, the model has learned something.")
    table(result.table, "worked.mlm.table")
    a, b, c = st.columns(3)
    a.metric("p(true word)", f"{result.p_true:.4f}")
    b.metric("Loss −ln p(true word)", f"{result.loss:.4f}", delta=f"{result.loss - result.uniform:+.4f} vs uniform",
             delta_color="inverse")
    c.metric(f"Uniform baseline ln {result.vocab_size}", f"{result.uniform:.4f}")
    chart(weight_bars(words, result.table["probability"], "Probabilities of the MLM head (true word dark)",
                      other=result.table.get(f"probability (as printed in {worked.SEED000})"),
                      other_name=f"as printed in {worked.SEED000}", highlight=true), "worked_mlm", key="worked.mlm.chart")
    if seed:
        comparison(result.checks, "worked.mlm.checks")
        st.caption("“From the seed's rounded figures” redoes a step with the seed's rounded inputs (e.g. the loss "
                   "from its rounded p(true word)): it shows where a slip came from. "
                   "The exact column is always the right one.")
    else:
        edited("words, logits or true word")


def one_hot_section() -> None:
    st.caption(f"{cite('001', start=True)}, section 8: three one-hot embeddings and single-head attention with W_Q = W_K = W_V = I, "
               "so each token's q, k and v are its embedding. The seed skips the 1/√d scaling BERT uses; "
               "both are shown. Positions count from 0 here (the seed's “position 2” is 1 · cat).")
    left, right, button = st.columns([5, 3, 1], vertical_alignment="bottom")
    with left:
        frame = st.data_editor(EMBEDDINGS, hide_index=True, num_rows="fixed",
                               key=f"{K.ONEHOT_MATRIX.name}.{state.get(K.ONEHOT_VERSION)}",
                               column_config={"token": st.column_config.TextColumn("token", required=True),
                                              **{c: st.column_config.NumberColumn(c, format="%.2f", required=True)
                                                 for c in EMBEDDINGS.columns[1:]}})
    button.button("Reset", key=K.ONEHOT_RESET.name, on_click=reset, args=(K.ONEHOT_QUERY,))
    tokens = [str(t) for t in frame["token"]]
    query = right.selectbox("Query position", range(len(tokens)), format_func=lambda i: f"{i} · {tokens[i]}",
                            key=K.ONEHOT_QUERY.name)
    seed = frame.equals(EMBEDDINGS) and query == onehot.SEED001_QUERY
    try:
        side, output = onehot.scaling_side_by_side(frame, query, onehot.SEED001_PRINTED if seed else None)
        plain_steps = onehot.one_hot_attention(frame, query, scale=False)
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    d = len(plain_steps.q)
    st.markdown(f"1. **Q, K, V**: with identity weights they are the embeddings above; the query is row {query}.\n"
                "2. **score = q·k**: the dot product of the query with every key.\n"
                f"3. **÷ √{d}** (BERT only): keeps scores from growing with the dimension d = {d}.\n"
                "4. **softmax** gives the weights; the **output** is Σ weight × v.")
    st.text("q = [" + ", ".join(f"{x:g}" for x in plain_steps.q) + "]   K = V = the embedding rows above")
    table(side, "worked.onehot.table")
    a, b = st.columns(2)
    weights_plain, weights_scaled = side["weight (no scaling)"], side[f"weight (÷ √{d})"]
    a.metric("Weight on the query itself, no scaling", f"{weights_plain[query]:.4f}")
    b.metric(f"Weight on the query itself, ÷ √{d}", f"{weights_scaled[query]:.4f}",
             delta=f"{weights_scaled[query] - weights_plain[query]:+.4f}", delta_color="off")
    chart(weight_bars(tokens, weights_plain, f"No scaling (as in {cite('001')})", digits=4,
                      other=side.get(f"weight (as printed in {onehot.SEED001_PRINTED.source})"),
                      other_name=f"as printed in {onehot.SEED001_PRINTED.source}"),
          "worked_onehot_plain", a, key="worked.onehot.chart.plain")
    chart(weight_bars(tokens, weights_scaled, f"÷ √{d} (as in BERT)", digits=4), "worked_onehot_scaled", b,
          key="worked.onehot.chart.scaled")
    st.markdown("**Output = Σ weight × v**")
    table(output, "worked.onehot.output")
    if seed:
        comparison(onehot.one_hot_checks(frame, query, onehot.SEED001_PRINTED), "worked.onehot.checks")
        st.caption("softmax([0, 1, 0]) = [1, e, 1] / (e + 2) without scaling, [1, e^(1/√3), 1] / (e^(1/√3) + 2) "
                   "with it.")
    else:
        edited("embeddings or query")
