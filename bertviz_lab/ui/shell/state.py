"""Every session-state key of the app, with its default and its one validity check, grouped by page (those of
"Where is the answer made?" in state_patching.py beside it, which this file had no room for).

A key is prefixed by its page ("attn.layer"); widgets take `key=K.NAME.name`. A remembered choice can
stop being valid when the sentence or the model changes (a 4-layer model's layer 3 on a 2-layer
model): the page calls `keep_valid(KEY, options)` before drawing the widget, and the key's check
decides what survives. Keys without a check hold whatever their widget allows.

Chart and table `key=` arguments are element ids, not session state, so they are not listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from bertviz_lab.files import SHIPPED
from bertviz_lab.ui.shell.state_checks import FORGET, nearest, one_of, some_of, span
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views import forms
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.worked import onehot
from bertviz_lab.views.pretrain import probe
from bertviz_lab.views.pretrain import live as vp
from bertviz_lab.views.worked import forward_pass as worked



@dataclass(frozen=True)
class Key:
    """One session-state key: its name, its default, and the check `keep_valid` applies (None: no check)."""
    name: str
    default: Any = None  # what `get` returns before anything is stored (widgets take it as value=)
    check: Callable[[Any, list], Any] | None = None


@dataclass(frozen=True)
class Sentences:
    """The keys of one page's sentence inputs (`ui.kit.widgets.sentence_inputs`), and the serial number of the
    learner's sentence (`Yours.SENTENCE`) the page last showed (None: not drawn yet in this session)."""
    text_a: Key
    pair: Key
    text_b: Key
    seen: Key

    @classmethod
    def of(cls, page: str, text_a: str, text_b: str = "") -> Sentences:
        return cls(Key(f"{page}.text_a", text_a), Key(f"{page}.pair", bool(text_b)), Key(f"{page}.text_b", text_b),
                   Key(f"{page}.seen"))


# --- Helpers: the only way pages and ui/ touch session state --------------------------------------
def get(key: Key):
    return st.session_state.get(key.name, key.default)


def put(key: Key, value) -> None:
    st.session_state[key.name] = value


def forget(key: Key) -> None:
    st.session_state.pop(key.name, None)


def held(key: Key) -> bool:
    """Whether the session holds a value (Streamlit drops a widget's value after a run that does not draw it)."""
    return key.name in st.session_state


def init(*keys: Key) -> None:
    """Store each key's default unless the session already holds a value (keys that callbacks change)."""
    for key in keys:
        st.session_state.setdefault(key.name, key.default)


def setdefault(key: Key, value) -> None:
    """Store `value` unless the session already holds one (a default known only at run time)."""
    st.session_state.setdefault(key.name, value)


def reset(*keys: Key) -> None:
    for key in keys:
        st.session_state[key.name] = key.default


def keep(*keys: Key) -> None:
    """Store the keys' values again, on every run of the page: Streamlit drops a widget's value after a run
    that does not draw it (a closed tab), and the learner's edits must outlive a look at another tab.
    Such widgets take no `value=`/`index=`/`default=`: their defaults are stored first (`init`, `setdefault`)."""
    for key in keys:
        if key.name in st.session_state:
            st.session_state[key.name] = st.session_state[key.name]


def keep_valid(key: Key, options: Iterable) -> None:
    """Bring a remembered value in line with the options the page offers now. Call it before the widget."""
    if key.check is None:
        raise TypeError(f"session key {key.name!r} has no validity check")
    if key.name not in st.session_state:
        return
    value = st.session_state[key.name]
    kept = key.check(value, list(options))
    if kept is FORGET:
        del st.session_state[key.name]
    elif kept != value:
        st.session_state[key.name] = kept


# --- The keys, page by page --------------------------------------------------------------------
class Classroom:
    """Projector view, links that restore a view and the handout (ui/shell/projector.py, ui/shell/links.py, ui/shell/handout.py),
    which app.py runs around every page."""
    PROJECTOR = Key("view.projector", False)  # the switch; also ?projector=1
    PROJECTOR_READ = Key("view.projector_read")  # the session has read ?projector= from its first URL
    RESTORED = Key("links.restored", frozenset())  # the pages whose link this session has read
    # (page, the query the notes are about (None until the page's first publish), the notes, what its link set)
    NOTES = Key("links.notes")
    HANDOUT = Key("handout.views")  # page script hash -> handout.View, the most recently closed last
    QR_FULL = Key("share.qr_full")  # "Show the QR code full screen" (ui/shell/share.py)
    QR_SHOW = Key("share.qr_show", False)  # that button was clicked: this run opens the full-screen code
    SHARE_OPEN = Key("share.open")  # the projector toolbar's Share popover is open (closed for the full screen)


