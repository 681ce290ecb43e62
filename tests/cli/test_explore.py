"""`similarity` and `lens`: parity with transformers, one line and exit 2 on bad input, readable text."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.cli import main
from tests.helpers.cli import corrupt, run_broken
from tests.helpers.lab import no_gpu_env, vocab_of_size
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
CONFIG = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=64, initializer_range=0.2)
LAYERS = CONFIG.num_hidden_layers + 1  # the embeddings' output, then every layer
# Different lengths (so the batch is padded) and the word at different positions.
PLAYING = ["i love playing .", "the dog and the cat were playing on the rug because it did not rain .",
           "playing in the street , he was tired"]
UNBELIEVABLE = ["it was unbelievable !", "the food in the city was unbelievable and delicious .",
                "unbelievable"]
LENS_TEXT = "the [MASK] sat on the mat . it was [MASK] and tired ."


def run_cli(*args):
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bertviz_lab", *map(str, args)], check=False,
                          capture_output=True, text=True, env=env, timeout=120)


def cli_json(capsys, *args):
    assert main([*map(str, args), "--device", "cpu", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    """A random transformers BertForPreTraining saved with save_pretrained, plus a vocab.txt."""
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(transformers.BertConfig(**CONFIG.to_dict(),
                                                                 attn_implementation="eager")).eval()
    with torch.no_grad():  # HF inits biases and LayerNorms to constants: randomize so parity means something
        for name, p in hf.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("hf")
    hf.save_pretrained(folder)
    WordPieceTokenizer.from_vocab(vocab_of_size(CONFIG.vocab_size)).save(folder)
    return folder, hf, transformers.BertTokenizerFast.from_pretrained(folder)


def expected_similarity(hf, hf_tok, word, sentences):
    """Per layer, the cosine matrix of the word's vectors, each sentence run alone (no padding) by transformers."""
    pieces = hf_tok.tokenize(word)
    vectors = []
    for text in sentences:
        enc = hf_tok(text, return_tensors="pt")
        tokens, word_ids = enc.tokens(), enc.word_ids()
        found = [[i for i, w in enumerate(word_ids) if w == k] for k in sorted({w for w in word_ids if w is not None})]
        positions = next(p for p in found if [tokens[i] for i in p] == pieces)
        with torch.no_grad():
            hidden = hf(**enc, output_hidden_states=True).hidden_states
        vectors.append(torch.stack([h[0, positions].mean(dim=0) for h in hidden]))  # (L + 1, d)
    v = torch.nn.functional.normalize(torch.stack(vectors, dim=1).double(), dim=-1)  # (L + 1, S, d)
    return (v @ v.transpose(1, 2)).numpy(), pieces


@pytest.mark.parametrize("word, sentences, n_pieces", [("playing", PLAYING, 2), ("unbelievable", UNBELIEVABLE, 3),
                                                       ("cat", ["the cat sat .", "a dog and a cat"], 1)])
def test_similarity_json_matches_transformers(hf_checkpoint, capsys, word, sentences, n_pieces):
    folder, hf, hf_tok = hf_checkpoint
    result = cli_json(capsys, "similarity", "--checkpoint", folder, "--word", word, *sentences)
    expected, pieces = expected_similarity(hf, hf_tok, word, sentences)
    assert len(pieces) == n_pieces and result["word"] == word and result["sentences"] == sentences
    got = np.array(result["layers"])
    assert got.shape == (LAYERS, len(sentences), len(sentences))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert (got[1:] < 0.999).any()  # the context moved the vectors apart: a match means something


def test_similarity_from_a_real_process_matches_in_process(hf_checkpoint, capsys):
    folder, hf, hf_tok = hf_checkpoint
    done = run_cli("similarity", "--checkpoint", folder, "--device", "cpu", "--json", "--word", "playing", *PLAYING)
    assert done.returncode == 0, done.stderr
    expected, _ = expected_similarity(hf, hf_tok, "playing", PLAYING)
    np.testing.assert_allclose(np.array(json.loads(done.stdout)["layers"]), expected, atol=1e-5, rtol=0)


