"""The Why-this-guess page's computations and its sections.

The page builds an `Ask` (views/why/ask.py) from its pickers. The nine methods run once per (model, input, Ask:
which guess, target, contrast) for the whole class (ui/shell/once.py), with a progress bar from the first second,
whatever the model; the attention strip for another layer or head is read from the attention weights the
explanation kept, so picking a layer runs no forward at all. The causal check runs once per explained guess and
attention choice: by itself when it should take under AUTO_SECONDS on this machine (estimated from the
explanation's own runs of the model), else behind a button that says how long it should take.
"""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from bertviz_lab import files
from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.explain import checks
from bertviz_lab.explain.methods import DELTA_WARN
from bertviz_lab.explain.report import METHODS
from bertviz_lab.figures import why as fy
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.kit import yours
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state import Why as K
from bertviz_lab.ui.kit.tables import number, numbers, table_height
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why import examples as why_examples
from bertviz_lab.views.why.ask import Ask

AUTO_SECONDS = 3.0  # the causal check runs by itself when it should take less than this here, else waits for a click
EXPLAINED = once.Slots("Explaining the guess", keep=8)
CHECKED = once.Slots("The causal check", keep=8)
COLUMNS = {"probability": st.column_config.ProgressColumn("probability", format="%.4f", min_value=0, max_value=1),
           "logit": number("%.3f", "logit")}
VERDICTS = {"beats": "beats every one", "ties": "ties the best", "below": "below the best"}  # Deletion.verdict
VALUE_FORMAT = "%.6g"  # a method's value in the table: 6 significant digits, as on hover


def _key(ckpt: Checkpoint, encoding: Encoding, ask: Ask) -> tuple:
    return model_key(ckpt), tuple(encoding.ids), tuple(encoding.segment_ids), ask.explained


def _bar(news: tuple[float, str]) -> None:
    """What a session draws while the work runs: a progress bar, with what is running."""
    st.progress(*news)


def explained(ckpt: Checkpoint, encoding: Encoding, ask: Ask) -> vw.Why:
    """Every method's answer for `ask`, the attention strip at the last layer, mean over heads (`vw.with_attention`
    shows another; InputError: a word not in the vocabulary, ...)."""
    def work(report: once.Report) -> vw.Why:
        return vw.why(ckpt.model, ckpt.tokenizer, encoding, ask.explained,
                      progress=lambda done, what: report((done, f"Running {what}: {done:.0%}")))

    slot = EXPLAINED.slot(_key(ckpt, encoding, ask))
    if not slot.ready():  # said at once, before the work (and its log) starts; once explained, they passed
        vw.check_length(encoding, ckpt.tokenizer)
        _check_words(ckpt, encoding, ask)
    return once.follow(slot, work, _bar, first=(0.0, "Running the model…"))


def _check_words(ckpt: Checkpoint, encoding: Encoding, ask: Ask) -> None:
    """A word not in the vocabulary, or a contrast that is the target (the typed one, or the top guess when no target
    is typed: one forward), in the page's own words."""
    ids = {what: vw.target_id(ckpt.tokenizer, word, what) for word, what in ((ask.target, "target"),
                                                                               (ask.contrast, "contrast")) if word}
    if "contrast" not in ids:
        return
    if "target" in ids and ids["target"] == ids["contrast"]:
        raise InputError("The Target word and the Contrast word are the same token, "
                         f"'{ckpt.tokenizer.id_to_token(ids['target'])}': type another Contrast word to compare "
                         "against, or clear it.")
    if "target" not in ids and vw.top_guess(ckpt.model, ckpt.tokenizer, encoding, ask.mask) == ids["contrast"]:
        raise InputError("The Contrast word is the model's top guess, which is the target while the Target word is "
                         "empty: type another Contrast word, or a Target word.")


def mask_word(tokenizer: WordPieceTokenizer, replaced: bool) -> str:
    """How the page names the explained position: the family's own mask token, or the discriminator's token."""
    return "the explained token" if replaced else f"the {tokenizer.mask_token}"


def definition(key: str, tokenizer: WordPieceTokenizer, replaced: bool) -> str:
    """A method's one-line definition in this family's tokens (RoBERTa writes <mask> and <pad>)."""
    text = METHODS[key].definition.replace("the [MASK]", mask_word(tokenizer, replaced))
    return text.replace("[MASK]", tokenizer.mask_token).replace("[PAD]", tokenizer.specials["pad"])


# --- Examples --------------------------------------------------------------------------------------------------
def examples(ckpt: Checkpoint) -> None:
    """A picker of the sentences where attention and occlusion disagree (the search's, in this model's mask token;
    Abnar & Zuidema's with a real BERT): picking one writes it into the sentence box and explains its top guess."""
    found = why_examples.examples(ckpt.tokenizer, ckpt.config.family)
    picked = st.selectbox("Examples where attention and occlusion disagree", found, index=None, key=K.EXAMPLE.name,
                          placeholder="Pick one, or type your own sentence below", on_change=_use_example)
    if picked is not None and state.get(K.SENTENCES.text_a) == picked.text:
        st.caption(plain(picked.note))


