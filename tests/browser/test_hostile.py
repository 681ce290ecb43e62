"""Hostile links and typed text in headless Chromium (issue 52): a link, or text typed into a page's boxes, that holds
a Markdown link, a Markdown image, HTML or a bare address never draws a link or an image pointing off the server and
never makes the browser fetch anything from elsewhere, on any page. Every message that quotes what a user typed or a
link carried is plain text.

Each page is opened with its every link parameter (ui/shell/links.py's PAGES, plus the sidebar's `model`, `projector`
and a parameter the page does not know) holding the payloads, once per tab or step that draws its own inputs;
parameters that take at most 100 characters get the payloads in two shorter strings of their own; then the main
boxes are typed into. After each, no element of the page has an address off the server, and no request left it
(every one is recorded, and aborted). One server, one browser and one short training run for the module."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from bertviz_lab.pretrain import process
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.ui.shell.links import PAGES
from tests.browser.harness import CHROMIUM, CHROMIUM_ARGS, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                                     reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]

LINK, IMAGE = "[Click](https://evil.example/phish)", "![x](https://evil.example/track.png)"
HTML_IMAGE, HTML_LINK = "<img src=https://evil.example/x.png>", "<a href=https://evil.example/a>a</a>"
BARE = "https://evil.example/bare"
QUOTED = '<a href="https://evil.example/q">q</a>'  # plotly draws this one as a link in a chart's title
ALL = " ".join((LINK, IMAGE, HTML_IMAGE, HTML_LINK, BARE, QUOTED))  # for a sentence (a link takes 1,000 characters)
# for a word, 100 characters at most each (QUOTED stands for HTML_LINK there: every renderer of HTML takes it)
SHORT = (f"{LINK} {IMAGE} {BARE}", f"{HTML_IMAGE} {QUOTED}")
assert all(len(s) <= 100 for s in SHORT)

# The parameter that picks a tab, a step or a source, and the values whose inputs differ: each gets a hostile link
# of its own (a hostile value there would open the first tab only). Steps 2, 4-6, 9 and 10 read no text of their own.
CONTEXTS = {"representations": ("tab", ["Same word, different contexts", "Nearest neighbours", "Logit lens",
                                        "Embedding geometry", "Shapes and padding"]),
            "lesson": ("step", ["1", "3", "7", "8", "11"]),
            "syntax": ("source", ["own"]),
            "timelapse": ("history", ["run tiny"]),
            "neurons": ("section", ["One sentence", "One neuron", "Neurons behind the guess"])}  # the run below, whose checkpoints read a typed sentence
MENU = ["", *PAGES, "pretrain", "finetune", "worked"]  # "": Home; the last three read no parameter of their own



def folder_box(page) -> None:
    """The sidebar's folder box (the same on every page): a path that is no model."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Open a model folder or a Hub id").click()
    box(page, "Folder path or Hub id").fill(ALL)
    sidebar.get_by_role("button", name="Load").click()
    wait_idle(page)


def pretrain_form(page) -> None:
    """A pasted training text and a run name, refused before anything starts (too short a text)."""
    page.get_by_text("Paste text").click()
    wait_idle(page)
    box(page, "Your text (at least 20 sentences and 200 words)").fill(ALL)
    box(page, "Run name (optional)").fill(SHORT[0])
    page.get_by_role("button", name="Start training").click()
    wait_idle(page)


def mlm_tab(page) -> None:
    """Worked examples' second tab (a tab of its own, not in the link)."""
    page.get_by_role("tab", name=re.compile("^MLM head and loss")).click()
    wait_idle(page)


def box(page, label: str):
    if label.startswith("/"):
        return page.get_by_label(re.compile(label.strip("/")))
    return page.get_by_label(label, exact=True)


# (page, context) -> what is then done: (a box's label, the text typed into it) or a step of its own; the boxes no
# link fills, and the main one of a page (a label in /.../ is a pattern)
TYPED = {
    ("", None): [folder_box],
    ("predict", None): [("Sentence A", SHORT[0])],
    ("attention", None): [("Sentence A", SHORT[0])],
    ("losses", None): [("Sentence A", SHORT[0])],
    ("why", None): [("Sentence A", SHORT[0])],
    ("representations", "Same word, different contexts"): [("/^Sentences, one per line \\(“sense/", ALL)],
    ("representations", "Embedding geometry"): [("Word", SHORT[0]), ("Word", SHORT[1])],
    ("representations", "Shapes and padding"): [("Sentences, one per line (2 to 4)", ALL)],
    ("timelapse", "run tiny"): [("/^Your own sentence/", ALL)],
    ("pretrain", None): [("Probe sentence", ALL), pretrain_form],
    ("worked", None): [("Tokens (separated by spaces)", ALL), mlm_tab, ("Vocabulary words (separated by spaces)", ALL)],
    ("syntax", "own"): [("Your sentences, one a line", SHORT[0])],
    ("neurons", "One sentence"): [("Sentence, with [MASK] where a guess goes", SHORT[0])],
}
# page -> its parameters that take a word (100 characters at most): (the link, then what is typed in its box)
WORDS = {
    "predict": [({"mask": list(SHORT)}, [])],  # a word to hide: picked from the sentence's words, no box
    "timelapse": [({"history": SHORT[0]}, [])],  # a history's name: picked from a list, no box
    "representations": [({"word": SHORT[0]}, [("Word to follow", SHORT[1])])],
    "lesson": [({"step": "7", "word": SHORT[0]}, [("The word that was really there", SHORT[1])]),
               ({"step": "11", "sense_word": SHORT[0]}, [("Word", SHORT[1])])],
    "why": [({"target": SHORT[0]}, [("Target word", SHORT[1])]),
            ({"contrast": SHORT[0]}, [("Contrast word (optional)", SHORT[1])])],
    "patching": [({"answer": SHORT[0]}, [("Answer", SHORT[1])]), ({"foil": SHORT[0]}, [("Foil", SHORT[1])])],
    "neurons": [({"section": "Neurons behind the guess", "answer": SHORT[0]}, [("Answer", SHORT[1])]),
                ({"section": "Neurons behind the guess", "foil": SHORT[0]}, [("Foil (optional)", SHORT[1])])],
}

