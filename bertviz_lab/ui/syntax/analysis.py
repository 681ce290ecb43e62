"""The Syntax page's sources, its one analysis run and its first two tabs (relations by head, search by a head).

The analysis (views/syntax/analysis.py: relations, the structural probe and its control, agreement) takes tens of seconds
to minutes on a laptop's CPU (the button says about how long: `vs.seconds_needed`), so it runs when the button is pressed, once per model and corpus for the whole class
(ui/shell/once.py), with a progress bar every session that waits on it follows; a widget change afterwards reads the
result and runs nothing. Unchecking the control after a run with it reuses that run. The search reads the
sentences' attention alone when no analysis has (a few seconds), and the learner's own sentences that way too. An
uploaded treebank is read the same way, once for the class with a progress bar, off the compute turns.
The probe and agreement tabs are in ui/syntax/probe_and_agreement.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.errors import InputError, LabError
from bertviz_lab.figures import syntax as fsy
from bertviz_lab.head_id import HeadId
from bertviz_lab.syntax.relations import DIRECTIONS
from bertviz_lab.syntax.report import Corpus, SyntaxReport, analyse, story_corpus
from bertviz_lab.syntax.search import NO_RELATION, search_head
from bertviz_lab.syntax.treebank import Treebank, read_treebank
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state import Syntax as K
from bertviz_lab.ui.kit.tables import number, percents, table_height
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.syntax import analysis as vs

SIZES = (100, 300, 600, 1_200)  # the story world's sentences read: fewer run faster, with noisier numbers
SOURCES = {"story": "The story world's sentences (with their trees)", "treebank": "Your treebank (CoNLL-U upload)",
           "own": "Your own sentences (the search only: no trees)"}
OWN = "Your sentences, one a line"  # the box's label: messages about a line name it
CONTROL = "Also train the probe on random weights (the control, doubles the time)"
TOP_PICKS, TOP_SHARES = 50, 12  # the search's table rows, and the labels its bar charts show
ANALYSED = once.Slots("The syntax analysis", keep=6)
READ = once.Slots("Reading the sentences", keep=4)
PARSED = once.Slots("Reading the treebank", keep=4)


@dataclass(frozen=True)
class Source:
    """The sentences the page reads: `key` is what the results depend on besides the model."""
    kind: str  # "story", "treebank" or "own"
    key: tuple
    corpus: Corpus | None  # with gold trees; None for the learner's own sentences
    sentences: tuple[str, ...] = ()  # the learner's own, one a line


@st.cache_resource(max_entries=4, show_spinner=False)
def _story(sentences: int) -> Corpus:
    return story_corpus(sentences)


def _treebank(digest: str, name: str, raw: bytes) -> Treebank | InputError:
    """The upload's trees, or why it has none, read once for the class in a thread of its own (ui/shell/once.py) while
    this script waits with a progress bar, holding no compute turn (ui/shell/turns.py): 20 MiB of 100-word sentences
    take 16-40 s. A refused file is kept as its error, so a widget change does not read it again."""
    def work(news: once.Report) -> Treebank | InputError:
        try:
            return read_treebank(raw, name, progress=lambda fraction, message: news(_news(fraction, message)))
        except InputError as exc:  # kept without its traceback, whose frames hold the file and its lines
            return InputError(str(exc))

    return once.follow(PARSED.slot((digest, name)), work, lambda news: st.progress(*news),
                       first=(0.0, "Reading the treebank…"))


def source_picker() -> Source | None:
    """The source radio and its input: a sample size, an upload or a text box. None (with a message): no sentences."""
    state.init(K.SOURCE, K.SENTENCES, K.OWN, K.CONTROL)
    state.keep_valid(K.SOURCE, list(SOURCES))
    state.keep_valid(K.SENTENCES, list(SIZES))
    state.setdefault(K.SENTENCES, SIZES[-1])
    left, right = st.columns([3, 2])
    kind = left.radio("Sentences", list(SOURCES), key=K.SOURCE.name, format_func=SOURCES.get)
    if kind == "story":
        n = right.select_slider("How many of them", SIZES, key=K.SENTENCES.name, format_func=lambda n: f"{n:,}",
                                help="The story world writes each sentence with its dependency tree. The probe's "
                                     "training time grows with the number of sentences; fewer give noisier numbers.")
        return Source("story", ("story", n), _story(n))
    if kind == "treebank":
        return _upload(right)
    text = st.text_area(OWN, key=K.OWN.name, height=110,
                        help="Words are split on spaces: write “mat .” for the full stop to be a word of its own.")
    try:
        lines = vs.own_sentences(text, OWN)
    except InputError as exc:
        st.warning(plain(str(exc)))
        return None
    return Source("own", ("own", tuple(lines)), None, tuple(lines))


def _upload(where) -> Source | None:
    upload = where.file_uploader("A CoNLL-U file", type=["conllu", "conll", "txt"], key=K.UPLOAD.name,
                                 help="A Universal Dependencies treebank, e.g. en_ewt-ud-dev.conllu: one word a line, "
                                      "10 columns separated by tabs, a blank line after each sentence.")
    if upload is None:
        st.info("Upload a CoNLL-U treebank to read its sentences and their trees.", icon=":material/upload_file:")
        return None
    raw = upload.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    bank = _treebank(digest, upload.name, raw)
    if isinstance(bank, InputError):
        st.error(plain(str(bank)))
        return None
    st.caption(plain(bank.summary))
    if bank.skipped or bank.notes:
        with st.expander(plain(f"What was left out of {bank.name}")):
            st.markdown("\n".join(f"- {plain(line)}" for line in [*bank.notes, *bank.skipped]))
    return Source("treebank", ("treebank", digest), Corpus(bank.trees, bank.name, "; ".join(bank.notes)))


# --- The analysis ----------------------------------------------------------------------------------------
def _news(fraction: float, message: str) -> tuple[float, str]:
    return fraction, f"{message[:1].upper()}{message[1:]} · {fraction:.0%}"


def analysed(ckpt: Checkpoint, source: Source | None) -> SyntaxReport | None:
    """The control checkbox and the Run button, then the analysis of `source` by this model (None until run)."""
    if source is None or source.corpus is None:
        return None
    key = (model_key(ckpt), source.key)
    full = ANALYSED.slot((*key, True))
    control = st.checkbox(CONTROL, key=K.CONTROL.name,
                          help="Hewitt & Manning's control: the same probe trained on a model of the same shape "
                               "whose weights were never trained. What it finds, a probe finds without any learning.")
    slot = full if full.ready() or full.running() else ANALYSED.slot((*key, control))
    with_control = control or slot is full
    ask = st.empty()  # the button and what it costs; gone once the analysis is there
    if not (slot.ready() or slot.running()):
        box, config, n = ask.container(), ckpt.config, len(source.corpus.trees)
        seconds = vs.seconds_needed(config.num_hidden_layers, config.hidden_size, n) * (2 if with_control else 1)
        box.caption(f"Reads {n:,} sentences, scores every head on every relation, trains the structural probe at "
                    f"every layer{' and its control' if with_control else ''} and scores the agreement pairs: "
                    f"{vs.duration(seconds)} on one core (the probes train on one thread), longer on a busy machine.")
        if not box.button("Run the analysis", key=K.RUN.name, type="primary", icon=":material/play_arrow:"):
            return None

    def work(report: once.Report) -> SyntaxReport:
        return analyse(ckpt.model, ckpt.tokenizer, source.corpus, control=with_control,
                       progress=lambda fraction, message: report(_news(fraction, message)))

    try:
        result = once.follow(slot, work, lambda news: st.progress(*news), first=(0.0, "Starting…"))
    except LabError as exc:
        st.error(plain(str(exc)))
        return None
    ask.empty()
    corpus = result.corpus
    st.caption(plain(f"Read {len(corpus.trees):,} sentences of {corpus.name} in {sum(result.seconds.values()):.0f} s"
                     + (f"; {corpus.note}" if corpus.note else "") + ("" if result.control is not None else "; no control run")
                     + "."))
    return result


def needs(source: Source | None, report: SyntaxReport | None) -> bool:
    """Whether a tab that reads the analysis can draw; if not, says why."""
    if source is not None and source.corpus is None:
        st.info("This tab needs gold trees, and your own sentences have none: pick the story world or a treebank "
                "above (the search tab reads your sentences).", icon=":material/account_tree:")
    elif source is not None and report is None:
        st.info("Press **Run the analysis** above: this tab shows its numbers.", icon=":material/play_arrow:")
    return source is not None and report is not None


# --- Relations by head ----------------------------------------------------------------------------------
DEPENDENT, GOLD, PICK = "violet", "blue", "orange"  # the marks of an example's words
RELATION_WIDTH = 96  # pixels: "compound" and "acl:relcl" whole at 1366 px (the automatic width cut them)
LABELS = {column: st.column_config.Column(label, help=help, width=RELATION_WIDTH if column == "relation" else None)
          for column, label, help in (  # short enough for a laptop
    ("dependents", "count", "How many words have this relation to their head"),
    ("best head, dependent → head", "best (d → h)", "The head whose most-attended word is most often the gold head"),
    ("accuracy, dependent → head", "accuracy (d → h)", None),
    ("best head, head → dependent", "best (h → d)", "The head in which the gold head most often attends most to "
                                                    "the dependent"),
    ("accuracy, head → dependent", "accuracy (h → d)", None),
    ("baseline: always the", "baseline", "The fixed offset that is right most often for this relation"),
    ("baseline accuracy", "baseline accuracy", None),
    ("relation", "relation", "The dependency relation (Universal Dependencies); a subtype such as obl:tmod has a row "
                             "of its own when it has enough dependents"),
    ("a head beats the baseline", "a head beats it", "Whether the better of the two best heads is above the "
                                                     f"baseline; “{vs.TOO_FEW}” under {vs.MIN_COUNT} dependents, "
                                                     "where the best of all heads scores high by luck alone"))}


def _mark(word: str, color: str) -> str:
    return f":{color}-background[:{color}[**{word}**]]"


def marked(example: vs.Marked) -> str:
    """The sentence as Markdown: the dependent in violet, its gold head in blue, the head's pick in orange (when it
    is not the gold head), each bold on a background of its colour."""
    words = []
    for i, word in enumerate(example.words):
        word = plain(word)
        if i == example.dependent:
            words.append(_mark(word, DEPENDENT))
        elif i == example.head:
            words.append(_mark(word, GOLD) + (" ✓" if example.right else ""))
        elif i == example.predicted:
            words.append(_mark(word, PICK) + " ✗")
        else:
            words.append(word)
    return " ".join(words)


def relations_tab(ckpt: Checkpoint, source: Source | None, report: SyntaxReport | None) -> None:
    st.markdown("Clark et al. (2019) read each attention head as a parser: for every word, the head's pick is taken "
                "as the word's head in the dependency tree, and its accuracy is counted per relation.\n\n"
                + "\n".join(f"- **{plain(d.split(': ')[0])}**: {plain(d.split(': ', 1)[1])}"
                            for d in vs.DEFINITIONS)
                + "\n- **baseline**: always pointing at the word a fixed offset away (for each relation, the "
                  "offset its dependents' heads lie at most often in this corpus).")
    if not needs(source, report):
        return
    rel = report.relations
    table = record_table(vs.relation_table(report), "syntax_relations")
    accuracy = [c for c in table.columns if "accuracy" in c]
    st.dataframe(percents(table, *accuracy), hide_index=True, height=table_height(table), column_config=LABELS)
    st.caption(plain(vs.merged_note(report) or f"A subtype (obl:tmod, acl:relcl) with {vs.MIN_COUNT} dependents or "
                     "more is a row of its own; these sentences have no rarer one."))
    state.keep_valid(K.RELATION, rel.relations)
    state.setdefault(K.RELATION, vs.default_relation(rel.relations))
    state.keep_valid(K.DIRECTION, list(range(len(DIRECTIONS))))
    state.init(K.DIRECTION)
    left, right = st.columns([2, 3])
    relation = left.selectbox("Relation", rel.relations, key=K.RELATION.name,
                              format_func=lambda r: f"{r} ({int(rel.counts[rel.index(r)]):,} dependents)")
    direction = right.segmented_control("Direction", list(range(len(DIRECTIONS))), key=K.DIRECTION.name,
                                        required=True, format_func=DIRECTIONS.__getitem__)
    chart(fsy.accuracy_heatmap(rel.accuracy[rel.index(relation), direction],
                                vs.heatmap_title(report, relation, direction)), "syntax_heads")
    st.markdown(plain(vs.relation_sentence(report, relation, direction)))
    hits, misses = vs.examples(report, relation, direction)
    (layer, head), _ = rel.best(relation, direction)
    for where, heading, found in zip(st.columns(2), ("right", "wrong"), (hits, misses)):
        where.markdown(f"**Where {HeadId(layer, head)} is {heading}**")
        where.markdown("\n".join(f"- {marked(m)}" for m in found) or "None in this corpus.")
    pick = "the word the dependent attends to most" if direction == 0 else "the word that attends most to it"
    st.caption(f"{_mark('dependent', DEPENDENT)} · {_mark('its head in the gold tree', GOLD)} · "
               f"{_mark('the head’s pick, when it is wrong', PICK)} ({pick}).")


# --- Search by a head -------------------------------------------------------------------------------------
def _readings(ckpt: Checkpoint, source: Source, report: SyntaxReport | None) -> tuple[list, list | None]:
    """(word attention per sentence, their trees or None): the analysis's, else read now, once for the class."""
    if report is not None:
        return report.readings, report.corpus.trees

    def work(news: once.Report):
        return vs.readings(ckpt.model, ckpt.tokenizer, source.corpus or list(source.sentences),
                           progress=lambda fraction, message: news(_news(fraction, message)))

    return once.follow(READ.slot((model_key(ckpt), source.key)), work, lambda news: st.progress(*news),
                       first=(0.0, "Reading the sentences…"))


