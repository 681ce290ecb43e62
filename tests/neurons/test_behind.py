"""behind.py: a planted neuron is found and its suppression beats random; IG's completeness; parity with Captum on
transformers' BERT; the causal test on ALBERT (an edit at one depth) and ELECTRA's discriminator equals the same
suppression made with transformers' own modules and a hook; the shipped model's number-agreement guess."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from captum.attr import InputXGradient, IntegratedGradients

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.explain.score import Score
from bertviz_lab.neurons.behind import attribute, causal_test, random_neurons, switch_off
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")

IDS = torch.tensor([[2, 10, 11, 4, 12, 3]])  # [CLS] w w [MASK] w [SEP] in the tiny vocabulary
POSITION, ANSWER, FOIL = 3, 40, 41
PLANTED = (0, 17)  # layer 0: its effect reaches F through layer 1
SILENT = (1, 5)  # a neuron whose value vector (W_2's column) is zero


def tiny(plant: bool = True) -> BertForPreTraining:
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, max_position_embeddings=64)).eval()
    with torch.no_grad():
        if plant:  # fires at 3 everywhere (a zero key, bias 3) and writes towards answer - foil's word vectors
            words = model.bert.embeddings.word_embeddings.weight
            toward = words[ANSWER] - words[FOIL]
            layer, neuron = PLANTED
            model.bert.encoder.layer[layer].intermediate.dense.weight[neuron] = 0
            model.bert.encoder.layer[layer].intermediate.dense.bias[neuron] = 3.0
            model.bert.encoder.layer[layer].output.dense.weight[:, neuron] = toward / toward.norm()
        model.bert.encoder.layer[SILENT[0]].output.dense.weight[:, SILENT[1]] = 0
    return model


SCORE = Score(POSITION, ANSWER, FOIL, 100)


@pytest.mark.parametrize("method", ["grad", "ig"])
def test_a_planted_neuron_is_found_first_and_beats_random(method):
    model = tiny()
    found = attribute(model, IDS, None, SCORE, method, steps=16)
    assert found.top(1)[0][:2] == PLANTED
    assert found.scores[SILENT] == 0.0  # its activation moves nothing downstream: no gradient at all
    test = causal_test(model, IDS, None, SCORE, found, k=3, draws=20, seed=0)
    assert PLANTED in test.neurons and test.beats_random
    assert test.drop_top > test.drops.max() and test.drop_top > 10 * abs(test.drop_random)
    plain = attribute(tiny(plant=False), IDS, None, SCORE, method, steps=16)
    assert plain.top(1)[0][:2] != PLANTED  # the neuron is found because it was planted


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("method", ["grad", "ig"])
def test_low_precision_autocast_finds_the_planted_neuron_and_the_causal_test_holds(method, dtype):
    """CPU autocast (bf16 on a machine with AMX, fp16 elsewhere): the attribution and the causal test run in it,
    find the planted neuron first, and keep F within a rounding bound of float32's."""
    model = tiny()
    exact = attribute(model, IDS, None, SCORE, method, steps=16)
    with torch.autocast("cpu", dtype=dtype):
        low = attribute(model, IDS, None, SCORE, method, steps=16)
        test = causal_test(model, IDS, None, SCORE, low, k=3, draws=20, seed=0)
    assert low.top(1)[0][:2] == PLANTED and np.isfinite(low.scores).all()
    assert low.f == pytest.approx(exact.f, abs=0.05 * max(1.0, abs(exact.f)))
    assert test.beats_random and np.isfinite(test.f_random).all()


def test_integrated_gradients_are_complete_as_the_steps_grow():
    torch.manual_seed(0)  # weights 10 times the usual spread: F bends along the path, so the steps matter
    model = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, max_position_embeddings=64,
                                          initializer_range=0.2)).eval().double()
    runs = {m: attribute(model, IDS, None, SCORE, "ig", steps=m) for m in (1, 4, 64)}
    gaps = {m: np.abs(run.gaps) for m, run in runs.items()}
    assert (gaps[64] < gaps[4]).all() and (gaps[4] < gaps[1]).all()
    moved = np.abs(runs[64].f - runs[64].baseline)
    assert (gaps[1] > 0.04 * moved).all() and (gaps[64] <= 0.03 * moved).all()
    grad = attribute(model, IDS, None, SCORE, "grad")
    assert grad.f == pytest.approx(runs[64].f) and np.allclose(grad.baseline, runs[64].baseline, atol=1e-9)


