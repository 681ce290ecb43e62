"""The Losses page's widget groups: one renderer per step of the walkthrough, the stepper's
callbacks, and the before/after metrics of one optimizer step."""

from __future__ import annotations

import random

import streamlit as st

from bertviz_lab.bert.config import RANDOM_TOKENS
from bertviz_lab.figures import losses as fl
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import Losses as K
from bertviz_lab.ui.kit.tables import by_position, number
from bertviz_lab.ui.kit.widgets import chart, segments_help
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.losses import walkthrough

F4, F6 = number("%.4f"), number("%.6f")
FREQUENCY_COLUMNS = {"se_rule": number("%.5f", "SE (rule)"), "se_draws": number("%.5f", "SE (draws)"),
                     "low": number("%.4f", "95% low"), "high": number("%.4f", "95% high"),
                     "inside": st.column_config.CheckboxColumn("inside 95%")}  # the frequency table's columns


# --- Callbacks -------------------------------------------------------------------------------
def reroll() -> None:
    old = state.get(K.SEED)
    state.put(K.SEED, random.choice([s for s in range(1, 10_000) if s != old]))


def move(delta: int, count: int) -> None:
    state.put(K.STEP, min(max(state.get(K.STEP) + delta, 1), count))


# --- The steps -------------------------------------------------------------------------------
def step_tokens(w):
    segments = "Segment A = 0, segment B = 1." if w.segments > 1 else segments_help(w.segments)
    st.caption(f"The tokenizer splits the text into {w.tokenizer_kind} tokens and frames a pair as {plain(w.framing)}. "
               + segments)
    table = walkthrough.token_table(w)
    for piece in by_position(table[["position", "token", "id", "segment" if "segment" in table else "sentence"]]):
        st.dataframe(piece)


def step_positions(w):
    n, r = sum(w.eligible), w.rates[0]
    here = "; ".join(f"{token} at position{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}"
                     for token, at in w.excluded.items())
    st.text(f"{n} tokens can be picked. Never picked: the special tokens {', '.join(w.special_tokens)}"
            f" (here: {here or 'none'}).\n"
            f"Each of them is picked with probability r = {r:g}, independently; if none is, one is picked "
            f"anyway.\nExpected number of picks: n·r + (1 − r)^n = {n} × {r:g} + {1 - r:g}^{n} = "
            f"{w.expected_picks:.2f}.\nSeed {w.seed} picked {len(w.picked)}: positions "
            + ", ".join(map(str, w.positions)))
    st.caption("The at-least-one rule gives every example something to predict. Google's original BERT script "
               "(create_pretraining_data.py) skips only [CLS] and [SEP] and picks a fixed number of tokens: "
               "max(1, round(0.15 × the sequence length, [CLS] and [SEP] included)), at most "
               "max_predictions_per_seq. Hugging Face's DataCollatorForLanguageModeling picks each non-special "
               "token with probability 0.15 and has no at-least-one rule.")
    for piece in by_position(walkthrough.token_table(w)[["position", "token", "can be picked", "picked"]]):
        st.dataframe(piece)


def step_actions(w):
    st.text(f"Each picked token: [MASK] with probability {w.rates[1]:g}, a random token with {w.rates[2]:g}, "
            f"kept with {w.keep_prob:g}. The model must recover the original at every picked position.\n"
            f"Random tokens are drawn from {RANDOM_TOKENS[w.random_tokens]}: {w.random_draws}.")
    st.dataframe(walkthrough.picked_table(w), hide_index=True)
    st.caption("What the model reads")
    st.code(" ".join(w.corrupted_tokens), language=None, wrap_lines=True)


def step_forward(w):
    st.caption("One forward pass in eval mode (no dropout) and without gradients, on the corrupted tokens.")
    st.code(" → ".join(f"{name} {shape}" for name, shape in w.shapes.items()), language=None, wrap_lines=True)
    st.dataframe(walkthrough.prediction_table(w)[["position", "fed", "top guess", "true logit"]], hide_index=True,
                 column_config={"true logit": F4})


def step_softmax(w):
    st.dataframe(walkthrough.prediction_table(w), hide_index=True, column_config={
        "true logit": F4, "logsumexp": F4, "p(true)": F6, "−log p": F6})
    st.text("\n".join(f"position {m.position}: p(true) = exp({m.true_logit:.4f} − {m.logsumexp:.4f}) = "
                      f"{m.p_true:.6f};  −log p = {m.neg_log_p:.6f}" for m in w.mlm.predictions))
    chart(fl.topk_grid(walkthrough.topk_panels(w)), "losses_topk", key="losses.topk")


