"""Home: what the lab is, and the card of the model it uses."""

import streamlit as st

from bertviz_lab.errors import LabError
from bertviz_lab.ui.models import active_checkpoint

st.title("bertviz_lab")
st.markdown(
    "Learn how BERT works by watching it work: type a sentence, mask a word, and see every "
    "number a textbook writes by hand — attention scores, softmax weights, masked-word "
    "probabilities, MLM and NSP losses — computed live by a real PyTorch BERT."
)
try:
    ckpt = active_checkpoint()
except LabError as exc:
    st.error(f"The default model could not be loaded: {exc}")
    st.stop()
cfg, card = ckpt.config, ckpt.card
held = card.get("held_out", {})
st.subheader(f"Active model: {ckpt.path.name}")
cols = st.columns(5)
cols[0].metric("Layers", cfg.num_hidden_layers)
cols[1].metric("Heads", cfg.num_attention_heads)
cols[2].metric("Hidden size", cfg.hidden_size)
cols[3].metric("Parameters", f"{ckpt.model.num_parameters() / 1e6:.1f} M")
cols[4].metric("Vocabulary", f"{ckpt.tokenizer.vocab_size:,}")
if held:
    st.caption(f"Trained on the {card.get('corpus', '?')} for {card.get('steps', '?')} steps; held-out MLM "
               f"top-1 {held['mlm_top1']:.1%}, top-5 {held['mlm_top5']:.1%}, NSP accuracy {held.get('nsp_acc', 0):.1%}.")
