"""BERT-base on one CUDA GPU: training tokens/s and model FLOPs utilisation, inference latency, ours vs transformers.

Training: one optimizer step of BERT-base (hidden 768, 12 layers, 12 heads, intermediate 3072, vocab 30522, 512
positions, dropout 0.1) on a fixed batch of --batch x 128 tokens (15% masked, NSP labels), in the lab's "auto"
precision (bf16 autocast; fp16 with a loss scaler on a card without bf16 units, whose peak the table gives), the same
fused AdamW and gradient clipping both sides. Ours is `Trainer.train_step` itself (metrics and its one host sync
included); transformers' BertForPreTraining (sdpa attention) holds the same weights and steps on the same batch.
Each timed call runs --steps steps and waits for the GPU; the ratio ours / transformers (tokens/s, above 1 = we
are faster) is the median of per-round ratios.

MFU, model FLOPs utilisation: achieved model FLOPs/s over the card's peak dense bf16 tensor FLOPs/s, counting
training FLOPs per token as the PaLM paper does (its appendix B):

    6 N + 12 L H T    N: non-embedding parameters (all but the word, position and token-type tables)
                      L: layers, H: hidden size, T: sequence length

6N is the weights' matmuls (2N forward, 4N backward), 12LHT attention's two products (QK^T and AV: 4LHT forward,
8LHT backward). Ours computes the MLM head only at the masked rows and the last layer only where the heads read,
fewer FLOPs than the count: its MFU is the model's, as the convention means, not the hardware's. The peak comes
from a table of cards by name (fp16 for T4 and V100, which have no bf16 units), or --peak-tflops.

Inference: median ms of one forward pass (eval, no grad, every head) at batch 1 and 32 of 128 tokens, ours vs
transformers, in bf16 autocast and in fp32 (TF32 as torch's default leaves it: off for matmuls).

    .venv/bin/python -m bench.gpu [--batch 64] [--rounds 10] [--steps 5] [--peak-tflops 989]
    .venv/bin/python -m bench.gpu --device cpu --tiny --rounds 2    # the whole path on a CPU, a tiny model

--precision (auto, fp32, bf16) is the lab's own switch: on a CPU "auto" is bf16 only where this machine runs
bf16 matmuls faster (an AMD without bf16 units: fp32), and the latency table then has no autocast rows.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable

import torch

from bench.common import fixed_batch, hf_adamw, hf_train_step, hf_twin, interleaved_ms, median_ratio
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.pretrain.config import PRECISIONS, TrainConfig
from bertviz_lab.pretrain.data import Batch
from bertviz_lab.pretrain.loop import Trainer

BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072, max_position_embeddings=512)
TINY = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=128, max_position_embeddings=64)
# (card name pattern, peak dense bf16 tensor FLOPs/s; fp16 for T4 and V100), from NVIDIA's datasheets. The first
# match wins, so a variant comes before its family's plain name.
PEAKS = ((r"H100.*PCIe", 756e12), (r"H100.*NVL", 835e12), (r"H100", 989e12), (r"H200", 989e12), (r"A100", 312e12),
         (r"L40S", 362e12), (r"\bL4\b", 121e12), (r"\bA10\b", 125e12), (r"\bT4\b", 65e12), (r"V100", 125e12))
EMBEDDING_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")
INFERENCE_BATCHES = (1, 32)
LABELS = {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}  # an autocast dtype (None: off) by name
TRAINING = {torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast", None: "fp32 (no autocast)"}
NO_GPU = ("no CUDA GPU: this benchmark measures one (run it where torch.cuda.is_available()); "
          "to smoke-test its code path on the CPU, run it with --device cpu --tiny")


def peak_flops(card: str) -> float | None:
    """The card's peak dense bf16 FLOPs/s by its name (torch.cuda.get_device_name), or None for a card not listed."""
    return next((peak for pattern, peak in PEAKS if re.search(pattern, card)), None)


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """N of the FLOPs count: every parameter but the word, position and token-type embedding tables."""
    return sum(p.numel() for name, p in model.named_parameters() if not any(t in name for t in EMBEDDING_TABLES))


def flops_per_token(non_embedding: int, layers: int, hidden: int, seq_len: int) -> int:
    """Training FLOPs per token, the PaLM paper's count: 6N + 12 L H T."""
    return 6 * non_embedding + 12 * layers * hidden * seq_len


def repeated(fn: Callable[[], object], times: int, device: torch.device) -> Callable[[], None]:
    """`fn` run `times` times, then a wait for the GPU: a timed call ends when its work has."""
    def run() -> None:
        for _ in range(times):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return run


def train_throughput(trainer: Trainer, hf, batch: Batch, *, rounds: int, steps: int) -> dict[str, list[float]]:
    """ms per step of ours and transformers', one entry per round (each round times both back to back)."""
    optimizer = hf_adamw(hf, trainer.cfg.weight_decay, trainer.cfg.lr)
    trainer.batch = lambda step, micro=0, stream=0: batch  # the same batch at every step
    calls = {"ours": repeated(trainer.train_step, steps, trainer.device),
             "transformers-sdpa": repeated(lambda: hf_train_step(hf, optimizer, batch, trainer.cfg.grad_clip,
                                                                 trainer.amp_dtype), steps, trainer.device)}
    return {name: [t / steps for t in ms] for name, ms in interleaved_ms(calls, rounds).items()}


