"""bertviz_lab: the Streamlit router. Run with `./lab.sh app` (or `streamlit run app.py`).

Every request runs this file: it draws the sidebar's model and device picker once, for
whichever page the URL names, then runs that page. In classroom mode (`./lab.sh app --classroom`)
the sidebar starts with the address and QR code students open.
"""

import streamlit as st

from bertviz_lab.ui.classroom import classroom_mode, join_box
from bertviz_lab.ui.models import sidebar
from bertviz_lab.ui.router import ensure_router
from bertviz_lab.ui.turns import my_turn

st.set_page_config(page_title="bertviz_lab", page_icon="🔍", layout="wide")
ensure_router()  # a server's first request: leave the pages/-folder mode before drawing anything
PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/predict.py", title="Mask & predict", icon=":material/visibility_off:"),
    st.Page("pages/attention.py", title="Attention", icon=":material/grid_on:"),
    st.Page("pages/representations.py", title="Representations", icon=":material/scatter_plot:"),
    st.Page("pages/pretrain.py", title="Pretrain live", icon=":material/model_training:"),
    st.Page("pages/timelapse.py", title="Time-lapse", icon=":material/slow_motion_video:"),
    st.Page("pages/finetune.py", title="Fine-tune", icon=":material/tune:"),
    st.Page("pages/losses.py", title="Losses step by step", icon=":material/functions:"),
    st.Page("pages/worked.py", title="Worked examples", icon=":material/calculate:"),
]
page = st.navigation(PAGES)
if classroom_mode():
    join_box()
with my_turn():  # at most two sessions compute at once; the others wait in line (ui/turns.py)
    sidebar()
    page.run()
