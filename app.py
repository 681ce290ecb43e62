"""bertviz_lab: the Streamlit router. Run with `./lab.sh app` (or `streamlit run app.py`).

Every request runs this file: it reads the link's view into session state (ui/shell/links.py), draws the
sidebar's model and device picker once, for whichever page the URL names, runs that page, then writes
the view back into the link and offers it to share (the link, its QR code, and the handout zip of the
views this session drew: ui/shell/share.py, ui/shell/handout.py). In classroom mode (`./lab.sh app --classroom`)
the sidebar starts with the address and QR code students open. Projector view (ui/shell/projector.py) folds
the sidebar away and moves the page menu (a dropdown per section) and the share button to the top.
"""

import streamlit as st

from bertviz_lab.classroom import classroom_mode
from bertviz_lab.errors import LabError
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell import projector
from bertviz_lab.ui.shell.classroom import join_box
from bertviz_lab.ui.shell.handout import handout_button
from bertviz_lab.ui.shell.models import plain_error, shown, sidebar
from bertviz_lab.ui.shell.router import HOME, by_section, ensure_router, routing
from bertviz_lab.ui.shell.share import share_box
from bertviz_lab.ui.shell.state import Classroom
from bertviz_lab.ui.shell.turns import my_turn

st.set_page_config(page_title="bertviz_lab", page_icon="🔍", layout="wide")
ensure_router()  # a server's first request: leave the pages/-folder mode before drawing anything
projector.read_link()
projector.apply()
MENU = {section: [st.Page(p.path, title=p.title, icon=p.icon, default=p is HOME) for p in pages]
        for section, pages in by_section().items()}  # ui/shell/router.py's list, in its sections
page = st.navigation(MENU, position="top" if projector.on() else "sidebar", expanded=True)  # top: a dropdown each
projector.switch()
try:
    if classroom_mode():
        join_box()
except LabError as exc:  # BERTVIZ_CLASSROOM or BERTVIZ_MAX_RUNS unreadable (settings.py): no page is safe to serve
    plain_error(str(exc))
    st.stop()
with my_turn():  # at most two sessions compute at once; the others wait in line (ui/shell/turns.py)
    links.restore(page.url_path)  # before the sidebar and the page draw their widgets
    try:
        sidebar()
    except LabError as exc:  # a setting it reads is unusable (BERTVIZ_RUNS, settings.py): said, and the page runs
        with st.sidebar:
            plain_error(shown(str(exc)))
    toolbar, notes = st.container(), st.container()  # filled once the page has run
    try:
        with routing():  # a page that ends early (router.end_page) ends only itself
            page.run()
    except LabError as exc:  # one no page caught (a bad BERTVIZ_RUNS on the run pages): its sentence, as typed
        plain_error(shown(str(exc)))
    finally:  # the link and the share box hold what the page drew
        query, left_out = links.publish(page.url_path, notes, projector.on())
        if projector.on():
            bar = toolbar.container(horizontal=True, horizontal_alignment="right")
            box = bar.popover("Share this view", icon=":material/qr_code_2:", key=Classroom.SHARE_OPEN.name,
                              on_change="rerun")  # keyed: "Show the QR code full screen" closes it
        else:
            box = st.sidebar.expander("Share this view", icon=":material/share:")
        handout_button(box, page.title, share_box(box, page.url_path, query, left_out, projector.on()))  # and others'
        if projector.on():
            bar.button("Leave projector view", icon=":material/close_fullscreen:", on_click=projector.leave)
