"""Attribution speed (issue 35, point 9): every method of the Why-this-guess page on one sentence.

Two models: the shipped checkpoint on a sentence of about ten words, and a BERT-base-sized random model
(12 x 768, vocabulary 30522, seeded) on 32 tokens with one [MASK]. For each, the time of each method (from
`Explanation.seconds`, median of N runs after a warm-up), `median N s` for all of them together (one `why()`:
the guesses, every method, the score), and the deletion curves. The goals: the shipped model under 1 s, base
at 32 tokens under 5 s, on 2 threads.

Against `transformers`, in the same run on the same weights: integrated gradients done the standard Captum way
(LayerIntegratedGradients on a transformers BertForMaskedLM's `bert.embeddings.word_embeddings`, transformers'
default attention, 50 Gauss-Legendre steps, the same internal batch size) against ours (the same Captum class
on our model, whose MLM head runs at the explained [MASK] only); the attributions are checked equal first.
Interleaved rounds; the ratio is the median of per-round ratios ours / transformers (below 1.0: we are faster).

    .venv/bin/python -m bench.attribution [--runs 5] [--deletion-runs 2] [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import inspect
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.common import interleaved_ms, median_ratio, pin_threads
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, Encoding, WordPieceTokenizer
from bertviz_lab.explain import methods
from bertviz_lab.explain.report import METHODS

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "bertviz-mini"
SENTENCE = "the cat sat on the [MASK] because it was tired ."  # 13 tokens with [CLS] and [SEP]
BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072)
BASE_TOKENS = 32
GOALS = {"shipped": 1.0, "base": 5.0}  # seconds for every method on one sentence (issue 35, point 9)
IG_CHUNK = inspect.signature(methods.integrated_gradients).parameters["chunk"].default  # Captum's internal batch


@dataclass(frozen=True)
class Subject:
    key: str  # "shipped" or "base"
    title: str
    model: BertForPreTraining
    tokenizer: WordPieceTokenizer
    encoding: Encoding


def shipped() -> Subject:
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.views.inputs import encode

    ckpt = load_checkpoint(SHIPPED, device=torch.device("cpu"))
    encoding = encode(ckpt.tokenizer, ckpt.model, SENTENCE, allow_truncation=False)
    cfg = ckpt.config
    return Subject("shipped", f"shipped model {SHIPPED.name} ({cfg.num_hidden_layers}x{cfg.hidden_size}), "
                              f"{len(encoding)} tokens: {SENTENCE!r}", ckpt.model, ckpt.tokenizer, encoding)


def base(tokens: int = BASE_TOKENS, seed: int = 0) -> Subject:
    """A random BERT-base (seeded) and a sentence of `tokens` random vocabulary words, one of them [MASK]."""
    torch.manual_seed(seed)
    model = BertForPreTraining(BASE).eval()
    words = [f"w{i}" for i in range(BASE.vocab_size - len(SPECIAL_TOKENS))]
    tokenizer = WordPieceTokenizer.from_vocab([*SPECIAL_TOKENS, *words])
    draw = torch.randint(len(words), (tokens - 2,), generator=torch.Generator().manual_seed(seed))
    picked = [words[i] for i in draw]
    picked[len(picked) // 2] = tokenizer.mask_token
    encoding = tokenizer.encode(" ".join(picked))
    assert len(encoding) == tokens, len(encoding)
    return Subject("base", f"random BERT-base ({BASE.num_hidden_layers}x{BASE.hidden_size}, vocabulary "
                           f"{BASE.vocab_size}), {tokens} tokens, one [MASK]", model, tokenizer, encoding)


def time_why(subject: Subject, runs: int, deletion_runs: int) -> dict:
    """Median seconds of each method and of a whole `why()` over `runs`, and of the deletion curves over
    `deletion_runs` (they cost the most: 17 s a run for base), after one warm-up."""
    from bertviz_lab.views.why import explanation as vw

    def timed(fn):
        start = time.perf_counter()
        return fn(), time.perf_counter() - start

    def explained():
        return vw.why(subject.model, subject.tokenizer, subject.encoding)

    timed(explained)  # warm-up: Captum's import, the packed weights
    results = [timed(explained) for _ in range(runs)]
    last = results[-1][0]
    deletion = [timed(lambda: vw.deletion_for(last))[1] for _ in range(deletion_runs)]
    return {"steps": {name: statistics.median(r.explanation.seconds[name] for r, _ in results)
                      for name in last.explanation.seconds},
            "total": statistics.median(t for _, t in results), "deletion": statistics.median(deletion),
            "result": last}


def hf_masked_lm(model: BertForPreTraining):
    """A transformers BertForMaskedLM holding our model's weights (its default attention, as a Captum user runs it)."""
    import transformers

    hf = transformers.BertForMaskedLM(transformers.BertConfig(**model.config.to_dict()))
    missing, _ = hf.load_state_dict(model.state_dict(), strict=False)  # our pooler and NSP head are left over
    assert all("decoder" in k for k in missing), missing  # the decoder is tied to the embeddings
    hf.tie_weights()
    return hf.eval()


