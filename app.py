"""bertviz_lab: the Streamlit router. Run with `./lab.sh app` (or `streamlit run app.py`)."""

import streamlit as st

st.set_page_config(page_title="bertviz_lab", page_icon="🔍", layout="wide")
home = st.Page("pages/home.py", title="Home", icon="🏠", default=True)
st.navigation([home]).run()
