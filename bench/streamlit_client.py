"""A Streamlit client without a browser: the app's own websocket protocol, spoken from Python.

A browser session is a websocket to `/_stcore/stream`: the client sends `BackMsg` protobufs (rerun the
script with these widget values) and the server answers with `ForwardMsg`s (the elements, then
`script_finished`). This client does the same, so a load test can put ten students on a 2-core server
without ten Chromium renderers taking the cores that the server needs: in a classroom every student's
browser runs on the student's own machine. It reads what a page shows (code blocks, tables, alerts,
exceptions) from the elements themselves. What the browser does after that (drawing) is not measured here;
`bench.classroom_load --driver browser` and `tests/ui/shell/test_load.py` drive real Chromium too. The websocket
library is `websockets`, which Streamlit itself requires.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED = ForwardMsg.ScriptFinishedStatus.Name  # status number -> name
DONE = {"FINISHED_SUCCESSFULLY", "FINISHED_WITH_COMPILE_ERROR"}  # a rerun the script asked for goes on


@dataclass
class Run:
    """What one script run put on the page: its elements in the order they came, and its end status."""

    elements: list[Element] = field(default_factory=list)
    status: str = ""
    seconds: float = 0.0  # from the rerun request to script_finished, as this client saw it

    def of(self, kind: str) -> list:
        """The elements of one kind (e.g. "code", "dataframe", "alert"), as their own protos."""
        return [getattr(e, kind) for e in self.elements if e.WhichOneof("type") == kind]

    def problems(self) -> list[str]:
        """The first line of each exception, error or warning box."""
        out = [f"exception: {e.type}: {e.message}".splitlines()[0] for e in self.of("exception")]
        out += [f"{'error' if a.format == a.ERROR else 'warning'}: {a.body}".splitlines()[0]
                for a in self.of("alert") if a.format in (a.ERROR, a.WARNING)]
        return out


class Session:
    """One browser tab's worth of protocol: `await Session.open(url, page)`, then `rerun(...)`."""

    def __init__(self, ws, page: str, query: str = ""):
        self._ws, self.page, self.query = ws, page, query
        self.page_hash = ""
        self.widgets: dict[str, WidgetState] = {}  # the values this client has set, by widget id

    @classmethod
    async def open(cls, url: str, page: str, timeout_s: float = 120.0, query: str = "") -> tuple[Session, Run]:
        """Connect and run `page` (its URL path, e.g. "attention") once, as a browser opening the page
        (`query`: the link's query string, e.g. "step=9")."""
        import websockets

        parts = urlparse(url)
        ws = await websockets.connect(f"ws://{parts.netloc}{parts.path.rstrip('/')}/_stcore/stream",
                                      subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s)
        session = cls(ws, page, query)
        return session, await session.rerun(timeout_s=timeout_s)

    async def close(self) -> None:
        await self._ws.close()

    def set(self, state: WidgetState) -> None:
        """A widget value of any type (a button's trigger_value, pills' string_array_value) for the next rerun;
        a trigger is sent once, as a browser sends a click."""
        self.widgets[state.id] = state

    def widget_id(self, run: Run, kind: str, label: str) -> str:
        """The id of the `kind` widget (e.g. "text_area") labelled `label` in `run`."""
        for widget in run.of(kind):
            if widget.label == label:
                return widget.id
        raise LookupError(f"no {kind} labelled {label!r} on {self.page}")

    async def rerun(self, values: dict[str, str] | None = None, timeout_s: float = 120.0) -> Run:
        """Send these string widget values (by id) with every value set before, and collect the run that
        follows, through any reruns the script itself asks for, until the script finishes."""
        for widget_id, value in (values or {}).items():
            self.widgets[widget_id] = WidgetState(id=widget_id, string_value=value)
        msg = BackMsg()
        msg.rerun_script.page_name = self.page
        msg.rerun_script.page_script_hash = self.page_hash
        msg.rerun_script.query_string = self.query
        msg.rerun_script.widget_states.widgets.extend(self.widgets.values())
        self.widgets = {k: w for k, w in self.widgets.items() if w.WhichOneof("value") != "trigger_value"}
        run, start = Run(), time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        async with asyncio.timeout(timeout_s):
            while run.status not in DONE:
                reply = ForwardMsg()
                reply.ParseFromString(await self._ws.recv())
                kind = reply.WhichOneof("type")
                if kind == "navigation":  # st.navigation resolved the page: its hash names it from now on
                    self.page_hash = reply.navigation.page_script_hash
                elif kind == "new_session":
                    run.elements.clear()  # a new run (the script's own st.rerun): what it draws replaces the old
                elif kind == "delta" and reply.delta.WhichOneof("type") == "new_element":
                    run.elements.append(reply.delta.new_element)
                elif kind == "script_finished":
                    run.status = FINISHED(reply.script_finished)
        run.seconds = time.perf_counter() - start
        return run
