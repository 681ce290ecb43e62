"""bench/gpu.py without a GPU: its whole code path on a tiny model on the CPU prints every line it promises, the
FLOPs count is the PaLM paper's on BERT-base, the peak table finds each card by name, and a machine without a GPU
gets one sentence and exit status 2."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from bench import gpu
from bertviz_lab.bert.model import BertForPreTraining
from tests.helpers.paths import ROOT

PEAK_TFLOPS = 0.01  # a made-up peak for the CPU, so that the MFU line is printed with numbers


@pytest.fixture(scope="module", params=["auto", "bf16", "fp32"])
def printed(request) -> tuple[str, str]:
    """(the precision asked for, what `python -m bench.gpu --device cpu --tiny --rounds 2` prints with a peak given).
    "auto" is bf16 on a CPU with bf16 units and fp32 on one without (an AMD EPYC with AVX2 only): both are run here
    by name, on every machine."""
    done = subprocess.run([sys.executable, "-m", "bench.gpu", "--device", "cpu", "--tiny", "--rounds", "2",
                           "--peak-tflops", str(PEAK_TFLOPS), "--precision", request.param], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return request.param, done.stdout


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text, re.MULTILINE)
    assert found, (pattern, text)
    return float(found.group(1))


def test_a_tiny_cpu_run_prints_throughput_ratio_mfu_and_latency(printed):
    precision, printed = printed
    ours = number(r"^  ours\s+(\d+) tokens/s", printed)
    theirs = number(r"^  transformers-sdpa\s+(\d+) tokens/s", printed)
    assert ours > 0 and theirs > 0
    assert number(r"^ratio ours / transformers = (\d+\.\d+) ", printed) > 0
    per_token = int(number(r"^model FLOPs per token: 6N \+ 12LHT = .* = ([\d,]+)$", printed.replace(",", "")))
    assert per_token == gpu.flops_per_token(76_650, 2, 64, 32)  # the tiny model: 2 x 64, vocab 1000, 32 tokens
    mfu = number(r"^MFU: ours (\d+\.\d)%", printed)
    assert mfu == pytest.approx(ours * per_token / (PEAK_TFLOPS * 1e12) * 100, rel=0.02, abs=0.1)
    latencies = re.findall(r"^  batch\s+(\d+) (bf16|fp32)  ours\s+([\d.]+) ms  transformers\s+([\d.]+) ms  ratio "
                           r"([\d.]+)$", printed, re.MULTILINE)
    trained = re.search(r"^training step, batch 4 x 32, (bf16 autocast|fp32 \(no autocast\)), fused AdamW:$", printed,
                        re.MULTILINE)
    assert trained and (precision == "auto" or trained.group(1).startswith(precision)), printed
    run = {"fp32"} | {trained.group(1).split()[0]}  # the run's own precision, and fp32 beside it (once)
    assert sorted((int(b), dtype) for b, dtype, *_ in latencies) == sorted((b, d) for b in (1, 32) for d in run)
    assert all(float(x) > 0 for *_, a, b, r in latencies for x in (a, b, r))


def test_training_flops_per_token_of_bert_base_by_hand():
    with torch.device("meta"):  # the shape only: no memory for 110 M weights
        model = BertForPreTraining(gpu.BASE)
    d, ffn, vocab = 768, 3072, 30522
    layer = 4 * (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 2 * 2 * d  # Q, K, V, output; the FFN; 2 LayerNorms
    mlm = (d * d + d) + 2 * d + vocab  # the transform, its LayerNorm, the decoder's bias (its weight: the embeddings)
    nsp = (d * d + d) + (2 * d + 2)  # the pooler, the NSP classifier
    n = 12 * layer + 2 * d + mlm + nsp  # the embeddings' LayerNorm counts; their tables do not
    assert gpu.non_embedding_parameters(model) == n == 86_270_780
    assert gpu.flops_per_token(n, 12, d, 128) == 6 * n + 12 * 12 * d * 128 == 531_780_456


@pytest.mark.parametrize("card, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 SXM5 80GB", 989e12), ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200", 989e12), ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA A10", 125e12), ("NVIDIA L4", 121e12),
    ("NVIDIA L40S", 362e12), ("Tesla T4", 65e12), ("Tesla V100-SXM2-16GB", 125e12),
    ("NVIDIA A10G", None), ("NVIDIA GeForce RTX 4090", None), ("CPU", None)])
def test_the_peak_table_finds_each_card_by_name(card, peak):
    assert gpu.peak_flops(card) == peak


def test_mfu_says_why_it_has_no_number():
    rates = {"ours": 1000.0}
    assert gpu.mfu_line(rates, 10, None, "CPU", torch.device("cpu")).startswith("MFU: n/a on CPU")
    assert "unknown card: pass --peak-tflops" in gpu.mfu_line(rates, 10, None, "NVIDIA Foo", torch.device("cuda"))
    assert gpu.mfu_line(rates, 10**9, 1e13, "NVIDIA Foo", torch.device("cuda")) == \
        "MFU: ours 10.0% of 10 TFLOP/s (NVIDIA Foo)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_without_a_gpu_it_says_so_in_one_sentence_and_exits_2(capsys):
    assert gpu.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == gpu.NO_GPU + "\n" and err.startswith("no CUDA GPU: ")