def test_the_causal_test_is_reproducible_and_never_draws_a_top_neuron():
    model = tiny()
    found = attribute(model, IDS, None, SCORE, "grad")
    one, two = (causal_test(model, IDS, None, SCORE, found, k=5, draws=20, seed=3) for _ in range(2))
    assert np.array_equal(one.f_random, two.f_random) and np.array_equal(one.random_neurons, two.random_neurons)
    other = causal_test(model, IDS, None, SCORE, found, k=5, draws=20, seed=4)
    assert not np.array_equal(one.random_neurons, other.random_neurons)
    top = set(one.neurons)
    per_layer = sorted(layer for layer, _ in one.neurons)
    for draw in one.random_neurons:
        assert not top & {tuple(map(int, n)) for n in draw}
        assert sorted(draw[:, 0].tolist()) == per_layer and len({tuple(n) for n in draw.tolist()}) == 5
    many = random_neurons(((0, 1), (0, 2), (1, 0)), 4, 200, 0)  # only 2 free neurons in layer 0: always {0, 3}
    assert {tuple(sorted(d[d[:, 0] == 0, 1].tolist())) for d in many} == {(0, 3)}


def test_switch_off_zeroes_the_neuron_everywhere_and_sets_it_to_its_mean():
    model = tiny()
    off = switch_off(model, IDS, None, SCORE, *PLANTED, mean=3.0)
    assert off.f_mean == pytest.approx(off.f, abs=1e-4)  # it already fires at 3 everywhere
    assert off.f - off.f_zero > 0.01 and off.top == off.top_mean
    silent = switch_off(model, IDS, None, SCORE, *SILENT, mean=5.0)
    assert silent.f_zero == silent.f_mean == silent.f


def test_bad_input_is_one_sentence():
    model = tiny()
    with pytest.raises(InputError, match="method"):
        attribute(model, IDS, None, SCORE, "lrp")
    with pytest.raises(InputError, match="outside"):
        attribute(model, IDS, None, Score(9, ANSWER), "grad")
    found = attribute(model, IDS, None, SCORE, "grad")
    with pytest.raises(InputError, match="k must"):
        causal_test(model, IDS, None, SCORE, found, k=0)
    with pytest.raises(InputError, match="does not exist"):
        switch_off(model, IDS, None, SCORE, 2, 0, 0.0)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    build("bert", folder)
    hf = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").double().eval()
    ckpt = load_checkpoint(folder)
    ids = torch.tensor([ckpt.tokenizer.encode("the cat sat on the [MASK] .").ids])
    position = int((ids[0] == ckpt.tokenizer.mask_id).nonzero()[0, 0])
    with torch.no_grad():
        logits = hf(input_ids=ids).logits[0, position]
    score = Score(position, int(logits.argmax()), int(logits.argmin()), ckpt.tokenizer.vocab_size)
    return hf, ckpt.model.double(), ids, score


def test_attributions_equal_captums_on_transformers(bert):
    """Captum's IntegratedGradients and InputXGradient on F as a function of one layer's activations at the position,
    computed by transformers' model with a forward hook on that layer's intermediate module (the rest of the batch
    row as the sentence makes it): Captum's LayerIntegratedGradients scales the whole layer, every position."""
    hf, model, ids, score = bert
    ours = {m: attribute(model, ids, None, score, m, steps=24) for m in ("ig", "grad")}
    for layer in range(2):
        module = hf.bert.encoder.layer[layer].intermediate
        kept = []
        handle = module.register_forward_hook(lambda _m, _a, out, kept=kept: kept.append(out.detach()))
        with torch.no_grad():
            hf(input_ids=ids)
        handle.remove()

        def forward(at, module=module):  # (B, d_ff) the position's activations -> (B,) F
            def put(_m, _a, out):
                return torch.cat([out[:, :score.position], at[:, None], out[:, score.position + 1:]], 1)
            handle = module.register_forward_hook(put)
            try:
                logits = hf(input_ids=ids.expand(at.shape[0], -1)).logits[:, score.position]
            finally:
                handle.remove()
            return logits[:, score.target] - logits[:, score.contrast]

        at = kept[0][:, score.position]  # (1, d_ff)
        ig = IntegratedGradients(forward).attribute(at, baselines=torch.zeros_like(at), n_steps=24,
                                                    method="riemann_middle")
        scale = np.abs(ours["ig"].scores[layer]).max()
        assert np.allclose(ours["ig"].scores[layer], ig[0].numpy(), rtol=0, atol=1e-5 * scale)
        grad = InputXGradient(forward).attribute(at.clone().requires_grad_(True))
        assert np.allclose(ours["grad"].scores[layer], grad[0].detach().numpy(), rtol=0, atol=1e-5 * scale)
        assert not np.allclose(ours["ig"].scores[layer], ours["grad"].scores[layer], rtol=0, atol=1e-5 * scale)