class Yours:  # the sentence the learner typed last on a page with sentence inputs (ui/kit/yours.py)
    SENTENCE = Key("yours.sentence")  # ui.kit.yours.Typed, or None before the learner types


class Model:
    """The sidebar (ui/shell/models.py), drawn once by app.py."""
    PATH = Key("model.path", str(SHIPPED / "bertviz-mini"))  # the folder of the active model
    DEVICE = Key("model.device", "auto")
    # The picker's label; None for a folder typed by hand. No check: the selectbox itself drops a label
    # it no longer offers (a deleted run's model).
    CHOICE = Key("model.choice")
    CUSTOM, LOAD = Key("model.custom", ""), Key("model.load")
    ERROR = Key("model.error")  # why the last folder did not load
    DOWNLOAD = Key("model.download")  # a Hub id the owner opened that the sidebar downloads on its next run


class Predict:
    SENTENCES = Sentences.of("predict", "the cat sat on the [MASK] .")
    WORDS = Key("predict.words")  # the clicked words to mask
    TOP_K, TEMPERATURE = Key("predict.top_k", 5), Key("predict.temperature", 1.0)
    CAUSAL = Key("predict.causal", False)
    INSPECT = Key("predict.inspect")  # with many masks, the one drawn in full


class Attention:
    SENTENCES = Sentences.of("attn", "the animal did not cross the street because it was too tired .")
    LAYER, HEAD = Key("attn.layer", 0, one_of), Key("attn.head", 0, one_of)
    TAB = Key("attn.tab", None, one_of)  # the open tab (its label), kept over reruns; None: the first
    MEAN, HIDE = Key("attn.mean", False), Key("attn.hide", False)
    RANGE = Key("attn.range", None, span)  # (first, last) tokens shown of a long input; None: the first 64
    BLOCK = Key("attn.block", "all", one_of)  # queries -> keys block of a sentence pair
    GRID = Key("attn.grid", False)  # the all-heads expander is open
    CSV = Key("attn.csv")
    OFF = Key("attn.off", (), some_of)  # heads switched off, e.g. ["L0 H1"]
    QUERY = Key("attn.query", None, one_of)  # None: the page's default query
    TOKENS = Key("attn.tokens")  # the tokens QUERY and KEY were picked among: a new sentence re-checks them
    TAU = Key("attn.tau", 1.0)
    KEY = Key("attn.key", None, one_of)  # None: the query's strongest key


class Why:
    """Why this guess? (pages/why.py, ui/why/sections.py): the sentence, what the page's Ask (views/why/ask.py) is
    built from, the attention strip's layer and head, the causal check's button and the example picked."""
    SENTENCES = Sentences.of("why", "the cat sat on the [MASK] .")
    MASK, TOKEN = Key("why.mask", 0, one_of), Key("why.token", None, one_of)  # which [MASK]; the discriminator's token
    TARGET, CONTRAST = Key("why.target", ""), Key("why.contrast", "")  # "": the top guess; no contrast
    LAYER, HEAD = Key("why.layer", None, one_of), Key("why.head", "mean", one_of)  # the attention strip's
    RUN, EXAMPLE = Key("why.run"), Key("why.example")  # "Run the causal check" on a big model; the example picked


