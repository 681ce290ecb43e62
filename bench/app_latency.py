"""Server time to re-render a page after the sentence changes (Streamlit AppTest, 2 threads).

Two cases, each on the Mask & predict and Attention pages, median over distinct
sentences (so no cache can answer):
  - the default model (checkpoints/bertviz-mini) at up to 64 tokens; target < 300 ms
  - a bert-base-sized model (12x768, vocab 30,522, random weights) at 128 tokens; target < 2 s
Then the Attention page with the bert-base-sized model at 512 tokens: a new sentence (the traced forward
pass of 512 tokens), and a redraw after moving the token range or the layer; target < 2 s.
Then each tab of the Representations page with the default model, after an edit of its own input
(new sentences, a new word); target < 300 ms. The first open of Nearest neighbours, which encodes
the sentence bank once per model, is timed on its own.

With --every-page: every page of app.py's router, run as the server runs it (app.py with its sidebar, link
and share box, AppTest), with the default model: the server time of a redraw after that page's typical edit
(a new sentence, the next step, another frame...), median of --sentences edits; target < 300 ms. The Pretrain
live and Fine-tune pages are given a short finished run each (trained first, in a temporary runs folder).

    .venv/bin/python -m bench.app_latency [--sentences 8] [--long-only | --every-page]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bertviz_lab.ui.shell.serve import openmp_settings

with openmp_settings():  # torch's threads as the server sets them (./lab.sh app): they are set as it loads
    import torch

from bench.common import pin_threads  # noqa: E402
from bertviz_lab import corpus  # noqa: E402
from bertviz_lab.bert.checkpoint import save_checkpoint  # noqa: E402
from bertviz_lab.bert.config import preset  # noqa: E402
from bertviz_lab.bert.model import BertForPreTraining  # noqa: E402
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer  # noqa: E402
from bertviz_lab.views.lesson import steps as vls  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"Mask & predict": ("pages/predict.py", "predict.text_a"), "Attention": ("pages/attention.py", "attn.text_a")}


def base_checkpoint(folder: Path) -> Path:
    words = corpus.vocabulary()
    vocab = list(SPECIAL_TOKENS) + words
    vocab += [f"tok{i}" for i in range(30522 - len(vocab))]
    torch.manual_seed(0)
    save_checkpoint(BertForPreTraining(preset("base")), WordPieceTokenizer.from_vocab(vocab), folder)
    return folder


def sentences(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = corpus.vocabulary()
    out = []
    for _ in range(n):
        text = rng.sample(vocab, words)
        text[rng.randrange(words)] = "[MASK]"
        out.append(" ".join(text) + " .")
    return out


def rerender_ms(page: str, key: str, texts: list[str], model_path: str | None) -> float:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / page), default_timeout=120)
    if model_path:
        at.session_state["model.path"] = model_path
    at.run()
    assert not at.exception, at.exception
    times = []
    for text in texts:
        at.text_area(key).set_value(text)
        start = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - start) * 1000)
        assert not at.exception, at.exception
    return statistics.median(times)


REPRESENTATIONS = "pages/representations.py"


def tab_edits(n: int, seed: int = 0) -> dict[str, tuple[str, str, list[str]]]:
    """Per tab of the Representations page: (widget kind, key, n distinct values to type)."""
    rng = random.Random(seed)
    distinct = list(dict.fromkeys(s for story in corpus.generate_documents(600, seed=seed) for s in story))
    bank = [s for s in distinct if re.search(r"\bbank\b", s)]
    masked = []
    for text in rng.sample(distinct, n):
        words = text.split()
        words[rng.randrange(len(words))] = "[MASK]"
        masked.append(" ".join(words))
    return {
        "Same word, different contexts": ("text_area", "repr.sentences", ["\n".join(rng.sample(bank, 8))
                                                                          for _ in range(n)]),
        "Nearest neighbours": ("text_input", "repr.nn_text", rng.sample(distinct, n)),
        "Logit lens": ("text_input", "repr.lens_text", masked),
        "Embedding geometry": ("text_input", "repr.geo_word", rng.sample(corpus.vocabulary(), n)),
        "Shapes and padding": ("text_area", "shapes.text", ["\n".join(rng.sample(distinct, 3)) for _ in range(n)]),
    }


def tab_rerender_ms(tab: str, kind: str, key: str, values: list[str]) -> tuple[float, float]:
    """(first open of the tab, median re-render after an edit), in ms."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / REPRESENTATIONS), default_timeout=600)
    at.session_state["repr.tab"] = tab
    start = time.perf_counter()
    at.run()
    first = (time.perf_counter() - start) * 1000
    assert not at.exception, at.exception
    return first, statistics.median(redraws_ms(at, kind, key, values))


