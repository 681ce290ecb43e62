"""Every path of ours that the docs or a docstring names exists: `bertviz_lab/...`, `views/...`, `ui/...` and the
other folders of the package, so a move that leaves a stale map behind fails here."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "bertviz_lab"
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
# A path that starts at the repository (bertviz_lab/, pages/, bench/) or at the package (views/, ui/, bert/, ...),
# ending in a module (.py) or a folder (a trailing slash).
NAMED = re.compile(r"(?<![\w./-])((?:bertviz_lab|pages|bench|" + "|".join(FOLDERS) + r")/(?:\w+/)*(?:\w+\.py|))"
                   r"(?![\w/{-])")
READ = [ROOT / "README.md", ROOT / "app.py", *sorted((ROOT / "docs").glob("*.md")), *sorted(PACKAGE.rglob("*.py")),
        *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "bench").glob("*.py"))]


def named_paths(text: str) -> list[str]:
    return [m[1] for m in NAMED.finditer(text) if m[1].endswith((".py", "/"))]


# Made only in an installed wheel: app.py, pages/ and the shipped model are copied there (pyproject.toml).
INSTALLED = {"bertviz_lab/lab/"}


def exists(path: str) -> bool:
    return path in INSTALLED or any((base / path).exists() for base in (ROOT, PACKAGE))


def test_every_path_named_in_the_docs_and_docstrings_exists():
    missing = {}
    for source in READ:
        for path in named_paths(source.read_text(encoding="utf-8")):
            if not exists(path):
                missing.setdefault(str(source.relative_to(ROOT)), []).append(path)
    assert missing == {}


def test_a_stale_path_is_found_and_a_real_one_is_not():
    text = "see views/why.py, ui/why/sections.py, bertviz_lab/ui/lesson/ and `pretrain/nothing_here.py`"
    assert named_paths(text) == ["views/why.py", "ui/why/sections.py", "bertviz_lab/ui/lesson/",
                                 "pretrain/nothing_here.py"]
    assert [exists(p) for p in named_paths(text)] == [False, True, True, False]
