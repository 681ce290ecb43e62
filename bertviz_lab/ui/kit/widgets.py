"""Widget groups shared by pages: sentence inputs, encoding with visible notes, typed text shown as typed, a layer
or head picker that fits any model, and every chart with its Export menu (PNG, SVG, CSV) and its place in the
handout."""

from __future__ import annotations

from functools import partial

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.bert.tokenizer_json import WORD_START  # tokenizer.kind -> its word-start mark
from bertviz_lab.errors import ExportError, InputError
from bertviz_lab.figures import export
from bertviz_lab.figures.attention import export_config
from bertviz_lab.ui.shell import handout
from bertviz_lab.ui.shell import projector
from bertviz_lab.ui.kit import yours
from bertviz_lab.ui.shell.router import end_page
from bertviz_lab.ui.shell.state import Sentences
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views import inputs

MAX_CHARS = 100_000  # enough for 5,000+ words; the tokenizer truncates to what the model reads


def index_picker(where, label: str, count: int, key: str, default: int = 0) -> int:
    """Pick one of 0..count-1 (a layer, a head) in `where`, every choice in view: in a column a segmented control
    stays on one row and cuts off what does not fit (BERT-base's head 11 at 1366 px), so its buttons wrap."""
    remembered = key in st.session_state  # a widget given both a default and a session value warns
    return where.segmented_control(label, list(range(count)), required=True, key=key, wrap=True,
                                   **({} if remembered else {"default": default}))


def say(kind: str, message: str, where=st, *, lead: str = "", **kwargs) -> None:
    """Draw `message` as plain text (`plain`) in `where`'s `kind` of element: "error", "warning", "info", "success",
    "caption", "markdown" or "toast". The one way a message that quotes what a user typed, a link carried or a file
    held (a LabError's sentence, most often) reaches the page. `lead`: the lab's own Markdown before it (a bold
    label); `kwargs`: the element's (icon=...)."""
    getattr(where, kind)(lead + plain(message), **kwargs)


def say_field(explained: str, where=st) -> None:
    """An error box for a form's refused value, as views' `explain` writes it ("**Steps**: steps must be ..."): the
    lab's bold field label, then the reason as plain text (it may quote what was typed)."""
    label, found, reason = explained.partition("**: ")
    if explained.startswith("**") and found:
        say("error", reason, where, lead=label + found)
    else:
        say("error", explained, where)


def segments_help(segments: int) -> str:
    """How a model with this many segment vectors (config.type_vocab_size) tells sentence B from sentence A: a
    segment vector each, or only the separator tokens."""
    if segments > 1:
        return "Sentence A's tokens get segment 0 and sentence B's segment 1: the model adds each segment's vector."
    if segments == 1:
        return ("This model has one segment vector, added to both sentences alike: it tells B from A only by the "
                "separator tokens between them.")
    return "This model has no segment embeddings: it tells B from A only by the separator tokens between them."


def sentence_inputs(keys: Sentences, config: BertConfig | None = None) -> tuple[str, str | None]:
    """Sentence A and, when the pair toggle is on, sentence B (None when empty), opening on the sentence the
    learner typed last on another page (ui/kit/yours.py). `config`: the active model's, so the toggle's help says
    whether it has segment embeddings."""
    yours.adopt(keys)  # the sentence the learner typed on another page, if newer than this page's
    publish = partial(yours.publish, keys)
    text_a = st.text_area("Sentence A", value=keys.text_a.default, key=keys.text_a.name, height=80,
                          max_chars=MAX_CHARS, on_change=publish)
    pair = st.toggle("Add a second sentence", value=keys.pair.default, key=keys.pair.name, on_change=publish,
                     help=None if config is None else segments_help(config.type_vocab_size))
    text_b = None
    if pair:
        text_b = st.text_area("Sentence B", value=keys.text_b.default, key=keys.text_b.name, height=68,
                              max_chars=MAX_CHARS, on_change=publish)
    return text_a, (text_b if text_b and text_b.strip() else None)


