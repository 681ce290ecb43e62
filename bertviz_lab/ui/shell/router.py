"""The app's pages in one list (`PAGES`: app.py's menu and Home's "Where to start" both read it, grouped in its
sections by `by_section`), and the router's work: every request kept inside app.py's router, even a deep link that
is a server's first request, and a page that ends early ends without ending the app's own work after it (the link
and the share box, app.py)."""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import dataclass
from typing import NoReturn

import streamlit as st
import torch

from bertviz_lab.errors import GpuMemoryError
from bertviz_lab.seeds import cite

# The menu's sections, by what a learner is doing there (the package's features: views/, explain/, syntax/, pretrain/,
# finetune/). A page names its section; the sections come in the order of their first page.
START, READ, EXPLAIN, CORPUS, TRAIN = "Start", "Read a sentence", "Explain a guess", "Across a corpus", "Train"


@dataclass(frozen=True)
class PageInfo:
    """One page of the app: its file, its menu entry and section, and what it needs of the active model."""

    path: str  # the page file, from the repository root
    title: str  # its name in the menu and on Home
    icon: str
    section: str  # its section of the menu and of Home's "Where to start"
    blurb: str  # Home's sentence about it ("" for Home itself)
    needs: str = ""  # "": any model; "mlm": an MLM head; "guess": an MLM head or ELECTRA's replaced-token head

    def works_with(self, model) -> bool:
        """Whether the page shows what it is for with this model (a page that does not still opens, and says why)."""
        if self.needs == "mlm":
            return model.has_mlm
        if self.needs == "guess":
            return model.has_mlm or getattr(model, "has_rtd", False)
        return True


HOME = PageInfo("pages/home.py", "Home", ":material/home:", START, "")
PAGES = (  # the menu's order: each section's pages together
    HOME,
    PageInfo("pages/lesson.py", "Lesson", ":material/school:", START,
             "A class walks through BERT in thirteen steps, from tokens to contextual vectors: guess first, then reveal."),
    PageInfo("pages/worked.py", "Worked examples", ":material/calculate:", START,
             f"The hand computations of {cite('000')} and {cite('001')} as calculators, with the exact values."),
    PageInfo("pages/predict.py", "Mask & predict", ":material/visibility_off:", READ,
             "Hide words and see what the model guesses, with and without the words to the right.", "guess"),
    PageInfo("pages/attention.py", "Attention", ":material/grid_on:", READ,
             "Every head's attention matrix, and the softmax steps for any word, one number at a time."),
    PageInfo("pages/neurons.py", "Inside the feed-forward layer", ":material/memory:", READ,
             "Two thirds of BERT's weights: what each neuron fires on, the words it writes, and whether a guess rests "
             "on it."),
    PageInfo("pages/representations.py", "Representations", ":material/scatter_plot:", READ,
             "What the model learned: one word's vector in different sentences, layer by layer, and the logit lens."),
    PageInfo("pages/why.py", "Why this guess?", ":material/psychology_alt:", EXPLAIN,
             "Which tokens made the model guess what it guessed: attribution methods side by side with attention, "
             "and the check that tests them.", "guess"),
    PageInfo("pages/patching.py", "Where is the answer made?", ":material/swap_horiz:", EXPLAIN,
             "Copy one inner state from a clean sentence into a corrupted one and see how much of the answer comes "
             "back: layer by layer, position by position, head by head.", "guess"),
    PageInfo("pages/syntax.py", "Syntax across a corpus", ":material/account_tree:", CORPUS,
             "What the heads and the vectors hold over hundreds of sentences with their dependency trees, each "
             "number beside a baseline that needs no model."),
    PageInfo("pages/losses.py", "Losses step by step", ":material/functions:", TRAIN,
             "One training example: 15% picked, 80/10/10, the MLM loss (and NSP where there is a head), one "
             "optimizer step.", "mlm"),
    PageInfo("pages/pretrain.py", "Pretrain live", ":material/model_training:", TRAIN,
             "Train a small BERT in the background and watch its losses fall and its heads form."),
    PageInfo("pages/timelapse.py", "Time-lapse", ":material/slow_motion_video:", TRAIN,
             "Play back how a BERT learned: its guesses, its heads taking on roles, its words sorting themselves."),
    PageInfo("pages/finetune.py", "Fine-tune", ":material/tune:", TRAIN,
             "The other half of BERT: put a classifier on top and see what pretraining buys over random weights."),
)


