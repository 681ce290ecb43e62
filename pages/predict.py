"""Mask & predict: hide words from BERT and watch it guess them, with how sure it is.

Masks come from typing [MASK] or clicking words (whole-word masking). Each mask gets
its top-k table and bar chart; several masks are filled two ways side by side: all
at once from one pass (independent) and one at a time from the left (iterative).
"""

import streamlit as st

from bertviz_lab.figures.predictions import confidence_strip, prediction_bars
from bertviz_lab.ui.kit import widgets
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.predict.reading import guesses_line, what_bert_reads
from bertviz_lab.ui.predict.replaced import replaced_tokens
from bertviz_lab.ui.shell.router import end_page
from bertviz_lab.ui.shell.state import Predict as K  # this page's session-state keys
from bertviz_lab.ui.kit.tables import number
from bertviz_lab.ui.kit.widgets import encode_or_stop, family_note, sentence_inputs
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr

MAX_DETAILED = 4  # masks drawn in full; with more, one is picked to inspect
MAX_STEPS = 8  # left-to-right passes; the last one fills every mask still open
COLUMNS = {"probability": st.column_config.ProgressColumn("probability", format="%.4f", min_value=0, max_value=1),
           "logit": number("%.3f", "logit")}
ROW_COLUMNS = {"p (independent)": number("%.4f"), "p (left-to-right)": number("%.4f"), "probability": number("%.4f")}


st.title("Mask & predict")
st.caption("BERT learned by guessing hidden words. Hide some — type [MASK] or click words below — "
           "and see what it guesses, and how sure it is.")
ckpt = active_model()
if ckpt.model.has_rtd:  # an ELECTRA discriminator: what it says of every token instead
    replaced_tokens(ckpt, *sentence_inputs(K.SENTENCES, ckpt.config))
    end_page()
if not ckpt.model.has_mlm:
    st.error("This model has no masked-language-model (MLM) head: "
             f"{ckpt.family.no_mlm(ckpt.model.has_rtd)}"
             ", so it cannot fill masks. Pick another model in the sidebar.")
    end_page()
family_note(ckpt, what="")

text_a, text_b = sentence_inputs(K.SENTENCES, ckpt.config)
encoding = encode_or_stop(ckpt, text_a, text_b)
answer = st.empty()  # the top guesses, filled once they are computed
clickable = {w.label: w.index for w in inputs.words(encoding, text_a, text_b, ckpt.tokenizer.mask_token)
             if not w.is_mask}
chosen = []
if clickable:
    chosen = st.pills("Click words to hide them from BERT", list(clickable), selection_mode="multi",
                      format_func=plain, key=K.WORDS.name,
                      help="Every piece of a clicked word becomes [MASK] (whole-word masking).")
left, right = st.columns(2)
top_k = left.slider("Top-k candidates", 1, min(20, ckpt.tokenizer.vocab_size), K.TOP_K.default, key=K.TOP_K.name)
temperature = right.slider("Temperature of the output softmax", 0.1, 3.0, K.TEMPERATURE.default, 0.1,
                           key=K.TEMPERATURE.name,
                           help="The logits are divided by it before the softmax: below 1 sharpens the "
                                "probabilities, above 1 flattens them. The ranking never changes.")
causal = st.toggle("Left context only (causal ablation)", key=K.CAUSAL.name,
                   help="Run this same bidirectional model with a causal attention mask: an ablation, not a "
                        "left-to-right model.")
if causal:
    st.warning("Ablation, out of distribution: every token now sees only itself and the words on its left. This "
               "model was trained to read both ways and never saw a causal mask, so these guesses show what it does "
               "with its right context cut off, not what a left-to-right model (one trained that way, like GPT) "
               "would predict.")
if temperature != 1:
    st.caption(f"At τ = {temperature:g} every probability and entropy below is of the tempered distribution "
               f"softmax(logits / {temperature:g}), not the model's own (τ = 1). The ranking is the same.")

try:
    report = vpr.explore_masks(ckpt.model, ckpt.tokenizer, encoding, [clickable[w] for w in chosen],
                                    top_k=top_k, temperature=temperature, causal=causal, max_steps=MAX_STEPS)
except vpr.NothingMasked:
    st.info("Nothing is hidden yet. Type [MASK] where a word should be guessed, or click words above to mask them.")
    end_page()
masks = report.independent.masks
answer.markdown(guesses_line(report, temperature, MAX_DETAILED))
ROW_COLUMNS[report.entropy_column] = number("%.3f")

what_bert_reads(ckpt, report.encoding, text_a, text_b)

st.subheader("The guesses" if len(masks) > 1 else "The guess")
shown = range(len(masks))
if len(masks) > MAX_DETAILED:
    st.caption(f"{len(masks)} masks: all are in the tables below; pick one to see its candidates.")
    shown = [st.selectbox("Mask to inspect", shown, key=K.INSPECT.name,
                          format_func=lambda i: f"mask #{i + 1} (token {masks[i].position})")]
for i in shown:
    mask, rows = masks[i], vpr.candidate_rows(masks[i])
    table, chart = st.columns(2)
    table.markdown(f"**Mask #{i + 1}** · token {mask.position}")
    table.dataframe(rows, hide_index=True, column_config=COLUMNS)
    table.metric("Entropy (uncertainty)" if temperature == 1 else f"Entropy of the tempered distribution "
                 f"(τ = {temperature:g})", f"{mask.entropy:.2f} nats",
                 help=f"0 = certain; {report.max_entropy:.2f} = a uniform guess over the whole vocabulary.")
    widgets.chart(prediction_bars(rows, f"Top-{top_k} for mask #{i + 1}"), f"predict_mask{i + 1}", chart,
                  key=f"predict.bars.{i}", theme="streamlit")

rows = vpr.mask_rows(report)
if report.iterative is None:
    st.caption("Filled sentence")
    st.code(report.independent_text, language=None, wrap_lines=True)
    st.dataframe(rows, hide_index=True, column_config=ROW_COLUMNS)
    end_page()

st.subheader("Independent vs left-to-right")
one_pass, step_by_step = st.columns(2)
one_pass.markdown("**Independent**: every mask from one pass; no guess sees another.")
one_pass.code(report.independent_text, language=None, wrap_lines=True)
step_by_step.markdown("**Left-to-right iterative**: fill the leftmost mask with its top guess, run again, repeat.")
step_by_step.code(report.iterative_text, language=None, wrap_lines=True)
if report.iterative.at_once:
    st.caption(f"To stay fast, left-to-right stops after {MAX_STEPS - 1} single steps; step {MAX_STEPS} "
               f"filled the remaining {report.iterative.at_once} masks together.")
st.dataframe(rows, hide_index=True, column_config=ROW_COLUMNS)
widgets.chart(confidence_strip(rows, report.max_entropy, "How unsure is BERT? Entropy per mask"
                               + ("" if temperature == 1 else f" at τ = {temperature:g}"), report.entropy_column),
              "predict_entropy", key="predict.entropy", theme="streamlit")
with st.expander("Left-to-right, step by step"):
    st.dataframe(vpr.step_rows(report.iterative), hide_index=True, column_config=ROW_COLUMNS)
