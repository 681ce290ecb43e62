"""`python -m bertviz_lab.ui.shell.serve [streamlit args]`: `streamlit run app.py`, with the first page's work done
while the server starts, and torch's CPU threads set for a server. `./lab.sh app` runs the app this way.

Otherwise a fresh server's first page pays, in its first script run, for importing torch, pandas and plotly,
loading the shipped model and its first forward pass: seconds a class watches a spinner. Here a background
thread starts that work with the process, alongside Streamlit's own start and the browser's loading of the
page, and the first run finds it done, or waits for the rest of it: a module is imported once and
`st.cache_resource` loads a model once, whichever thread asks first. The thread does what a new session's
first page does; if anything fails there, the page meets it again and says why.

The server's settings are the lab's own (SETTINGS), whatever folder it starts in: Streamlit also reads the
`.streamlit/config.toml` of the working folder, and a folder someone else filled could open the server to every other
site's pages, serve files or move the app; that file is not read, and SETTINGS go first on the command line, where
they win over every file while the user's own arguments after them still win over them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

from bertviz_lab.files import ROOT

log = logging.getLogger("bertviz_lab")
THREAD = "bertviz-warm"
# torch's OpenMP threads sleep as soon as a parallel region ends, instead of spinning for the next one.
# Streamlit runs each script run in a new thread, and each new thread gets a new team of OpenMP threads;
# spinning teams take the cores from each other and from everything else on the machine. On a busy 2-core
# machine a forward pass of the shipped model took 0.4-0.5 s in a new thread with 2 threads spinning and
# 7-10 ms with them sleeping (a bert-base-sized one at 128 tokens: 1.5 s and 0.3 s); when the cores are
# free, sleeping costs the small model 2-4 ms a pass. OpenMP reads this once, when torch loads; a user's
# own setting wins, and the training runs the app starts get the environment as it was.
OPENMP = {"OMP_WAIT_POLICY": "PASSIVE"}
# Every setting the lab relies on, or that decides who may reach the server and what the browser gets; the
# repository's .streamlit/config.toml says the same, with the reasons (for `streamlit run app.py`; a test checks they
# agree). Not here: server.port (the user's), server.headless (Streamlit opens a browser where there is a display),
# logging, the theme, and lists such as server.corsAllowedOrigins, which no flag can empty: with the working folder's
# file unread, only the user's own ~/.streamlit/config.toml can set those.
SETTINGS: dict[str, bool | int | str] = {
    "global.disableWidgetStateDuplicationWarning": True,
    "global.developmentMode": False,
    "server.address": "localhost",
    "server.baseUrlPath": "",
    "server.enableCORS": True,
    "server.enableXsrfProtection": True,
    "server.xsrfCookieSameSite": "lax",
    "server.enableStaticServing": False,
    "server.enableAgentApi": False,
    "server.maxUploadSize": 20,
    "server.maxMessageSize": 200,
    "server.enableWebsocketCompression": False,
    "server.fileWatcherType": "none",
    "server.runOnSave": False,
    "client.toolbarMode": "viewer",
    "client.showErrorDetails": "none",
    "client.showSidebarNavigation": True,
    "runner.postScriptGC": False,
    "runner.enforceSerializableSessionState": False,
    "browser.serverAddress": "localhost",
    "browser.gatherUsageStats": False,
}


class _NotWarmThread(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warning for this thread: it runs no script, by design."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD


@contextlib.contextmanager
def openmp_settings() -> Iterator[None]:
    """OPENMP in the environment (where the user set none) while torch loads inside the block."""
    added = {name: value for name, value in OPENMP.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def warm() -> None:
    """Import what app.py and its first pages import, load the default model, and read the default mask."""
    try:
        with openmp_settings():
            import torch  # noqa: F401 - first, for its OpenMP settings

        from bertviz_lab.figures.predictions import prediction_bars
        from bertviz_lab.ui.kit import widgets  # noqa: F401 - what app.py and the pages load
        from bertviz_lab.ui.shell import handout, links, models  # noqa: F401
        from bertviz_lab.ui.shell.state import Model, Predict
        from bertviz_lab.views import inputs
        from bertviz_lab.views.predict import guesses as vpr

        logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NotWarmThread())
        ckpt = models.cached_checkpoint(Model.PATH.default, models.device_name(Model.DEVICE.default))
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, Predict.SENTENCES.text_a.default)
        report = vpr.explore_masks(ckpt.model, ckpt.tokenizer, encoding, [], top_k=Predict.TOP_K.default)
        prediction_bars(vpr.candidate_rows(report.independent.masks[0]), "")  # plotly's validators load
    except Exception:  # noqa: BLE001 - only a head start: the page does the same work and reports the error
        log.warning("warming up the default model failed; the first page will load it", exc_info=True)


def setting_flags() -> list[str]:
    """SETTINGS as Streamlit's flags, less those a STREAMLIT_ environment variable sets (an administrator's choice,
    which a flag would silently override)."""
    from streamlit.string_util import to_snake_case

    flags = []
    for key, value in SETTINGS.items():
        if f"STREAMLIT_{to_snake_case(key.replace('.', '_')).upper()}" not in os.environ:
            flags += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return flags


def ignore_the_working_folders_config() -> None:
    """Streamlit reads ~/.streamlit/, then the working folder's .streamlit/, then app.py's own: the middle one (config
    and secrets) is left out, so that what no flag can undo (a list of origins, theme.base naming a URL the server
    fetches, hidden settings such as server.trustedUserHeaders) never comes from the folder the app is started in."""
    from streamlit import config, file_util

    every = config.get_config_files

    def without_the_working_folder(file_name: str) -> list[str]:
        here = file_util.get_project_streamlit_file_path(file_name)
        own = str(ROOT / ".streamlit" / file_name)
        kept = [path for path in every(file_name) if path != here]
        return kept if own in kept else [*kept, own]

    config.get_config_files = without_the_working_folder


def main(argv: list[str]) -> None:
    # Streamlit first, whole: importing it builds plotly objects, and plotly reads pandas from sys.modules
    # without waiting for its import to finish, so it must not meet the thread's pandas half imported.
    from streamlit.web import cli

    ignore_the_working_folders_config()  # before any thread reads a setting
    threading.Thread(target=warm, name=THREAD, daemon=True).start()
    # app.py by its full path, so the app starts from any folder; Streamlit reads .streamlit/config.toml beside it.
    cli.main(["run", str(ROOT / "app.py"), *setting_flags(), *argv], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
