"""Trace-mode forward latency: bertviz_lab vs transformers, same weights, same run.

transformers runs BertForPreTraining in eager attention with output_attentions and
output_hidden_states (what an attention view needs); we run `trace=True`, which
returns even more (q, k, v, scores, weights, context per layer). Batch 1, 2 threads.
Prints the medians and the ratio ours / transformers (below 1.0 = we are faster).

    .venv/bin/python -m bench.inference [--rounds 30] [--device cpu]
"""

from __future__ import annotations

import argparse

import torch

from bench.common import hf_twin, median_ms, pin_threads
from bertviz_lab.bert.config import preset
from bertviz_lab.bert.device import resolve_device
from bertviz_lab.bert.model import BertForPreTraining

CASES = [("mini", 32), ("base", 32), ("base", 128)]


def bench_case(name: str, tokens: int, rounds: int, device: torch.device) -> dict:
    torch.manual_seed(0)
    ours = BertForPreTraining(preset(name)).eval().to(device)
    hf = hf_twin(ours).eval().to(device)
    ids = torch.randint(5, ours.config.vocab_size, (1, tokens), device=device)
    segments = torch.zeros_like(ids)
    segments[:, tokens // 2:] = 1

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    @torch.inference_mode()
    def run_ours():
        ours(ids, segments, trace=True)
        sync()

    @torch.inference_mode()
    def run_hf():
        hf(input_ids=ids, token_type_ids=segments, output_attentions=True, output_hidden_states=True)
        sync()

    with torch.inference_mode():  # same answers before we time anything
        a, b = ours(ids, segments, trace=True), hf(input_ids=ids, token_type_ids=segments, output_attentions=True)
        assert torch.allclose(a.mlm_logits, b.prediction_logits, atol=1e-4), "the two models disagree"
    ms = median_ms({"ours": run_ours, "transformers": run_hf}, rounds)
    return {"case": f"{name} ({ours.config.num_hidden_layers}x{ours.config.hidden_size}), {tokens} tokens",
            **ms, "ratio": ms["ours"] / ms["transformers"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    pin_threads(args.threads)
    device = resolve_device(args.device)
    print(f"trace-mode forward, batch 1, {args.threads} threads, {device}, median of {args.rounds} rounds")
    print(f"{'case':<32} {'ours ms':>9} {'transformers ms':>16} {'ratio':>7}")
    worst = 0.0
    for name, tokens in CASES:
        r = bench_case(name, tokens, args.rounds, device)
        worst = max(worst, r["ratio"])
        print(f"{r['case']:<32} {r['ours']:>9.2f} {r['transformers']:>16.2f} {r['ratio']:>7.3f}")
    print(f"worst ratio {worst:.3f} ({'meets' if worst <= 1.0 else 'MISSES'} the <= 1.0 target)")


if __name__ == "__main__":
    main()
