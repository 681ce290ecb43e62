"""The layout holds: arrows point down (import-linter contracts in pyproject.toml), Streamlit stays in
app.py, pages/ and bertviz_lab/ui/, imports inside the package point one way (no cycle), and no module or page
grows past what a newcomer can read."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from tests.helpers.paths import ROOT

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
    assert "5 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("bertviz_lab/bert/model.py", "from bertviz_lab.views import predict", "bertviz_lab.bert.model -> bertviz_lab.views"),
    ("bertviz_lab/views/inputs.py", "from bertviz_lab.ui import widgets", "bertviz_lab.views.inputs -> bertviz_lab.ui"),
    ("bertviz_lab/pretrain/loop.py", "import bertviz_lab.views.pretrain.probe", "bertviz_lab.pretrain.loop -> bertviz_lab.views"),
    ("bertviz_lab/views/attention/explorer.py", "import streamlit", "bertviz_lab.views.attention.explorer -> streamlit"),
    ("bertviz_lab/figures/attention.py", "import torch", "bertviz_lab.figures.attention -> torch"),
    ("bertviz_lab/classroom.py", "import streamlit", "bertviz_lab.classroom -> streamlit"),
    ("bertviz_lab/classroom.py", "from bertviz_lab.pretrain import runs", "bertviz_lab.classroom -> bertviz_lab.pretrain"),
    ("bertviz_lab/ui/shell/state.py", "from bertviz_lab.ui.kit import tables",
     "bertviz_lab.ui.shell.state -> bertviz_lab.ui.kit.tables"),
    ("bertviz_lab/ui/why/sections.py", "from bertviz_lab.ui.attention import cached",
     "bertviz_lab.ui.why.sections -> bertviz_lab.ui.attention.cached"),
    ("bertviz_lab/ui/kit/tables.py", "from bertviz_lab.ui.why import sections",
     "bertviz_lab.ui.kit.tables -> bertviz_lab.ui.why.sections"),
    ("bertviz_lab/views/predict/guesses.py", "from bertviz_lab.views.why import examples",
     "bertviz_lab.views.predict.guesses -> bertviz_lab.views.why.examples"),
    ("bertviz_lab/views/attention/layer.py", "from bertviz_lab.views.timelapse import history",
     "bertviz_lab.views.attention.layer -> bertviz_lab.views.timelapse.history"),
    ("bertviz_lab/views/why/explanation.py", "from bertviz_lab.views.patching import runs",
     "bertviz_lab.views.why.explanation -> bertviz_lab.views.patching.runs"),
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


def imports(path: Path, package: str, modules: set[str]) -> set[str]:
    """The modules of `modules` that the file imports, at module level, in a function or under TYPE_CHECKING:
    `from a.b import c` is a.b.c where that is a module, else a.b (its __init__); a relative import is resolved
    against `package`. The parents an import runs on the way (a/__init__.py for a.b) are not counted."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + [base] if base else parts)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:  # a name inside a module: the module
                name = name.rpartition(".")[0]
            found.add(name)
    return found - {""}


def import_graph(root: Path) -> nx.DiGraph:
    """bertviz_lab's modules, an edge from each to every module of the package it imports."""
    paths = {}
    for path in (root / "bertviz_lab").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = nx.DiGraph()
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph.add_node(name)
        graph.add_edges_from((name, other) for other in imports(path, package, set(paths)) if other != name)
    return graph




def test_no_import_cycle_between_the_packages_modules():
    """Imports point one way: no module imports, directly or through others, a module that imports it (a lazy
    import inside a function counts: it is a cycle that only waits for its call)."""
    assert list(nx.simple_cycles(import_graph(ROOT))) == []


def test_an_import_cycle_is_caught_lazy_or_not(tree_copy):
    """The check finds a cycle made by a lazy import (as batch_cache.py's of loop.py was), and one of two
    module-level imports."""
    assert list(nx.simple_cycles(import_graph(tree_copy))) == []
    path = tree_copy / "bertviz_lab" / "pretrain" / "batch_cache.py"
    original = path.read_text()
    for line in ("def ship():\n    from bertviz_lab.pretrain.loop import Trainer\n",
                 "from bertviz_lab.pretrain import supply\n", "from . import supply\n"):
        path.write_text(original + f"\n{line}")
        try:
            found = [set(c) for c in nx.simple_cycles(import_graph(tree_copy))]
        finally:
            path.write_text(original)
        assert found and all("bertviz_lab.pretrain.batch_cache" in c for c in found), line
