"""ruff, pinned in requirements-test.txt, with the rules pyproject.toml keeps: the tree is clean, and a
finding in a copy of it fails the check (so a ruff that silently checks nothing cannot pass)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

RUFF = Path(sys.executable).with_name("ruff")
CHECKED = ("app.py", "bertviz_lab", "pages", "tests", "bench", "docs")


def ruff(root: Path, *paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", *paths], cwd=root, capture_output=True, text=True,
                          timeout=120)


def test_ruff_finds_nothing_in_the_tree():
    result = ruff(ROOT, *CHECKED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_reports_an_unused_import_and_a_loop_variable_bound_late(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "bad.py").write_text("import os\n\nfns = [lambda: i for i in range(3)]\n")
    result = ruff(tmp_path, "bad.py")
    assert result.returncode == 1
    assert "F401" in result.stdout and "B023" in result.stdout


def _module_imports() -> dict[str, set[str]]:
    """Every one of our modules imported as a module anywhere in the tree -> the names it is bound to."""
    import ast

    ours = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in (ROOT / "bertviz_lab").rglob("*.py")}
    found: dict[str, set[str]] = {}
    for folder in CHECKED:
        paths = [ROOT / folder] if folder.endswith(".py") else (ROOT / folder).rglob("*.py")
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        if f"{node.module}.{alias.name}" in ours:
                            found.setdefault(f"{node.module}.{alias.name}", set()).add(alias.asname or alias.name)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name in ours and alias.asname:
                            found.setdefault(alias.name, set()).add(alias.asname)
    return found


def _aliases() -> dict[str, str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["ruff"]["lint"]["flake8-import-conventions"]["extend-aliases"]


def test_every_module_imported_as_a_module_has_one_alias_and_no_alias_names_two_modules():
    aliases, found = _aliases(), _module_imports()
    assert sorted(set(found) - set(aliases)) == [], "add these to pyproject.toml's extend-aliases"
    assert {module: names for module, names in found.items() if names != {aliases[module]}} == {}
    named: dict[str, list[str]] = {}
    for module, alias in aliases.items():
        named.setdefault(alias, []).append(module)
    assert {alias: modules for alias, modules in named.items() if len(modules) > 1} == {}


def test_ruff_reports_a_module_imported_under_another_alias(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "bad.py").write_text("from bertviz_lab.views.why import explanation as why\n\nprint(why)\n")
    result = ruff(tmp_path, "bad.py")
    assert result.returncode == 1 and "ICN001" in result.stdout and "`vw`" in result.stdout
