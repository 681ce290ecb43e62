"""The layout holds: arrows point down (import-linter contracts in pyproject.toml), Streamlit stays in
app.py, pages/ and bertviz_lab/ui/, and no module or page grows past what a newcomer can read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
MAX_MODULE_LINES, MAX_PAGE_LINES = 350, 150


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=root, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The package, the pages and the contracts, copied so a test can break them."""
    root = tmp_path_factory.mktemp("tree")
    for name in ("bertviz_lab", "pages"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root)
    return root


def test_the_contracts_hold_on_this_tree():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("bertviz_lab/bert/model.py", "from bertviz_lab.views import predict", "bertviz_lab.bert.model -> bertviz_lab.views"),
    ("bertviz_lab/views/inputs.py", "from bertviz_lab.ui import widgets", "bertviz_lab.views.inputs -> bertviz_lab.ui"),
    ("bertviz_lab/pretrain/loop.py", "import bertviz_lab.views.pretrain.probe", "bertviz_lab.pretrain.loop -> bertviz_lab.views"),
    ("bertviz_lab/views/attention/explorer.py", "import streamlit", "bertviz_lab.views.attention.explorer -> streamlit"),
    ("bertviz_lab/figures/attention.py", "import torch", "bertviz_lab.figures.attention -> torch"),
    ("bertviz_lab/classroom.py", "import streamlit", "bertviz_lab.classroom -> streamlit"),
    ("bertviz_lab/classroom.py", "from bertviz_lab.pretrain import runs", "bertviz_lab.classroom -> bertviz_lab.pretrain"),
])
def test_an_upward_or_streamlit_import_breaks_a_contract(tree_copy, module, line, broken):
    path = tree_copy / module
    original = path.read_text()
    path.write_text(original + f"\n{line}  # deliberate: the contract must catch this\n")
    try:
        result = lint(tree_copy)
    finally:
        path.write_text(original)
    assert result.returncode == 1, result.stdout
    assert "BROKEN" in result.stdout and "0 broken" not in result.stdout
    assert broken in result.stdout  # the report names the offending import


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_or_page_is_too_long_to_read():
    modules = {p.relative_to(ROOT): lines(p) for p in (ROOT / "bertviz_lab").rglob("*.py")}
    pages = {p.relative_to(ROOT): lines(p) for p in (ROOT / "pages").glob("*.py")}
    assert {p: n for p, n in modules.items() if n > MAX_MODULE_LINES} == {}
    assert {p: n for p, n in pages.items() if n > MAX_PAGE_LINES} == {}
