"""Losses step by step: one BERT training example, from picking 15% of the tokens to the
total loss, then one optimizer step on it, and the masking rule checked over many draws."""

import random

import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.figures import losses as figs
from bertviz_lab.ui.models import active_checkpoint
from bertviz_lab.ui.widgets import encode_or_stop, sentence_inputs
from bertviz_lab.views import losses as lesson

DEFAULT_A, DEFAULT_B = "the cat sat on the mat .", "it was a warm afternoon ."
F4, F6 = st.column_config.NumberColumn(format="%.4f"), st.column_config.NumberColumn(format="%.6f")
LEARNING_RATES = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0]


def reroll() -> None:
    old = st.session_state.get("losses.seed", 0)
    st.session_state["losses.seed"] = random.choice([s for s in range(1, 10_000) if s != old])


def move(delta: int, count: int) -> None:
    st.session_state["losses.step"] = min(max(st.session_state.get("losses.step", 1) + delta, 1), count)


def wide(table):
    """Positions as columns, so a whole sentence fits on a projector; cells shown as text."""
    return table.set_index("position").T.astype(str).rename(columns=str)


def step_tokens(w):
    st.caption("The tokenizer splits the text into WordPiece tokens and frames it: [CLS] A [SEP] B [SEP]. "
               "Segment A = 0, segment B = 1.")
    st.dataframe(wide(lesson.token_table(w)[["position", "token", "id", "segment"]]))


def step_positions(w):
    n = sum(w.eligible)
    st.text(f"{n} tokens can be picked (not [CLS] / [SEP]); each is picked with probability {w.rates[0]:g}, "
            f"about {n * w.rates[0]:.2f} expected.\nSeed {w.seed} picked {len(w.picked)}: positions "
            + ", ".join(map(str, w.positions)))
    st.caption("If no token is picked by chance, one is picked anyway, so every example has something to predict.")
    st.dataframe(wide(lesson.token_table(w)[["position", "token", "can be picked", "picked"]]))


def step_actions(w):
    st.text(f"Each picked token: [MASK] with probability {w.rates[1]:g}, a random token with {w.rates[2]:g}, "
            f"kept with {w.keep_prob:g}. The model must recover the original at every picked position.")
    st.dataframe(lesson.picked_table(w), hide_index=True)
    st.caption("What the model reads")
    st.code(" ".join(w.corrupted_tokens), language=None, wrap_lines=True)


def step_forward(w):
    st.caption("One forward pass in eval mode (no dropout) and without gradients, on the corrupted tokens.")
    st.code(" → ".join(f"{name} {shape}" for name, shape in w.shapes.items()), language=None, wrap_lines=True)
    st.dataframe(lesson.prediction_table(w)[["position", "fed", "top guess", "true logit"]], hide_index=True,
                 column_config={"true logit": F4})


def step_softmax(w):
    st.dataframe(lesson.prediction_table(w), hide_index=True, column_config={
        "true logit": F4, "logsumexp": F4, "p(true)": F6, "−log p": F6})
    st.text("\n".join(f"position {m.position}: p(true) = exp({m.true_logit:.4f} − {m.logsumexp:.4f}) = "
                      f"{m.p_true:.6f};  −log p = {m.neg_log_p:.6f}" for m in w.mlm.predictions))
    st.plotly_chart(figs.topk_grid(lesson.topk_panels(w)), theme=None, key="losses.topk")


def step_mlm(w):
    terms, k = [m.neg_log_p for m in w.mlm.predictions], w.mlm.count
    left, right = st.columns(2)
    left.metric("L_MLM, mean over masked positions (BERT)", f"{w.mlm.loss_mean:.4f}")
    left.text(f"({' + '.join(f'{t:.4f}' for t in terms)}) / {k}")
    right.metric("L_MLM, sum (seed 004's convention)", f"{w.mlm.loss_sum:.4f}")
    right.text(" + ".join(f"{t:.4f}" for t in terms))
    labels = [f"{m.position} {m.true_token}" for m in w.mlm.predictions]
    st.plotly_chart(figs.neg_log_p_bars(labels, terms, w.mlm.loss_mean, "−log p(true) per masked position"),
                    theme=None, key="losses.nll")


def nsp_column(col, path, reason):
    if path is None:
        col.info(reason)
        return
    col.markdown(f"**{path.title}**")
    col.code(path.sentence_b, language=None, wrap_lines=True)
    col.dataframe(lesson.nsp_vectors(path), column_config={c: F4 for c in lesson.nsp_vectors(path).columns})
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
        cols[1].caption(f"No NSP term: {w.nsp_reason or lesson.NO_NSP_REASON}.")
        cols[2].metric("Total loss = L_MLM", f"{w.total:.4f}")


STEPS = {"Tokens": step_tokens, "Pick the positions to predict": step_positions,
         "Corrupt each picked position (80 / 10 / 10)": step_actions, "Forward pass": step_forward,
         "Logits → softmax → p(true) → −log p": step_softmax, "L_MLM: mean and sum": step_mlm,
         "Next sentence prediction (NSP)": step_nsp, "Total loss": step_total}