def test_lens_json_matches_transformers_and_its_last_layer_is_predict(hf_checkpoint, capsys):
    folder, hf, hf_tok = hf_checkpoint
    k = 5
    result = cli_json(capsys, "lens", "--checkpoint", folder, "--top-k", k, LENS_TEXT)
    enc = hf_tok(LENS_TEXT, return_tensors="pt")
    assert result["tokens"] == enc.tokens()
    positions = [i for i, t in enumerate(enc["input_ids"][0].tolist()) if t == hf_tok.mask_token_id]
    assert [m["position"] for m in result["masks"]] == positions and len(positions) == 2
    with torch.no_grad():
        hidden = hf(**enc, output_hidden_states=True).hidden_states
        for mask, position in zip(result["masks"], positions):
            assert len(mask["layers"]) == LAYERS
            for layer, top in zip(hidden, mask["layers"]):
                probs, ids = torch.softmax(hf.cls.predictions(layer[0, position]), dim=-1).topk(k)
                assert [c["token"] for c in top] == hf_tok.convert_ids_to_tokens(ids.tolist())
                np.testing.assert_allclose([c["prob"] for c in top], probs.numpy(), atol=1e-5, rtol=0)
            layers = [[c["token"] for c in top] for top in mask["layers"]]
            assert len({tuple(t) for t in layers}) > 1  # the layers disagree: the lens reads each one
    predicted = cli_json(capsys, "predict", "--checkpoint", folder, "--top-k", k, LENS_TEXT)
    for mask, guess in zip(result["masks"], predicted["masks"]):
        assert [c["token"] for c in mask["layers"][-1]] == [c["token"] for c in guess["candidates"]]
        np.testing.assert_allclose([c["prob"] for c in mask["layers"][-1]],
                                   [c["prob"] for c in guess["candidates"]], atol=1e-6, rtol=0)


def without_mlm_head(path):
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(**CONFIG.to_dict())).save_pretrained(path)
    WordPieceTokenizer.from_vocab(vocab_of_size(CONFIG.vocab_size)).save(path)