def redraws_ms(at, kind: str | None, key: str, values) -> list[float]:
    """Server ms of each rerun after setting widget `key` (of type `kind`; None: rerun as is) to each value."""
    times = []
    for value in values:
        if kind is not None:
            getattr(at, kind)(key=key).set_value(value)
        start = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - start) * 1000)
        assert not at.exception, at.exception
    return times


def long_input_ms(model_path: str, n: int) -> tuple[float, float, float]:
    """Attention page, 512 tokens: (median ms for a new sentence, after moving the token range, after a new layer)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages/attention.py"), default_timeout=600)
    at.session_state["model.path"] = model_path
    at.run()
    timed = {"sentence": [], "range": [], "layer": []}
    ranges = [(64 * k, 64 * k + 63) for k in range(7)]  # 64 tokens each, as the page starts
    for i, text in enumerate(sentences(n, 600, seed=512)):  # 600 words: cut to 512 tokens
        for what, change in (("sentence", lambda text=text: at.text_area("attn.text_a").set_value(text)),
                             ("range", lambda i=i: at.slider(key="attn.range").set_range(*ranges[i % 7])),
                             ("layer", lambda i=i: at.segmented_control(key="attn.layer").set_value(1 + i % 11))):
            change()
            start = time.perf_counter()
            at.run()
            timed[what].append((time.perf_counter() - start) * 1000)
            assert not at.exception, at.exception
    assert at.slider(key="attn.range").max == 511  # the input really was 512 tokens
    return tuple(statistics.median(timed[k]) for k in ("sentence", "range", "layer"))


APP = ROOT / "app.py"


def router_pages() -> dict[str, str]:
    """Title -> page file of every page in app.py's router, in its order."""
    return {title: path for path, title in re.findall(r'st\.Page\("([^"]+)", title="([^"]+)"', APP.read_text())}


def finished_runs(root: Path) -> None:
    """A short pretraining run and a short fine-tuning run of the shipped model, finished, under `root`."""
    common = ["--eval-every", "20", "--threads", "1"]
    for args in (["train", "--run-dir", str(root / "pretrain"), "--steps", "40", "--checkpoint-every", "20"],
                 ["finetune", "--run-dir", str(root / "finetune"), "--task", "coherence", "--steps", "40",
                  "--from", str(ROOT / "checkpoints" / "bertviz-mini")]):
        subprocess.run([sys.executable, "-m", "bertviz_lab", *args, *common], cwd=ROOT, check=True,
                       capture_output=True)


REVEALED = tuple(step for step in vls.ids() if step not in ("training", "probe"))  # the Lesson's steps that do not train


def reveal_lesson(at) -> None:
    """Answer and reveal every step of the Lesson but the two that train ("training" and "probe", with progress
    bars of their own), so that its redraws draw the revealed views."""
    for step in REVEALED:
        at.selectbox(key="lesson.step").set_value(step).run()
        for kind in ("number_input", "pills", "radio", "selectbox"):
            try:
                guess = getattr(at, kind)(key=f"lesson.guess.{step}")
            except KeyError:
                continue
            guess.set_value(1 if kind == "number_input" else guess.options[0].replace("\\", "")).run()  # unescaped
            break
        at.button(key=f"lesson.reveal.{step}").click().run()
        assert not at.exception, at.exception


