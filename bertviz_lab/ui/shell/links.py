"""Links that restore a view: each page's choices live in the address bar (`st.query_params`).

After every run `publish` writes the page's sentences, masks, layer, head, query token and options into the URL, only
those that differ from their defaults, so a link stays short. A teacher pastes the address, or shows its QR code
(ui/shell/share.py), and everyone sees the same view. On a page's first run in a session, `restore` reads the URL back into
session state before any widget is drawn.

A link is text anyone can write, so every value goes through a reader that knows its type and range. The page falls
back to its default, and says so in one note, for each of these: a value a reader refuses (`layer=abc`, or a sentence
with invisible or direction-changing characters, which would make the link show other words than the model reads), a
parameter the page does not know, a value the page cannot offer (layer 7 of a 2-layer model, which the page's own
check drops), and repeated values past MAX_PARAMS. The note quotes values as code, every control or invisible
character written as an escape (\\x00, \\u202e). `query` writes only what these readers take back, and says what it
leaves out by the widget's label.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from bertviz_lab.bert import hub
from bertviz_lab.bert.config import RANDOM_TOKENS
from bertviz_lab.explain.patch_grids import DIRECTIONS
from bertviz_lab.ui.shell import models
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.link_readers import choice, flag, head_name, integer, number, token_range
from bertviz_lab.ui.shell.state import (Attention, Classroom, Key, Lesson, Losses, Model, Predict, Representations,
                                  Sentences, Syntax, TimeLapse, Why)
from bertviz_lab.ui.shell.state_neurons import CORPORA, SECTIONS, Neurons
from bertviz_lab.ui.shell.state_patching import VIEWS, Patch
from bertviz_lab.ui.shell.state_probing import Careful
from bertviz_lab.probing.records import TASKS
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.neurons.ask import MAX_FACTORS, MAX_K, METHODS
from bertviz_lab.views.patching.ask import MAX_DRAWS

MAX_TEXT = 1_000  # characters of one sentence in a link: longer ones make URLs that break and dense QR codes
MAX_PARAMS = 64  # parameters read from one link; a longer query string is hostile or broken
MAX_NOTED = 6  # parameters named in the note; the rest are counted
GLOBAL = ("projector", "model")  # read by app.py and the sidebar on every page, not by this module
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls but tab and newline


# --- Readers: the URL's text -> a value, or ValueError(why) (the others: ui/shell/link_readers.py) -------------
def text(limit: int = MAX_TEXT) -> Callable[[str], str]:
    def read(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"is longer than {limit:,} characters")
        if found := list(dict.fromkeys(f"U+{ord(c):04X}" for c in _CONTROL.findall(value))):
            raise ValueError(f"holds control characters ({_listed(found)})")
        if found := inputs.hidden_characters(value):
            raise ValueError(f"holds invisible or direction-changing characters ({_listed(found)})")
        return value
    return read


def _listed(code_points: list[str]) -> str:
    return ", ".join(code_points[:MAX_NOTED]) + (" …" if len(code_points) > MAX_NOTED else "")


# --- Parameters ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One URL parameter: its name, the session key it fills, its reader; `many`: a list, as repeated
    parameters (?mask=cat&mask=mat); `label`: the widget's, as the share box names what a link leaves out."""
    name: str
    key: Key
    read: Callable[[str], Any]
    many: bool = False
    label: str = ""

    def url_value(self) -> str | list[str] | None:
        """What goes into the URL for the value held now; None for the default (left out of the link)."""
        value = state.get(self.key)
        if value is None or value == self.key.default or (self.many and list(value) == list(self.key.default or ())):
            return None
        if self.many:
            return [str(v) for v in value]
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, (tuple, list)):  # a token range
            return f"{value[0]}-{value[1]}"
        return str(value)


def sentences(keys: Sentences) -> tuple[Param, ...]:
    return (Param("a", keys.text_a, text(), label="Sentence A"), Param("pair", keys.pair, flag),
            Param("b", keys.text_b, text(), label="Sentence B"))


