"""Home: what the lab is. The model picker and the other pages arrive with the app issues."""

import streamlit as st

st.title("bertviz_lab")
st.markdown(
    "Learn how BERT works by watching it work: type a sentence, mask a word, and see every "
    "number a textbook writes by hand — attention scores, softmax weights, masked-word "
    "probabilities, MLM and NSP losses — computed live by a real PyTorch BERT."
)
st.info("The engine is ready (`python -m bertviz_lab predict|info`); the interactive pages are being built.")
