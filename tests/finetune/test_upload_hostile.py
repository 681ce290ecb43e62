"""Hostile fine-tune CSVs: each odd file is refused with its own sentence (a huge cell, UTF-16, a late NUL
byte, a repeated column) or read as meant (blank lines before the header); every CSV the lab writes makes a
formula-like text cell inert, in every kind of text column, keeps numbers (and plain numbers typed as text) as
they are, and the upload's success line shows labels as typed."""

import csv
import io
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab import files
from bertviz_lab.errors import InputError
from bertviz_lab.figures import export
from bertviz_lab.figures import finetune as ff
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.figures import handout as fh
from bertviz_lab.ui.shell.text import plain
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "finetune.py")
HOSTILE = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3", "\tX", "\rX"]


def good(n: int = 12, header: str = "text,label") -> str:
    return header + "\n" + "".join(f"the {i} cat sat on the mat .,{'ok' if i % 2 else 'no'}\n" for i in range(n))


def refused(raw: bytes, name: str = "class.csv") -> str:
    with pytest.raises(InputError) as caught:
        ft_data.parse_csv(raw, name)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# --- Upload messages --------------------------------------------------------------------------------------
def test_a_huge_cell_names_its_row_column_and_the_limit():
    rows = good().splitlines()
    rows[3] = "x" * 19_000_000 + ",ok"
    message = refused("\n".join(rows).encode())
    assert message == (f"row 4: the text cell has 19,000,000 characters and a cell may hold at most "
                       f"{ft_data.MAX_CELL_CHARS:,}; shorten it or split it over several rows")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_utf16_file_is_named_as_such_with_or_without_its_bom(encoding):
    message = refused(good().encode(encoding))
    wide = "UTF-32" if encoding == "utf-32" else "UTF-16"
    assert message.startswith(f"class.csv is {wide} text") and "save it as UTF-8 CSV" in message


def test_blank_lines_before_the_header_are_skipped_and_rows_keep_their_line_numbers():
    task = ft_data.parse_csv(("\n \n,,\n" + good()).encode())
    assert set(task.labels) == {"ok", "no"} and len(task.train) + len(task.dev) + len(task.test) == 12
    broken = "\n\n" + good().replace(".,ok\n", ".,\n", 1)  # the first 'ok' row is file line 5
    assert refused(broken.encode()) == "row 5: the label column is empty"
    assert refused(b"\n\n,,\n , \n").startswith("class.csv holds only empty cells; upload a CSV file")


def test_a_nul_byte_after_the_first_8_kb_is_refused():
    text = good(400)
    at = len(text.encode()) - 10
    assert at > 8192
    raw = text.encode()[:at] + b"\x00" + text.encode()[at:]
    message = refused(raw)
    line = raw[:at].count(b"\n") + 1
    assert message.startswith(f"class.csv is not a text file: it holds binary data (a NUL byte at byte {at:,}, "
                              f"on line {line:,}); save it as UTF-8 CSV")


@pytest.mark.parametrize("header, twice, where", [("text,label,Label", "label", "columns 2 and 3"),
                                                  ("text, TEXT ,label", "text", "columns 1 and 2"),
                                                  ("text,label,note,note", "note", "columns 3 and 4")])
def test_a_repeated_column_name_is_refused_by_name(header, twice, where):
    message = refused(good(header=header).replace(",ok\n", ",ok,a,b\n").encode())
    assert message == f"class.csv has two columns named {twice!r} ({where}); rename or remove one of them"


def test_empty_header_cells_may_repeat():
    task = ft_data.parse_csv(good(header="text,label,,").replace(",ok\n", ",ok,,\n").encode())
    assert set(task.labels) == {"ok", "no"}


# --- CSVs out ---------------------------------------------------------------------------------------------
def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def live_formulas(text: str) -> list[str]:
    """Every cell of a CSV text that a spreadsheet would run: text starting with = + - @ tab or CR."""
    return [c for row in csv.reader(io.StringIO(text, newline="")) for c in row
            if c.startswith(files.FORMULA_STARTS) and not is_number(c)]


