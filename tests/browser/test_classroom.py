"""The real server in classroom mode, seen from another machine: Chromium opens it through this
machine's network address, so the server sees a visitor. The visitor's folder box refuses /etc
without a traceback; the owner (localhost) sees the QR code students scan, and it reads back as the
address. With the project's config the server listens on localhost only and shows a crash as a
generic note, its traceback going to the server's log."""

from __future__ import annotations

import contextlib
import io
import re
import socket
from pathlib import Path

import pytest
import segno

from bertviz_lab import classroom
from tests.browser.harness import CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

LAN = classroom.lan_address()
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
              pytest.mark.skipif(LAN is None, reason="this machine has no network address besides loopback")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
SIDEBAR = '[data-testid="stSidebar"]'
SECRET = "secret-detail /home/teacher/notes.txt"


@contextlib.contextmanager
def server(log: Path, address: str = "127.0.0.1", script: str = "app.py", env: dict | None = None):
    """The harness's server with its output in `log`; yields its port."""
    with streamlit_server(env, address=address, script=script, log=log) as url:
        yield int(url.rsplit(":", 1)[1])


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=3).close()
    except ConnectionRefusedError:
        return True
    return False


def qr_modules(png: bytes, size: int) -> list[list[bool]]:
    """Sample a screenshot of a QR code at the centre of each of its size x size modules (True: dark)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    w, h = image.size
    return [[image.getpixel((int((x + 0.5) * w / size), int((y + 0.5) * h / size))) < 128 for x in range(size)]
            for y in range(size)]


def test_classroom_visitor_and_owner(tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with server(tmp_path / "log", address="0.0.0.0", env={"BERTVIZ_CLASSROOM": "1"}) as port, \
            browser_page() as page:
        open_page(page, f"http://{LAN}:{port}")  # another machine, as far as the server can tell
        sidebar = page.locator(SIDEBAR)
        sidebar.get_by_text("Open a model folder or a Hub id").click()
        for path in ("/etc", "/no/such/folder"):
            sidebar.get_by_label("Folder path").fill(path)
            sidebar.get_by_role("button", name="Load").click()
            wait_idle(page)
            assert sidebar.locator('[data-testid="stAlertContentError"]').inner_text().strip() == classroom.REFUSAL
        assert page.locator(EXCEPTION).count() == 0 and "Traceback" not in page.inner_text("body")
        assert page.get_by_role("heading", name="Active model: bertviz-mini").is_visible()

        url = f"http://{LAN}:{port}"
        open_page(page, f"http://127.0.0.1:{port}")  # the owner, at the projector
        sidebar = page.locator(SIDEBAR)
        assert sidebar.get_by_text("Open a model folder or a Hub id").is_visible()
        qr = sidebar.locator('[data-testid="stImage"] img').first  # the join box's; the share box's is folded
        qr.wait_for(timeout=30_000)
        assert sidebar.get_by_role("heading", name=f"{LAN}:{port}").is_visible()
        box = qr.bounding_box()
        assert box["width"] >= 200 and abs(box["width"] - box["height"]) < 2
        code = segno.make(url, error="m")  # what classroom.qr_svg draws: the screenshot must read back as it
        expected = [[bool(bit) for bit in row] for row in code.matrix_iter(scale=1, border=4)]
        assert qr_modules(qr.screenshot(), code.symbol_size(scale=1, border=4)[0]) == expected
        sidebar.screenshot(path=str(SHOTS / "classroom_sidebar.png"))


def test_the_default_config_listens_on_localhost_and_hides_crashes(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(f"import streamlit as st\nst.error('a LabError sentence')\nraise RuntimeError({SECRET!r})\n")
    with server(tmp_path / "log", script=str(script)) as port, browser_page() as page:
        assert refused(LAN, port)
        open_page(page, f"http://127.0.0.1:{port}")
        page.wait_for_selector(EXCEPTION, timeout=30_000)
        text = page.inner_text("body")
        assert "a LabError sentence" in text  # st.error is ours: it still shows
        assert "redacted" in page.locator(EXCEPTION).inner_text()
        assert "secret-detail" not in text and "RuntimeError" not in text and "Traceback" not in text
    log = re.sub(r"\x1b\[[0-9;]*m", "", (tmp_path / "log").read_text())  # without rich's colours
    assert f"RuntimeError: {SECRET}" in log and "Traceback" in log  # the server's log has it all