def suppressed(hf, modules, ids, edits, read) -> float:
    """F from transformers' model with `edits` {(module index, call): neurons} zeroed at the input of W_2."""
    calls, handles = {}, []
    for index, module in enumerate(modules):
        def pre(_m, args, index=index):
            call = calls[index] = calls.get(index, -1) + 1
            neurons = edits.get((index, call))
            if not neurons:
                return None
            act = args[0].clone()
            act[:, read[0], list(neurons)] = 0
            return (act,)
        handles.append(module.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            return float(read[1](hf(input_ids=ids).logits))
    finally:
        for handle in handles:
            handle.remove()


@pytest.mark.parametrize("name", ["albert", "electra-discriminator"])
def test_suppression_equals_transformers_with_a_hook(name, tmp_path):
    hf, _ = build(name, tmp_path)
    hf = hf.double().eval()
    ckpt = load_checkpoint(tmp_path)
    model = ckpt.model.double()
    ids = torch.tensor([ckpt.tokenizer.encode("the cat sat on the [MASK] .").ids])
    if name == "albert":  # one layer object at 3 depths: W_2 (ffn_output) is called once per depth
        position = int((ids[0] == ckpt.tokenizer.mask_id).nonzero()[0, 0])
        modules = [hf.albert.encoder.albert_layer_groups[0].albert_layers[0].ffn_output]
        score = Score(position, 7, 9, ckpt.tokenizer.vocab_size)
        read = lambda logits: logits[0, position, 7] - logits[0, position, 9]  # noqa: E731
        where = lambda layer: (0, layer)  # noqa: E731
    else:
        position = 2
        modules = [layer.output.dense for layer in hf.electra.encoder.layer]
        score = Score(position, None)
        read = lambda logits: logits[0, position]  # noqa: E731
        where = lambda layer: (layer, 0)  # noqa: E731
    found = attribute(model, ids, None, score, "grad")
    test = causal_test(model, ids, None, score, found, k=4, draws=3, seed=0)
    assert test.f == pytest.approx(suppressed(hf, modules, ids, {}, (position, read)), abs=1e-9)
    edits = {}
    for layer, neuron in test.neurons:
        edits.setdefault(where(layer), []).append(neuron)
    assert test.f_top == pytest.approx(suppressed(hf, modules, ids, edits, (position, read)), abs=1e-9)
    edits = {}
    for layer, neuron in test.random_neurons[1]:
        edits.setdefault(where(int(layer)), []).append(int(neuron))
    assert test.f_random[1] == pytest.approx(suppressed(hf, modules, ids, edits, (position, read)), abs=1e-9)
    assert test.f_top != test.f  # the top neurons do something: the comparison is not of F with itself


def test_the_shipped_models_agreement_guess_rests_on_its_top_neurons(shipped):
    model, tok = shipped.model, shipped.tokenizer
    enc = tok.encode("the children [MASK] happy .")
    ids = torch.tensor([enc.ids])
    score = Score(enc.tokens.index("[MASK]"), tok.token_to_id("were"), tok.token_to_id("was"), tok.vocab_size)
    found = attribute(model, ids, None, score, "ig", steps=20)
    test = causal_test(model, ids, None, score, found, k=10, draws=20, seed=0)
    assert test.beats_random == (test.drop_top > test.drops.max())
    # measured: F 1.036 (were over was), the top 10 drop it by 1.57 (the guess flips to "was"); random 10: mean
    # drop 0.005, largest 0.13
    assert test.beats_random and test.f_top < 0 < test.f
    assert test.drop_top > 5 * test.drops.max()
