"""docs/notebook.ipynb, run top to bottom by a real Jupyter kernel (nbclient + ipykernel), as a student runs it; its
outputs are read back and checked against the lab's own numbers, not only run.

The kernel runs the lab as a user has it: the wheel installed (conftest's `installed`), in an empty working folder,
with Jupyter's and IPython's own folders empty (a user-level "python3" kernel of this machine's cannot step in).
The notebook is committed without outputs.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.lab import installed_env
from tests.helpers.paths import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from bertviz_lab import notebook as nb  # noqa: E402 - after the skips

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"
# The kernel and this process compute in float32, each with the matmul kernels its CPU and BLAS pick (MKL's AVX2
# path and its AVX-512 one differ by up to 3e-6 relative on the guesses' probabilities, measured with
# ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2): equal means equal to float32's rounding, not bit for bit.
FLOAT32 = {"rtol": 1e-5, "atol": 1e-7}
pytestmark = pytest.mark.slow


RUN = """
import sys, nbformat, nbclient
book = nbformat.read(sys.argv[1], as_version=4)
book.cells.append(nbformat.v4.new_code_cell("import bertviz_lab; print(bertviz_lab.__file__)"))
nbclient.NotebookClient(book, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
nbformat.write(book, sys.argv[2])
"""


@pytest.fixture(scope="module")
def executed(installed, tmp_path_factory):
    where = tmp_path_factory.mktemp("student")
    env = {k: v for k, v in installed_env(installed, where).items() if not k.startswith(("JUPYTER", "IPYTHON"))}
    env.update(JUPYTER_DATA_DIR=str(where / "jupyter-data"), JUPYTER_CONFIG_DIR=str(where / "jupyter-config"),
               IPYTHONDIR=str(where / "ipython"))
    done = subprocess.run([sys.executable, "-c", RUN, str(NOTEBOOK), str(where / "executed.ipynb")], cwd=where,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]  # a cell that raised: its source and traceback
    cells = [cell for cell in nbformat.read(where / "executed.ipynb", as_version=4).cells if cell.cell_type == "code"]
    assert text_of(cells[-1]).strip() == str(installed / "bertviz_lab" / "__init__.py")  # the installed copy ran
    return cells[:-1]


def mini():
    """The shipped model here, on the CPU as the notebook's kernel runs it (installed_env shows it no GPU)."""
    return nb.load("bertviz-mini", device="cpu")


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def figure_of(cell) -> dict:
    (fig,) = [o.data[PLOTLY] for o in cell.outputs if PLOTLY in o.get("data", {})]
    return fig if isinstance(fig, dict) else json.loads(fig)


def array(value) -> np.ndarray:
    """A figure's numbers as the notebook holds them: a list, or plotly's typed array {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(value)


def cell_with(cells, source: str):
    (cell,) = [c for c in cells if source in c.source]
    return cell


def test_the_committed_notebook_has_no_outputs():
    book = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in book.cells if c.cell_type == "code")
    nbformat.validate(book)


def test_every_cell_draws_what_it_says_inline(executed):
    loading = [c for c in executed if "load(" in c.source]
    tables = [c for c in executed if 'kind="table"' in c.source]
    assert len(loading) == 2 and len(tables) == 1
    (html,) = [o.data["text/html"] for o in tables[0].outputs if "text/html" in o.get("data", {})]
    assert "weight = exp ÷ Σ" in html and "q·k" in html  # the Attention page's table of the softmax's steps
    for cell in executed:
        if cell not in loading + tables:
            fig = figure_of(cell)  # exactly one figure, as the kernel sent it to the notebook
            assert fig["data"] and fig["layout"]["title"]["text"], cell.source


def test_no_cell_prints_a_warning_or_an_error(executed):
    for cell in executed:
        assert not [o for o in cell.outputs if o.output_type == "error"]
        stderr = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
        assert "Warning" not in stderr and "Traceback" not in stderr, (cell.source, stderr[:500])


def test_the_lab_says_what_it_loaded(executed):
    shown = executed[0].outputs[-1].data["text/plain"]
    assert shown.startswith("<Lab BERT: 4 layers × 4 heads") and "bertviz-mini" in shown


def test_the_guesses_are_the_labs_own(executed):
    cell = cell_with(executed, 'nb.predict(lab, "the cat sat on the [MASK] .", top_k=5)')
    assert text_of(cell) == "top guess: mat\n"
    theirs = figure_of(cell)["data"][0]
    ours = nb.predict(mini(), "the cat sat on the [MASK] .", top_k=5).data[0]
    assert list(array(theirs["y"])) == list(ours.y)
    np.testing.assert_allclose(array(theirs["x"]), ours.x, **FLOAT32)


def test_the_attention_rows_sum_to_one_and_are_the_labs(executed):
    cell = cell_with(executed, "nb.attention(lab, sentence, layer=0, head=0)")
    assert text_of(cell) == "every row sums to 1: True\n"
    z = array(figure_of(cell)["data"][0]["z"]).astype(float)
    ours = np.array(nb.attention(mini(), "the animal was tired because it ran .", layer=0, head=0).data[0].z)
    np.testing.assert_allclose(z, ours, **FLOAT32)


def test_the_relations_cell_names_its_baseline(executed):
    title = text_of(cell_with(executed, 'kind="relations"'))
    assert title.startswith("nsubj, dependent → head") and "baseline" in title


def test_a_transformers_model_in_memory_gives_transformers_numbers(executed):
    assert "in memory" in cell_with(executed, "theirs = nb.load(model, tokenizer)").outputs[-1].data["text/plain"]
    cell = cell_with(executed, "fig = nb.predict(theirs, text, top_k=5)")
    printed = text_of(cell)  # "transformers: p(mat) = 0.2680", from transformers' own logits in the kernel
    assert printed.startswith("transformers: p(mat) = ")
    bars = figure_of(cell)["data"][0]
    assert array(bars["y"])[0] == "mat"
    assert f"{array(bars['x'])[0]:.4f}" == printed.split("= ")[1].strip()
    mine = nb.predict(mini(), "the cat sat on the [MASK] .", top_k=5).data[0]
    np.testing.assert_allclose(array(bars["x"]), mine.x, atol=1e-5)  # the same model, read from memory and from disk