def step_mlm(w):
    terms, k = [m.neg_log_p for m in w.mlm.predictions], w.mlm.count
    left, right = st.columns(2)
    left.metric("L_MLM, mean over masked positions (BERT)", f"{w.mlm.loss_mean:.4f}")
    left.text(f"({' + '.join(f'{t:.4f}' for t in terms)}) / {k}")
    right.metric(f"L_MLM, sum (the convention of {cite('004', parens=False)})", f"{w.mlm.loss_sum:.4f}")
    right.text(" + ".join(f"{t:.4f}" for t in terms))
    labels = [f"{m.position} {m.true_token}" for m in w.mlm.predictions]
    chart(fl.neg_log_p_bars(labels, terms, w.mlm.loss_mean, "−log p(true) per masked position"), "losses_neg_log_p",
          key="losses.nll")


def nsp_column(col, path, reason):
    if path is None:
        col.info(reason)
        return
    col.markdown(f"**{path.title}**")
    col.code(path.sentence_b, language=None, wrap_lines=True)
    vectors = walkthrough.nsp_vectors(path)
    col.dataframe(vectors, column_config={c: F4 for c in vectors.columns})
    col.text(f"logits [IsNext, NotNext] = [{path.logits[0]:.4f}, {path.logits[1]:.4f}]\n"
             f"W_nsp · pooled + b by hand = [{path.logits_by_hand[0]:.4f}, {path.logits_by_hand[1]:.4f}]\n"
             f"label: {'IsNext' if path.label == 0 else 'NotNext'}")
    a, b = col.columns(2)
    a.metric("P(IsNext)", f"{path.p_is_next:.4f}")
    b.metric("L_NSP = −log p(label)", f"{path.loss:.4f}")


def step_nsp(w):
    st.caption("[CLS]'s last hidden state → pooler dense + tanh → NSP head → 2 logits → softmax → P(IsNext). "
               "First 8 of the hidden dimensions shown. The random B is read unmasked.")
    left, right = st.columns(2)
    nsp_column(left, w.nsp_true, w.nsp_reason)
    nsp_column(right, w.nsp_random, None)


def step_total(w):
    cols = st.columns(3)
    cols[0].metric("L_MLM (mean)", f"{w.mlm.loss_mean:.4f}")
    if w.nsp_true is not None:
        cols[1].metric("L_NSP (true pair)", f"{w.nsp_true.loss:.4f}")
        cols[2].metric("Total loss = L_MLM + L_NSP", f"{w.total:.4f}")
    else:
        cols[1].caption(f"No NSP term: {w.nsp_reason or walkthrough.NO_NSP_REASON}.")
        cols[2].metric("Total loss = L_MLM", f"{w.total:.4f}")


STEPS = {"Tokens": step_tokens, "Pick the positions to predict": step_positions,
         "Corrupt each picked position (80 / 10 / 10)": step_actions, "Forward pass": step_forward,
         "Logits → softmax → p(true) → −log p": step_softmax, "L_MLM: mean and sum": step_mlm,
         "Next sentence prediction (NSP)": step_nsp, "Total loss": step_total}


def stepper(count: int) -> int:
    """Back, Next and a progress bar; returns the step shown (1-based)."""
    state.keep_valid(K.STEP, range(1, count + 1))
    current = state.get(K.STEP)
    back, where, nxt = st.columns([1, 4, 1], vertical_alignment="center")
    back.button("Back", key=K.BACK.name, on_click=move, args=(-1, count), disabled=current == 1,
                icon=":material/arrow_back:", width="stretch")
    nxt.button("Next", key=K.NEXT.name, on_click=move, args=(1, count), disabled=current == count,
               icon=":material/arrow_forward:", width="stretch")
    where.progress(current / count, text=f"Step {current} of {count}")
    return current


def before_after(result) -> None:
    """One metric per loss: its value after the step, and the change from before."""
    for col, name in zip(st.columns(len(result.before)), result.before):
        col.metric(f"{name}: before → after", f"{result.after[name]:.4f}",
                   f"{result.after[name] - result.before[name]:+.4f} (from {result.before[name]:.4f})",
                   delta_color="inverse")
    if result.after["total"] >= result.before["total"]:
        st.warning("The loss went up: this learning rate overshoots. Try a smaller one.")
