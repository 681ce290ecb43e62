"""Training throughput: tokens/s of our training step vs transformers, same config, same run.

Config: vocab 8192, hidden 256, 4 layers, 4 heads, intermediate 1024; batch 32 x 128
tokens with 15% masking and NSP labels; AdamW, gradient clipping, fp32, 2 threads.
Ours is `Trainer.train_step` itself (sparse MLM head, the fast CPU dropout, metrics
included) fed a fixed batch; transformers' BertForPreTraining runs with its eager and
its sdpa attention and the faster of the two is the baseline. Prints medians and
the ratio ours / transformers (above 1 = we are faster).

    .venv/bin/python -m bench.train_throughput [--rounds 12]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.common import hf_twin, pin_threads
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.masking import mask_tokens
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.data import Batch
from bertviz_lab.pretrain.loop import Trainer, param_groups

CONFIG = BertConfig(vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                    intermediate_size=1024, max_position_embeddings=128)
B, T = 32, 128


def fixed_batch() -> Batch:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, CONFIG.vocab_size, (B, T), generator=g)
    ids[:, 0], ids[:, T // 2], ids[:, -1] = 2, 3, 3  # [CLS] A [SEP] B [SEP]
    segments = torch.zeros_like(ids)
    segments[:, T // 2 + 1:] = 1
    masked = mask_tokens(ids, special_ids={0, 1, 2, 3, 4}, vocab_size=CONFIG.vocab_size, mask_id=4, generator=g)
    return Batch(masked.input_ids, segments, None, masked.labels, torch.randint(0, 2, (B,), generator=g), B * T)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    pin_threads(args.threads)
    batch = fixed_batch()
    trainer = Trainer(TrainConfig(preset="mini", seq_len=T, batch_size=B, steps=10**6, warmup=0, lr=1e-4,
                                  threads=args.threads, device="cpu", precision="fp32"), model_config=CONFIG)
    trainer.batch = lambda step, micro=0, stream=0: batch
    attention = torch.ones(B, T, dtype=torch.long)  # transformers gets an explicit all-ones mask, as usual

    def hf_step(model, optimizer):
        out = model(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids, attention_mask=attention,
                    labels=batch.labels, next_sentence_label=batch.nsp_labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    steps = {"ours": trainer.train_step}
    for impl in ("eager", "sdpa"):
        hf = hf_twin(trainer.model, impl).train()
        opt = torch.optim.AdamW(param_groups(hf, 0.01), lr=1e-4, eps=1e-6)
        steps[f"transformers-{impl}"] = lambda hf=hf, opt=opt: hf_step(hf, opt)
    for step in steps.values():  # warm up allocators and kernels
        step(), step()
    times = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    tps = {name: B * T / statistics.median(t) for name, t in times.items()}
    faster = max(("transformers-eager", "transformers-sdpa"), key=tps.get)
    # Each round times the contenders back to back, so a per-round ratio cancels slow drifts
    # in machine load; the median of those is the figure quoted.
    ratio = statistics.median(theirs / ours for ours, theirs in zip(times["ours"], times[faster]))
    print(f"training step, batch {B}x{T}, vocab 8192, 4x256, fp32, {args.threads} threads, "
          f"median of {args.rounds} rounds")
    for name, value in tps.items():
        print(f"  {name:<20} {value:8.0f} tokens/s")
    print(f"ratio ours / {faster} = {ratio:.2f} (median of per-round ratios; target >= 1.8)")


if __name__ == "__main__":
    main()
