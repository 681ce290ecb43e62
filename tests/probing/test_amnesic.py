"""Amnesic probing (probing/amnesic.py). `projecting` against the obviously right reference: transformers' own model
with the same projection applied by a plain PyTorch forward hook on the module whose output is that hidden state
(the embeddings, or their projection to the layers' width; encoder layer l - 1; ALBERT's one shared layer group at
the one depth asked), masked-LM logits within 1e-5, for every family's random checkpoint
(tests/helpers/family_models.py). Then `amnesic` on the shipped model, the discriminator and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.probing.amnesic import amnesic, default_layer, projecting
from bertviz_lab.probing.inlp import random_basis
from bertviz_lab.syntax.report import story_corpus
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

TEXT = "the cat sat on the [MASK] ."
TOL = 1e-5
FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra-generator"]
RANK = 4


@pytest.fixture(scope="module", params=FAMILIES)
def member(request, tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(request.param)
    hf, _ = build(request.param, folder)
    if request.param == "bert":  # built with its NSP head too: the masked-LM class reads the same weights
        hf = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="eager")
    ckpt = load_checkpoint(folder)
    text = TEXT.replace("[MASK]", ckpt.tokenizer.mask_token)
    return request.param, hf.eval(), ckpt.model.eval(), torch.tensor([ckpt.tokenizer.encode(text).ids])


def site(name: str, hf, layer: int) -> tuple[torch.nn.Module, int]:
    """transformers' module whose output is hidden state `layer`, and which of its calls in a forward that is."""
    base = hf.base_model
    if layer == 0:
        if name == "albert":
            return base.encoder.embedding_hidden_mapping_in, 0
        return (base.embeddings_project if name.startswith("electra") else base.embeddings), 0
    if name == "albert":
        return base.encoder.albert_layer_groups[0], layer - 1  # one group, called once per depth
    if name == "distilbert":
        return base.transformer.layer[layer - 1], 0
    return base.encoder.layer[layer - 1], 0


def reference(name: str, hf, ids, layer: int, q: torch.Tensor, every_call: bool = False) -> torch.Tensor:
    """transformers' logits (T, V) with h -> h - (h q) q^T on `layer`'s output (every call of its module, if asked)."""
    module, call = site(name, hf, layer)
    seen = [0]

    def hook(_m, _args, out):
        seen[0] += 1
        if seen[0] - 1 != call and not every_call:
            return None
        h = out[0] if isinstance(out, tuple) else out
        h = h - (h @ q) @ q.T
        return (h, *out[1:]) if isinstance(out, tuple) else h

    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return hf(input_ids=ids).logits[0]
    finally:
        handle.remove()


def test_projecting_equals_a_hook_on_transformers_at_every_hidden_state(member):
    name, hf, model, ids = member
    L = model.config.num_hidden_layers
    q = random_basis(model.config.hidden_size, RANK, np.random.Generator(np.random.PCG64(5)))
    with torch.no_grad():
        plain = model(ids).mlm_logits[0]
    for layer in range(L + 1):
        with projecting(model, layer, q) as hooked, torch.no_grad():
            ours = hooked(ids).mlm_logits[0]
        want = reference(name, hf, ids, layer, torch.as_tensor(q, dtype=torch.float32))
        torch.testing.assert_close(ours, want, atol=TOL, rtol=0, msg=f"{name} hidden state {layer}")
        assert (ours - plain).abs().max() > 1e-3  # the projection changed something to compare


def test_albert_projects_only_the_depth_asked(tmp_path):
    torch.manual_seed(0)
    hf, _ = build("albert", tmp_path)
    model = load_checkpoint(tmp_path).model.eval()
    ids = torch.tensor([[2, 10, 11, 12, 4, 13, 3]])  # [CLS] ... [MASK] ... [SEP] of the test vocabulary
    q = random_basis(model.config.hidden_size, RANK, np.random.Generator(np.random.PCG64(6)))
    layer = 2  # of 3: the shared layer's second call
    with projecting(model, layer, q) as hooked, torch.no_grad():
        ours = hooked(ids).mlm_logits[0]
    q32 = torch.as_tensor(q, dtype=torch.float32)
    torch.testing.assert_close(ours, reference("albert", hf.eval(), ids, layer, q32), atol=TOL, rtol=0)
    everywhere = reference("albert", hf, ids, layer, q32, every_call=True)
    assert (ours - everywhere).abs().max() > 1e-3  # a hook on the shared module alone would project every depth
    with projecting(model, layer, q) as hooked, torch.no_grad():
        assert torch.equal(hooked(ids).mlm_logits[0], ours)  # the call count starts again at each forward


