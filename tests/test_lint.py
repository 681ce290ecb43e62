"""ruff, pinned in requirements-test.txt, with the rules pyproject.toml keeps: the tree is clean, and a
finding in a copy of it fails the check (so a ruff that silently checks nothing cannot pass)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