def latency(contenders: dict[str, torch.nn.Module], batch: Batch, amp_dtype: torch.dtype | None, *, rounds: int,
            repeats: int) -> dict[str, list[float]]:
    """ms of one forward pass (every head, no grad) of each model on `batch`, one entry per round."""
    device = batch.input_ids.device

    @torch.no_grad()
    def forward(model: torch.nn.Module) -> None:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            model(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids)  # by name: transformers' second
            # positional argument is attention_mask

    calls = {name: repeated(lambda m=model: forward(m), repeats, device) for name, model in contenders.items()}
    return {name: [t / repeats for t in ms] for name, ms in interleaved_ms(calls, rounds).items()}


def mfu_line(tokens_per_s: dict[str, float], per_token: int, peak: float | None, card: str, device) -> str:
    """What share of the card's peak each side's model FLOPs reach, or why that cannot be said."""
    if peak is None:
        return ("MFU: n/a on CPU (pass --peak-tflops for this CPU's peak)" if device.type == "cpu" else
                f"MFU: unknown card: pass --peak-tflops ({card} is not in bench/gpu.py's table)")
    shares = ", ".join(f"{name} {rate * per_token / peak:.1%}" for name, rate in tokens_per_s.items())
    return f"MFU: {shares} of {peak / 1e12:g} TFLOP/s ({card})"


def print_latencies(trainer: Trainer, hf, cfg: BertConfig, seq_len: int, args: argparse.Namespace) -> None:
    """Inference: ours and transformers' forward pass at each of INFERENCE_BATCHES, in the run's autocast and fp32."""
    print(f"inference, one forward pass of {seq_len} tokens (median ms; ratio transformers / ours, above 1: ours is "
          "faster):")
    trainer.model.eval()
    hf.eval()
    for size in INFERENCE_BATCHES:
        for dtype in dict.fromkeys((trainer.amp_dtype, None)):  # fp32 once where the run has no autocast
            batch = fixed_batch(cfg, size, seq_len, trainer.device)
            times = latency({"ours": trainer.model, "transformers": hf}, batch, dtype, rounds=args.rounds,
                            repeats=args.steps)
            ours, theirs = (statistics.median(times[k]) for k in ("ours", "transformers"))
            print(f"  batch {size:>2} {LABELS[dtype]}  ours {ours:8.2f} ms  transformers {theirs:8.2f} ms  ratio "
                  f"{median_ratio(times['transformers'], times['ours']):.2f}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (cpu: with --tiny, a smoke test)")
    parser.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers, vocab 1000, batch 4 x 32")
    parser.add_argument("--batch", type=int, default=None, help="training batch (default: 64; --tiny: 4)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default: 10; --tiny: 3)")
    parser.add_argument("--steps", type=int, default=None, help="steps per timed call (default: 5; --tiny: 1)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the card's peak dense bf16 TFLOP/s")
    parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                        help="the run's autocast, as the lab's train --precision (default: auto)")
    args = parser.parse_args(argv)
    args.batch = args.batch or (4 if args.tiny else 64)
    args.rounds = args.rounds or (3 if args.tiny else 10)
    args.steps = args.steps or (1 if args.tiny else 5)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    cfg, seq_len = (TINY, 32) if args.tiny else (BASE, 128)
    trainer = Trainer(TrainConfig(preset="tiny" if args.tiny else "base", seq_len=seq_len, batch_size=args.batch,
                                  steps=10**6, warmup=0, lr=1e-4, device=args.device, precision=args.precision),
                      model_config=cfg)
    device = trainer.device
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    hf = hf_twin(trainer.model, "sdpa").to(device).train()
    print(f"device: {card} (torch {torch.__version__}); model {cfg.num_hidden_layers} x {cfg.hidden_size}, vocab "
          f"{cfg.vocab_size}; {args.rounds} rounds of {args.steps} step(s) (medians; ratios: median of per-round ratios)")
    ms = train_throughput(trainer, hf, fixed_batch(cfg, args.batch, seq_len, device), rounds=args.rounds,
                          steps=args.steps)
    tokens = args.batch * seq_len
    rates = {name: tokens / statistics.median(times) * 1000 for name, times in ms.items()}
    print(f"training step, batch {args.batch} x {seq_len}, {TRAINING[trainer.amp_dtype]}, fused AdamW:")
    for name, rate in rates.items():
        print(f"  {name:<18} {rate:10.0f} tokens/s  {statistics.median(ms[name]):8.2f} ms/step")
    print(f"ratio ours / transformers = {median_ratio(ms['transformers-sdpa'], ms['ours']):.2f} "
          "(tokens/s; above 1: ours is faster)")
    n = non_embedding_parameters(trainer.model)
    per_token = flops_per_token(n, cfg.num_hidden_layers, cfg.hidden_size, seq_len)
    print(f"model FLOPs per token: 6N + 12LHT = 6 x {n:,} + 12 x {cfg.num_hidden_layers} x {cfg.hidden_size} x "
          f"{seq_len} = {per_token:,}")
    peak = args.peak_tflops * 1e12 if args.peak_tflops else None if device.type == "cpu" else peak_flops(card)
    print(mfu_line(rates, per_token, peak, card, device))
    print_latencies(trainer, hf, cfg, seq_len, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