def _use_example() -> None:
    picked = state.get(K.EXAMPLE)
    if picked is not None:
        hand_off(picked.text)


def hand_off(text: str) -> None:
    """The page opens on this sentence, its top guess explained at its first [MASK] (no target or contrast word):
    the example picker and the Lesson's "Open Why this guess? on this sentence" both hand a sentence over here."""
    for key, value in ((K.SENTENCES.text_a, text), (K.SENTENCES.pair, False), (K.TARGET, ""), (K.CONTRAST, ""),
                       (K.MASK, 0)):
        state.put(key, value)
    yours.publish(K.SENTENCES)  # the learner's sentence now, as if typed: other pages open on it too


# --- The guess and F -----------------------------------------------------------------------------------------
def score_line(result: vw.Why, tokenizer: WordPieceTokenizer) -> str:
    """What F is, in words and numbers (Markdown)."""
    e, token = result.explanation, plain(result.encoding.tokens[result.position])
    if result.guesses is None:
        return (f"**F = the replaced-token logit** at token {result.position} ({token}) = {e.value:.4f};  "
                f"p(replaced) = sigmoid(F) = {e.prob:.4f}")
    target = plain(result.target)
    f = f"logit({target})" + ("" if result.contrast is None else f" − logit({plain(result.contrast)})")
    number_of = result.masks.index(result.position) + 1
    return (f"**F = {f}** at {plain(tokenizer.mask_token)} #{number_of} (token {result.position}) = {e.value:.4f};  "
            f"p({target}) = {e.prob:.4f}")


def guesses(result: vw.Why, where) -> None:
    if result.guesses is not None:
        where.dataframe(vpr.candidate_rows(result.guesses.masks[0]), hide_index=True, column_config=COLUMNS)


# --- The strips ------------------------------------------------------------------------------------------------
def strips(result: vw.Why, tokenizer: WordPieceTokenizer, replaced: bool) -> None:
    """One heat strip per method, what each measures, the integrated gradients' check, and the raw numbers."""
    e = result.explanation
    chart(fy.strips(vw.titled(e.values), vw.SIGNED, e.tokens, e.layer, e.head), "why_strips")
    st.caption("Each row is coloured against its own largest value, since every method has its own units; the "
               "numbers in the cells are the values, to 2 digits (hover for 6). Signed rows: blue raises F, red "
               "lowers it, white is 0. Unsigned rows: darker is larger. Integrated gradients and occlusion are 0 at "
               "the framing tokens and the explained position by construction: neither method moves or masks them.")
    left, right = st.columns(2)
    mask = mask_word(tokenizer, replaced)
    for where, kind, heading in ((left, "attention", f"Read from attention: where {mask} looked (F is never read: the "
                                                     "same for any target or contrast)"),
                                 (left, "mixing", f"Read from how the layers mix the tokens: what reaches {mask} "
                                                  "(F is never read here either)"),
                                 (right, "score", "Read from F: what changes the score")):
        where.markdown(f"**{plain(heading)}**\n\n" + "\n".join(
            f"- **{plain(m.title)}**: {plain(definition(k, tokenizer, replaced))}"
            for k, m in METHODS.items() if m.kind == kind))
    ig = e.ig
    st.markdown(f"Integrated gradients: {ig.steps} steps, F(x) − F(baseline) = {ig.score - ig.baseline_score:.6g}, "
                f"sum of attributions = {float(ig.values.sum()):.6g}, delta = {ig.delta:.3g}.")
    if ig.flagged:
        st.warning(f"Integrated gradients did not converge here: the delta is more than {DELTA_WARN:.0%} of "
                   "F(x) − F(baseline), so its values are only roughly what the path integral gives.")
    table = record_table(pd.DataFrame(vw.rows(result)), "why_values")
    with st.expander("Every value, as a table"):
        st.dataframe(table, hide_index=True, height=table_height(table), column_config=numbers(table, VALUE_FORMAT))
        st.download_button("Download these values (CSV)", partial(files.csv_text, table), file_name="why_values.csv",
                           mime="text/csv", on_click="ignore")