st.title("Losses step by step")
st.caption("One training example of BERT, every number computed live by the active model: pick 15% of the "
           "tokens, corrupt them 80 / 10 / 10, predict them back, and add the next-sentence loss.")
ckpt = active_checkpoint()
text_a, text_b = sentence_inputs("losses", DEFAULT_A, DEFAULT_B)
encoding = encode_or_stop(ckpt, text_a, text_b)
cols = st.columns([2, 2, 2, 2, 2, 2], vertical_alignment="bottom")
st.session_state.setdefault("losses.seed", 0)  # set here, not by value=, so Re-roll can change it
seed = cols[0].number_input("Seed", 0, 2**31 - 1, step=1, key="losses.seed")
cols[1].button("Re-roll", key="losses.reroll", on_click=reroll, icon=":material/casino:", width="stretch")
rate = cols[2].number_input("Mask rate", value=0.15, step=0.05, format="%.2f", key="losses.rate")
shares = [c.number_input(label, value=v, step=0.05, format="%.2f", key=f"losses.{k}") for c, label, v, k in
          zip(cols[3:], ("→ [MASK]", "→ random token", "→ kept"), (0.8, 0.1, 0.1), ("mask", "random", "keep"))]
try:
    lesson.check_split(*shares)
    walk = lesson.walkthrough(ckpt.model, ckpt.tokenizer, encoding, seed=int(seed), mask_rate=rate,
                              mask_prob=shares[0], random_prob=shares[1])
except InputError as exc:
    st.warning(f"Cannot run this example: {exc}")
    st.stop()

titles = lesson.step_titles(walk)
if walk.nsp_random is None:
    st.info(f"Step “Next sentence prediction” is skipped: {lesson.NO_NSP_REASON}.")
show_all = st.toggle("Show all steps", key="losses.all")
current = min(st.session_state.get("losses.step", 1), len(titles))
if not show_all:
    back, where, nxt = st.columns([1, 4, 1], vertical_alignment="center")
    back.button("Back", key="losses.back", on_click=move, args=(-1, len(titles)), disabled=current == 1,
                icon=":material/arrow_back:", width="stretch")
    nxt.button("Next", key="losses.next", on_click=move, args=(1, len(titles)), disabled=current == len(titles),
               icon=":material/arrow_forward:", width="stretch")
    where.progress(current / len(titles), text=f"Step {current} of {len(titles)}")
for number, title in enumerate(titles, start=1):
    if show_all or number == current:
        st.subheader(f"Step {number} of {len(titles)} · {title}")
        STEPS[title](walk)

st.subheader("Take one optimizer step on this example")
st.caption("On a copy of the model (the active one is never changed), in eval mode so before and after are "
           "computed the same way, on the same corrupted input.")
left, right = st.columns([1, 3], vertical_alignment="bottom")
optimizer = left.radio("Optimizer", lesson.OPTIMIZERS, key="losses.optimizer", horizontal=True)
lr = right.select_slider("Learning rate", LEARNING_RATES, value=1e-4, format_func="{:g}".format, key="losses.lr")
signature = (str(ckpt.path), walk.seed, tuple(walk.corrupted_ids), walk.rates, optimizer, lr)
if st.button("Take one optimizer step on this example", key="losses.train", type="primary"):
    st.session_state["losses.result"] = (signature, lesson.optimizer_step(ckpt.model, ckpt.tokenizer, walk,
                                                                          lr=lr, optimizer=optimizer))
stored = st.session_state.get("losses.result")
if stored and stored[0] == signature:
    result = stored[1]
    for col, name in zip(st.columns(len(result.before)), result.before):
        col.metric(f"{name}: before → after", f"{result.after[name]:.4f}",
                   f"{result.after[name] - result.before[name]:+.4f} (from {result.before[name]:.4f})",
                   delta_color="inverse")
    if result.after["total"] >= result.before["total"]:
        st.warning("The loss went up: this learning rate overshoots. Try a smaller one.")

with st.expander("Masking frequencies over many draws"):
    draws = st.number_input("Draws", 100, 20_000, 2_000, 100, key="losses.draws")
    freq = lesson.masking_frequencies(ckpt.tokenizer, encoding, draws=int(draws), seed=walk.seed,
                                      rates=walk.rates)
    st.plotly_chart(figs.masking_frequency_chart(freq, f"{int(draws):,} draws of the masking rule on this input"),
                    theme=None, key="losses.freq")
    st.dataframe(freq, hide_index=True, column_config={c: F4 for c in ("target", "bert", "expected", "empirical",
                                                                          "std_error")})
    st.caption("“expected” for picked / eligible includes the at-least-one rule: on n eligible tokens it is "
               "rate + (1 − rate)ⁿ / n, a little above the rate on a short sentence.")
