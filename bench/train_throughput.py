"""Training throughput: tokens/s of our training step vs transformers, same config, same run.

Config: vocab 8192, hidden 256, 4 layers, 4 heads, intermediate 1024; batch 32 x 128
tokens with 15% masking and NSP labels; the same fused AdamW both sides, gradient clipping, fp32, 2 threads.
Ours is `Trainer.train_step` itself (the MLM head and the last layer only at the rows the losses read,
the fast CPU dropout, metrics included) fed a fixed batch; transformers' BertForPreTraining runs with
its eager and its sdpa attention and the faster of the two is the baseline. Prints medians, each step
split into its phases (by hooks on the model and the optimizer), the median of per-round ratios ours /
transformers (above 1 = we are faster; issue 17's goal: 2.0), the share of our step that dropout takes
(the same step without it is timed alongside) and the time of our step spent in matrix products
(torch.profiler, one step): the ratio could be no higher than the baseline's step over that time.

    .venv/bin/python -m bench.train_throughput [--rounds 12] [--threads 2]

`--threads 0` times each side as it runs by default: ours on the trainer's threads 0 (every core no other
program is using, looked at each second: pretrain/threads.py), transformers on torch's default.
Beside a program that keeps a core busy this compares the two defaults, not the two steps' code.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from bench.common import fixed_batch, hf_adamw, hf_train_step, hf_twin, median_ratio, pin_threads
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer

CONFIG = BertConfig(vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                    intermediate_size=1024, max_position_embeddings=128)
B, T = 32, 128
GOAL = 2.0
PHASES = ("forward", "backward", "optimizer", "rest")
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "mkldnn::_linear_pointwise"}


class PhaseClock:
    """Splits each timed step at marks set by hooks: the model's forward begins ("forward") and ends
    ("backward": the loss, backward and gradient clipping follow), the optimizer step begins and ends
    ("rest": metrics, zeroing, the schedule). Each phase is a list of ms, one per timed step."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        self.marks: dict[str, float] = {}
        self.ms = {phase: [] for phase in (*PHASES, "step")}
        model.register_forward_pre_hook(lambda *_: self._mark("forward"))
        model.register_forward_hook(lambda *_: self._mark("backward"))
        optimizer.register_step_pre_hook(lambda *_: self._mark("optimizer"))
        optimizer.register_step_post_hook(lambda *_: self._mark("rest"))

    def _mark(self, phase: str) -> None:
        self.marks.setdefault(phase, time.perf_counter())

    def time(self, step: Callable[[], object]) -> None:
        self.marks = {}
        start = time.perf_counter()
        step()
        end = time.perf_counter()
        bounds = [start, *(self.marks[p] for p in PHASES[1:]), end]  # forward starts with the step
        for phase, a, b in zip(PHASES, bounds, bounds[1:]):
            self.ms[phase].append((b - a) * 1000)
        self.ms["step"].append((end - start) * 1000)

    def summary(self) -> str:
        return "  ".join(f"{p} {statistics.median(self.ms[p]):4.0f}" for p in PHASES) + " ms"


def matmul_ms(step: Callable[[], object]) -> tuple[float, float]:
    """(ms in matrix products, ms in all) of one profiled step: linear layers and attention products."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        step()
        wall = time.perf_counter() - start
    busy = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMULS)  # microseconds
    return busy / 1000, wall * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    default_threads = torch.get_num_threads()  # torch's own choice, before anything here changes it
    if args.threads:
        pin_threads(args.threads)
    batch = fixed_batch(CONFIG, B, T)
    trainer = Trainer(TrainConfig(preset="mini", seq_len=T, batch_size=B, steps=10**6, warmup=0, lr=1e-4,
                                  threads=args.threads, device="cpu", precision="fp32"), model_config=CONFIG)
    trainer.batch = lambda step, micro=0, stream=0: batch
    # the same step without dropout, timed alongside: what the dropout costs us
    no_dropout = replace(CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    still = Trainer(trainer.cfg, model_config=no_dropout)
    still.batch = trainer.batch
    steps = {"ours": trainer.train_step, "ours, no dropout": still.train_step}
    if not args.threads:  # each side its default threads before each of its steps: one process, one setting
        for name, step in steps.items():
            steps[name] = lambda step=step, t=trainer.threads: (torch.set_num_threads(t.update()), step())
    clocks = {"ours": PhaseClock(trainer.model, trainer.optimizer),
              "ours, no dropout": PhaseClock(still.model, still.optimizer)}
    for impl in ("eager", "sdpa"):
        hf = hf_twin(trainer.model, impl).train()
        opt = hf_adamw(hf, 0.01, 1e-4)
        steps[f"transformers-{impl}"] = lambda hf=hf, opt=opt: (
            args.threads or torch.set_num_threads(default_threads), hf_train_step(hf, opt, batch))
        clocks[f"transformers-{impl}"] = PhaseClock(hf, opt)
    for step in steps.values():  # warm up allocators and kernels
        step(), step()
    for _ in range(args.rounds):
        for name, step in steps.items():
            clocks[name].time(step)
    ms = {name: clock.ms["step"] for name, clock in clocks.items()}
    faster = min(("transformers-eager", "transformers-sdpa"), key=lambda name: statistics.median(ms[name]))
    # Each round times the contenders back to back, so a per-round ratio cancels slow drifts
    # in machine load; the median of those is the figure quoted.
    ratio = median_ratio(ms[faster], ms["ours"])
    threads = (f"{args.threads} threads" if args.threads else
               f"threads as each runs by default (ours used {trainer.threads.describe()}; transformers {default_threads})")
    print(f"training step, batch {B}x{T}, vocab 8192, 4x256, fp32, {threads}, {args.rounds} rounds "
          "(medians; ratio: median of per-round ratios)")
    for name, clock in clocks.items():
        print(f"  {name:<20} {B * T / statistics.median(ms[name]) * 1000:6.0f} tokens/s   {clock.summary()}")
    print(f"ratio ours / {faster} = {ratio:.2f} (goal >= {GOAL}: {'met' if ratio >= GOAL else 'MISSED'})")
    print(f"dropout: {1 - 1 / median_ratio(ms['ours'], ms['ours, no dropout']):.0%} of our step (ours / ours without "
          "dropout, median of per-round ratios)")
    products, step_ms = matmul_ms(steps["ours"])  # on its own threads
    print(f"ours: matrix products {products:.0f} of {step_ms:.0f} ms ({products / step_ms:.0%}, torch.profiler, one "
          f"step); the rest (dropout, GELU, softmax, the loss, LayerNorm) is what limits the ratio: at no cost it "
          f"would be {statistics.median(ms[faster]) / products:.2f}")


if __name__ == "__main__":
    main()
