"""The Syntax-across-a-corpus page in AppTest on a tiny model and 40 story-world sentences: the button runs the
analysis once, and each tab shows the numbers the syntax package gives for the same corpus (`analyse`, run here
on its own; `search_head`, `predict`), a widget change runs nothing again, a bad CoNLL-U upload is a message, a
good one is analysed, the learner's own sentences are searched without trees, and a model without a masked-LM
head says agreement needs one."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus.agreement import EXAMPLE
from bertviz_lab.syntax.encode import read_corpus
from bertviz_lab.syntax.probe import predict
from bertviz_lab.syntax.report import analyse, story_corpus
from bertviz_lab.syntax.search import search_head
from bertviz_lab.ui.syntax import analysis as ui_syntax
from bertviz_lab.views.syntax import analysis as vs
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import app_test, open_page, vocab_of_size
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

PAGE = str(ROOT / "pages" / "syntax.py")
SENTENCES = 40
RELATIONS, SEARCH, PROBE, AGREEMENT = "Relations by head", "Search by a head", "Structural probe", "Agreement"


@pytest.fixture(scope="module", autouse=True)
def small():
    """The story world's sample cut to 40 sentences (or 30), and every cached analysis forgotten."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ui_syntax, "SIZES", (30, SENTENCES))
        ui_syntax.ANALYSED.clear()
        ui_syntax.READ.clear()
        yield
        ui_syntax.ANALYSED.clear()
        ui_syntax.READ.clear()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    words = vocab_of_size(100)[:-3] + ["were", "is", "are"]  # "was" is one already: agreement has its forms
    torch.manual_seed(0)
    return save_checkpoint(BertForPreTraining(config).eval(), WordPieceTokenizer.from_vocab(words),
                           tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def expected(tiny):
    """The syntax package's own answer for the same model and corpus, computed here, apart from the page."""
    ckpt = load_checkpoint(tiny)
    return analyse(ckpt.model, ckpt.tokenizer, story_corpus(SENTENCES), control=True)


def page(folder: Path, **session) -> AppTest:
    """The page on the model in `folder`; `session`: keys, "." written "__"."""
    return open_page(PAGE, folder, 300, **session)


def run_analysis(at: AppTest) -> AppTest:
    assert at.button(key="syntax.run").label == "Run the analysis"
    at.button(key="syntax.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_tab(at: AppTest, tab: str) -> AppTest:
    at.session_state["syntax.tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def titled(at: AppTest, start: str) -> dict:
    return next(f for f in figures(at) if f["layout"].get("title", {}).get("text", "").startswith(start))


def said(at: AppTest) -> str:
    return " ".join(shown(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.error, *at.warning])


def table_with(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture(scope="module")
def ran(tiny) -> AppTest:
    """The page after one press of the button, the control on (its default)."""
    at = page(tiny)
    assert not at.dataframe and not at.get("plotly_chart")  # nothing is computed before the button
    assert at.checkbox(key="syntax.control").value is True
    estimate = vs.duration(2 * vs.seconds_needed(2, 32, SENTENCES))  # the control doubles it, said in one figure
    assert f"Reads {SENTENCES} sentences" in said(at) and "at every layer and its control" in said(at)
    assert f"{estimate} on one core (the probes train on one thread), longer on a busy machine." in said(at)
    return run_analysis(at)


def test_the_time_estimate_scales_the_measured_base_with_the_sentences_and_the_probes_work():
    assert vs.seconds_needed(4, 256, 1_200) == pytest.approx(13.0)  # the shipped model's shape, as measured
    assert vs.seconds_needed(4, 256, 300) == pytest.approx(13.0 / 4)
    assert vs.seconds_needed(12, 768, 1_200) == pytest.approx(13.0 * 13 / 5 * 3)  # bert-base: 13 states, 3x as wide
    assert [vs.duration(s) for s in (0.1, 38.0, 89.0, 152.0, 1_000.0)] == [
        "about 5 s", "about 40 s", "about 90 s", "about 3 min", "about 17 min"]


def test_the_relations_tab_is_the_reports_numbers(ran, expected):
    at = open_tab(ran, RELATIONS)
    rel = expected.relations
    table = table_with(at, "best head, dependent → head")
    assert table["relation"].tolist() == rel.relations
    assert table["dependents"].tolist() == rel.counts.tolist()
    for name, row in zip(rel.relations, table.to_dict("records")):
        for d, direction in enumerate(("dependent → head", "head → dependent")):
            (layer, head), accuracy = rel.best(name, d)
            assert row[f"best head, {direction}"] == f"L{layer} H{head}"
            assert row[f"accuracy, {direction}"] == pytest.approx(accuracy, abs=1e-12)
        offset, baseline = rel.baseline[name]
        assert row["baseline: always the"] == f"word {abs(offset)} to the {'right' if offset > 0 else 'left'}"
        assert row["baseline accuracy"] == pytest.approx(baseline, abs=1e-12)
        beats = max(rel.best(name, 0)[1], rel.best(name, 1)[1]) > baseline
        assert row["a head beats the baseline"] == ("too few to tell" if row["dependents"] < vs.MIN_COUNT else
                                                    "yes" if beats else "no")
    few = [name for name, count in zip(rel.relations, rel.counts) if count < vs.MIN_COUNT]
    assert few and len(few) < len(rel.relations)  # 40 sentences: some relations have a handful of dependents
    assert at.selectbox(key="syntax.relation").value == "nsubj"  # the default where the corpus has subjects
    for relation, direction in (("nsubj", 0), ("det", 1)):
        at.selectbox(key="syntax.relation").set_value(relation).run()
        at.segmented_control(key="syntax.direction").set_value(direction).run()
        heatmap = titled(at, f"{relation}, {('dependent → head', 'head → dependent')[direction]}")["data"][0]
        k = rel.index(relation)
        np.testing.assert_allclose(array(heatmap["z"]), rel.accuracy[k, direction], atol=1e-12)
        (layer, head), accuracy = rel.best(relation, direction)
        offset, baseline = rel.baseline[relation]
        text = said(at)
        assert (f"On these {SENTENCES} sentences, " in text and f"in head L{layer} H{head} is its head "
                f"{accuracy:.0%} of the time ({rel.counts[k]:,} dependents)" in text)
        assert f"always pointing at the word {abs(offset)} to the " in text and f"right {baseline:.0%} of the" in text
        hit = rel.hits[relation, direction][0]
        words = expected.corpus.trees[hit.sentence].words
        assert f":violet[**{words[hit.dependent]}**]" in text  # the first hit, its dependent marked
        assert f"Where L{layer} H{head} is right" in text
        assert "too few to tell" not in text
    at.selectbox(key="syntax.relation").set_value(few[0]).run()
    n, text = int(rel.counts[rel.index(few[0])]), said(at)
    assert f"({n:,} dependent" in text and "too few to tell a head from chance" in text
    assert f"only {n:,} dependent" in text and "above the offset" not in text and "No head beats" not in text


def test_the_search_tab_lists_the_heads_strongest_picks_and_its_shares(ran, expected):
    at = open_tab(ran, SEARCH)
    at.segmented_control(key="syntax.layer").set_value(1).run()
    at.segmented_control(key="syntax.head").set_value(2).run()
    found = search_head(expected.readings, expected.corpus.trees, 1, 2, top=ui_syntax.TOP_PICKS)
    table = table_with(at, "attends most to")
    np.testing.assert_allclose(table["weight"], [p.weight for p in found.picks], atol=1e-7)
    assert table["relation"].tolist() == [p.relation for p in found.picks]
    first = found.picks[0]
    assert table["query word"][0] == first.words[first.query] and f"[{first.words[first.query]}]" in table["sentence"][0]
    assert table["kinds"][0] == f"{first.query_kind} → {first.key_kind}"
    bars = titled(at, "L1 H2's picks by relation")["data"]
    top = [s for s in found.relations if s.label != "no relation"][:ui_syntax.TOP_SHARES]
    np.testing.assert_allclose(array(bars[0]["x"]), [s.share for s in top], atol=1e-12)
    np.testing.assert_allclose(array(bars[1]["x"]), [s.base for s in top], atol=1e-12)
    assert bars[0]["y"] == [s.label for s in top]
    assert f"head L1 H2 makes {found.total:,} picks" in said(at)


def test_the_search_reads_the_sentences_itself_before_any_analysis(tiny):
    at = open_tab(page(tiny, syntax__sentences=30), SEARCH)
    assert at.button(key="syntax.run")  # no analysis of these 30 sentences has run
    ckpt, trees = load_checkpoint(tiny), story_corpus(30).trees
    found = search_head(read_corpus(ckpt.model, ckpt.tokenizer, trees), trees, 0, 0, top=ui_syntax.TOP_PICKS)
    table = table_with(at, "attends most to")
    np.testing.assert_allclose(table["weight"], [p.weight for p in found.picks], atol=1e-6)
    assert table["relation"].tolist() == [p.relation for p in found.picks]


def test_the_probe_tab_draws_every_layers_scores_and_one_sentences_trees(ran, expected, tiny):
    at = open_tab(ran, PROBE)
    curves = {t["name"]: array(t["y"]) for t in titled(at, "The structural probe")["data"]}
    np.testing.assert_allclose(curves["UUAS"], [s.uuas for s in expected.probe.layers], atol=1e-12)
    np.testing.assert_allclose(curves["distance Spearman (DSpr)"], [s.spearman for s in expected.probe.layers],
                               atol=1e-12)
    np.testing.assert_allclose(curves["root accuracy"], [s.root_accuracy for s in expected.probe.layers], atol=1e-12)
    np.testing.assert_allclose(curves["UUAS, random weights (control)"], [s.uuas for s in expected.control.layers],
                               atol=1e-12)
    np.testing.assert_allclose(curves["UUAS of LINEAR (each word to the next)"], expected.probe.linear_uuas)
    layer, uuas = expected.best_uuas()
    assert at.segmented_control(key="syntax.probe_layer").value == layer  # opens on the best layer
    held = list(range(expected.corpus.split, SENTENCES))
    assert at.selectbox(key="syntax.sentence").options[0].startswith(f"{held[0] + 1}: ")
    ckpt = load_checkpoint(tiny)
    for index, at_layer in ((held[0], layer), (held[3], 2)):
        at.selectbox(key="syntax.sentence").set_value(index).run()
        at.segmented_control(key="syntax.probe_layer").set_value(at_layer).run()
        tree = expected.corpus.trees[index]
        vectors = read_corpus(ckpt.model, ckpt.tokenizer, [tree], vectors=True)[0].vectors[at_layer]
        right = len(predict(expected.probe, at_layer, vectors, tree).edges & tree.edges(skip_punct=True))
        figure = titled(at, f"Layer {'0 (embeddings)' if at_layer == 0 else at_layer}: ")
        assert f"{right} of {len(tree.edges(skip_punct=True))} gold edges found" in figure["layout"]["title"]["text"]
        words = next(t for t in figure["data"] if t.get("name") == "words")["text"]
        assert words == list(tree.words)
    text = said(at)
    assert f"UUAS {uuas:.0%}" in text or f"finds {uuas:.0%}" in text
    named = layer not in expected.probe.unfitted() and uuas > expected.probe.linear_uuas
    assert ("the most of any layer" in text) == named  # a finding only from a probe that fitted and beats LINEAR
    assert ("did not fit" in text) == bool(expected.probe.unfitted() or expected.control.unfitted())


def test_the_agreement_tab_shows_the_example_the_bars_and_the_pairs(ran, expected):
    agreement = expected.agreement
    at = open_tab(ran, AGREEMENT)
    bars = titled(at, "Right form scored higher")["data"][0]
    counts = agreement.counts()
    np.testing.assert_allclose(array(bars["y"]), [r / n for r, n in counts.values()], atol=1e-12)
    assert bars["text"] == [f"{r} of {n}" for r, n in counts.values()]
    example = next(s for s in agreement.scores if s.text == EXAMPLE)
    assert f"p(were) = {example.p_right:.3f} and p(was) = {example.p_wrong:.3f}" in said(at)
    assert [(m.label, m.value) for m in at.metric] == [("p(were) (right)", f"{example.p_right:.3f}"),
                                                       ("p(was)", f"{example.p_wrong:.3f}")]
    assert ("pairs were left out" in said(at)) == (agreement.skipped > 0)  # said only when some were
    at.segmented_control(key="syntax.attractors").set_value(2).run()
    table = table_with(at, "p(right)")
    twos = [s for s in agreement.scores if s.attractors == 2]
    assert set(table["attractors"]) == {2} and len(table) == len(twos)
    np.testing.assert_allclose(table["p(right)"], [s.p_right for s in twos], atol=1e-7)


def test_a_widget_change_runs_nothing_and_the_control_run_serves_a_run_without_it(ran, monkeypatch):
    calls = []
    monkeypatch.setattr(ui_syntax, "analyse", lambda *a, **k: calls.append(k))  # any new analysis would call it
    for tab in (RELATIONS, SEARCH, PROBE, AGREEMENT):
        open_tab(ran, tab)
    open_tab(ran, RELATIONS).selectbox(key="syntax.relation").set_value("det").run()
    ran.checkbox(key="syntax.control").uncheck().run()  # the run with the control has every number without it
    assert not ran.exception and not ran.button and ran.dataframe and calls == []
    ran.select_slider(key="syntax.sentences").set_value(30).run()  # another corpus waits for the button again
    assert ran.button(key="syntax.run").label == "Run the analysis" and not ran.dataframe and calls == []
    ran.select_slider(key="syntax.sentences").set_value(SENTENCES).run()
    ran.checkbox(key="syntax.control").check().run()


def test_a_bad_conllu_upload_says_why_and_a_good_one_is_analysed(tiny, expected):
    at = page(tiny, syntax__source="treebank")
    at.file_uploader(key="syntax.upload").set_value(("trees.conllu", b"hello world\nthis is not a treebank\n",
                                                     "text/plain")).run()
    assert not at.exception and "not a CoNLL-U file: line 1" in shown(at.error[0].value) and not at.button
    good = "".join(t.to_conllu() for t in story_corpus(SENTENCES).trees).encode()
    at.file_uploader(key="syntax.upload").set_value(("story.conllu", good, "text/plain")).run()
    assert not at.exception and not at.error and f"{SENTENCES} sentences" in said(at)
    at.checkbox(key="syntax.control").uncheck().run()
    run_analysis(at)
    table = table_with(at, "dependents")
    assert table["dependents"].tolist() == expected.relations.counts.tolist()
    np.testing.assert_allclose(table["accuracy, dependent → head"],
                               [expected.relations.best(r, 0)[1] for r in expected.relations.relations])


def test_your_own_sentences_are_searched_without_trees(tiny):
    text = "the cat sat on the mat .\nthe dog went to the bank .\n\nit was tired ."
    at = page(tiny, syntax__source="own", syntax__own=text)
    assert not at.button  # nothing to analyse: no trees
    assert "your own sentences have none" in said(at)
    at = open_tab(at, SEARCH)
    ckpt = load_checkpoint(tiny)
    lines = [line for line in text.splitlines() if line.strip()]
    found = search_head(read_corpus(ckpt.model, ckpt.tokenizer, lines), None, 0, 0, top=ui_syntax.TOP_PICKS)
    table = table_with(at, "attends most to")
    np.testing.assert_allclose(table["weight"], [p.weight for p in found.picks], atol=1e-7)
    assert set(table["relation"]) == {""} and set(table["kinds"]) == {""}
    assert not at.get("plotly_chart") and "have no trees" in said(at)
    at.text_area(key="syntax.own").input("   \n").run()
    assert not at.exception and "type at least one sentence" in said(at)


def test_a_model_without_a_masked_lm_head_says_agreement_needs_one(headless_checkpoint):
    at = run_analysis(page(headless_checkpoint, syntax__control=False))
    assert table_with(at, "dependents")["relation"][0] == "all"  # the other tabs stand
    at = open_tab(at, AGREEMENT)
    assert shown(at.info[0].value).startswith("Agreement is read from the masked-word guesses (p(right form) against "
                                              "p(wrong form) at the masked verb), and this model has no masked-language"
                                              "-model head: it was saved without the layer that turns hidden states "
                                              "into word guesses.")
    assert not at.get("plotly_chart")



def test_a_link_restores_the_tab_and_the_choices_and_the_view_writes_them_back(tiny):
    """Through app.py's router: the link's values reach the widgets' keys, and the page writes them back."""
    from bertviz_lab.ui.shell import links

    query = {"tab": AGREEMENT, "sentences": "30", "relation": "det", "direction": "1", "layer": "1", "head": "2",
             "attractors": "2"}
    at = app_test(Path(PAGE).parents[1] / "app.py", 300)
    at.session_state["model.path"] = str(tiny)
    at.run()
    at.switch_page("pages/syntax.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    expected = {"syntax.tab": AGREEMENT, "syntax.sentences": 30, "syntax.relation": "det", "syntax.direction": 1,
                "syntax.layer": 1, "syntax.head": 2, "syntax.attractors": 2}
    assert {key: at.session_state[key] for key in expected} == expected
    assert {name: at.query_params[name] for name in query} == {**query, "tab": AGREEMENT}
    assert [p.name for p in links.PAGES["syntax"]] == ["source", "sentences", "own", "tab", "relation", "direction",
                                                      "layer", "head", "probe_layer", "sentence", "attractors",
                                                      "probe_task", "remove", "remove_at"]


# --- Issue 52: progress from the first second, the upload off the compute turn, uploaded text shown as written ----
def test_the_analysis_draws_its_stage_and_how_far_before_it_finishes(tiny, monkeypatch):
    """Timing-free: the analysis (the real one) waits after its first report of the sentences read until the page
    has drawn that report, so the bar is seen while it runs, whatever the model's size."""
    import threading

    drawn, bars, real = threading.Event(), [], ui_syntax.analyse
    progress = ui_syntax.st.progress

    def bar(value, text=None):
        bars.append(text)
        if text and text.startswith("Reading the sentences: 0 of 30"):
            drawn.set()
        return progress(value, text)

    def analyse(*args, progress, **options):
        def hold(fraction, message):
            progress(fraction, message)
            if message == "reading the sentences: 0 of 30":  # before the first batch
                assert drawn.wait(30), bars  # the page drew this very report before the work went on
        return real(*args, progress=hold, **options)

    monkeypatch.setattr(ui_syntax.st, "progress", bar)
    monkeypatch.setattr(ui_syntax, "analyse", analyse)
    at = run_analysis(page(tiny, syntax__sentences=30, syntax__control=False))
    assert drawn.is_set(), bars
    assert table_with(at, "dependents")["dependents"][0] > 0  # and the analysis went on to its end


def _uploaded(trees, relation: str) -> bytes:
    """The trees in CoNLL-U with every det renamed `relation`, and one sentence that is not a tree."""
    text = "".join(t.to_conllu() for t in trees).replace("\tdet\t", f"\t{relation}\t")
    return (text + "1\ttwo\t_\tX\t_\t_\t0\troot\t_\t_\n2\troots\t_\tX\t_\t_\t0\troot\t_\t_\n\n").encode()


def test_an_uploaded_relation_name_and_file_name_are_shown_as_written(tiny):
    """A DEPREL of <b>bold</b> is no bold title or hover; the file's name is no Markdown in the expander."""
    bold = "<b>bold</b>"
    at = page(tiny, syntax__source="treebank", syntax__control=False)
    at.file_uploader(key="syntax.upload").set_value(("[x](https://evil.example) <img src=x>.conllu",
                                                     _uploaded(story_corpus(SENTENCES).trees, bold),
                                                     "text/plain")).run()
    label = at.expander[0].label
    assert shown(label).replace("\u2060", "") == "What was left out of [x](https://evil.example) <img src=x>.conllu"
    assert not re.search(r"(?<!\\)[\[\]()<>]", label)  # every bracket escaped: drawn as written, no link
    run_analysis(at)
    at.selectbox(key="syntax.relation").set_value(bold).run()
    title = titled(at, "&lt;b&gt;bold&lt;/b&gt;, dependent → head")["layout"]["title"]["text"]
    assert bold not in title and "<" not in title
    assert f"{bold} dependent" in said(at) and not any(bold in m.value for m in at.markdown)


def test_every_syntax_chart_draws_its_title_as_written():
    """Plotly draws a subset of HTML in titles: a relation's name from a treebank is escaped, never bold."""
    from bertviz_lab.figures import syntax as fsy

    title = "<b>bold</b> & <a href='https://evil.example'>x</a>"
    built = [fsy.accuracy_heatmap(np.zeros((2, 2)), title), fsy.share_bars(["<i>a</i>"], np.ones(1), np.ones(1), title),
             fsy.tree_arcs(["a", "b"], [(0, 1)], [(0, 1)], title), fsy.probe_curves({"UUAS": np.ones(2)}, 0.5, title),
             fsy.agreement_bars([0], np.ones(1), [1], [1], title)]
    for figure in built:
        assert figure.layout.title.text == "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href='https://evil.example'&gt;x&lt;/a&gt;"
    assert list(built[1].data[0].y) == ["&lt;i&gt;a&lt;/i&gt;"]  # a label, in the axis and the hover


def test_a_treebank_is_read_off_the_compute_turn_with_a_progress_bar(tiny, monkeypatch):
    """Issue 52: a 20 MiB treebank took 40 s in the script thread, holding one of the two compute turns. Through
    app.py (which takes the turn), the reading runs while no script holds one, and its progress is drawn."""
    import threading

    from bertviz_lab.ui.shell import turns

    real, held, drawn, bars = ui_syntax.read_treebank, [], threading.Event(), []
    progress = ui_syntax.st.progress

    def bar(value, text=None):
        bars.append(text)
        if (text or "").startswith("Reading the treebank: line"):
            drawn.set()
        return progress(value, text)

    def read(raw, name=None, progress=None):
        if progress is None:  # read with no bar to draw: whether the script holds a turn meanwhile
            held.append(turns._computing[0])

        def hold(fraction, message):
            progress(fraction, message)
            assert drawn.wait(30), bars  # the page drew how far the reading is: the script waits on it ...
            held.append(turns._computing[0])  # ... holding no turn (app.py's), as no other script run does
        return real(raw, name, **({} if progress is None else {"progress": hold}))

    monkeypatch.setattr(ui_syntax.st, "progress", bar)
    monkeypatch.setattr(ui_syntax, "read_treebank", read)
    at = app_test(Path(PAGE).parents[1] / "app.py", 300)
    at.session_state["model.path"] = str(tiny)
    at.session_state["syntax.source"] = "treebank"
    at.run()
    at.switch_page("pages/syntax.py").run()
    raw = "".join(t.to_conllu() for t in story_corpus(300).trees).encode()  # past one report (every 250)
    at.file_uploader(key="syntax.upload").set_value(("turn.conllu", raw, "text/plain")).run()
    assert not at.exception and "300 sentences" in said(at)
    assert held == [0]  # one report (at sentence 250), drawn while no script run held a turn


def test_a_line_of_invisible_characters_names_the_box_the_page_has(tiny):
    at = open_tab(page(tiny, syntax__source="own", syntax__own="the cat sat .\n\n\u200b"), SEARCH)
    text = said(at)
    assert "line 3 of “Your sentences, one a line” holds only characters that are not drawn (U+200B)" in text
    assert "Text A" not in text and not at.dataframe