def attention_pickers(ckpt: Checkpoint) -> tuple[int, int | None]:
    """The attention strip's layer (default: the last) and head (default: the mean over heads)."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    state.keep_valid(K.LAYER, range(L))
    state.keep_valid(K.HEAD, ["mean", *range(H)])
    state.setdefault(K.LAYER, L - 1)
    cols = st.columns([2, 3])
    layer = cols[0].segmented_control("Attention strip: layer", list(range(L)), required=True, key=K.LAYER.name,
                                       wrap=True)
    head = cols[1].segmented_control("Head", ["mean", *range(H)], required=True, key=K.HEAD.name, wrap=True,
                                     format_func=lambda h: "mean of heads" if h == "mean" else str(h))
    return layer, None if head == "mean" else head


# --- Agreement and the causal check -------------------------------------------------------------------------------
def lead() -> str:
    """The page's first caption, counted from METHODS: how many methods read F, and that the others never do."""
    kinds = [m.kind for m in METHODS.values()]
    return (f"Which tokens made the model guess what it guessed? {kinds.count('score')} of these {len(kinds)} methods "
            f"answer for one number, F, the score of the guess; the other {len(kinds) - kinds.count('score')} read "
            f"only the attention ({kinds.count('attention')}) or how the layers mix the tokens "
            f"({kinds.count('mixing')}), never F, so their rows are the same for any target or contrast word. A causal "
            "check at the bottom tests every one of them.")


def agreement(result: vw.Why) -> None:
    n = len(result.explanation.movable)
    left, right = st.columns([3, 2])
    chart(fy.agreement(vw.titled(result.agreement), n), "why_agreement", left)
    right.markdown(plain(result.agreement_sentence))
    right.caption(f"ρ = 1: the same order of the {n} removable tokens; 0: unrelated; −1: reversed. Over the tokens "
                  "the causal check may remove, so the framing tokens and the explained position are left out. "
                  "Over few tokens a large ρ is often chance: p says how often.")


def check_caption(result: vw.Why) -> str:
    """What the causal check does, naming what its curves follow for this guess."""
    if result.guesses is None:
        watched = "p(replaced) at the explained token"
    elif result.contrast is None:
        watched = f"{result.follows}, the probability of the guess,"
    else:
        watched = (f"{result.follows} = sigmoid(F), the probability of the target against the contrast (a function "
                   "of F alone: a removal that lowers both words alike leaves it where it was),")
    return plain(f"Mask the tokens one at a time in the order a method ranks them, most important first (tokens a "
                 f"method ties have no order among them: the curve averages over their orders), and watch {watched} after each. A "
                 "method that found what the score rests on makes it fall faster than random orders do. AOPC, the "
                 "area over the curve, is the mean fall: larger is faster.")


def _may_start(result: vw.Why) -> bool:
    """Whether the causal check may start now: by itself when it should take under AUTO_SECONDS here, else once the
    button beside its estimate is clicked (the offer then goes: the curves take its place)."""
    seconds = vw.deletion_seconds(result)
    if seconds < AUTO_SECONDS:
        return True
    offer = st.empty()
    with offer.container():
        st.caption(f"The causal check should take about {_duration(seconds)} on this machine (estimated from the "
                   "time the model took on this sentence during the explanation), so it waits for you.")
        clicked = st.button("Run the causal check", key=K.RUN.name, icon=":material/science:")
    if clicked:
        offer.empty()
    return clicked


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} minutes"


def causal_check(ckpt: Checkpoint, encoding: Encoding, ask: Ask, result: vw.Why) -> None:
    """The deletion curves of every method against random orders, with their AOPC."""
    e = result.explanation
    slot = CHECKED.slot((*_key(ckpt, encoding, ask), e.layer, e.head))
    if not (slot.ready() or slot.running()) and not _may_start(result):
        return
    deletion = once.follow(slot, lambda report: vw.deletion_for(
        result, progress=lambda done, what: report((done, f"Running the {what}: {done:.0%}"))),
        _bar, first=(0.0, "Running the deletion curves…"))
    curves = vw.titled(deletion.curves)
    chart(fy.deletion(curves, deletion.random_curves, vw.NEVER_F, result.follows), "why_deletion")
    left, right = st.columns([3, 2])
    table = record_table(pd.DataFrame({"method": list(curves), "AOPC": list(deletion.aopc.values()),
                                       "beats random": [deletion.beats_random(k) for k in deletion.curves],
                                       "against random": [VERDICTS.get(deletion.verdict(k), "untested")
                                                          for k in deletion.curves]}),
                         "why_aopc")
    left.dataframe(table, hide_index=True, column_config={**numbers(table), "beats random": st.column_config.
                   CheckboxColumn(help=f"Its AOPC is above every one of the {len(deletion.random_curves)} random "
                                       "orders'")})
    random = deletion.random_aopc
    if len(random):
        right.metric(f"AOPC of {len(random)} random orders", f"{random.mean():.4f} ± {random.std():.4f}",
                     help="Mean ± standard deviation; the grey band around their mean curve is ±1 of it.")
    right.markdown(plain(checks.deletion_sentence(deletion, vw.TITLES, result.follows)))
    attention = [k for k, m in METHODS.items() if m.kind == "attention"]
    st.markdown(plain(checks.attention_sentence(deletion, vw.TITLES, attention, result.follows)))