# Every address an element may hold, resolved against the page; what is off the server. A data: image is drawn
# from the page itself (the share box's QR code); nothing the app draws on purpose points elsewhere (a clean page
# of each kind was checked: its links are the page menu and the headings' anchors).
OFF_SERVER_JS = """() => {
  const found = [];
  for (const e of document.querySelectorAll("body *")) {
    for (const name of ["href", "xlink:href", "src", "srcset", "action", "formaction", "poster", "data"]) {
      const value = e.getAttribute(name);
      if (!value) continue;
      let url;
      try { url = new URL(value.trim().split(/\\s+/)[0], document.baseURI); } catch (_) { found.push(value); continue; }
      const image = ["img", "image"].includes(e.tagName.toLowerCase());
      if (url.origin === location.origin || (image && url.protocol === "data:" && /^data:image\\//.test(value))) continue;
      const where = e.closest("[data-testid^=st]:not([data-testid$=Container])");
      found.push(`<${e.tagName.toLowerCase()} ${name}="${value}"> in ${where ? where.dataset.testid : "the page"}: `
                 + (where || e).innerText.slice(0, 160));
    }
  }
  return found;
}"""


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """The server's URL; its runs folder holds one finished 20-step run, `tiny`, with kept checkpoints (Time-lapse
    then runs a typed sentence, and Pretrain live shows its probe box)."""
    runs = tmp_path_factory.mktemp("runs")
    tiny = TrainConfig(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=20, lr=5e-3,
                       warmup=3, eval_every=10, eval_batches=1, checkpoint_every=10, device="cpu", threads=1)
    assert process.execute(runs / "tiny", tiny, resume=False, command=["train"]) == 0
    with streamlit_server(env={"BERTVIZ_RUNS": str(runs)}) as address:
        yield address


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture()
def page(browser, url):
    """A fresh page whose every request for an address off the server is recorded in `page.left` and aborted."""
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    tab = context.new_page()
    tab.left = []
    server = urlsplit(url).netloc

    def guard(route):
        if urlsplit(route.request.url).netloc == server:
            route.continue_()
        else:
            tab.left.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    yield tab
    context.close()


def visits(path: str) -> list[tuple[dict, list]]:
    """What one page is put through: a link whose every parameter holds ALL (once per tab or step), then a link
    for each word parameter, each with what is typed afterwards."""
    everything = {p.name: ALL for p in PAGES.get(path, ())} | {"model": ALL, "projector": ALL, SHORT[0]: ALL}
    where, values = CONTEXTS.get(path, (None, [None]))
    return [(everything | ({where: value} if where else {}), TYPED.get((path, value), [])) for value in values] + \
        WORDS.get(path, [])


def accepts(param, value: str) -> bool:
    try:
        param.read(value)
    except ValueError:
        return False
    return True


def type_into(page, label: str, text: str) -> None:
    """Type `text` into the box labelled `label` and submit it as a learner would (Enter; Ctrl+Enter in a text area)."""
    field = box(page, label).first
    field.fill(text)
    field.press("Control+Enter" if field.evaluate("e => e.tagName") == "TEXTAREA" else "Enter")
    wait_idle(page)


def assert_nothing_off_server(page, what: str) -> None:
    drawn = page.evaluate(OFF_SERVER_JS)
    assert not drawn, f"{what} drew addresses off the server: {drawn}"
    assert not page.left, f"{what} made the browser fetch {page.left}"


def test_every_word_parameter_gets_a_link_of_its_own():
    """A parameter that takes a word but not ALL (the reader's limit) is tested with the shorter strings."""
    words = {(path, p.name) for path, params in PAGES.items() for p in params
             if not accepts(p, ALL) and accepts(p, SHORT[0])}
    assert words <= {(path, name) for path, found in WORDS.items() for link, _ in found for name in link}


@pytest.mark.parametrize("path", MENU, ids=lambda p: p or "home")
def test_hostile_links_and_typed_text_plant_no_link_and_fetch_nothing(page, url, path):
    for query, typed in visits(path):
        what = f"/{path}?" + "&".join(f"{name[:12]}={str(value)[:12]}…" for name, value in query.items())
        open_page(page, url, f"{path}?{urlencode(query, doseq=True)}")
        assert_nothing_off_server(page, what)
        if query.get("tab") not in (None, ALL):  # the link opened the tab it names: its inputs were read
            assert page.get_by_role("tab", name=query["tab"], selected=True).count() == 1
        for step in typed:
            if callable(step):
                step(page)
            else:
                type_into(page, *step)
            assert_nothing_off_server(page, f"{what}, then {getattr(step, '__name__', step)}")

