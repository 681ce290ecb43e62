"""README.md and docs/*.md: the README stays a two-minute read that links every docs page, every relative link
and picture resolves (an #anchor to a heading of its target, as GitHub writes heading ids), and every command
the pages name is one the command line has."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from bertviz_lab.cli import build_parser
from tests.helpers.paths import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

FENCE = re.compile(r"^ *```.*?^ *```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target); alt text may hold [MASK]
COMMAND = re.compile(r"(?:-m bertviz_lab|bertviz-lab)\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?")
MODULE = re.compile(r"-m ((?:bertviz_lab|bench|docs)(?:\.\w+)+)")


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's heading id: the heading as shown, lower case, without punctuation, spaces made hyphens."""
    shown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", shown.strip().lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading id of a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    ids = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        heading = re.match(r"#{1,6} +(.+?)(?: +#+)?\s*$", line)
        if heading:
            base = slug(heading.group(1))
            ids.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return frozenset(ids)


def links(path: Path) -> list[str]:
    return [t for t in LINK.findall(prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken(page: Path, target: str) -> str | None:
    """Why a relative link of `page` does not resolve, or None."""
    file, _, anchor = target.partition("#")
    path = (page.parent / file).resolve() if file else page
    if not path.is_relative_to(ROOT):
        return f"{target}: outside the repository"
    if not path.exists():
        return f"{target}: no such file"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"{target}: {name(path)} has no heading #{anchor}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_relative_link_and_picture_resolves(page):
    assert [why for t in links(page) if (why := broken(page, t))] == []


def test_a_missing_page_picture_anchor_or_a_way_out_is_each_caught():
    page = ROOT / "docs" / "guide.md"
    assert broken(page, "reference.md#head-roles") is None
    assert broken(page, "no-such-page.md") == "no-such-page.md: no such file"
    assert broken(page, "no-such-picture.png") == "no-such-picture.png: no such file"
    assert "no heading #no-such-heading" in broken(page, "reference.md#no-such-heading")
    assert "no heading #no-such-heading" in broken(page, "#no-such-heading")
    assert "outside the repository" in broken(page, "../../etc/passwd")


def test_heading_ids_follow_githubs_rules(tmp_path):
    assert slug("Why this guess: the methods") == "why-this-guess-the-methods"
    assert slug("Mask & predict") == "mask--predict"
    assert slug("The app's latency") == "the-apps-latency"
    assert slug("The `finetune` command") == "the-finetune-command"
    page = tmp_path / "p.md"
    page.write_text("# Runs\n\n```bash\n# not a heading\n```\n\n## Runs\n")
    assert anchors(page) == {"runs", "runs-1"}


def test_the_readme_is_short_and_links_every_docs_page():
    assert len(README.read_text().splitlines()) < 200
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert DOCS and [name(p) for p in DOCS if p.resolve() not in linked] == []


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_command_named_is_one_the_command_line_has(page):
    commands = subcommands(build_parser())
    named = COMMAND.findall(page.read_text())
    unknown = []
    for command, action in named:
        if command not in commands:
            unknown.append(command)
        elif action and (actions := subcommands(commands[command])):
            unknown += [f"{command} {action}"] if action not in actions else []
    assert unknown == []


def test_every_module_run_with_dash_m_exists():
    modules = {m for page in PAGES for m in MODULE.findall(page.read_text())}
    assert {"bench.why_disagree", "docs.make_screenshots"} <= modules
    missing = [m for m in modules
               if not (ROOT / (m.replace(".", "/") + ".py")).exists() and not (ROOT / m.replace(".", "/")).is_dir()]
    assert missing == []


def test_the_notebook_reference_gives_every_call_with_its_real_parameters():
    import inspect

    from bertviz_lab import notebook as nb

    text = (ROOT / "docs" / "reference.md").read_text()
    calls = {name for name in nb.__all__ if name != "Lab"}
    written = dict(re.findall(r"^- `nb\.(\w+)\(([^`]*)\)`", text, re.M))
    assert set(written) == calls
    for name, params in written.items():
        named = [p.split("=")[0].strip(" *") for p in params.replace("\n", " ").split(",")]
        real = inspect.signature(getattr(nb, name)).parameters
        assert [p for p in named if p and p != "..."] == [p for p in real][:len([p for p in named if p and p != "..."])]