class Syntax:
    """Syntax across a corpus (pages/syntax.py, ui/syntax/analysis.py): the sentences read, the run, and each tab's choices."""
    SOURCE = Key("syntax.source", "story", one_of)  # "story", "treebank" (an upload) or "own" (the search only)
    SENTENCES = Key("syntax.sentences", 1_200, one_of)  # how many of the story world's sentences
    UPLOAD = Key("syntax.upload")
    OWN = Key("syntax.own", "the cat sat on the mat .\nthe children in the park were happy .\n"
                            "the animal did not cross the street because it was too tired .")
    CONTROL, RUN = Key("syntax.control", True), Key("syntax.run")  # the random-weights control; the Run button
    TAB = Key("syntax.tab", None, one_of)  # the open tab (its label); None: the first
    RELATION = Key("syntax.relation", None, one_of)  # None: nsubj where the corpus has it, else "all"
    DIRECTION = Key("syntax.direction", 0, one_of)  # 0: dependent → head, 1: head → dependent
    LAYER, HEAD = Key("syntax.layer", 0, one_of), Key("syntax.head", 0, one_of)  # the head searched
    PROBE_LAYER = Key("syntax.probe_layer", None, one_of)  # the tree drawn; None: the layer with the best UUAS
    SENTENCE = Key("syntax.sentence", None, one_of)  # a held-out sentence (its index in the corpus); None: the first
    ATTRACTORS = Key("syntax.attractors", "all", one_of)  # the pairs listed: "all" or 0..3
    INPUTS = (SOURCE, SENTENCES, OWN, CONTROL, RELATION, DIRECTION, LAYER, HEAD, PROBE_LAYER, SENTENCE, ATTRACTORS)


class Losses:
    SENTENCES = Sentences.of("losses", "the cat sat on the mat .", "it was a warm afternoon .")
    SEED = Key("losses.seed", 0)
    REROLL = Key("losses.reroll")
    RATE = Key("losses.rate", 0.15)
    SHARES = (Key("losses.mask", 0.8), Key("losses.random", 0.1), Key("losses.keep", 0.1))  # 80 / 10 / 10
    RANDOM_TOKENS = Key("losses.random_tokens", "vocabulary")  # where random tokens come from (as BERT)
    ALL = Key("losses.all", False)  # every step at once instead of the stepper
    STEP = Key("losses.step", 1, nearest)
    BACK, NEXT = Key("losses.back"), Key("losses.next")
    OPTIMIZER = Key("losses.optimizer")
    LR = Key("losses.lr", 1e-4)
    TRAIN = Key("losses.train")
    RESULT = Key("losses.result")  # (what it was computed for, the before/after losses)
    DRAWS = Key("losses.draws", 2_000)


class Worked:
    ATTN_TOKENS = Key("worked.attn.tokens", " ".join(worked.SEED000_TOKENS))
    ATTN_SCORES = Key("worked.attn.scores", " ".join(f"{x:g}" for x in worked.SEED000_SCORES))
    ATTN_KIND = Key("worked.attn.kind", worked.SCORES_SCALED)  # the scores are already ÷ √d_head, or plain q·k
    ATTN_D_HEAD = Key("worked.attn.d_head", 64)  # BERT-base: 768 / 12
    ATTN_RESET = Key("worked.attn.reset")
    MLM_WORDS = Key("worked.mlm.words", " ".join(worked.SEED000_WORDS))
    MLM_LOGITS = Key("worked.mlm.logits", " ".join(f"{x:g}" for x in worked.SEED000_LOGITS))
    MLM_TRUE = Key("worked.mlm.true", worked.SEED000_TRUE, one_of)
    MLM_RESET = Key("worked.mlm.reset")
    ONEHOT_QUERY = Key("worked.onehot.query", onehot.SEED001_QUERY)
    ONEHOT_VERSION = Key("worked.onehot.version", 0)  # bumped by Reset: a fresh, unedited matrix
    ONEHOT_MATRIX = Key("worked.onehot.matrix")  # the editor's key is this name + "." + the version
    ONEHOT_RESET = Key("worked.onehot.reset")
    INPUTS = (ATTN_TOKENS, ATTN_SCORES, ATTN_KIND, ATTN_D_HEAD, MLM_WORDS, MLM_LOGITS, MLM_TRUE, ONEHOT_QUERY, ONEHOT_VERSION)


class RunKeys:
    """The keys of a run page's picker, live panel and buttons (ui/kit/runs.py), named by page: "pretrain.run", ..."""
    def __init__(self, page: str):
        def key(name: str, default=None, check=None) -> Key:
            return Key(f"{page}.{name}", default, check)
        self.run, self.selected = key("run", None, one_of), key("selected")  # the run shown; kept while not drawn
        self.watching = key("watching", False)  # the live panel refreshes itself
        self.stop, self.use, self.resume = key("stop"), key("use"), key("resume")
        self.delete = key("delete")  # asks first: the run named in `confirm` gets Delete / Cancel buttons
        self.confirm = key("confirm_delete")  # the name of the run whose deletion awaits confirmation
        self.delete_yes, self.delete_no = key("delete_yes"), key("delete_no")
        self.notice = key("notice")  # a Stop/Resume/Delete refusal, shown once on the next run of the page
        self.compare = key("compare", (), some_of)  # runs overlaid on shared axes