LAYER, HEAD, TOKEN = integer(0, 999), integer(0, 999), integer(0, 99_999)
PAGES: dict[str, tuple[Param, ...]] = {  # url_path -> the parameters of that page
    "predict": (*sentences(Predict.SENTENCES),
                Param("mask", Predict.WORDS, text(100), many=True, label="Words to hide"),
                Param("k", Predict.TOP_K, integer(1, 20)), Param("temperature", Predict.TEMPERATURE, number(0.1, 3)),
                Param("causal", Predict.CAUSAL, flag)),
    "attention": (*sentences(Attention.SENTENCES), Param("layer", Attention.LAYER, LAYER),
                  Param("head", Attention.HEAD, HEAD), Param("mean", Attention.MEAN, flag),
                  Param("hide", Attention.HIDE, flag), Param("block", Attention.BLOCK, choice(av.BLOCKS)),
                  Param("range", Attention.RANGE, token_range), Param("grid", Attention.GRID, flag),
                  Param("off", Attention.OFF, head_name, many=True, label="Heads to switch off"),
                  Param("query", Attention.QUERY, TOKEN),
                  Param("tau", Attention.TAU, number(0.1, 5)), Param("key", Attention.KEY, TOKEN)),
    "losses": (*sentences(Losses.SENTENCES), Param("seed", Losses.SEED, integer(0, 2**31 - 1)),
               Param("rate", Losses.RATE, number(0, 1)),
               *(Param(key.name.split(".")[1], key, number(0, 1)) for key in Losses.SHARES),
               Param("random_from", Losses.RANDOM_TOKENS, choice(list(RANDOM_TOKENS))),
               Param("all", Losses.ALL, flag), Param("step", Losses.STEP, integer(1, 99))),
    "representations": (Param("tab", Representations.TAB, text(60)), Param("set", Representations.SET, text(60)),
                        Param("word", Representations.WORD, text(100), label="Word to follow"),
                        Param("layer", Representations.LAYER, LAYER),
                        Param("nn_text", Representations.NN_TEXT, text(), label="Sentence"),
                        Param("nn_token", Representations.NN_TOKEN, TOKEN),
                        Param("nn_layer", Representations.NN_LAYER, LAYER),
                        Param("lens_text", Representations.LENS_TEXT, text(), label="Sentence with [MASK]"),
                        Param("lens_mask", Representations.LENS_MASK, integer(0, 999))),
    "timelapse": (Param("history", TimeLapse.SOURCE, text(200)),
                  Param("probe", TimeLapse.PROBE, text(), label="Probe sentence"),
                  Param("view", TimeLapse.VIEW, text(20)), Param("layer", TimeLapse.LAYER, LAYER),
                  Param("head", TimeLapse.HEAD, HEAD), Param("role", TimeLapse.ROLE, text(40)),
                  Param("step", TimeLapse.STEP, integer(0, 10**9))),
    "lesson": (Param("step", Lesson.STEP, vls.from_link), Param("a", Lesson.MASKED, text()),  # ?step=softmax, or 4
               Param("word", Lesson.TRUE_WORD, text(100)), Param("attn", Lesson.ATTENTION, text()),
               Param("nsp_a", Lesson.NSP_A, text()), Param("nsp_b", Lesson.NSP_B, text()),
               Param("sense_word", Lesson.SENSE_WORD, text(100)), Param("sense_a", Lesson.SENSE_A, text()),
               Param("sense_b", Lesson.SENSE_B, text()), Param("sense_c", Lesson.SENSE_C, text())),
    "why": (*sentences(Why.SENTENCES), Param("mask", Why.MASK, integer(0, 999)), Param("token", Why.TOKEN, TOKEN),
            Param("target", Why.TARGET, text(100), label="Target word"),
            Param("contrast", Why.CONTRAST, text(100), label="Contrast word"), Param("layer", Why.LAYER, LAYER),
            Param("head", Why.HEAD, lambda value: value if value == "mean" else HEAD(value))),
    "syntax": (Param("source", Syntax.SOURCE, choice(("story", "treebank", "own"))),
               Param("sentences", Syntax.SENTENCES, integer(1, 99_999)),
               Param("own", Syntax.OWN, text(), label="Your sentences"), Param("tab", Syntax.TAB, text(60)),
               Param("relation", Syntax.RELATION, text(60)), Param("direction", Syntax.DIRECTION, integer(0, 1)),
               Param("layer", Syntax.LAYER, LAYER), Param("head", Syntax.HEAD, HEAD),
               Param("probe_layer", Syntax.PROBE_LAYER, LAYER), Param("sentence", Syntax.SENTENCE, integer(0, 99_999)),
               Param("attractors", Syntax.ATTRACTORS, lambda value: value if value == "all" else integer(0, 9)(value)),
               Param("probe_task", Careful.TASK, choice(TASKS)), Param("remove", Careful.AMNESIC_TASK, choice(TASKS)),
               Param("remove_at", Careful.AMNESIC_LAYER, LAYER)),
    "patching": (Param("clean", Patch.CLEAN, text(), label="Clean sentence"),
                 Param("corrupt", Patch.CORRUPT, text(), label="Corrupted sentence"),
                 Param("answer", Patch.ANSWER, text(100), label="Answer"), Param("foil", Patch.FOIL, text(100), label="Foil"),
                 Param("noise", Patch.NOISE, flag), Param("noised", Patch.NOISED, TOKEN, many=True),
                 Param("draws", Patch.DRAWS, integer(1, MAX_DRAWS)), Param("seed", Patch.SEED, integer(0, 2**31 - 1)),
                 Param("grid", Patch.GRID, choice(VIEWS)), Param("direction", Patch.DIRECTION, choice(DIRECTIONS)),
                 Param("layer", Patch.LAYER, LAYER), Param("head", Patch.HEAD, HEAD)),
    "neurons": (Param("text", Neurons.TEXT, text(), label="Sentence"), Param("section", Neurons.SECTION, choice(SECTIONS)),
                Param("layer", Neurons.LAYER, LAYER), Param("token", Neurons.TOKEN, TOKEN),
                Param("neuron", Neurons.NEURON, integer(0, 999_999)),
                Param("factors", Neurons.FACTORS, integer(1, MAX_FACTORS)),
                Param("corpus", Neurons.CORPUS, choice(list(CORPORA))),
                Param("own", Neurons.OWN, text(), label="Your sentences"),
                Param("answer", Neurons.ANSWER, text(100), label="Answer"), Param("foil", Neurons.FOIL, text(100), label="Foil"),
                Param("method", Neurons.METHOD, choice(list(METHODS))), Param("k", Neurons.K, integer(1, MAX_K))),
}
RESTORED, NOTES = Classroom.RESTORED, Classroom.NOTES