def test_an_empty_basis_changes_nothing_and_the_hooks_go_afterwards(member):
    _, _, model, ids = member
    d = model.config.hidden_size
    with torch.no_grad():
        plain = model(ids).mlm_logits[0]
        with projecting(model, 1, np.zeros((d, 0))) as hooked:
            torch.testing.assert_close(hooked(ids).mlm_logits[0], plain, atol=1e-6, rtol=0)
        with projecting(model, 1, random_basis(d, RANK, np.random.Generator(np.random.PCG64(0)))) as hooked:
            inside = hooked(ids).mlm_logits[0]
            assert any(m._forward_hooks for m in hooked.modules())
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in (*hooked.modules(), *model.modules()))
        torch.testing.assert_close(hooked(ids).mlm_logits[0], plain, atol=1e-6, rtol=0)
        assert (inside - plain).abs().max() > 1e-3


def test_projecting_refuses_a_hidden_state_or_basis_the_model_does_not_have(member):
    _, _, model, _ = member
    L, d = model.config.num_hidden_layers, model.config.hidden_size
    with pytest.raises(InputError, match=f"are 0 .* to {L}"), projecting(model, L + 1, np.zeros((d, 1))):
        pass
    with pytest.raises(InputError, match=f"\\({d}, r\\) matrix"), projecting(model, 0, np.zeros((d + 1, 1))):
        pass


def test_the_default_layer_is_the_middle_hidden_state():
    assert [default_layer(L) for L in (1, 2, 3, 4, 6, 12)] == [1, 1, 2, 2, 3, 6]


# --- amnesic() ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def number(shipped):
    return amnesic(shipped.model, shipped.tokenizer, story_corpus(200), "number", 2, draws=2, agreement_pairs=10)


def test_amnesic_removes_number_and_measures_the_model_with_and_without(number):
    r = number
    assert r.task == "number" and r.layer == 2 and r.draws == 2 and r.rank >= 1 and r.iterations >= 1
    assert r.probe_before > r.majority + 0.1  # there was number to remove
    assert r.probe_after <= r.majority + 0.03 < r.probe_random  # gone for a fresh probe; a random projection keeps it
    assert r.masked > 0 and r.loss_random.shape == r.accuracy_random.shape == (2,)
    numbers = [r.loss_before, r.loss_after, *r.loss_random, r.accuracy_before, r.accuracy_after, *r.accuracy_random]
    assert np.isfinite(numbers).all() and 0 <= min(r.accuracy_before, r.accuracy_after) <= 1
    assert r.agreement_pairs == {0: 10, 1: 10, 2: 10, 3: 10}
    for scores in (r.agreement_before, r.agreement_after, r.agreement_random):
        assert set(scores) == {0, 1, 2, 3} and all(0 <= v <= 1 for v in scores.values())


def test_the_discriminator_has_no_masked_words_to_measure(tmp_path):
    torch.manual_seed(0)
    build("electra-discriminator", tmp_path)
    ckpt = load_checkpoint(tmp_path)
    r = amnesic(ckpt.model, ckpt.tokenizer, story_corpus(60), "pos", 1, draws=1)
    assert r.masked == 0 and np.isnan(r.loss_after) and r.agreement_before is None
    assert "no masked-language-model head" in r.note


@pytest.mark.parametrize(("task", "layer", "draws", "pairs", "match"), [
    ("tense", 1, 2, 10, "no probing task 'tense'"), ("pos", 5, 2, 10, "hidden state 5 does not exist"),
    ("pos", -1, 2, 10, "hidden state -1"), ("pos", 1, 0, 10, "draws must be a whole number from 1"),
    ("number", 1, 2, True, "agreement_pairs must be")])
def test_bad_inputs_are_one_sentence(shipped, task, layer, draws, pairs, match):
    with pytest.raises(InputError, match=match):
        amnesic(shipped.model, shipped.tokenizer, story_corpus(20), task, layer, draws=draws, agreement_pairs=pairs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_under_cpu_autocast_the_projection_moves_the_logits_as_in_float32(shipped, dtype):
    """A machine whose precision is `auto` may run the model in bf16 (Intel with AMX) or fp16 autocast: the hook
    projects the half-precision hidden state with the float32 basis, and the guesses move as they do in float32."""
    ids = torch.tensor([shipped.tokenizer.encode("the children in the park [MASK] happy .").ids])
    basis = random_basis(shipped.config.hidden_size, 64, np.random.Generator(np.random.PCG64(0)))

    def logits(q, autocast: bool) -> torch.Tensor:
        with projecting(shipped.model, 2, q) as hooked, torch.no_grad(), \
                torch.autocast("cpu", dtype=dtype, enabled=autocast):
            return hooked(ids).mlm_logits.float()

    plain, moved = logits(np.zeros((basis.shape[0], 0)), False), logits(basis, False)
    half_plain, half_moved = logits(np.zeros((basis.shape[0], 0)), True), logits(basis, True)
    shift, half_shift = moved - plain, half_moved - half_plain
    assert torch.isfinite(half_moved).all()
    assert shift.abs().max() > 0.5  # 64 random directions of 256 move the guesses in float32
    # in half precision they move the same way: the shift's error is small against the shift itself
    assert (half_shift - shift).norm() < 0.2 * shift.norm()
    assert half_moved[0, 6].argmax() == moved[0, 6].argmax()  # the guess at [MASK] (position 6) is the same
