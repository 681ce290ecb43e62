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

    .venv/bin/python -m bench.app_latency [--sentences 8] [--long-only]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.common import pin_threads
from bertviz_lab import corpus
from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import preset
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

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
    times = []
    for value in values:
        getattr(at, kind)(key=key).set_value(value)
        start = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - start) * 1000)
        assert not at.exception, at.exception
    return first, statistics.median(times)


def long_input_ms(model_path: str, n: int) -> tuple[float, float, float]:
    """Attention page, 512 tokens: (median ms for a new sentence, after moving the token range, after a new layer)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages/attention.py"), default_timeout=600)
    at.session_state["model.path"] = model_path
    at.run()
    timed = {"sentence": [], "range": [], "layer": []}
    ranges = [(64 * k, 64 * k + 63) for k in range(7)]  # 64 tokens each, as the page starts
    for i, text in enumerate(sentences(n, 600, seed=512)):  # 600 words: cut to 512 tokens
        for what, change in (("sentence", lambda: at.text_area("attn.text_a").set_value(text)),
                             ("range", lambda: at.slider(key="attn.range").set_range(*ranges[i % 7])),
                             ("layer", lambda: at.segmented_control(key="attn.layer").set_value(1 + i % 11))):
            change()
            start = time.perf_counter()
            at.run()
            timed[what].append((time.perf_counter() - start) * 1000)
            assert not at.exception, at.exception
    assert at.slider(key="attn.range").max == 511  # the input really was 512 tokens
    return tuple(statistics.median(timed[k]) for k in ("sentence", "range", "layer"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long-only", action="store_true", help="only the 512-token case")
    args = parser.parse_args()
    pin_threads(args.threads)
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
