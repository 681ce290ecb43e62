"""Server time to re-render a page after the sentence changes (Streamlit AppTest, 2 threads).

Two cases, each on the Mask & predict and Attention pages, median over distinct
sentences (so no cache can answer):
  - the default model (checkpoints/bertviz-mini) at up to 64 tokens; target < 300 ms
  - a bert-base-sized model (12x768, vocab 30,522, random weights) at 128 tokens; target < 2 s

    .venv/bin/python -m bench.app_latency [--sentences 8]
"""

from __future__ import annotations

import argparse
import random
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"server time to re-render after a new sentence, median of {args.sentences}, {args.threads} threads")
    with tempfile.TemporaryDirectory() as tmp:
        base = str(base_checkpoint(Path(tmp) / "base"))
        # 60 words + [CLS]/[SEP] + "." fill the default model's 64 positions; 125 words give 128 tokens.
        cases = [("default model, 64 tokens", None, 60, 300.0), ("bert-base size, 128 tokens", base, 125, 2000.0)]
        for label, path, words, target in cases:
            for name, (page, key) in PAGES.items():
                ms = rerender_ms(page, key, sentences(args.sentences, words, seed=words), path)
                verdict = "meets" if ms < target else "MISSES"
                print(f"  {label:<28} {name:<15} {ms:8.1f} ms  ({verdict} < {target:.0f} ms)")


if __name__ == "__main__":
    main()