# --- Reading a link ---------------------------------------------------------------------------------
def escaped(value: str) -> str:
    """`value` with each control, invisible or direction-changing character (Unicode's categories C, Zl, Zp and
    its default-ignorable code points, such as the Hangul filler U+3164) written as its escape, as Python writes
    it ("\\x00", "\\u202e", "\\u3164"): what a note quotes is what the link holds."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c)[0] == "C" or inputs.invisible(c) else c for c in value)


def _shown(value: str) -> str:
    """A value as a note quotes it: short, one line, every hidden character visible, and never read as markdown."""
    value = value if len(value) <= 40 else value[:37] + "…"
    return "`" + escaped(value).replace("`", "'") + "`"


def _refused(param: Param, values: list[str]) -> str:
    """The first of `values` that `param` refuses (the note quotes that one)."""
    for value in values:
        try:
            param.read(value)
        except ValueError:
            return value
    return values[0]


def _wanted(param: Param) -> list[str]:
    values = st.query_params.get_all(param.name)
    return values if param.many else values[-1:]


def restore(page: str) -> None:
    """Read the link into session state, once per page and session, before any widget is drawn."""
    done = state.get(RESTORED)
    if page in done:
        return
    state.put(RESTORED, done | {page})
    params = PAGES.get(page, ())
    names = list(st.query_params.keys())
    if not names:
        return
    notes, restored = [], {}
    unknown = [n for n in names if n not in GLOBAL and n not in {p.name for p in params}]
    if len(names) > MAX_PARAMS:
        state.put(NOTES, (page, None, [f"the link has {len(names):,} parameters; it was not read"], {}))
        return
    for param in params:
        values = _wanted(param)
        if not values:
            continue
        if len(values) > MAX_PARAMS:
            notes.append(f"only the first {MAX_PARAMS} of {len(values):,} `{param.name}` values were used")
            values = values[:MAX_PARAMS]
        try:
            value = [param.read(v) for v in values] if param.many else param.read(values[0])
        except ValueError as why:
            notes.append(f"{param.name}={_shown(_refused(param, values))} {why}")
            continue
        state.put(param.key, value)
        restored[param.name] = value
    notes += _restore_model()
    if "b" in restored and "pair" not in restored and any(p.name == "pair" for p in params):
        state.put(next(p.key for p in params if p.name == "pair"), True)  # ?b=... means a pair
    if unknown:
        notes.append(f"this page has no {'setting' if len(unknown) == 1 else 'settings'} called "
                     + ", ".join(map(_shown, unknown[:MAX_NOTED])) + (" …" if len(unknown) > MAX_NOTED else ""))
    state.put(NOTES, (page, None, notes, restored))


def _restore_model() -> list[str]:
    """Open the model the link names, as the sidebar would for this session (a visitor: only the lab's
    folders and cached Hub models). A link never starts a download. Returns the notes."""
    wanted = st.query_params.get("model")
    if wanted is None or wanted == model_value():
        return []
    try:
        target = text(300)(wanted).strip()
    except ValueError as why:
        return [f"model={_shown(wanted)} {why}"]
    if models.is_hub(target) and hub.cached_folder(target) is None:  # read as the folder box reads it
        return [f"model={_shown(wanted)} is a Hub model this lab has not downloaded (open it from the sidebar "
                "once; a link never starts a download)"]
    if models.try_load(target):
        return []
    why = state.get(Model.ERROR) or "it did not load"
    state.forget(Model.ERROR)  # the note says it: the sidebar shows no stale error
    # why repeats the typed text: escaped, and never read as markdown
    return [f"model={_shown(wanted)} could not be opened ({plain(escaped(why.rstrip('.')))})"]


def model_value() -> str | None:
    """How a link names the active model: nothing for the default, a Hub id, or a folder of the lab
    ("checkpoints/x", "runs/x/checkpoint"); another folder by its path (only its owner can open it)."""
    path = state.get(Model.PATH)
    if path == Model.PATH.default:
        return None
    if repo_id := hub.repo_id_of(path):
        return repo_id
    folder = Path(path).resolve()
    for label, root in models.visitor_roots().items():
        if folder.is_relative_to(Path(root).resolve()):
            return f"{label}/{folder.relative_to(Path(root).resolve()).as_posix()}"
    return str(path)


# --- Writing the link ------------------------------------------------------------------------------
def query(page: str, projector: bool = False, model: str | None = None) -> tuple[dict[str, str | list[str]],
                                                                               dict[str, str]]:
    """The URL parameters for the view on screen now, and what they leave out, name -> what the share box says
    ("Sentence A is longer than 1,000 characters"): a link carries only what its own reader takes back (not a
    sentence too long for a link, or typed with invisible characters; the first MAX_PARAMS repeated values)."""
    found: dict[str, str | list[str]] = {"projector": "1"} if projector else {}
    left_out = {}
    if model:
        found["model"] = model
    for param in PAGES.get(page, ()):
        value = param.url_value()
        if value is None:
            continue
        named = param.label or f"`{param.name}`"
        if param.many and len(value) > MAX_PARAMS:  # `restore` would read no more
            left_out[param.name] = f"{named} past the first {MAX_PARAMS} ({len(value):,} chosen)"
            value = value[:MAX_PARAMS]
        try:
            for one in [value] if isinstance(value, str) else value:
                param.read(one)
        except ValueError as why:
            left_out[param.name] = f"{named} {why}, so the link opens with the page's default there"
        else:
            found[param.name] = value
    return found, left_out


def publish(page: str, where, projector: bool = False) -> tuple[dict, dict[str, str]]:
    """Write the view into the URL (only when it changed) and draw this page's link notes into `where`.
    Returns the URL's parameters and what they leave out (see `query`)."""
    wanted, left_out = query(page, projector, model_value())
    current = {name: (st.query_params.get_all(name) if isinstance(wanted.get(name), list) else st.query_params[name])
               for name in st.query_params}
    if current != wanted:
        st.query_params.from_dict(wanted)
    _notes(page, wanted, where)
    return wanted, left_out


def _notes(page: str, wanted: dict, where) -> None:
    """The note about what the link asked for and could not get; gone once the learner changes the view."""
    held = state.get(NOTES)
    if not held or held[0] != page:
        return
    _, about, notes, restored = held
    if about is None:  # the run that read the link: the values the page itself then refused join the note
        for param in PAGES.get(page, ()):
            if param.name in restored and state.get(param.key) != restored[param.name]:
                now = state.get(param.key)
                notes.append(f"{param.name}={_shown(str(restored[param.name]))} is not offered here"
                             + ("" if now is None else f" (showing {_shown(str(now))})"))
        about = wanted
        state.put(NOTES, (page, about, notes, {}))
    if notes and about == wanted:
        where.info("This link asked for something this view cannot show, so the defaults are used instead: "
                   + "; ".join(notes) + ".", icon=":material/link_off:")
