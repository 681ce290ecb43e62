"""Every message that quotes what a user typed or a link carried is drawn as plain text (issue 52).

An exception's message quotes the input (an InputError names the typed word, a ConfigError the path), so no page
passes it to an element that reads Markdown (st.error, st.warning, st.info, st.caption, ...) without `plain()`,
`say()` or `plain_error()`; a name that holds the message (why = f"... {exc}") counts as the exception. And plain()
itself leaves nothing that Streamlit's Markdown draws as a link, an image or HTML: tests/browser/test_hostile.py
checks the drawn page in Chromium."""

from __future__ import annotations

import ast
import re

import pytest

from bertviz_lab.ui.shell.text import WORD_JOINER, plain
from tests.helpers.paths import ROOT

SOURCES = sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "bertviz_lab" / "ui").rglob("*.py")])
MARKDOWN = {"error", "warning", "info", "success", "caption", "markdown", "toast", "write", "exception", "title",
            "header", "subheader"}  # the elements whose body is Markdown (st.exception: a traceback)
ESCAPES = {"plain", "say", "plain_error"}  # what makes a message plain text
LOGGERS = {"log", "logger", "logging", "warnings"}
NO_TEXT = {"isinstance", "type", "len", "bool", "hasattr"}  # quiet = isinstance(exc, ...) holds no message


def _names(node: ast.AST, unescaped_only: bool = True) -> set[str]:
    """The names `node` reads, leaving out those inside a call that escapes them or reads no text of theirs."""
    if isinstance(node, ast.Call) and unescaped_only and _called(node) in ESCAPES | NO_TEXT:
        return set()
    found = {node.id} if isinstance(node, ast.Name) else set()
    for child in ast.iter_child_nodes(node):
        found |= _names(child, unescaped_only)
    return found


def _walk(scope: ast.AST):
    """The nodes of one scope: a function's body, or a module's statements outside its functions."""
    for child in ast.iter_child_nodes(scope):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield child
            yield from _walk(child)


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _markdown_element(call: ast.Call) -> bool:
    """st.error(...), where.info(...), (st.info if quiet else st.warning)(...): an element that reads Markdown."""
    funcs = [call.func.body, call.func.orelse] if isinstance(call.func, ast.IfExp) else [call.func]
    for func in funcs:
        if isinstance(func, ast.Attribute) and func.attr in MARKDOWN:
            owner = func.value
            if not (isinstance(owner, ast.Name) and owner.id in LOGGERS):
                return True
    return False


def _tainted(nodes: list[ast.AST]) -> set[str]:
    """The names that hold an exception's message: an `except ... as` name, and what is assigned from it unescaped
    (why = f"no: {exc}"; message = why + ".": assignments in any order)."""
    tainted = {h.name for h in nodes if isinstance(h, ast.ExceptHandler) and h.name}
    assigned = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None]
    for _ in range(3):
        for node in assigned:
            if _names(node.value) & tainted:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted |= {n for t in targets for n in _names(t, unescaped_only=False)}
    return tainted


def unescaped_messages(source: str, filename: str = "") -> list[str]:
    """`file:line` of every Markdown element that draws an exception's message, or a name holding it, unescaped."""
    found = []
    tree = ast.parse(source)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        nodes = list(_walk(scope))
        tainted = _tainted(nodes)
        found += [f"{filename}:{node.lineno}" for node in nodes
                  if isinstance(node, ast.Call) and _markdown_element(node) and _draws(node, tainted)]
    return sorted(set(found))


def _draws(call: ast.Call, tainted: set[str]) -> bool:
    """A traceback (st.exception), or an argument that reads an exception's message unescaped."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "exception":
        return True
    return any(_names(arg) & tainted for arg in [*call.args, *(k.value for k in call.keywords)])


def test_no_page_draws_an_exceptions_message_as_markdown():
    found = [line for path in SOURCES for line in unescaped_messages(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "drawn as Markdown, not plain text (use plain(), say() or plain_error()): " + ", ".join(found)


@pytest.mark.parametrize("source, caught", [
    ("try:\n    f()\nexcept E as exc:\n    st.warning(str(exc))\n", True),
    ("try:\n    f()\nexcept E as exc:\n    where.info(f'{exc} Below.')\n", True),
    ("try:\n    f()\nexcept E as exc:\n    why = f'no: {exc}'\nst.error(why + '.')\n", True),
    ("try:\n    f()\nexcept E as exc:\n    (st.info if q else st.warning)(str(exc))\n", True),
    ("st.exception(e)\n", True),
    ("try:\n    f()\nexcept E as exc:\n    st.warning(plain(str(exc)))\n", False),
    ("try:\n    f()\nexcept E as exc:\n    say('warning', str(exc), icon=':material/warning:')\n", False),
    ("try:\n    f()\nexcept E as exc:\n    log.warning('failed: %s', exc)\n", False),
    ("try:\n    f()\nexcept E as exc:\n    st.text(str(exc))\n", False),
])
def test_the_check_finds_what_it_should(source, caught):
    assert bool(unescaped_messages(source)) == caught


PAYLOADS = ["[Click](https://evil.example/phish)", "![x](https://evil.example/track.png)",
            "<img src=https://evil.example/x.png>", "<a href=https://evil.example/a>a</a>", "https://evil.example/bare",
            "www.evil.example", "HTTP://evil.example", "me@evil.example", "`code` **bold** :red[x] $x$ # h"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_plain_leaves_no_markup_and_no_bare_address(payload):
    shown = plain(payload)
    unescaped = re.sub(r"\\(.)", r"\1", shown)  # the text Markdown reads after its escapes: as typed, word joiners in
    assert unescaped.replace(WORD_JOINER, "") == payload
    assert not re.search(r"[!-/:-@\[-`{-~]", re.sub(r"\\[!-/:-@\[-`{-~]", "", shown))  # each one escaped
    assert not re.search(r"(?i)https?://|www\.|[\w.+-]@", unescaped)  # GFM's bare links (found after unescaping)