def by_section(pages=PAGES) -> dict[str, list[PageInfo]]:
    """`pages` (PAGES, or some of them) by section, the sections and their pages in PAGES' order: st.navigation's
    menu in app.py, and the headings of Home's "Where to start"."""
    grouped: dict[str, list[PageInfo]] = {}
    for page in pages:
        grouped.setdefault(page.section, []).append(page)
    return grouped


def where_to_start(model, why_no_mlm: str) -> tuple[list[PageInfo], str]:
    """Home's links: every page but Home that works with `model`, and a sentence naming those that do not ("" when
    all do). `why_no_mlm`: why the model has no MLM head (`Family.no_mlm`)."""
    usable = [p for p in PAGES if p is not HOME and p.works_with(model)]
    left_out = [p.title for p in PAGES if not p.works_with(model)]
    if not left_out:
        return usable, ""
    names = left_out[0] if len(left_out) == 1 else f"{', '.join(left_out[:-1])} and {left_out[-1]}"
    verb = "needs" if len(left_out) == 1 else "need"
    them = "it" if len(left_out) == 1 else "them"
    return usable, (f"{names} {verb} a masked-language-model (MLM) head, which the active model lacks: "
                    f"{why_no_mlm.rstrip('.')}. Pick a model with one in the sidebar to use {them}.")


_routed = threading.local()  # each session's script runs in a thread of its own


class PageEnd(Exception):
    """A page has nothing more to draw (`end_page`); app.py's `routing()` catches it."""


OUT_OF_MEMORY = ("The GPU ran out of memory for this page (other models or runs hold the rest of it): choose CPU "
                 "under Device in the sidebar, or try a shorter text.")


@contextlib.contextmanager
def routing():
    """Run a page under the router: `end_page` inside it ends the page, not the whole script run; a GPU that runs
    out of memory ends it with a sentence saying what to do, and its unused memory is given back."""
    _routed.on = True
    out_of_memory = None
    try:
        yield
    except PageEnd:
        pass
    except (torch.OutOfMemoryError, GpuMemoryError) as exc:
        out_of_memory = f"{exc}." if isinstance(exc, GpuMemoryError) else OUT_OF_MEMORY
    finally:
        _routed.on = False
    if out_of_memory:  # outside the handler, whose traceback holds the failed pass's tensors
        from bertviz_lab.ui.shell.text import plain
        gc.collect()
        torch.cuda.empty_cache()
        st.error(plain(out_of_memory[0].upper() + out_of_memory[1:]), icon=":material/memory:")


def end_page() -> NoReturn:
    """Stop drawing this page, as `st.stop()` would. Under app.py's router only the page ends, so what app.py
    draws after it (the link that restores the view, the share box) still runs: after `st.stop()` every
    Streamlit call of the run raises again. A page run on its own (AppTest of one page) gets `st.stop()`."""
    if getattr(_routed, "on", False):
        raise PageEnd
    st.stop()


def ensure_router() -> None:
    """Leave Streamlit's legacy pages/-folder mode if this server started in it.

    A server whose first request is a deep link (say /attention, bookmarked) runs the
    page file directly with an automatic menu built from pages/, because app.py has not
    yet told Streamlit about st.navigation. Turning that flag off and rerunning sends the
    same URL through app.py's router, with its menu, its sidebar and its wide layout.
    So app.py calls this first, and so does every page (through `models.active_model`
    or directly): in that first request the page file is the only code that runs.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without this internal: nothing to fix
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()
