"""The feed-forward neurons against the obviously right reference (issue 55, item 5): for every family, the
activations read.py keeps, the logits after an edit, and values.py's value vectors and vocabulary scores equal what
plain PyTorch forward hooks and transformers' own parameters give, within 1e-5 (float32 both).

The reference hooks the module whose output is the activation after the activation function: `intermediate`
(BERT, RoBERTa, XLM-R, ELECTRA: act(dense)), DistilBERT's `ffn.activation`, ALBERT's shared layer's `activation`,
called once per depth (the hook counts the calls and touches one). The checkpoints are
tests/helpers/family_models.py's random ones (2-3 layers, 32 wide, 64 neurons)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.read import Edit, one_sentence, run, twin
from bertviz_lab.neurons.values import NO_HEAD, promoted, value_vectors, vocabulary_scores
from tests.helpers.family_models import build

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

TEXT = "the cat sat on the [MASK] ."
TOL = 1e-5
FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra-generator", "electra-discriminator"]
WITH_HEAD = FAMILIES[:-1]
# transformers' parameters the value reading uses, per family: W_2 (of layer {l}), the head's transform and LayerNorm
W2 = {"distilbert": "transformer.layer.{l}.ffn.lin2", "albert": "encoder.albert_layer_groups.0.albert_layers.0.ffn_output"}
HEAD = {"bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm"),
        "roberta": ("lm_head.dense", "lm_head.layer_norm"), "xlm-roberta": ("lm_head.dense", "lm_head.layer_norm"),
        "distilbert": ("vocab_transform", "vocab_layer_norm"), "albert": ("predictions.dense", "predictions.LayerNorm"),
        "electra-generator": ("generator_predictions.dense", "generator_predictions.LayerNorm")}


@dataclass
class Member:
    name: str
    hf: torch.nn.Module
    model: BertForPreTraining
    ids: torch.Tensor  # (1, T)

    @property
    def base(self) -> torch.nn.Module:
        return getattr(self.hf, self.hf.base_model_prefix)

    def site(self, depth: int) -> tuple[torch.nn.Module, int]:
        """(the module whose output is depth's activations, which of its calls in a forward is depth's)."""
        if self.name == "albert":
            return self.base.encoder.albert_layer_groups[0].albert_layers[0].activation, depth
        if self.name == "distilbert":
            return self.base.transformer.layer[depth].ffn.activation, 0
        return self.base.encoder.layer[depth].intermediate, 0

    def reference(self, hooks: dict[int, object] | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """transformers' forward with `hooks` {depth: fn (T, d_ff) tensor -> tensor}: (every depth's activations
        after the hooks, each (T, d_ff); the logits (T, V), or the discriminator's (T,))."""
        depths = self.model.config.num_hidden_layers
        kept: dict[int, torch.Tensor] = {}
        handles = []
        for depth in range(depths):
            module, call = self.site(depth)
            seen = [0]

            def after(_m, _args, out, depth=depth, call=call, seen=seen):
                seen[0] += 1
                if seen[0] - 1 != call:
                    return out
                out = (hooks or {}).get(depth, lambda t: t)(out)
                kept[depth] = out[0].detach().clone()
                return out

            handles.append(module.register_forward_hook(after))
        try:
            with torch.no_grad():
                logits = self.hf(input_ids=self.ids).logits[0]
        finally:
            for handle in handles:
                handle.remove()
        assert sorted(kept) == list(range(depths))  # every depth's call was seen once
        return [kept[d] for d in range(depths)], logits

    def ours(self, edits=()) -> torch.Tensor:
        """Our logits (T, V) (or (T,)) after `edits`."""
        with torch.no_grad():
            hidden = run(twin(self.model), self.ids, edits=edits).hidden
            if self.model.has_rtd:
                return self.model.cls.discriminator(hidden)[0]
            return self.model.mlm_head(hidden)[0]


def member(name: str, tmp_path_factory) -> Member:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(name)
    hf, _ = build(name, folder)
    if name == "bert":  # built with its NSP head too: the masked-LM class reads the same weights
        hf = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="eager")
    ckpt = load_checkpoint(folder)
    ids = torch.tensor([ckpt.tokenizer.encode(TEXT).ids])
    return Member(name, hf.eval(), ckpt.model.eval(), ids)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory) -> Member:
    return member(request.param, tmp_path_factory)


def test_activations_equal_transformers_hooks(family):
    ref, _ = family.reference()
    ours = one_sentence(family.model, family.ids)
    assert len(ours) == len(ref) == family.model.config.num_hidden_layers
    for depth, (a, b) in enumerate(zip(ours, ref)):
        assert a.shape == (family.ids.shape[1], family.model.config.intermediate_size)
        assert np.abs(a).max() > 0.1 and (a < 0).any()  # after the GELU: mostly small, some below 0
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=TOL, err_msg=f"{family.name} depth {depth}")