def page_edits(n: int) -> list[tuple[str, str, dict, str | None, str | None, object]]:
    """(page title, what changes, session state set first or a function that prepares the page, widget kind,
    key, n values or a function of the AppTest giving them) for every page; kind None: a redraw, no change."""
    tabs = tab_edits(n)
    texts = [v.replace("[MASK]", "", 0) for v in tabs["Logit lens"][2]]  # distinct sentences, one [MASK] each
    masked = tabs["Logit lens"][2]

    def steps(at) -> list[int]:  # the history's own steps, from the first: the page opens on the last
        options = [int(o.replace(",", "")) for o in at.select_slider(key="lapse.step").options]
        return [options[i % len(options)] for i in range(n)]

    def sizes(at) -> list[int]:  # the story world's sentence counts the Syntax page offers, each in turn
        options = [int(o.replace(",", "")) for o in at.select_slider(key="syntax.sentences").options]
        return [options[(i + 1) % len(options)] for i in range(n)]

    edits = [("Home", "redraw, nothing changed", {}, None, None, [None] * n),
             ("Lesson", "another step", {}, "selectbox", "lesson.step", [vls.ids()[(i + 1) % len(vls.ids())] for i in range(n)]),
             ("Lesson", "another step, answers revealed", reveal_lesson, "selectbox", "lesson.step",
              [REVEALED[(i + 1) % len(REVEALED)] for i in range(n)]),
             ("Mask & predict", "new sentence", {}, "text_area", "predict.text_a", masked),
             ("Attention", "new sentence", {}, "text_area", "attn.text_a", texts),
             ("Why this guess?", "new sentence (every method computed)", {}, "text_area", "why.text_a", masked),
             ("Why this guess?", "another attention layer (computed once)", {}, "segmented_control", "why.layer",
              [i % 4 for i in range(n)])]
    edits += [("Representations", f"{tab}: {key}", {"repr.tab": tab}, kind, key, values)
              for tab, (kind, key, values) in tabs.items()]
    edits += [("Pretrain live", "new probe sentence", {}, "text_input", "pretrain.probe", masked),
              ("Time-lapse", "another step", {}, "select_slider", "lapse.step", steps),
              ("Syntax across a corpus", "another sentence count (before a run)", {}, "select_slider",
               "syntax.sentences", sizes),
              ("Fine-tune", "Try it: new sentence", {"finetune.tab": "Try it"}, "text_input", "finetune.text", texts),
              ("Losses step by step", "new seed", {}, "number_input", "losses.seed", list(range(1, n + 1))),
              ("Worked examples", "new scores", {}, "text_input", "worked.attn.scores",
               [" ".join(f"{random.Random(i).uniform(-3, 3):.2f}" for _ in range(6)) for i in range(n)])]
    return edits


def page_redraw_ms(path: str, preset, kind: str | None, key: str | None, values) -> tuple[float, float]:
    """(the page's first run, median redraw after each edit), in ms, through app.py as the server runs it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=600)
    for name, value in ({} if callable(preset) else preset).items():
        at.session_state[name] = value
    at.run()
    at.switch_page(path)
    start = time.perf_counter()
    at.run()
    first = (time.perf_counter() - start) * 1000
    assert not at.exception, at.exception
    if callable(preset):
        preset(at)
    return first, statistics.median(redraws_ms(at, kind, key, values(at) if callable(values) else values))


def every_page(n: int) -> None:
    print(f"every page through app.py, default model, redraw after an edit, median of {n}; target < 300 ms")
    missing = set(router_pages()) - {title for title, *_ in page_edits(1)}
    assert not missing, f"no edit for {missing}"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BERTVIZ_RUNS"] = tmp
        finished_runs(Path(tmp))
        pages = router_pages()
        for title, what, preset, kind, key, values in page_edits(n):
            first, ms = page_redraw_ms(pages[title], preset, kind, key, values)
            verdict = "meets" if ms < 300 else "MISSES"
            print(f"  {title:<20} {what:<48} {ms:7.1f} ms  ({verdict})   first open {first / 1000:.2f} s",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long-only", action="store_true", help="only the 512-token case")
    parser.add_argument("--every-page", action="store_true", help="every page of the router, default model")
    args = parser.parse_args()
    pin_threads(args.threads)
    if args.every_page:
        every_page(args.sentences)
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = str(base_checkpoint(Path(tmp) / "base"))
        print(f"Attention page, bert-base size, 512 tokens, median of {args.sentences}, {args.threads} threads")
        cases = ("new sentence", "token range moved", "layer changed")
        for label, ms in zip(cases, long_input_ms(base, args.sentences)):
            print(f"  {label:<28} {ms:8.1f} ms  ({'meets' if ms < 2000 else 'MISSES'} < 2000 ms)")
        if args.long_only:
            return
        print(f"server time to re-render after a new sentence, median of {args.sentences}, {args.threads} threads")
        # 60 words + [CLS]/[SEP] + "." fill the default model's 64 positions; 125 words give 128 tokens.
        cases = [("default model, 64 tokens", None, 60, 300.0), ("bert-base size, 128 tokens", base, 125, 2000.0)]
        for label, path, words, target in cases:
            for name, (page, key) in PAGES.items():
                ms = rerender_ms(page, key, sentences(args.sentences, words, seed=words), path)
                verdict = "meets" if ms < target else "MISSES"
                print(f"  {label:<28} {name:<15} {ms:8.1f} ms  ({verdict} < {target:.0f} ms)")
    print(f"Representations page, default model, re-render after an edit, median of {args.sentences}")
    for tab, (kind, key, values) in tab_edits(args.sentences).items():
        first, ms = tab_rerender_ms(tab, kind, key, values)
        verdict = "meets" if ms < 300 else "MISSES"
        print(f"  {tab:<30} {ms:8.1f} ms  ({verdict} < 300 ms)   first open {first / 1000:.2f} s")


if __name__ == "__main__":
    main()
