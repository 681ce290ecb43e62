"""Home: what the lab is, the active model's card, and where to go next."""

import streamlit as st

from bertviz_lab.bert import hub
from bertviz_lab.bert.card import card_facts, markdown_safe
from bertviz_lab.bert.config import ACTIVATIONS
from bertviz_lab.ui.shell.models import active_model
from bertviz_lab.ui.shell.router import by_section, where_to_start
from bertviz_lab.ui.kit.widgets import family_note
from bertviz_lab.views import sizes

st.title("bertviz_lab")
st.markdown(
    "Learn how BERT works by watching it work. Type a sentence, hide a word, and see every number "
    "a textbook writes by hand — attention scores, softmax weights, masked-word probabilities — "
    "computed live by a real PyTorch BERT."
)
ckpt = active_model()
cfg, name = ckpt.config, hub.repo_id_of(ckpt.path) or ckpt.path.name  # a Hub model by its id
# The folder name and the card are data: text that Streamlit's markdown would change is shown as plain text.
st.subheader(f"Active model: {name}" if markdown_safe(name) else "Active model")
if not markdown_safe(name):
    st.text(name)
cols = st.columns(5)
cols[0].metric("Layers", cfg.num_hidden_layers)
cols[1].metric("Heads per layer", cfg.num_attention_heads)
cols[2].metric("Hidden size", cfg.hidden_size)
cols[3].metric("Parameters", f"{ckpt.model.num_parameters() / 1e6:.1f} M")
cols[4].metric("Vocabulary", f"{ckpt.tokenizer.vocab_size:,}")
facts = [f"reads up to {cfg.max_tokens} tokens",
         f"heads: {ckpt.model.heads_summary}"]
# A card's facts, and a classifier's labels (from its config.json), are data: any that Streamlit's
# markdown would change are shown as plain text.
lines = facts + card_facts(ckpt.card)
st.caption(" · ".join(line for line in lines if markdown_safe(line)))
if not all(markdown_safe(line) for line in lines):
    st.text(" · ".join(line for line in lines if not markdown_safe(line)))
st.caption(f"Feed-forward activation: {ACTIVATIONS[cfg.hidden_act]}.")
family_note(ckpt)
if cfg.family == "bert":  # the table computes each shape as a BERT's
    with st.expander("How big is it next to the BERT family?"):
        active = sizes.Shape(f"active: {name}", cfg.num_hidden_layers, cfg.hidden_size,
                             cfg.num_attention_heads, cfg.intermediate_size, cfg.vocab_size,
                             cfg.max_position_embeddings, cfg.type_vocab_size, "this lab")
        st.dataframe(sizes.family_table(active), hide_index=True)
        st.caption("Parameters are computed from each shape: embeddings, every encoder layer and the pooler, without "
                   "the pretraining heads. " + sizes.SEED001_CORRECTION)

st.subheader("Where to start")
links, left_out = where_to_start(ckpt.model, ckpt.family.no_mlm(ckpt.model.has_rtd))  # from the app's page list
for section, infos in by_section(links).items():  # the menu's sections, in its order
    st.markdown(f"##### {section}")  # a heading, not bold text: nothing on Home is bold Markdown (a card is not)
    for row in range(0, len(infos), 3):
        for column, info in zip(st.columns(3), infos[row:row + 3]):
            with column:
                st.page_link(info.path, label=info.title, icon=info.icon)
                st.caption(info.blurb)
if left_out:
    st.caption(left_out)
st.caption("Pick another model or the device in the sidebar: a model folder or a Hugging Face Hub id of the "
           "BERT family (BERT, DistilBERT, RoBERTa, XLM-R, ELECTRA, ALBERT) opens as is.")
