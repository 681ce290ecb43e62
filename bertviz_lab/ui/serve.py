"""`python -m bertviz_lab.ui.serve [streamlit args]`: `streamlit run app.py`, with the first page's work done
while the server starts, and torch's CPU threads set for a server. `./lab.sh app` runs the app this way.

Otherwise a fresh server's first page pays, in its first script run, for importing torch, pandas and plotly,
loading the shipped model and its first forward pass: seconds a class watches a spinner. Here a background
thread starts that work with the process, alongside Streamlit's own start and the browser's loading of the
page, and the first run finds it done, or waits for the rest of it: a module is imported once and
`st.cache_resource` loads a model once, whichever thread asks first. The thread does what a new session's
first page does; if anything fails there, the page meets it again and says why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

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
        from bertviz_lab.ui import handout, links, models, widgets  # noqa: F401 - what app.py and the pages load
        from bertviz_lab.ui.state import Model, Predict
        from bertviz_lab.views import inputs, predict

        logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NotWarmThread())
        ckpt = models.cached_checkpoint(Model.PATH.default, models.device_name(Model.DEVICE.default))
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, Predict.SENTENCES.text_a.default)
        report = predict.explore_masks(ckpt.model, ckpt.tokenizer, encoding, [], top_k=Predict.TOP_K.default)
        prediction_bars(predict.candidate_rows(report.independent.masks[0]), "")  # plotly's validators load
    except Exception:  # noqa: BLE001 - only a head start: the page does the same work and reports the error
        log.warning("warming up the default model failed; the first page will load it", exc_info=True)


def main(argv: list[str]) -> None:
    # Streamlit first, whole: importing it builds plotly objects, and plotly reads pandas from sys.modules
    # without waiting for its import to finish, so it must not meet the thread's pandas half imported.
    from streamlit.web import cli

    threading.Thread(target=warm, name=THREAD, daemon=True).start()
    from bertviz_lab.files import ROOT

    # app.py by its full path, so the app starts from any folder; Streamlit reads .streamlit/config.toml beside it.
    cli.main(["run", str(ROOT / "app.py"), *argv], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