def head_pickers(ckpt: Checkpoint) -> tuple[int, int]:
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    state.keep_valid(K.LAYER, list(range(L)))
    state.keep_valid(K.HEAD, list(range(H)))
    state.init(K.LAYER, K.HEAD)
    left, right = st.columns([2, 3])
    layer = left.segmented_control("Layer", list(range(L)), key=K.LAYER.name, required=True, wrap=True)
    head = right.segmented_control("Head", list(range(H)), key=K.HEAD.name, required=True, wrap=True)
    return layer, head


def search_tab(ckpt: Checkpoint, source: Source | None, report: SyntaxReport | None) -> None:
    st.markdown("exBERT's corpus view: for every word of every sentence, the word one head attends to most (itself "
                "left out). The table lists the head's strongest picks; the charts count all of them.")
    if source is None:
        return
    layer, head = head_pickers(ckpt)
    try:
        read, trees = _readings(ckpt, source, report)
        search = search_head(read, trees, layer, head, top=TOP_PICKS)
    except LabError as exc:
        st.error(plain(str(exc)))
        return
    st.markdown(plain(vs.search_sentence(search, len(read))))
    table = record_table(vs.search_table(search), "syntax_search")
    st.dataframe(table, hide_index=True, height=table_height(table), column_config={"weight": number("%.3f")})
    st.caption("[ ] marks the query word, « » the word it attends to most; weight: the word attention from one to "
               "the other (a word's tokens pooled as Clark et al. do).")
    if not search.relations:
        return
    name = HeadId(layer, head)
    linked = tuple(s for s in search.relations if s.label != NO_RELATION)  # "no relation": said above
    for where, shares, what, filename in zip(st.columns(2), (linked, search.kinds),
                                             ("relation (share of all its picks)", "kinds of words (query → key)"),
                                             ("syntax_search_relations", "syntax_search_kinds")):
        top = shares[:TOP_SHARES]
        chart(fsy.share_bars([s.label for s in top], np.array([s.share for s in top]),
                              np.array([s.base for s in top]), f"{name}'s picks by {what}"), filename, where)