def hf_integrated_gradients(hf, case: methods.Case):
    """The tutorial way: Captum's LayerIntegratedGradients on the word embeddings of a transformers model, the
    target's logit at the [MASK] read from the full (B, T, V) logits; the same baseline, steps and batch as ours."""
    from captum.attr import LayerIntegratedGradients

    position, target = case.score.position, case.score.target

    def forward(ids, segments, attention_mask):
        return hf(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask).logits[:, position, target]

    ig = LayerIntegratedGradients(forward, hf.bert.embeddings.word_embeddings)
    return ig.attribute(case.ids, baselines=methods.baseline_ids(case), n_steps=methods.IG_STEPS,
                        method=methods.IG_METHOD, internal_batch_size=IG_CHUNK, return_convergence_delta=True,
                        additional_forward_args=(case.segments, torch.ones_like(case.ids)))


def compare_ig(case: methods.Case, rounds: int) -> dict:
    """Seconds of each side's integrated gradients (medians) and the median of per-round ratios ours / theirs."""
    hf = hf_masked_lm(case.model)
    ours = methods.integrated_gradients(case).values
    theirs = hf_integrated_gradients(hf, case)[0][0].double().sum(-1).numpy()
    assert abs(ours - theirs).max() <= 1e-3 * max(abs(ours).max(), 1e-12), "the two integrated gradients disagree"
    ms = interleaved_ms({"ours": lambda: methods.integrated_gradients(case),
                         "transformers": lambda: hf_integrated_gradients(hf, case)}, rounds, warmup=1)
    return {**{side: statistics.median(t) / 1000 for side, t in ms.items()},
            "ratio": median_ratio(ms["ours"], ms["transformers"])}


def report(subject: Subject, timed: dict, ig: dict, runs: int, deletion_runs: int) -> bool:
    """Print one model's figures; whether its goal was met."""
    print(f"\n{subject.title}")
    seconds = timed["steps"]
    for name, s in seconds.items():
        also = " (and gradient x input: the same backward)" if name == "gradient" else ""
        print(f"  {name:<22} {s * 1000:9.1f} ms{also}")
    goal, total = GOALS[subject.key], timed["total"]
    met = total < goal
    print(f"  all {len(METHODS)} methods (why(): the guesses, every method, the score): median {total:.3g} s "
          f"over {runs} runs; goal < {goal:g} s: {'met' if met else 'MISSED'}")
    print(f"  deletion curves (every method's order and 20 random ones): median {timed['deletion']:.3g} s "
          f"over {deletion_runs} runs")
    print(f"  integrated gradients, ours vs transformers + Captum: ours {ig['ours']:.3g} s, transformers "
          f"{ig['transformers']:.3g} s, ratio {ig['ratio']:.3f}")
    return met


def cpu_name() -> str:
    """The processor's model name, as /proc/cpuinfo gives it (Linux), or the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed runs of every method per model (default 5)")
    parser.add_argument("--deletion-runs", type=int, default=2, help="timed runs of the deletion curves (default 2)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the IG comparison (default 5)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--base-tokens", type=int, default=BASE_TOKENS)
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"{dt.date.today()} · {platform.node()} · {cpu_name()} · "
          f"{os.cpu_count()} cores, {args.threads} threads, CPU, torch {torch.__version__} · load average "
          f"{os.getloadavg()[0]:.1f} at the start · medians of {args.runs} runs after a warm-up")
    missed = 0
    for make in (shipped, lambda: base(args.base_tokens)):
        subject = make()
        timed = time_why(subject, args.runs, args.deletion_runs)
        ig = compare_ig(timed["result"].case, args.rounds)
        missed += not report(subject, timed, ig, args.runs, args.deletion_runs)
    print("\nevery goal met" if not missed else f"\n{missed} goal(s) MISSED")


if __name__ == "__main__":
    main()
