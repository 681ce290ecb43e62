"""Losses step by step: one BERT training example, from picking 15% of the tokens to the
total loss, then one optimizer step on it, and the masking rule checked over many draws."""

import streamlit as st

from bertviz_lab.bert.config import RANDOM_TOKENS
from bertviz_lab.errors import InputError
from bertviz_lab.figures import losses as fl
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.losses.walkthrough import F4, FREQUENCY_COLUMNS, STEPS, before_after, reroll, stepper
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.router import end_page
from bertviz_lab.ui.shell.state import Losses as K  # this page's session-state keys
from bertviz_lab.ui.kit.widgets import chart, encode_or_stop, family_note, say, sentence_inputs
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.losses import walkthrough
from bertviz_lab.views.losses import masking_stats

LEARNING_RATES = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0]
SHARE_LABELS = ("→ [MASK]", "→ random token", "→ kept")

st.title("Losses step by step")
st.caption("One training example of BERT, every number computed live by the active model: pick each token "
           "with probability 15%, corrupt the picked ones 80 / 10 / 10, predict them back, and add the "
           "next-sentence loss.")
ckpt = active_model()
family_note(ckpt)
text_a, text_b = sentence_inputs(K.SENTENCES, ckpt.config)
encoding = encode_or_stop(ckpt, text_a, text_b)
cols = st.columns([2, 2, 2, 2, 2, 2], vertical_alignment="bottom")
state.init(K.SEED)  # set here, not by value=, so Re-roll can change it
seed = cols[0].number_input("Seed", 0, 2**31 - 1, step=1, key=K.SEED.name)
cols[1].button("Re-roll", key=K.REROLL.name, on_click=reroll, icon=":material/casino:", width="stretch")
rate = cols[2].number_input("Mask rate", value=K.RATE.default, step=0.05, format="%.2f", key=K.RATE.name)
shares = [col.number_input(label, value=key.default, step=0.05, format="%.2f", key=key.name)
          for col, label, key in zip(cols[3:], SHARE_LABELS, K.SHARES)]
source = st.radio("Random tokens come from", list(RANDOM_TOKENS), format_func=RANDOM_TOKENS.get,
                  key=K.RANDOM_TOKENS.name, horizontal=True)
st.caption(f"Active: {RANDOM_TOKENS[source]}: {plain(masking_stats.random_draws(ckpt.tokenizer, source))}. BERT "
           "draws its 10% random tokens from the whole vocabulary, its special tokens included (Google's "
           "create_pretraining_data.py and Hugging Face's DataCollatorForLanguageModeling alike).")
try:
    walkthrough.check_split(*shares)
    walk = walkthrough.walkthrough(ckpt.model, ckpt.tokenizer, encoding, seed=int(seed), mask_rate=rate,
                              mask_prob=shares[0], random_prob=shares[1], random_tokens=source)
except InputError as exc:
    say("warning", str(exc), lead="Cannot run this example: ")
    end_page()

titles = walkthrough.step_titles(walk)
if walk.nsp_random is None:
    st.info(f"Step “Next sentence prediction” is skipped: {walkthrough.NO_NSP_REASON}.")
show_all = st.toggle("Show all steps", key=K.ALL.name)
current = 0 if show_all else stepper(len(titles))  # the stepper: Back, Next and where we are
for number, title in enumerate(titles, start=1):
    if show_all or number == current:
        st.subheader(f"Step {number} of {len(titles)} · {title}")
        STEPS[title](walk)

st.subheader("Take one optimizer step on this example")
st.caption("On a copy of the model (the active one is never changed), in eval mode so before and after are "
           "computed the same way, on the same corrupted input.")
left, right = st.columns([1, 3], vertical_alignment="bottom")
optimizer = left.radio("Optimizer", walkthrough.OPTIMIZERS, key=K.OPTIMIZER.name, horizontal=True)
lr = right.select_slider("Learning rate", LEARNING_RATES, value=K.LR.default, format_func="{:g}".format,
                         key=K.LR.name)
signature = (str(ckpt.path), walk.seed, tuple(walk.corrupted_ids), walk.rates, optimizer, lr)
if st.button("Take one optimizer step on this example", key=K.TRAIN.name, type="primary"):
    with st.spinner("Taking the step on a copy of the model…"):  # the first AdamW step takes 1.5 s
        state.put(K.RESULT, (signature, walkthrough.optimizer_step(ckpt.model, ckpt.tokenizer, walk, lr=lr,
                                                              optimizer=optimizer)))
stored = state.get(K.RESULT)
if stored and stored[0] == signature:
    before_after(stored[1])

with st.expander("Masking frequencies over many draws"):
    draws = st.number_input("Draws", 100, 20_000, K.DRAWS.default, 100, key=K.DRAWS.name)
    freq = masking_stats.masking_frequencies(ckpt.tokenizer, encoding, draws=int(draws), seed=walk.seed,
                                             rates=walk.rates)
    chart(fl.masking_frequency_chart(freq, f"{int(draws):,} draws of the masking rule on this input"),
          "masking_frequencies", key="losses.freq")
    st.dataframe(freq, hide_index=True, column_config={**{c: F4 for c in ("target", "bert", "expected", "empirical")},
                                                       **FREQUENCY_COLUMNS})
    st.caption("“SE (rule)” is the standard error the masking rule predicts for this many draws: for picked / "
               "eligible from the distribution of the picks per draw (the at-least-one rule makes the picks of one "
               "draw dependent), for the [MASK] / random / kept shares given how many were picked (they are shares "
               "of the picked tokens). “SE (draws)” estimates the same from the spread of the draws themselves. "
               "The 95% interval is expected ± 1.96 × SE (rule), and “inside” says whether the empirical share fell "
               "in it (it misses about 1 time in 20).")
    st.caption("“expected” for picked / eligible includes the at-least-one rule: on n eligible tokens it is "
               "rate + (1 − rate)ⁿ / n, a little above the rate on a short sentence.")
