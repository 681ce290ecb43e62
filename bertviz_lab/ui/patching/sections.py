"""The "Where is the answer made?" page's inputs, its two recorded runs and their scores.

The page builds a `PatchAsk` (views/patching/ask.py) from its boxes: two typed sentences, a built-in minimal pair
written into them, or noise on chosen tokens of the clean one. The two runs are recorded once per (model, ask) for
the whole class (ui/shell/once.py), with a progress bar, and every grid then patches between them
(ui/patching/grids.py); a change of grid or direction records nothing again.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus.minimal_pairs import PAIRS, by_key
from bertviz_lab.errors import InputError
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state_patching import Patch as K
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import MAX_DRAWS, PatchAsk
from bertviz_lab.views.predict.guesses import candidate_rows

PREPARED = once.Slots("Recording the two runs", keep=8)
LEAD = ("Where inside the model is the answer made? Run a clean sentence and a corrupted one that differs in a "
        "word, then copy one inner activation at a time from one run into the other and measure how much of the "
        "answer comes back: at which layer, at which position, in which head (activation patching, also called "
        "causal tracing).")
DISCRIMINATOR = ("This is a discriminator: it guesses no words, so no [MASK] is needed. Here the score F is its "
                 "replaced-token logit at the first token where the two sentences differ (with noise: the first "
                 "noised token), and p = sigmoid(F) the probability it gives that the token was replaced")
NORMALISED = ("Every grid below shows (F patched − F corrupted) / (F clean − F corrupted): 0 is the corrupted run's "
              "score, 1 the clean run's, whichever way a patch goes.")
COLUMNS = {"probability": st.column_config.ProgressColumn("probability", format="%.4f", min_value=0, max_value=1),
           "logit": st.column_config.NumberColumn("logit", format="%.3f")}


def _bar(news: tuple[float, str]) -> None:
    st.progress(*news)


# --- Inputs ------------------------------------------------------------------------------------------------------
def pair_picker() -> None:
    """The built-in minimal pairs, by group: picking one writes its sentences, answer and foil into the boxes."""
    keys = [p.key for p in PAIRS]
    state.keep_valid(K.PAIR, keys)
    picked = st.selectbox("Built-in minimal pairs", keys, key=K.PAIR.name, on_change=_use_pair,
                          format_func=lambda k: f"{by_key(k).group} · {by_key(k).title}",
                          help="Found in the story world: pick one, or type your own two sentences below.")
    pair = by_key(picked) if picked in keys else None
    if pair is not None and (state.get(K.CLEAN), state.get(K.CORRUPT)) == (pair.clean, pair.corrupt):
        st.caption(plain(pair.note[0].upper() + pair.note[1:]))


def _use_pair() -> None:
    pair = by_key(state.get(K.PAIR))
    for key, value in ((K.CLEAN, pair.clean), (K.CORRUPT, pair.corrupt), (K.ANSWER, pair.answer),
                       (K.FOIL, pair.foil), (K.NOISE, False), (K.NOISED, [])):
        state.put(key, value)


def _noise_default(tokenizer: WordPieceTokenizer) -> None:
    """Noise switched on with no token picked: the tokens where the two sentences differ (the subject, mostly)."""
    if not state.get(K.NOISE) or state.get(K.NOISED):
        return
    clean, corrupt = tokenizer.encode(state.get(K.CLEAN)), tokenizer.encode(state.get(K.CORRUPT))
    if len(clean) == len(corrupt):
        state.put(K.NOISED, [i for i, (a, b) in enumerate(zip(clean.ids, corrupt.ids)) if a != b])


def ask_inputs(ckpt: Checkpoint, replaced: bool) -> PatchAsk:
    """The boxes, drawn; what they ask (InputError: a box the ask refuses, in one sentence)."""
    tokenizer = ckpt.tokenizer
    clean = st.text_input("Clean sentence" if replaced else "Clean sentence, with [MASK] where the answer goes",
                          key=K.CLEAN.name)
    noise = st.toggle("Corrupt with noise instead of a second sentence", key=K.NOISE.name,
                      on_change=_noise_default, args=(tokenizer,),
                      help="Meng et al.'s corruption: Gaussian noise, 3 times the word vectors' standard deviation, "
                           "on the chosen tokens' word vectors; several seeded draws, their scores averaged.")
    corrupt, noised, draws, seed = "", (), K.DRAWS.default, K.SEED.default
    if noise:
        encoding = tokenizer.encode(clean)
        words = [i for i, special in enumerate(encoding.special_mask)
                 if not special and encoding.ids[i] != tokenizer.mask_id]
        state.keep_valid(K.NOISED, words)
        noised = tuple(st.pills("Tokens to corrupt with noise", words, selection_mode="multi", key=K.NOISED.name,
                                format_func=lambda i: f"{encoding.tokens[i]} ({i})"))
        left, right = st.columns(2)
        draws = left.slider("Noise draws, averaged", 1, MAX_DRAWS, key=K.DRAWS.name)
        seed = int(right.number_input("Seed", 0, 2**31 - 1, step=1, key=K.SEED.name))
    else:
        corrupt = st.text_input("Corrupted sentence: the clean one with a word changed, as many tokens",
                                key=K.CORRUPT.name)
    answer = foil = ""
    if not replaced:
        left, right = st.columns(2)
        answer = left.text_input("Answer", key=K.ANSWER.name, placeholder="the clean run's top guess",
                                 help="The clean sentence's right word; empty: the clean run's top guess.")
        foil = right.text_input("Foil", key=K.FOIL.name, placeholder="the corrupted run's top guess",
                                help="The corrupted sentence's word; empty: the corrupted run's top guess other "
                                     "than the answer. The score is F = logit(answer) − logit(foil).")
    return PatchAsk(clean, corrupt, answer.strip(), foil.strip(), noise, noised, draws, seed)


# --- The two runs ------------------------------------------------------------------------------------------------
def prepared(ckpt: Checkpoint, ask: PatchAsk) -> vpa.Patching:
    """The two runs recorded for `ask` (InputError: a pair that cannot be patched; its progress bar is cleared)."""
    slot = PREPARED.slot((model_key(ckpt), ask))
    holder = st.empty()
    try:
        with holder.container():
            return once.follow(slot, lambda report: vpa.prepare(ckpt.model, ckpt.tokenizer, ask), _bar,
                               first=(0.0, "Running the clean and the corrupted sentence…"))
    except InputError:
        holder.empty()
        raise


def score_line(patching: vpa.Patching) -> str:
    """What F is, where it is read (Markdown, the tokens escaped)."""
    token = plain(patching.tokens[patching.position])
    if patching.replaced:
        return (f"**F = the replaced-token logit** at '{token}' (token {patching.position}), the first token where "
                "the runs differ; p = sigmoid(F), the probability that it was replaced.")
    return f"**F = {plain(patching.metric)}** at '{token}' (token {patching.position})."


def used(patching: vpa.Patching) -> str:
    """Which answer and foil the score uses, and whether they were typed or picked by default (Markdown)."""
    if patching.replaced:
        return ""
    ask = patching.ask
    answer = "typed" if ask.answer else "the clean run's top guess"
    foil = "typed" if ask.foil else ("the clean run's next guess" if patching.corrupt is None
                                     else "the corrupted run's top guess other than the answer")
    return (f"Answer **{plain(patching.answer)}** ({answer}), foil **{plain(patching.foil)}** ({foil}).")


def runs(patching: vpa.Patching) -> None:
    """The score, then each run's F, p and top guesses side by side."""
    st.markdown(score_line(patching) + " " + used(patching))
    p_name = "p(replaced)" if patching.replaced else f"p({patching.answer})"
    traced = patching.traced
    noise = f"mean of {patching.ask.draws} noise draws on tokens {', '.join(map(str, patching.noised))}"
    for n, (where, name, f, p, top, guess) in enumerate(zip(
            st.columns(2), ("Clean run", f"Corrupted run ({noise})" if patching.noised else "Corrupted run"),
            (patching.f_clean, patching.f_corrupt), (traced.p_clean, traced.p_corrupt), patching.tops,
            patching.guesses or (None, None))):
        where.markdown(f"**{name}**")
        cells = where.columns(3 if top else 2)
        cells[0].metric("F", f"{f:.4f}")
        cells[1].metric(p_name, f"{p:.4f}")
        if top:
            cells[2].metric("Top guess" + (" (first draw)" if n and patching.noised else ""), top)
        if guess is not None:
            where.dataframe(candidate_rows(guess.masks[0]), hide_index=True, column_config=COLUMNS)
    st.caption(NORMALISED)
    warning = vpa_read.small_gap(patching)
    if warning:
        st.warning(warning)