class FormKeys:
    """The keys of a new-run form (views/forms.py, drawn by ui/kit/forms.py): one per field, "<page>.<field>" at its
    default (a choice's check keeps it among the options offered now); the page's other inputs kept with them;
    and `saved`, their values (key name -> value) restored after a visit to another page."""
    def __init__(self, page: str, form: forms.Form, *others: Key):
        self.form, self.others, self.saved = form, others, Key(f"{page}.saved", {})
        self.fields = {f.name: Key(f"{page}.{f.name}", f.default, one_of if f.kind in forms.CHOICES else None)
                       for f in form.fields}

    def __getitem__(self, name: str) -> Key:
        return self.fields[name]


class Pretrain:
    CORPUS_KIND = Key("pretrain.corpus_kind", "builtin")
    UPLOAD, PASTE = Key("pretrain.upload"), Key("pretrain.paste", "")
    FORM = FormKeys("pretrain", vp.FORM, CORPUS_KIND, PASTE)  # the new-run form and where its text comes from
    START = Key("pretrain.start")
    RUNS = RunKeys("pretrain")
    PROBE = Key("pretrain.probe", probe.DEFAULT_SENTENCE)
    LAYER, HEAD = Key("pretrain.layer", 0, one_of), Key("pretrain.head", 0, one_of)  # the probe's heatmap


class Finetune:
    TASK = Key("finetune.task", "coherence")  # a built-in task, or CSV (the learner's file)
    UPLOAD = Key("finetune.upload")
    FORM = FormKeys("finetune", vf.FORM, TASK)  # start (a vf.Start's label), weights, mode, numbers
    GO = Key("finetune.go")
    RUNS = RunKeys("finetune")
    TAB = Key("finetune.tab", None, one_of)  # the open tab of the chosen run's results; None: the first
    TEXT, TEXT_B = Key("finetune.text"), Key("finetune.text_b")  # "Try it": None until set from a dev example
    TRY_RUN = Key("finetune.try_run")  # the run whose example filled TEXT
    DEMO = Key("finetune.demo")  # the "Class demo settings" button


class TimeLapse:
    SOURCE = Key("lapse.source", None, one_of)  # the history shown: a shipped model's name, or "run NAME"
    OPEN = Key("lapse.open")  # the Pretrain page's button that opens this page on its run
    PROBE = Key("lapse.probe", None, one_of)  # one of the probe sentences
    VIEW = Key("lapse.view", "All heads")  # or "One head"
    LAYER, HEAD = Key("lapse.layer", 0, one_of), Key("lapse.head", 0, one_of)
    ROLE = Key("lapse.role", "previous", one_of)  # the role whose scores are drawn over the steps
    STEP = Key("lapse.step")  # the frame shown (a step); the player moves it while PLAYING
    PLAYING, PLAY = Key("lapse.playing", False), Key("lapse.play")
    FROM, TO = Key("lapse.from", None, one_of), Key("lapse.to", None, one_of)  # the two steps compared
    OWN = Key("lapse.own", "")  # a sentence typed on this page: a probe run on the history's kept checkpoints


class Representations:
    TAB = Key("repr.tab", None, one_of)  # the open tab (its label); None: the first
    SET = Key("repr.set", "bank", one_of)  # a built-in sense set, or OWN
    WORD = Key("repr.word", "bank")
    SENTENCES = Key("repr.sentences")  # the editable "sense | sentence" lines; None: the set's own
    LAYER = Key("repr.layer", None, nearest)  # None: the last layer
    NN_TEXT = Key("repr.nn_text", "i went to the bank to deposit money .")
    NN_TOKEN = Key("repr.nn_token", None, one_of)  # a token position; None: the first sense-set word, or 1
    NN_LAYER = Key("repr.nn_layer", None, nearest)
    NN_K, PRECISION_K = Key("repr.nn_k", 8), Key("repr.precision_k", 3)
    LENS_TEXT = Key("repr.lens_text", "i went to the [MASK] to deposit money .")
    LENS_K, LENS_MASK = Key("repr.lens_k", 5), Key("repr.lens_mask", 0, one_of)
    GEO_WORD = Key("repr.geo_word", "bank")
    GEO_POSITIONS = Key("repr.geo_positions", 64, nearest)  # a smaller model reads fewer positions
    INPUTS = (SET, WORD, SENTENCES, LAYER, NN_TEXT, NN_TOKEN, NN_LAYER, NN_K, PRECISION_K, LENS_TEXT, LENS_K,
              LENS_MASK, GEO_WORD, GEO_POSITIONS)  # what `keep` holds while another tab is open


