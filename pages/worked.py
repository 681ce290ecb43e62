"""Worked examples: the seed texts' hand computations as calculators, preloaded with the seeds'
inputs, computed exactly, and checked against the figures the seeds printed."""

import re

import numpy as np
import pandas as pd
import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.figures.worked import weight_bars
from bertviz_lab.ui.models import sidebar
from bertviz_lab.views import worked as w

EMBEDDINGS = pd.DataFrame({"token": list(w.SEED001_TOKENS),
                           **{f"dim {j}": [row[j] for row in w.SEED001_EMBEDDINGS] for j in range(3)}})
DEFAULTS = {"worked.attn.tokens": " ".join(w.SEED000_TOKENS),
            "worked.attn.scores": " ".join(f"{x:g}" for x in w.SEED000_SCORES),
            "worked.mlm.words": " ".join(w.SEED000_WORDS),
            "worked.mlm.logits": " ".join(f"{x:g}" for x in w.SEED000_LOGITS),
            "worked.mlm.true": w.SEED000_TRUE, "worked.onehot.query": w.SEED001_QUERY, "worked.onehot.version": 0}


def plain(text: str) -> str:
    """Backslash-escape ASCII punctuation: alert bodies are Markdown and typed input must show as typed."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def reset(*keys: str) -> None:
    for key in keys:
        st.session_state[key] = DEFAULTS[key]
    st.session_state["worked.onehot.version"] += "worked.onehot.query" in keys  # a fresh, unedited matrix


def formats(df: pd.DataFrame) -> dict:
    """Exact columns to 4 decimals (exp in scientific notation when huge); printed ones as the seed printed."""
    config = {}
    for c in df.columns:
        if "(as printed" in c:  # a short header: the long name stays in the data and the CSV
            config[c] = st.column_config.NumberColumn(c.split(" (as printed")[0] + " · printed",
                                                      format="%.2f" if c.startswith("exp") else "%.3f"
                                                      if "seed 000" in c else "%.4f")
        elif pd.api.types.is_float_dtype(df[c]):
            config[c] = st.column_config.NumberColumn(format="%.4e" if df[c].abs().max() >= 1e6 else "%.4f")
    return config


def table(df: pd.DataFrame, key: str) -> None:
    config = formats(df)
    if "which is right" in df:
        config["which is right"] = st.column_config.TextColumn(width="large")
        config["from the seed's rounded figures"] = st.column_config.NumberColumn("from its rounded figures",
                                                                                 format="%.4f")
    st.dataframe(df, hide_index=True, column_config=config, height="content" if len(df) <= 24 else 600, key=key)


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


def attention_section() -> None:
    st.caption("Seed 000, step 2: how much the [MASK] at position 5 attends to each token of "
               "“[CLS] The cat sat on [MASK] mat [SEP]”. The seed gives the raw scores; the rest is computed.")
    left, right, button = st.columns([4, 4, 1], vertical_alignment="bottom")
    left.text_input("Tokens (separated by spaces)", key="worked.attn.tokens")
    right.text_input("Raw scores, one per token", key="worked.attn.scores")
    button.button("Reset", key="worked.attn.reset", on_click=reset, args=("worked.attn.tokens", "worked.attn.scores"))
    try:
        tokens = w.parse_labels(st.session_state["worked.attn.tokens"])
        scores = w.parse_numbers(st.session_state["worked.attn.scores"], tokens, "scores")
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    seed = tokens == list(w.SEED000_TOKENS) and np.array_equal(scores, w.SEED000_SCORES)
    steps = w.softmax_table(tokens, scores, w.SEED000_ATTENTION_PRINTED if seed else None)
    st.markdown("1. **score**: how well the query matches each key, q·k / √d_head.\n"
                "2. **exp(score)**: makes every score positive; a bigger score gets a much bigger number.\n"
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
    printed = steps.table.get("weight (as printed in seed 000)")
    st.plotly_chart(weight_bars(tokens, steps.table["weight"], "Attention weights of the [MASK] query",
                                other=printed, other_name="as printed in seed 000"),
                    theme=None, key="worked.attn.chart")
    if seed:
        comparison(steps.checks, "worked.attn.checks")
    else:
        edited("tokens or scores")


def mlm_section() -> None:
    st.caption("Seed 000, steps 3–4: the MLM head turns the hidden state of [MASK] into one logit per word; "
               "softmax makes them probabilities, and the loss is −ln of the true word's probability.")
    left, right, button = st.columns([4, 4, 1], vertical_alignment="bottom")
    left.text_input("Vocabulary words (separated by spaces)", key="worked.mlm.words")
    right.text_input("Logits, one per word", key="worked.mlm.logits")
    button.button("Reset", key="worked.mlm.reset", on_click=reset,
                  args=("worked.mlm.words", "worked.mlm.logits", "worked.mlm.true"))
    try:
        words = w.parse_labels(st.session_state["worked.mlm.words"], "words")
        logits = w.parse_numbers(st.session_state["worked.mlm.logits"], words, "logits")
    except InputError as exc:
        st.warning(plain(str(exc)))
        return
    if st.session_state["worked.mlm.true"] >= len(words):
        st.session_state["worked.mlm.true"] = 0
    true = st.selectbox("True (hidden) word", range(len(words)), format_func=lambda i: f"{i} · {words[i]}",
                        key="worked.mlm.true")
    seed = words == list(w.SEED000_WORDS) and np.array_equal(logits, w.SEED000_LOGITS) and true == w.SEED000_TRUE
    try:
        result = w.mlm_loss_table(words, logits, true, w.SEED000_MLM_PRINTED if seed else None)
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
    st.plotly_chart(weight_bars(words, result.table["probability"], "Probabilities of the MLM head (true word dark)",
                                other=result.table.get("probability (as printed in seed 000)"),
                                other_name="as printed in seed 000", highlight=true),
                    theme=None, key="worked.mlm.chart")
    if seed:
        comparison(result.checks, "worked.mlm.checks")
        st.caption("“From the seed's rounded figures” redoes a step with the seed's rounded inputs (e.g. the loss "
                   "from its rounded p(true word)): it shows where a slip came from. "
                   "The exact column is always the right one.")
    else:
        edited("words, logits or true word")


def one_hot_section() -> None:
    st.caption("Seed 001, section 8: three one-hot embeddings and single-head attention with W_Q = W_K = W_V = I, "
               "so each token's q, k and v are its embedding. The seed skips the 1/√d scaling BERT uses; "
               "both are shown. Positions count from 0 here (the seed's “position 2” is 1 · cat).")
    version = st.session_state["worked.onehot.version"]
    left, right, button = st.columns([5, 3, 1], vertical_alignment="bottom")
    with left:
        frame = st.data_editor(EMBEDDINGS, hide_index=True, num_rows="fixed", key=f"worked.onehot.matrix.{version}",
                               column_config={"token": st.column_config.TextColumn("token", required=True),
                                              **{c: st.column_config.NumberColumn(c, format="%.2f", required=True)
                                                 for c in EMBEDDINGS.columns[1:]}})
    button.button("Reset", key="worked.onehot.reset", on_click=reset, args=("worked.onehot.query",))
    tokens = [str(t) for t in frame["token"]]
    query = right.selectbox("Query position", range(len(tokens)), format_func=lambda i: f"{i} · {tokens[i]}",
                            key="worked.onehot.query")
    seed = frame.equals(EMBEDDINGS) and query == w.SEED001_QUERY
    try:
        side, output = w.scaling_side_by_side(frame, query, w.SEED001_PRINTED if seed else None)
        plain_steps = w.one_hot_attention(frame, query, scale=False)
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
    a.plotly_chart(weight_bars(tokens, weights_plain, "No scaling (as in seed 001)", digits=4,
                               other=side.get("weight (as printed in seed 001)"), other_name="as printed in seed 001"),
                   theme=None, key="worked.onehot.chart.plain")
    b.plotly_chart(weight_bars(tokens, weights_scaled, f"÷ √{d} (as in BERT)", digits=4),
                   theme=None, key="worked.onehot.chart.scaled")
    st.markdown("**Output = Σ weight × v**")
    table(output, "worked.onehot.output")
    if seed:
        comparison(w.one_hot_checks(frame, query, w.SEED001_PRINTED), "worked.onehot.checks")
        st.caption("softmax([0, 1, 0]) = [1, e, 1] / (e + 2) without scaling, [1, e^(1/√3), 1] / (e^(1/√3) + 2) "
                   "with it.")
    else:
        edited("embeddings or query")


sidebar()
st.title("Worked examples")
st.caption("The seed texts' hand computations, redone exactly. Edit any number and everything recomputes; "
           "with the seeds' own inputs, the figures they printed are checked against the exact ones.")
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)
attention, mlm, one_hot = st.tabs(["Seed 000 · attention softmax", "Seed 000 · MLM head and loss",
                                   "Seed 001 · one-hot attention (with and without 1/√d)"])
with attention:
    attention_section()
with mlm:
    mlm_section()
with one_hot:
    one_hot_section()