def edits_of(model: BertForPreTraining, depth: int) -> tuple[list[Edit], dict]:
    """Two neurons zeroed at every position and two others set to 3.0 and -1.0 at positions 2 and 4, and the same
    as a hook."""
    zeroed, set_, positions = (3, 17), (40, 41), (2, 4)

    def hook(t: torch.Tensor) -> torch.Tensor:  # (B, T, d_ff)
        t = t.clone()
        t[:, :, list(zeroed)] = 0.0
        for position in positions:
            t[:, position, set_[0]], t[:, position, set_[1]] = 3.0, -1.0
        return t

    return [Edit(depth, zeroed), Edit(depth, set_, (3.0, -1.0), positions)], {depth: hook}


def test_an_edit_equals_the_same_edit_by_a_hook(family):
    clean = family.ours()
    for depth in range(family.model.config.num_hidden_layers):
        edits, hooks = edits_of(family.model, depth)
        ref_acts, ref = family.reference(hooks)
        ours = family.ours(edits)
        assert (ours - clean).abs().max() > 1e-3  # the edit moves the logits
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=0, atol=TOL, err_msg=f"{family.name} {depth}")
        kept = run(twin(family.model), family.ids, edits=edits).activations[depth][0].detach()  # what W_2 read
        np.testing.assert_allclose(kept.numpy(), ref_acts[depth].numpy(), rtol=0, atol=TOL)
        assert (kept[[2, 4], 40] == 3.0).all() and (kept[[2, 4], 41] == -1.0).all() and not kept[:, [3, 17]].any()


def test_albert_edits_a_depth_not_the_shared_weights(tmp_path_factory):
    """ALBERT's one layer at depths 0 and 1: the same weights, yet an edit at each gives other logits (a patch of
    the weights would make them equal), each equal to the reference that touches that depth's call only."""
    m = member("albert", tmp_path_factory)
    assert m.model.bert.encoder.layer[0] is m.model.bert.encoder.layer[1]
    logits = [m.ours(edits_of(m.model, depth)[0]) for depth in (0, 1)]
    assert (logits[0] - logits[1]).abs().max() > 1e-3
    for depth, ours in zip((0, 1), logits):
        np.testing.assert_allclose(ours.numpy(), m.reference(edits_of(m.model, depth)[1])[1].numpy(), atol=TOL)


def reference_scores(m: Member, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d_ff, d) value vectors and (d_ff, V) their scores, from transformers' parameters by values.py's formula:
    W_dec (gamma * centre(W_T v)), float64."""
    w2 = m.base.get_submodule(W2.get(m.name, "encoder.layer.{l}.output.dense").format(l=layer)).weight.double()
    dense, norm = (m.hf.get_submodule(n) for n in HEAD[m.name])
    embeddings = m.hf.get_input_embeddings().weight.double()
    assert m.hf.get_output_embeddings().weight is m.hf.get_input_embeddings().weight  # tied: the decoder
    v = w2.T.detach()  # (d_ff, d)
    t = v @ dense.weight.double().T  # (d_ff, e)
    t = (t - t.mean(-1, keepdim=True)) * norm.weight.double()
    return v, (t @ embeddings.T).detach()  # (d_ff, V)


@pytest.mark.parametrize("name", WITH_HEAD)
def test_value_vectors_and_scores_equal_transformers_parameters(name, tmp_path_factory):
    m = member(name, tmp_path_factory)
    for layer in range(m.model.config.num_hidden_layers):
        v, scores = reference_scores(m, layer)
        ours = value_vectors(m.model, layer)
        np.testing.assert_allclose(ours.double().numpy(), v.numpy(), rtol=0, atol=TOL)
        mine = vocabulary_scores(m.model, ours)
        assert mine.shape == scores.shape and scores.abs().max() > 0.01
        np.testing.assert_allclose(mine.double().numpy(), scores.numpy(), rtol=0, atol=TOL, err_msg=name)
        up, down = promoted(m.model, layer, 5, k=3)
        centred = scores[5] - scores[5].mean()
        assert [i for i, _ in up] == centred.argsort(descending=True)[:3].tolist()
        assert [i for i, _ in down] == centred.argsort()[:3].tolist()
        np.testing.assert_allclose([s for _, s in up], centred.sort(descending=True).values[:3].numpy(), atol=TOL)


def test_the_discriminator_has_no_vocabulary_to_read(tmp_path_factory):
    m = member("electra-discriminator", tmp_path_factory)
    assert value_vectors(m.model, 0).shape == (64, 32)  # its values exist; only the reading needs a head
    with pytest.raises(InputError) as caught:
        vocabulary_scores(m.model, value_vectors(m.model, 0))
    assert str(caught.value) == NO_HEAD
    with pytest.raises(InputError, match="no masked-language-model head"):
        promoted(m.model, 0, 0)