def encode_or_stop(ckpt: Checkpoint, text_a: str, text_b: str | None) -> Encoding:
    """Tokenize for the active model; bad text stops the page with a message, truncation is noted."""
    try:
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text_a, text_b)
    except InputError as exc:
        say("warning", str(exc))
        end_page()
    hidden = list(dict.fromkeys([*inputs.hidden_characters(text_a), *inputs.hidden_characters(text_b or "")]))
    if hidden:
        st.info(f"Your text holds invisible or direction-changing characters ({', '.join(hidden[:6])}"
                f"{', …' if len(hidden) > 6 else ''}): the box may show its words in another order or hide some, "
                "and the model reads them as they are stored, not as they look. The tokens on this page are what "
                "the model reads.", icon=":material/visibility_off:")
    if encoding.truncated:
        st.info(f"The text is {len(encoding) + encoding.truncated:,} tokens long; this model reads at most "
                f"{ckpt.config.max_tokens}, so the last {encoding.truncated:,} tokens were dropped.")
    return encoding


def chart(fig, filename: str, where=st, key: str | None = None, theme: str | None = None,
          frame: bool = False, keep_ticks: bool = False) -> None:
    """A figure at its own colours (theme="streamlit": Streamlit's), whose camera button saves `filename`.png,
    with an Export menu under it and a place in the handout (ui/shell/handout.py). `key`: the chart's element key,
    needed where a page draws two charts of one `filename`. `frame`: one frame of a chart that grows while a
    job runs, drawn only (the finished chart is the one to export and to hand out). `keep_ticks`: projector view
    leaves the figure's tick labels at their size (labels sized to fit small squares)."""
    where.plotly_chart(projector.enlarge(fig, ticks=not keep_ticks), theme=theme, key=key, config=export_config(filename))
    if frame:
        return
    with where.container():  # exports and the handout keep the figure's own size
        _export_menu(fig, filename, f"export.{key or filename}")
    handout.record_chart(fig, filename, key or filename)


@st.fragment
def _export_menu(fig, filename: str, key: str) -> None:
    """A small "Export" popover under a chart: PNG and SVG (drawn by a browser: figures/export.py) and the CSV of
    its numbers, each made when clicked. Its buttons exist only while it is open, and opening it reruns only
    its own fragment, so a page redraw pays for one closed popover a chart."""
    row = st.container(horizontal=True, horizontal_alignment="right")
    menu = row.popover("Export", icon=":material/download:", type="tertiary", key=key, on_change="rerun",
                       help="This chart as an image (PNG, SVG) or its numbers (CSV)")
    if not menu.open:
        return
    try:
        export.check()
        for fmt, what in (("png", "PNG image"), ("svg", "SVG image (prints at any size)")):
            menu.download_button(what, partial(export.image, fig, fmt), file_name=f"{filename}.{fmt}",
                                 mime=export.FORMATS[fmt], key=f"{key}.{fmt}", on_click="ignore",
                                 icon=":material/image:", width="stretch")
    except ExportError as exc:
        say("caption", str(exc), menu)
    menu.download_button("Its numbers (CSV)", partial(export.numbers_csv, fig),
                         file_name=f"{filename}.csv", mime="text/csv", key=f"{key}.csv", on_click="ignore",
                         icon=":material/table:", width="stretch")


def family_note(ckpt: Checkpoint, what: str | None = None) -> None:
    """For a model that is not a BERT: its family, how it differs, how its tokens read, and `what` this page
    should add (by default, what the family lacks here, and why). For any model whose tokenizer leaves rows of
    word embeddings unread, a warning first (bert/checkpoint.py's vocab_warning: numbers only, no user text)."""
    if ckpt.vocab_warning:
        st.warning(ckpt.vocab_warning, icon=":material/warning:")
    family, tokenizer = ckpt.family, ckpt.tokenizer
    if family.name == "bert":
        return
    marker = {"byte-level BPE": f" ({WORD_START['byte-level BPE']} marks a token that starts a word: it stands for "
                                "the space before it)",
              "SentencePiece Unigram": f" ({WORD_START['SentencePiece Unigram']} marks a token that starts a word)"
              }.get(tokenizer.kind, "")
    mask = tokenizer.mask_token
    typed = f" A typed [MASK] is read as its mask token, `{mask}`." if mask != "[MASK]" else ""
    st.info(f"**{family.title}**: {family.summary}. Its tokens are {tokenizer.kind}{marker}.{typed} "
            f"{family.lacks if what is None else what}{'.' if (family.lacks if what is None else what) else ''}",
            icon=":material/family_history:")