SIM = ["similarity", "--word"]
BAD = {
    "word not in a sentence": (None, [*SIM, "cat", "the cat sat .", "the dog sat ."], "sentence 2 does not contain"),
    "word only inside a longer word": (None, [*SIM, "cat", "the cat sat .", "two cats sat ."], "sentence 2 "),
    "one sentence": (None, [*SIM, "cat", "the cat sat ."], "at least two sentences"),
    "no sentence": (None, [*SIM, "cat"], "at least two sentences"),
    "blank sentence": (None, [*SIM, "cat", "the cat", " ", "the dog"], "sentence 2 is empty"),
    "too many sentences": (None, [*SIM, "cat", *["the cat"] * 25], "at most 24"),
    "unknown word": (None, [*SIM, "zebra", "a zebra .", "the zebra ."], "does not know 'zebra'"),
    "empty word": (None, [*SIM, " ", "the cat", "a cat"], "type a word"),
    "sentence too long": (None, [*SIM, "cat", "the cat", "a cat " * 40], "sentence 2: .*at most 64"),
    "similarity, corrupt weights": (corrupt, [*SIM, "cat", "the cat", "a cat"], "model.safetensors is .*corrupt"),
    "similarity, missing folder": ("rm", [*SIM, "cat", "the cat", "a cat"], "no model folder"),
    "similarity, unknown device": (None, ["similarity", "--device", "tpu", "--word", "cat", "the cat", "a cat"],
                                   "unknown device"),
    "no mask": (None, ["lens", "the cat sat on the mat ."], "type \\[MASK\\]"),
    "empty text": (None, ["lens", "  "], "empty"),
    "text too long": (None, ["lens", "the [MASK] " + "cat " * 80], "at most 64"),
    "top-k 0": (None, ["lens", "--top-k", "0", "the [MASK] ."], "top-k must be between 1 and 100, got 0"),
    "top-k negative": (None, ["lens", "--top-k", "-3", "the [MASK] ."], "top-k must be between 1 and 100"),
    "top-k over the vocabulary": (None, ["lens", "--top-k", "101", "the [MASK] ."], "between 1 and 100, got 101"),
    "top-k absurd": (None, ["lens", "--top-k", str(10 ** 12), "the [MASK] ."], "between 1 and 100"),
    "lens, no MLM head": (without_mlm_head, ["lens", "the [MASK] ."], "no MLM head"),
    "lens, corrupt weights": (corrupt, ["lens", "the [MASK] ."], "model.safetensors is .*corrupt"),
    "lens, missing folder": ("rm", ["lens", "the [MASK] ."], "no model folder"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(tiny_checkpoint, tmp_path, capsys, case):
    breaker, args, message = BAD[case]
    captured = run_broken(tiny_checkpoint, tmp_path, capsys, breaker, args[0], args[1:])
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1 and captured.out == ""
    assert re.search(message, captured.err), captured.err


@pytest.mark.parametrize("args", [["similarity", "--word", "cat", "the dog", "a cat"],
                                  ["lens", "--top-k", "0", "a [MASK]"]])
def test_bad_input_from_a_real_process_has_no_traceback(tiny_checkpoint, args):
    done = run_cli(args[0], "--checkpoint", tiny_checkpoint, *args[1:])
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_similarity_text_numbers_sentences_and_prints_each_layer(tiny_checkpoint, capsys):
    assert main(["similarity", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--word", "unbelievable",
                 *UNBELIEVABLE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "'unbelievable' is 3 word pieces (un ##believ ##able): its vector is their mean"
    assert [line.split(". ", 1) for line in lines[1:4]] == [[f"   {n}", s] for n, s in enumerate(UNBELIEVABLE, 1)]
    headers = [i for i, line in enumerate(lines) if line.startswith("layer ")]
    assert [lines[i] for i in headers] == ["layer 0 (embeddings)", "layer 1", "layer 2"]
    for i in headers:
        assert lines[i + 1].split() == ["1", "2", "3"]
        rows = [line.split() for line in lines[i + 2:i + 5]]
        assert [row[0] for row in rows] == ["1", "2", "3"] and all(len(row) == 4 for row in rows)
        assert all(rows[n][n + 1] == "1.000" for n in range(3))
        assert all(rows[a][b + 1] == rows[b][a + 1] and re.fullmatch(r"-?\d\.\d{3}", rows[a][b + 1])
                   for a in range(3) for b in range(3))
    assert main(["similarity", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--word", "cat", "the cat",
                 "a cat ."]) == 0
    assert "word pieces" not in capsys.readouterr().out  # a whole word: no note


def test_lens_text_has_a_line_per_layer_with_top_k(tiny_checkpoint, capsys):
    assert main(["lens", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--top-k", "3", LENS_TEXT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[MASK] #1 at token 2" and lines[4] == "[MASK] #2 at token 10" and len(lines) == 8
    for block in (lines[1:4], lines[5:8]):
        rows = [re.fullmatch(r"  (layer 0 \(embeddings\)|layer \d) +(.*)", line).groups() for line in block]
        assert [label for label, _ in rows] == ["layer 0 (embeddings)", "layer 1", "layer 2"]
        for _, top in rows:
            pairs = [re.fullmatch(r"(\S+) (0\.\d{4}|1\.0000)", pair).groups() for pair in top.split("  ")]
            probs = [float(p) for _, p in pairs]
            assert len(pairs) == 3 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1


def test_shipped_model_tells_the_two_banks_apart(capsys):
    money = ["i went to the bank to deposit money.", "the bank opens at nine and closes at five.",
             "the manager of the bank was polite."]
    river = ["i took a walk next to the bank yesterday.", "a fisherman was fishing on the bank.",
             "the grass on the bank was green."]
    result = cli_json(capsys, "similarity", "--checkpoint", SHIPPED, "--word", "bank", *money, *river)
    assert len(result["layers"]) == 5
    last = np.array(result["layers"][-1])
    sense = np.array([0] * 3 + [1] * 3)
    same = (sense[:, None] == sense[None, :]) & ~np.eye(6, dtype=bool)
    cross = sense[:, None] != sense[None, :]
    assert last[same].mean() > last[cross].mean() + 0.05, last
