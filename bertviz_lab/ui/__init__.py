"""The only Streamlit code outside pages/: cached loaders, session state, widget groups."""
