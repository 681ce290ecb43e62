"""Why this guess? Which tokens made the model guess what it guessed: nine attribution methods side by side (with
attention and value zeroing among them), how far they agree, and the causal check that tests them (mask the tokens
each method ranks first and watch the guess's probability fall).

Four methods explain one number, F: the target word's logit at the chosen mask (minus a contrast word's, if one is
typed), or, for ELECTRA's discriminator, its replaced-token logit at a chosen token; the four read from attention
and value zeroing (read from how the layers mix the tokens) never read it."""

import streamlit as st

from bertviz_lab.errors import InputError
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.why import sections as ui_why
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.router import end_page
from bertviz_lab.ui.shell.state import Why as K  # this page's session-state keys
from bertviz_lab.ui.kit.widgets import encode_or_stop, family_note, say, sentence_inputs
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.ask import Ask

st.title("Why this guess?")
st.caption(ui_why.lead())
ckpt = active_model()
model, tokenizer = ckpt.model, ckpt.tokenizer
replaced = model.has_rtd and not model.has_mlm  # ELECTRA's discriminator: no word guesses, a logit per token
mask = plain(tokenizer.mask_token)
if not (model.has_mlm or replaced):
    st.error("This model has no masked-language-model (MLM) head: "
             f"{ckpt.family.no_mlm(ckpt.model.has_rtd)}"
             ", so it makes no guess to explain. Pick another model in the sidebar.")
    end_page()
family_note(ckpt, what="This is a discriminator: it guesses no words. Here F is its replaced-token logit at the "
                       "token you pick, and p = sigmoid(F) the probability it gives that the token was replaced"
            if replaced else "")
if not replaced:
    ui_why.examples(ckpt)
text_a, text_b = sentence_inputs(K.SENTENCES, ckpt.config)
encoding = encode_or_stop(ckpt, text_a, text_b)

if replaced:
    words = [i for i, special in enumerate(encoding.special_mask) if not special]
    state.keep_valid(K.TOKEN, words)
    position = st.selectbox("Token to explain", words, key=K.TOKEN.name,
                            format_func=lambda i: f"{i} · {encoding.tokens[i]}")
    ask = Ask(position=position)
else:
    masks = vw.mask_positions(encoding, tokenizer)
    if not masks:
        typed = "[MASK]" if tokenizer.mask_token == "[MASK]" else f"[MASK] or {mask}"
        st.info(f"The text has no {mask}. Type {typed} where the model should guess a word, and this page explains "
                "that guess.")
        end_page()
    cols = st.columns(3 if len(masks) > 1 else 2)
    state.keep_valid(K.MASK, range(len(masks)))
    which = 0 if len(masks) == 1 else cols[0].selectbox(
        "Which mask", range(len(masks)), key=K.MASK.name,
        format_func=lambda i: f"{tokenizer.mask_token} #{i + 1} (token {masks[i]})")
    target = cols[-2].text_input("Target word", key=K.TARGET.name, placeholder="the top guess",
                                help="Any one token of the vocabulary; empty: the model's top guess.")
    contrast = cols[-1].text_input("Contrast word (optional)", key=K.CONTRAST.name, placeholder="none",
                                  help="Why the target rather than this word? F becomes the difference of the two "
                                       "logits, which cancels what the two words share.")
    ask = Ask(mask=which, target=target.strip(), contrast=contrast.strip())

st.subheader("The guess explained")
try:
    result = ui_why.explained(ckpt, encoding, ask)
except InputError as exc:
    say("error", str(exc))  # it quotes the typed words (or a link's): shown as typed, never as Markdown
    end_page()
left, right = st.columns([2, 3])
ui_why.guesses(result, left)
right.markdown(ui_why.score_line(result, tokenizer))
right.info(f"Read the rows below with care. The attention rows say where {plain(ui_why.mask_word(tokenizer, replaced))} "
           "looked: a clue to test, not the reason for the guess by itself; value zeroing, what reaches it through the "
           "layers' mixing of the tokens; none of them reads F. The score rows are computed from F "
           "itself: how F changes when a token's vector moves, or when the token alone is masked. No kind is "
           "right by definition, occlusion included: the causal check at the bottom tests them all, and says what "
           "it found for attention on this sentence.", icon=":material/lightbulb:")

st.subheader("Which tokens mattered?")
result = vw.with_attention(result, *ui_why.attention_pickers(ckpt))
ui_why.strips(result, tokenizer, replaced)

st.subheader("Do the methods agree?")
ui_why.agreement(result)

st.subheader("The causal check: remove what each method ranks first")
st.caption(ui_why.check_caption(result))
ui_why.causal_check(ckpt, encoding, ask, result)