def hostile_task():
    """A fine-tune CSV whose labels and sentences start like formulas (tab and CR ones are stripped on reading)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["text", "label", "split"])
    for i in range(24):
        writer.writerow([f"{HOSTILE[i % 6]} sentence {i}", HOSTILE[i % 6], "dev" if i >= 18 else "train"])
    return ft_data.parse_csv(out.getvalue().encode(), "hostile.csv")


def hostile_figures(task) -> list:
    labels = list(task.labels)
    texts = [e.text for e in task.dev]
    rng = np.random.default_rng(0)
    points = rng.normal(size=(2, len(texts), 2)) - 1.0  # negative floats among them
    return [ff.confusion_heatmap(np.eye(len(labels), dtype=int) * 3, labels, "=confusion"),
            ff.probability_bars(labels, np.linspace(0.1, 0.3, len(labels))),
            ff.before_after(points, np.array([[0.5, 0.2], [0.6, 0.1]]), [e.label for e in task.dev], texts,
                              "before and after")]


def test_csv_text_makes_text_inert_and_keeps_numbers_numbers():
    frame = pd.DataFrame({HOSTILE[0]: HOSTILE, "value": [-0.5, -2.0, 3.0, -1e-9, 0.0, 7.25],
                          "mixed": ["-0.5", -0.5, "@x", 1, None, "fine"]},
                         index=pd.Index(HOSTILE, name="-index"))
    text = files.csv_text(frame)
    assert live_formulas(text) == []
    back = pd.read_csv(io.StringIO(text), index_col=0)
    assert back["value"].dtype == np.float64 and back["value"].tolist() == frame["value"].tolist()
    assert back.index.tolist() == ["'" + h for h in HOSTILE] and back.index.name == "'-index"
    assert back.columns[0] == "'" + HOSTILE[0] and back[back.columns[0]].tolist() == ["'" + h for h in HOSTILE]
    assert back["mixed"].tolist()[:4] == ["-0.5", "-0.5", "'@x", "1"]  # a plain number, as text or not, is no formula
    assert frame.index[0] == HOSTILE[0]  # the caller's frame is left as it was


NUMBERS = ["-1", "1", "-0.5", "+3", "1e-3", "-.5", "+2.", "-1E+9"]  # sentiment labels -1/1, typed values
FORMULAS = ["-2+3", "=1", "@SUM(1)", "+cmd|' /C calc'!A0", "-1 ", "-1e", "--1", "-1,5", "+3)", "-0x1", "-١"]


@pytest.mark.parametrize("dtype", [object, "string", "str", pd.ArrowDtype(pa.string()), "category"])
def test_every_kind_of_text_column_is_made_inert_and_a_plain_number_stays_as_it_is(dtype):
    column = pd.Series(NUMBERS + FORMULAS).astype(dtype)
    rows = list(csv.reader(io.StringIO(files.csv_text(pd.DataFrame({"label": column})), newline="")))
    assert [r[0] for r in rows[1:]] == NUMBERS + ["'" + f for f in FORMULAS]
    assert live_formulas(files.csv_text(pd.DataFrame({"label": column}))) == []


def test_numbers_booleans_and_dates_are_written_as_they_are():
    frame = pd.DataFrame({"n": pd.array([-1, 2], dtype=pd.ArrowDtype(pa.int64())), "b": [True, False],
                          "t": pd.to_datetime(["2026-01-01", "2026-01-02"]), "f": [-0.5, 1.0]})
    assert files.csv_text(frame).splitlines() == ["n,b,t,f", "-1,True,2026-01-01,-0.5", "2,False,2026-01-02,1.0"]


def test_the_index_is_written_unless_it_is_0_to_n_minus_1():
    frame = pd.DataFrame({"x": [10, 20, 30]})
    assert files.csv_text(frame).splitlines()[0] == "x"
    assert files.csv_text(frame.set_index(pd.Index([0, 1, 2]))).splitlines()[0] == "x"  # 0..n-1, not a RangeIndex
    assert files.csv_text(frame.iloc[1:]).splitlines() == [",x", "1,20", "2,30"]  # a RangeIndex from 1
    assert files.csv_text(frame.iloc[::2]).splitlines() == [",x", "0,10", "2,30"]
    assert files.csv_text(frame.rename_axis("step")).splitlines()[:2] == ["step,x", "0,10"]  # named: meant
    assert files.csv_text(frame.iloc[1:], index=False).splitlines() == ["x", "20", "30"]


def test_the_export_menus_numbers_of_a_figure_with_hostile_labels_are_inert():
    task = hostile_task()
    assert set(HOSTILE[:4]) <= set(task.labels)
    for fig in hostile_figures(task):
        text = export.numbers_csv(fig)
        assert live_formulas(text) == [], fig.layout.title.text
        back = pd.read_csv(io.StringIO(text))
        numeric = [c for c in ("value", "x", "y") if c in back and back[c].dtype == np.float64]
        assert numeric, list(back.columns)
    scatter = pd.read_csv(io.StringIO(export.numbers_csv(hostile_figures(task)[2])))
    assert scatter["x"].dtype == np.float64 and (scatter["x"] < 0).any()  # negative floats stay numbers
    assert "'" + HOSTILE[1] in set(scatter["trace"]) and "X" in set(scatter["trace"])  # tab and CR: stripped on reading
    assert scatter["hover"].str.startswith(("'", "X sentence")).all()


def test_every_csv_in_the_handout_zip_is_inert():
    task = hostile_task()
    frame = pd.DataFrame({"text": [e.text for e in task.dev], "label": [e.label for e in task.dev],
                          "margin": np.linspace(-1.5, 1.5, len(task.dev))})
    page = fh.Page("Fine-tune", None, tuple((f"fig{i}", f) for i, f in enumerate(hostile_figures(task))),
                        (("dev examples", frame), ("by label", frame.set_index("label"))))
    z = zipfile.ZipFile(io.BytesIO(fh.handout_zip([page], draw=lambda fig, fmt: b"fake")))
    names = [n for n in z.namelist() if n.endswith(".csv")]
    assert len(names) == 5
    for name in names:
        assert live_formulas(z.read(name).decode()) == [], name
    table = pd.read_csv(io.BytesIO(z.read("01_Fine-tune/table_dev_examples.csv")))
    assert table["margin"].tolist() == frame["margin"].tolist() and table["margin"].min() == -1.5


MENU = """
import numpy as np
from bertviz_lab.figures import finetune as figs
from bertviz_lab.ui.kit.widgets import chart
labels = {labels!r}
chart(figs.probability_bars(labels, np.linspace(-0.3, 0.3, len(labels))), "hostile")
"""


def test_the_export_menu_in_the_app_gives_the_inert_csv(downloads):
    at = AppTest.from_string(MENU.format(labels=HOSTILE), default_timeout=60).run()
    at.session_state["export.hostile"] = True  # open the chart's Export menu
    at.run()
    (button,) = [b for b in at.download_button if b.key == "export.hostile.csv"]
    text = downloads[button.proto.deferred_file_id]()
    assert live_formulas(text) == [] and {"'" + h for h in HOSTILE} <= {r[1] for r in csv.reader(io.StringIO(text))}
    back = pd.read_csv(io.StringIO(text))
    assert back["x"].dtype == np.float64 and back["x"].min() == -0.3


# --- The page ---------------------------------------------------------------------------------------------
@pytest.fixture
def empty(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    return tmp_path


def upload(name: str, raw: bytes) -> AppTest:
    at = app_test(PAGE).run()
    at.radio(key="finetune.task").set_value("csv").run()
    return at.file_uploader(key="finetune.upload").set_value((name, raw, "text/csv")).run()


def test_the_success_line_shows_the_file_name_and_labels_as_typed(empty):
    rows = "".join(f"the {i} cat sat .,{':red[x]' if i % 2 else '![](http://x/t.png)'}\n" for i in range(12))
    at = upload("**bold**.csv", ("text,label\n" + rows).encode())
    assert not at.exception and not at.error
    (line,) = at.success
    assert plain(":red[x]") in line.value and plain("![](http://x/t.png)") in line.value
    assert plain("**bold**.csv") + ": one sentence, 2 labels" in line.value
    assert not re.search(r"(?<!\\):red\[|(?<!\\)!\[|(?<!\\)\*\*", line.value)  # no unescaped Markdown left


def test_an_upload_error_quotes_the_file_as_plain_text(empty):
    rows = "".join(f"the {i} cat sat .,:red[x]\n" for i in range(12))
    at = upload("a.csv", ("text,label\n" + rows).encode())
    (error,) = at.error
    assert error.value.startswith("**CSV file**: ") and plain("':red[x]'") in error.value
