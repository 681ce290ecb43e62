"""Home: what the lab is, the active model's card, and where to go next."""

import streamlit as st

from bertviz_lab.bert import hub
from bertviz_lab.bert.card import card_facts, markdown_safe
from bertviz_lab.bert.config import ACTIVATIONS
from bertviz_lab.ui.models import active_model
from bertviz_lab.ui.widgets import family_note
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
LINKS = [
    ("pages/predict.py", "Mask & predict", ":material/visibility_off:",
     "Hide words and see what BERT guesses, with and without the words to the right."),
    ("pages/attention.py", "Attention", ":material/grid_on:",
     "Every head's attention matrix, and the softmax steps for any word, one number at a time."),
    ("pages/representations.py", "Representations", ":material/scatter_plot:",
     "What BERT learned: one word's vector in different sentences, layer by layer, and the logit lens."),
    ("pages/losses.py", "Losses step by step", ":material/functions:",
     "One training example: 15% picked, 80/10/10, MLM and NSP losses, one optimizer step."),
    ("pages/pretrain.py", "Pretrain live", ":material/model_training:",
     "Train a small BERT in the background and watch its losses fall and its heads form."),
    ("pages/timelapse.py", "Time-lapse", ":material/slow_motion_video:",
     "Play back how a BERT learned: its guesses, its heads taking on roles, its words sorting themselves."),
    ("pages/finetune.py", "Fine-tune", ":material/tune:",
     "The other half of BERT: put a classifier on top and see what pretraining buys over random weights."),
    ("pages/worked.py", "Worked examples", ":material/calculate:",
     "The textbook's hand computations as calculators, with the exact values."),
]
for row in range(0, len(LINKS), 3):
    for column, (path, label, icon, blurb) in zip(st.columns(3), LINKS[row:row + 3]):
        with column:
            st.page_link(path, label=label, icon=icon)
            st.caption(blurb)
st.caption("Pick another model or the device in the sidebar: a model folder or a Hugging Face Hub id of the "
           "BERT family (BERT, DistilBERT, RoBERTa, XLM-R, ELECTRA, ALBERT) opens as is.")