class Shapes:
    """The Representations page's "Shapes and padding" tab (ui/representations/shapes.py)."""
    SOURCE = Key("shapes.source", "text")  # "text": your sentences; "seed002": the BERT tutorial's ids (seed text 002)
    TEXT = Key("shapes.text", "the cat sat on the mat .\ni went to the bank to deposit money yesterday .\nit rained .")
    MODEL = Key("shapes.model", "random")  # "random": a random BERT of the sizes below; "active": the active model
    HIDDEN = Key("shapes.hidden", 32)  # seed text 002's config: hidden_size=32, 2 layers, 4 heads, intermediate 64
    LAYERS, HEADS = Key("shapes.layers", 2), Key("shapes.heads", 4)
    INTERMEDIATE = Key("shapes.intermediate", 64)
    ROW = Key("shapes.row", 0, one_of)  # the sentence whose attention is drawn
    LAYER, HEAD = Key("shapes.layer", 0, one_of), Key("shapes.head", 0, one_of)  # fewer after the sizes shrink
    INPUTS = (SOURCE, TEXT, MODEL, HIDDEN, LAYERS, HEADS, INTERMEDIATE, ROW, LAYER, HEAD)


class Lesson:
    """The guided lesson (pages/lesson.py): its step, its sentences, the class's guesses, the revealed answers."""
    STEP = Key("lesson.step", vls.STEPS[0].id, one_of)  # the step shown, by id (views/lesson/steps.py), never place
    BACK, NEXT, RESTART = Key("lesson.back"), Key("lesson.next"), Key("lesson.restart")
    MASKED = Key("lesson.masked", "the cat sat on the [MASK] .")  # tokens, embeddings, the guess, the loss
    TRUE_WORD = Key("lesson.true_word", "mat")  # the word hidden under the first [MASK]
    WORD = Key("lesson.word", None, one_of)  # the embeddings step's word; None: the sentence's longest
    ATTENTION = Key("lesson.attention", "the animal did not cross the street because it was too tired .")
    HEAD = Key("lesson.head", None, one_of)  # "L2 H1" of the softmax step; None: the model's pronoun head
    HEAD_FOR = Key("lesson.head_for")  # the model whose pronoun head HEAD started from
    NSP_A, NSP_B = Key("lesson.nsp_a", "the cat sat on the mat ."), Key("lesson.nsp_b", "it was a warm afternoon .")
    TASK = Key("lesson.task", "acceptability", one_of)  # the fine-tuning step's built-in task
    SENSE_WORD = Key("lesson.sense_word", "bank")
    # The contextual step's sentences: "bank" stands at position 7 in sentences 1 and 2 (one vector at layer 0, in
    # two senses) and at 6 in sentence 3, so the layer-0 cosines differ by construction, not by a tie.
    SENSE_A = Key("lesson.sense_a", "a fisherman was fishing on the bank .")
    SENSE_B = Key("lesson.sense_b", "he put his money in the bank .")
    SENSE_C = Key("lesson.sense_c", "the ducks sat on the bank of the river .")  # sentence 1's sense again
    GUESSES = {step.id: Key(f"lesson.guess.{step.id}") for step in vls.STEPS}  # step id -> the class's guess
    REVEAL = Key("lesson.reveal")  # each step's Reveal button is this name + "." + the step's id
    # step id -> views/lesson/questions.py's Answered; replaced whole, never changed in place
    ANSWERS = Key("lesson.answers", {})
    TRAINING = Key("lesson.training")  # the short training run: (seed, train records, held-out records)
    RETRAIN = Key("lesson.retrain")
    INPUTS = (MASKED, TRUE_WORD, WORD, ATTENTION, HEAD, NSP_A, NSP_B, TASK, SENSE_WORD, SENSE_A, SENSE_B, SENSE_C,
              *GUESSES.values())
