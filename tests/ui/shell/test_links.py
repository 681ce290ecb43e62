"""Links that restore a view (ui/shell/links.py) and projector view (ui/shell/projector.py), through app.py's router:
a view's choices go into the URL, the URL brings them back, and a bad or hostile link gets the defaults
and one note, never a traceback."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab import classroom
from bertviz_lab.ui.shell import classroom as ui_classroom
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell import models
from bertviz_lab.ui.shell import share
from bertviz_lab.views import inputs
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")
PAGE_FILES = {"predict": "pages/predict.py", "attention": "pages/attention.py", "losses": "pages/losses.py",
              "representations": "pages/representations.py", "timelapse": "pages/timelapse.py", "why": "pages/why.py",
              "syntax": "pages/syntax.py", "lesson": "pages/lesson.py", "patching": "pages/patching.py",
              "neurons": "pages/neurons.py"}
NOTE = "This link asked for something this view cannot show"


def open_link(page: str, query: dict, url: str | None = None) -> AppTest:
    """A new session that opens `page` with `query` in its address, as a pasted link does."""
    at = app_test(APP, 90)
    if url:
        at.context["url"] = url
    at.query_params.update(query)
    at.run()  # AppTest's first run is Home's: the session's first URL (?projector= is read from it)
    at.switch_page(PAGE_FILES[page])  # a page reads its own parameters on its first visit
    at.query_params.clear()
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec)["data"] for chart in at.get("plotly_chart")]


def model_path(at: AppTest) -> str:
    return at.session_state["model.path"] if "model.path" in at.session_state else str(models.DEFAULT_CHECKPOINT)


def notes(at: AppTest) -> list[str]:
    return [i.value for i in at.info if NOTE in i.value]


def query_of(at: AppTest) -> dict:
    return dict(at.query_params)


# --- Round trips ------------------------------------------------------------------------------------
def test_an_attention_view_round_trips_through_its_link():
    at = open_link("attention", {})
    # Defaults make no parameters, so a plain link stays short; the query token and its key are chosen by
    # the page for each sentence ("it", and its strongest key), and the link keeps the page's choice.
    assert set(query_of(at)) == {"query", "key"}
    at.text_area(key="attn.text_a").input("the dog went to the bank because it was hungry .").run()
    at.segmented_control(key="attn.layer").set_value(2).run()
    at.segmented_control(key="attn.head").set_value(3).run()
    at.toggle(key="attn.hide").set_value(True).run()
    at.selectbox(key="attn.query").set_value(7).run()
    link = query_of(at)
    assert link["a"] == "the dog went to the bank because it was hungry ."
    assert (link["layer"], link["head"], link["hide"], link["query"]) == ("2", "3", "1", "7")

    again = open_link("attention", link)
    for key, value in {"attn.text_a": link["a"], "attn.layer": 2, "attn.head": 3, "attn.hide": True,
                       "attn.query": 7}.items():
        assert again.session_state[key] == value, key
    assert figures(again) == figures(at)  # the same matrices, softmax bars and vectors
    assert notes(again) == []
    assert query_of(again) == link  # and the restored view writes the same link


def test_a_predict_view_with_clicked_masks_and_a_pair_round_trips():
    at = open_link("predict", {})
    at.text_area(key="predict.text_a").input("the cat sat on the mat .").run()
    at.toggle(key="predict.pair").set_value(True).run()
    at.text_area(key="predict.text_b").input("it was tired .").run()
    at.pills(key="predict.words").set_value(["mat", "tired"]).run()
    at.slider(key="predict.top_k").set_value(8).run()
    link = query_of(at)
    assert link["mask"] == ["mat", "tired"] and link["b"] == "it was tired ." and link["k"] == "8"

    again = open_link("predict", link)
    assert again.session_state["predict.words"] == ["mat", "tired"]
    assert again.session_state["predict.pair"] is True
    assert [d.value.to_dict() for d in again.dataframe] == [d.value.to_dict() for d in at.dataframe]


def test_a_link_with_only_sentence_b_turns_the_pair_on():
    at = open_link("predict", {"a": "the cat sat on the [MASK] .", "b": "it was tired ."})
    assert at.session_state["predict.pair"] is True
    assert at.text_area(key="predict.text_b").value == "it was tired ."


def test_the_losses_stepper_and_its_seed_round_trip():
    at = open_link("losses", {"seed": "7", "step": "3", "rate": "0.3"})
    assert (at.session_state["losses.seed"], at.session_state["losses.step"]) == (7, 3)
    assert at.session_state["losses.rate"] == pytest.approx(0.3)
    assert query_of(at) == {"seed": "7", "step": "3", "rate": "0.3"}


def test_the_share_box_offers_the_link_without_projector_view():
    at = open_link("attention", {"layer": "1", "projector": "1"}, url="http://localhost:8501/attention")
    (code,) = [c.value for c in at.code if c.value.startswith("http")]
    assert code.startswith("http://localhost:8501/attention?layer=1&query=9&key=")
    assert "projector" not in code  # a student's laptop opens in normal view
    assert query_of(at)["projector"] == "1"  # while the teacher's own address keeps it


def test_in_classroom_mode_the_link_names_the_rooms_address(monkeypatch):
    monkeypatch.setenv(classroom.CLASSROOM_ENV, "1")
    monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    at = open_link("attention", {"head": "2"}, url="http://localhost:8501/attention")
    assert share.link("attention", {"head": "2"}) is None  # outside a session there is no address to name
    assert any(c.value.startswith("http://192.168.1.20:8501/attention?head=2&") for c in at.code)


def test_a_sentence_too_long_for_a_link_is_left_out_and_named():
    long = "the cat sat on the mat . " * 60  # 1,500 characters
    at = open_link("attention", {}, url="http://localhost:8501/attention")
    at.text_area(key="attn.text_a").input(long).run()
    assert "a" not in query_of(at)
    assert any(c.value == "Left out of the link: Sentence A is longer than 1,000 characters, so the link opens "
               "with the page's default there." for c in at.caption)  # named by the widget's label


def test_a_typed_sentence_with_hidden_characters_is_left_out_of_the_link_and_named():
    at = open_link("attention", {}, url="http://localhost:8501/attention")
    at.text_area(key="attn.text_a").input("the cat sat on the \u202etam .").run()
    assert "a" not in query_of(at)  # the link never carries what its reader would refuse
    assert any(c.value.endswith(": Sentence A holds invisible or direction-changing characters (U+202E), so the link "
                                "opens with the page's default there.") for c in at.caption)


def test_a_lesson_link_names_its_step_by_id_and_round_trips():
    at = open_link("lesson", {"step": "softmax"})
    assert notes(at) == [] and at.session_state["lesson.step"] == "softmax"
    assert at.subheader[0].value == "4. The softmax steps" and query_of(at) == {"step": "softmax"}
    at.button(key="lesson.next").click().run()
    link = query_of(at)
    assert link == {"step": "guess"}  # the step's id, not its place
    again = open_link("lesson", link)
    assert again.session_state["lesson.step"] == "guess" and again.subheader[0].value == "5. The guess at [MASK]"


@pytest.mark.parametrize(("number", "step", "title"), [("1", "tokens", "1. Tokens"),
                                                       ("9", "training", "11. A short training run")])
def test_a_lesson_link_shared_with_a_step_number_opens_that_step_and_is_written_again_by_id(number, step, title):
    at = open_link("lesson", {"step": number})
    assert notes(at) == [] and at.session_state["lesson.step"] == step and at.subheader[0].value == title
    assert query_of(at) == ({} if step == "tokens" else {"step": step})  # the first step is the default: no parameter


@pytest.mark.parametrize(("value", "said"), [("12", "step=`12` is not a step's number (1 to 11)"),
                                             ("**bogus**", "step=`**bogus**` is not a step of the Lesson (one of "
                                                           "tokens, embeddings, heads")])
def test_a_lesson_link_to_no_step_opens_the_first_with_one_note(value, said):
    at = open_link("lesson", {"step": value})
    (note,) = notes(at)
    assert said in note, note
    assert at.session_state["lesson.step"] == "tokens" and at.subheader[0].value == "1. Tokens"


# --- Bad and hostile links --------------------------------------------------------------------------
HOSTILE = [
    ({"layer": "abc"}, "layer=`abc` is not a whole number"),
    ({"layer": "-1"}, "layer=`-1` is not between 0 and 999"),
    ({"layer": "99999999999999999999"}, "is not a whole number"),
    ({"layer": "1e3"}, "is not a whole number"),
    ({"tau": "nan"}, "tau=`nan` is not a number"),
    ({"tau": "inf"}, "tau=`inf` is not a number"),
    ({"tau": "9"}, "is not between 0.1 and 5"),
    ({"range": "9-2"}, "is not a token range"),
    ({"block": "all'; DROP TABLE"}, "is not one of"),
    ({"off": ["L0 H0", "<script>"]}, "is not a head like L0 H1"),
    ({"a": "x" * 5000}, "is longer than 1,000 characters"),
    ({"a": "the cat\x00 sat"}, "a=`the cat\\x00 sat` holds control characters (U+0000)"),
    ({"layer": "1\x00"}, "layer=`1\\x00` is not a whole number"),  # a refused value's NUL shows as its escape
    ({"a": "the cat sat on the \u202etam ."}, "a=`the cat sat on the \\u202etam .` holds invisible or "
                                             "direction-changing characters (U+202E)"),
    ({"b": "it was \u2067tired\u2069 ."}, "holds invisible or direction-changing characters (U+2067, U+2069)"),
    ({"a": "the c\u200bat sat ."}, "a=`the c\\u200bat sat .` holds invisible or direction-changing characters "
                                  "(U+200B)"),
    ({"a": "the\u00ad cat\ufeff ."}, "(U+00AD, U+FEFF)"),
    ({"a": "the cat\x85 sat"}, "holds control characters (U+0085)"),  # a C1 control
    # "the cat sat" on screen, while the shipped tokenizer reads "the [UNK] on ...": a Hangul filler draws as a space
    ({"a": "the cat\u3164sat on the mat ."}, "a=`the cat\\u3164sat on the mat .` holds invisible or direction-"
                                            "changing characters (U+3164)"),
    ({"a": "the\u115f cat\u1160 sat\uffa0 .", "b": "it\u034f was\ufe00 tired\U000e0100 ."},
     "(U+115F, U+1160, U+FFA0); b=`it\\u034f was\\ufe00 tired\\U000e0100 .` holds invisible"),
    ({"a": "the cat\u2028sat\u2029 .", "b": "a\ufe0f b\U000e01ef ."}, "(U+2028, U+2029); b=`a\\ufe0f b\\U000e01ef .`"),
    ({"\u202ebogus": "1"}, "this page has no setting called `\\u202ebogus`"),
    ({"off": ["L0 H1", "L0 H2", "<script>"]}, "off=`<script>` is not a head like L0 H1"),  # the refused one
    ({"off": ["L0 H1"] * 70}, "only the first 64 of 70 `off` values were used"),
    ({"bogus": "1", "**bold**": "2"}, "this page has no settings called `bogus`, `**bold**`"),
    ({"layer": "7"}, "layer=`7` is not offered here (showing `0`)"),  # a 4-layer model
    ({"query": "500"}, "query=`500` is not offered here"),
    ({"model": "/etc"}, "model=`/etc` could not be opened"),
    ({"model": "someone/not-downloaded-bert"}, "is a Hub model this lab has not downloaded"),
]


@pytest.mark.parametrize("query, said", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_a_bad_link_falls_back_to_the_defaults_with_one_note(query, said):
    at = open_link("attention", query)
    (note,) = notes(at)
    assert said in note, note
    assert not [c for c in note if unicodedata.category(c)[0] == "C" or inputs.invisible(c)], note  # all escaped
    assert at.session_state["attn.layer"] == 0 and at.session_state["attn.head"] == 0
    assert at.subheader[0].value.startswith("Switch heads off") or at.title[0].value == "Attention explorer"
    assert at.get("plotly_chart") != []  # the page still draws with the defaults
    assert model_path(at) == str(models.DEFAULT_CHECKPOINT)


def test_a_sentence_a_link_shows_reversed_is_refused_not_read():
    # "\u202e" draws what follows right to left: the link would show "the cat sat on the mat" while the
    # model reads "tam eht no tas tac eht"; the page keeps its default sentence and says why.
    at = open_link("predict", {"a": "\u202etam eht no tas tac eht"})
    (note,) = notes(at)
    assert "a=`\\u202etam eht no tas tac eht` holds invisible or direction-changing characters (U+202E)" in note
    assert at.text_area(key="predict.text_a").value == at.session_state["predict.text_a"] != "tam eht no tas tac eht"
    assert "a" not in query_of(at)  # the default sentence: the link the page now writes is clean


def test_emoji_joiners_and_right_to_left_scripts_are_writing_not_hidden_characters():
    # a family emoji, a rainbow flag, Arabic and Hebrew, a Persian word with its zero-width non-joiner
    written = ["the cat 👨\u200d👩\u200d👧 sat .", "the flag 🏳\ufe0f\u200d🌈 .", "شالوم שלום עולם .",
               "می\u200cخواهم the cat ."]
    assert [inputs.hidden_characters(t) for t in written] == [[]] * 4
    assert inputs.hidden_characters("a\u200db \u200d\u2066x\u2069\u2066") == ["U+200D", "U+2066", "U+2069"]
    at = open_link("predict", {"a": written[0], "b": written[2]})
    assert notes(at) == []
    assert at.text_area(key="predict.text_a").value == written[0]


# Unicode's default-ignorable code points and the line and paragraph separators, as a reviewer found them
HIDDEN = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u034f", "\ufe00", "\ufe0f", "\U000e0100", "\U000e01ef", "\u2028",
          "\u2029", "\u061c", "\u17b4", "\u180b", "\u2065", "\ufff0", "\U0001bca0", "\U0001d173", "\U000e0fff"]


@pytest.mark.parametrize("hidden", HIDDEN, ids=[f"U+{ord(h):04X}" for h in HIDDEN])
def test_every_default_ignorable_character_is_hidden_and_refused_by_the_reader(hidden):
    code = f"U+{ord(hidden):04X}"
    after_kanji = [] if hidden in "\ufe0e\ufe0f" else [f"the 猫{hidden} sat"]  # there a selector is writing
    for text in (f"the cat{hidden}sat .", f"{hidden}the cat", f"the cat{hidden}", *after_kanji):
        assert inputs.hidden_characters(text) == [code], text
        with pytest.raises(ValueError, match=re.escape(f"invisible or direction-changing characters ({code})")):
            links.text()(text)
    assert links.escaped(f"cat{hidden}sat") == f"cat{ascii(hidden)[1:-1]}sat"


def test_presentation_selectors_and_joiners_count_only_as_part_of_the_writing():
    heart, keycap, flag = "\u2764\ufe0f", "1\ufe0f\u20e3", "\U0001f3f3\ufe0f\u200d\U0001f308"
    family, persian = "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    for text in (f"i {heart} the cat .", f"{keycap} cat", f"the flag {flag} .", f"the {family} sat .", persian,
                 "\u2603\ufe0e snow", "مرحبا بالعالم", "שלום עולם", f"{persian} the {heart}"):
        assert inputs.hidden_characters(text) == [], text
        assert links.text()(text) == text
    assert inputs.hidden_characters("a\ufe0f \u2764\ufe0f\ufe0f \ufe0e") == ["U+FE0F", "U+FE0E"]  # after nothing drawn
    assert inputs.hidden_characters("\u2764\u3164\u200d\u2764 2\ufe0f\u20e3 #\ufe0f") == ["U+3164", "U+200D", "U+FE0F"]


def test_a_link_holds_the_first_64_repeated_values_and_the_share_box_names_the_rest(monkeypatch):
    held = {"attn.off": [f"L{i // 12} H{i % 12}" for i in range(100)]}
    monkeypatch.setattr(links.state, "get", lambda key: held.get(key.name, key.default))
    found, left_out = links.query("attention")
    assert found["off"] == held["attn.off"][:links.MAX_PARAMS]  # what `restore` reads back, and no more
    assert left_out == {"off": "Heads to switch off past the first 64 (100 chosen)"}
    captions = []
    monkeypatch.setattr(share, "link", lambda page, query: "http://localhost:8501/attention?off=L0+H0")
    monkeypatch.setattr(share, "qr_code", lambda url: None)
    where = type("Box", (), {"caption": lambda self, text: captions.append(text),
                             "code": lambda self, *a, **k: None, "image": lambda self, *a, **k: None})()
    share.share_box(where, "attention", found, left_out)
    assert captions[-1] == "Left out of the link: Heads to switch off past the first 64 (100 chosen)."


def test_only_the_first_64_repeated_values_are_read_and_the_note_says_so():
    at = open_link("predict", {"a": "the cat sat on the mat .", "mask": ["mat"] + [f"w{i}" for i in range(69)]})
    (note,) = notes(at)
    assert "only the first 64 of 70 `mask` values were used" in note
    assert at.session_state["predict.words"] == ["mat"]  # the words the sentence has


def test_hundreds_of_parameters_are_not_read_at_all():
    at = open_link("attention", {f"p{i}": "1" for i in range(200)} | {"layer": "2"})
    (note,) = notes(at)
    assert "the link has 201 parameters; it was not read" in note
    assert at.session_state["attn.layer"] == 0


def test_a_note_quotes_values_as_code_and_never_as_markdown():
    at = open_link("attention", {"layer": "`](javascript:alert(1))\n# big"})
    (note,) = notes(at)
    assert "javascript" in note and "\n" not in note and note.count("`") == 2


def test_a_model_error_that_repeats_the_link_is_never_read_as_markdown():
    at = open_link("attention", {"model": "/tmp/**bold** [x](https://evil.example)/# h"})
    (note,) = notes(at)
    why = note.split("could not be opened", 1)[1]  # the load error, which repeats the typed folder
    assert r"\*\*bold\*\*" in why and r"\[x\]\(https" in why and r"\# h" in why
    assert "**" not in why.replace(r"\*", "") and "](" not in why


def test_typed_html_is_shown_as_typed_text():
    at = open_link("attention", {"a": "<img src=x onerror=alert(1)> the cat ."})
    assert notes(at) == []
    assert at.text_area(key="attn.text_a").value == "<img src=x onerror=alert(1)> the cat ."


def test_the_note_goes_once_the_view_changes():
    at = open_link("attention", {"layer": "abc", "head": "1"})
    assert notes(at) and at.session_state["attn.head"] == 1
    at.segmented_control(key="attn.layer").set_value(1).run()
    assert notes(at) == []


def test_a_link_never_reads_a_model_outside_the_lab_for_a_visitor(monkeypatch, tmp_path, tiny_checkpoint):
    monkeypatch.setenv(classroom.CLASSROOM_ENV, "1")
    monkeypatch.setattr(ui_classroom, "client_ip", lambda: "192.168.1.77")
    monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    at = open_link("attention", {"model": str(tiny_checkpoint)})
    (note,) = notes(at)
    assert "could not be opened" in note
    assert model_path(at) == str(models.DEFAULT_CHECKPOINT)


def test_a_link_to_another_lab_model_opens_it_and_names_it_back(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(models, "SHIPPED", tiny_checkpoint.parent)
    at = open_link("attention", {"model": f"checkpoints/{tiny_checkpoint.name}"})
    assert notes(at) == []
    assert at.subheader[0].value != "" and at.session_state["model.path"].endswith(tiny_checkpoint.name)
    assert query_of(at)["model"] == f"checkpoints/{tiny_checkpoint.name}"


@pytest.mark.parametrize("visitor", [False, True])
def test_runs_in_a_link_is_the_runs_root_wherever_it_points(visitor, monkeypatch, runs_elsewhere):
    folder = runs_elsewhere
    if visitor:
        monkeypatch.setenv(classroom.CLASSROOM_ENV, "1")
        monkeypatch.setattr(ui_classroom, "client_ip", lambda: "192.168.1.77")
        monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    at = open_link("attention", {"model": "runs/r1/checkpoint"})
    assert notes(at) == []
    assert Path(at.session_state["model.path"]).resolve() == folder.resolve()
    assert query_of(at)["model"] == "runs/r1/checkpoint"


@pytest.mark.parametrize("page", ["predict", "losses", "representations", "timelapse", "why", "syntax", "lesson",
                                  "neurons"])
def test_every_page_survives_garbage_in_every_one_of_its_parameters(page):
    garbage = {p.name: ("\x07" * 3 if i % 2 else "9" * 40) for i, p in enumerate(links.PAGES[page])}
    at = open_link(page, garbage)
    assert len(notes(at)) == 1


def test_the_reference_lists_every_pages_parameters():
    reference = (Path(APP).parent / "docs" / "reference.md").read_text()
    titles = {"Lesson": "lesson", "Mask & predict": "predict", "Attention": "attention",
              "Losses step by step": "losses", "Representations": "representations", "Time-lapse": "timelapse",
              "Why this guess": "why", "Where is the answer made": "patching", "Syntax across a corpus": "syntax",
              "Inside the feed-forward layer": "neurons"}
    rows = {}
    for line in reference.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] in titles | {"every page": None}:
            rows[cells[0]] = [n.split("`")[0] for n in cells[1].split("`")[1::2]]
    assert rows.pop("every page") == list(links.GLOBAL)
    assert {titles[t]: names for t, names in rows.items()} == {
        page: [p.name for p in params] for page, params in links.PAGES.items()}


# --- Projector view ----------------------------------------------------------------------------------
def test_projector_view_from_the_link_folds_the_sidebar_and_enlarges_text():
    at = open_link("attention", {"projector": "1"})
    assert at.session_state["view.projector"] is True
    assert any("font-size: 22px" in h.proto.body for h in at.get("html"))
    assert query_of(at)["projector"] == "1"
    at.toggle(key="view.projector").set_value(False).run()
    assert not any("font-size" in h.proto.body for h in at.get("html"))
    assert "projector" not in query_of(at)


def test_projector_view_keeps_every_control_working():
    at = open_link("attention", {"projector": "1"})
    at.segmented_control(key="attn.layer").set_value(3).run()
    at.selectbox(key="attn.query").set_value(2).run()
    assert not at.exception
    link = query_of(at)
    assert (link["projector"], link["layer"], link["query"]) == ("1", "3", "2")


def test_a_why_link_opens_the_explanation_it_names():
    """?target=, ?contrast=, ?layer= and ?head= come back as the page's choices, and the page explains that guess."""
    at = open_link("why", {"a": "the cat sat on the [MASK] .", "target": "rug", "contrast": "mat", "layer": "1",
                           "head": "2"})
    assert notes(at) == []
    assert at.session_state["why.target"] == "rug" and at.session_state["why.contrast"] == "mat"
    assert at.session_state["why.layer"] == 1 and at.session_state["why.head"] == 2
    assert any("logit(rug)" in m.value and "logit(mat)" in m.value for m in at.markdown)
    assert query_of(at) == {"target": "rug", "contrast": "mat", "layer": "1", "head": "2"}  # `a`: the default
