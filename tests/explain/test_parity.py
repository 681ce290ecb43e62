"""The nine attribution methods against references computed here, from `transformers` (its eager attentions,
hidden states and weights, value zeroing by plain PyTorch forward hooks) and Captum run on the transformers model, for random BERT and RoBERTa checkpoints
(within 1e-4 of the largest |value|); integrated gradients adds up; contrast is linear; and every family
(RoBERTa, XLM-R, DistilBERT, ALBERT, both ELECTRAs) gets all nine methods."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from captum.attr import FeatureAblation, LayerGradientXActivation, LayerIntegratedGradients

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.explain.report import METHODS
from bertviz_lab.views import inputs
from bertviz_lab.views.why.ask import Ask
from bertviz_lab.views.why.explanation import target_id, why
from tests.helpers.family_models import build

TEXTS = {"bert": ("the cat sat on the [MASK] .", "he sat by the river bank ."),
         "roberta": ("the cat sat on the [MASK] by the river .", None)}
WORDS = {"bert": ("cat", "dog"), "roberta": ("Ġthe", "Ġsat")}  # two targets each vocabulary has as one token
REL = 1e-4


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread


def built(name: str, tmp_path_factory):
    torch.manual_seed(0)  # build() seeds only the biases' noise: the weights' init is ours to seed
    folder = tmp_path_factory.mktemp(name)
    hf, tok = build(name, folder)
    return hf, tok, load_checkpoint(folder)


@pytest.fixture(scope="module", params=["bert", "roberta"])
def member(request, tmp_path_factory):
    hf, tok, ckpt = built(request.param, tmp_path_factory)
    text_a, text_b = TEXTS[request.param]
    return request.param, hf, tok, ckpt, inputs.encode(ckpt.tokenizer, ckpt.model, text_a, text_b)


class Reference:
    """F and every method computed from the transformers model alone."""

    def __init__(self, name, hf, tok, ids, segments, position, target, contrast):
        self.hf, self.name, self.ids, self.segments, self.position = hf, name, ids, segments, position
        self.target, self.contrast = target, contrast
        self.fixed = (ids[0] == tok.cls_token_id) | (ids[0] == tok.sep_token_id)
        self.fixed[position] = True
        self.mask_id, self.pad_id = tok.mask_token_id, tok.pad_token_id
        self.words = hf.base_model.embeddings.word_embeddings
        with torch.no_grad():
            self.out = hf(**self.kwargs(ids), output_attentions=True, output_hidden_states=True)

    def kwargs(self, ids):
        return {"input_ids": ids} if self.name == "roberta" else \
            {"input_ids": ids, "token_type_ids": self.segments.expand(ids.shape[0], -1)}

    def f(self, ids=None, **kwargs) -> torch.Tensor:
        """F for every row: the target's logit at the position (minus the contrast's)."""
        out = self.hf(**(self.kwargs(ids) if ids is not None else kwargs))
        logits = (out.prediction_logits if self.name == "bert" else out.logits)[:, self.position]
        return logits[:, self.target] - (logits[:, self.contrast] if self.contrast is not None else 0)

    def methods(self) -> dict[str, np.ndarray]:
        A = [a[0].double() for a in self.out.attentions]  # L x (H, T, T)
        grads = LayerGradientXActivation(self.f, self.words, multiply_by_inputs=False).attribute(self.ids)[0]
        gxi = LayerGradientXActivation(self.f, self.words).attribute(self.ids)[0].sum(-1)
        occlusion = FeatureAblation(self.f).attribute(self.ids, baselines=self.mask_id)[0].double()
        occlusion[self.fixed] = 0
        return {"attention": A[-1][:, self.position].mean(0), "rollout": self.rollout(A), "flow": self.flow(A),
                "value_norm": self.value_norm(A[-1]), "value_zeroing": self.value_zeroing(),
                "gradient": grads.norm(dim=-1), "gradient_x_input": gxi,
                "integrated_gradients": self.integrated_gradients(), "occlusion": occlusion}

    @staticmethod
    def mixed(a):
        mixed = 0.5 * a.mean(0) + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
        return mixed / mixed.sum(-1, keepdim=True)

    def rollout(self, A):
        R = torch.eye(A[0].shape[-1], dtype=torch.float64)
        for a in A:
            R = self.mixed(a) @ R
        return R[self.position]

    def flow(self, A):
        """Every edge of every layer, networkx's default max-flow algorithm, a fresh computation per source."""
        graph = nx.DiGraph()
        for layer, a in enumerate(A, start=1):
            mixed = self.mixed(a)
            for i in range(mixed.shape[0]):
                for j in range(mixed.shape[1]):
                    graph.add_edge((layer - 1, j), (layer, i), capacity=float(mixed[i, j]))
        return [nx.maximum_flow_value(graph, (0, j), (len(A), self.position)) for j in range(A[0].shape[-1])]

    def value_norm(self, a):
        """Each token's share of the last layer's context, concatenated over heads, through W_O: || . ||."""
        layer = self.hf.base_model.encoder.layer[-1].attention
        x = self.out.hidden_states[-2][0].double()  # (T, d): the last layer's input
        v = x @ layer.self.value.weight.double().T + layer.self.value.bias.double()  # (T, d)
        H, T = a.shape[0], a.shape[-1]
        shares = (a[:, self.position, :].T[:, :, None] * v.view(T, H, -1)).reshape(T, -1)  # (T, d)
        return (shares @ layer.output.dense.weight.double().T).norm(dim=-1)

    def value_zeroing(self):
        """Mohebbi et al.: in layer l, row j of a batch has token j's value vectors zeroed (a forward hook on
        `attention.self.value`); the cosine distance of each token's layer-l output from the unzeroed one, rows
        normalised to sum 1, the layers multiplied through (the first rightmost), the position's row."""
        T = self.ids.shape[1]
        R = torch.eye(T, dtype=torch.float64)
        for depth, layer in enumerate(self.hf.base_model.encoder.layer):
            def zero(_module, _args, out):
                out = out.clone()
                out[torch.arange(T), torch.arange(T)] = 0  # row j: token j's values, every head
                return out

            handle = layer.attention.self.value.register_forward_hook(zero)
            with torch.no_grad():
                moved = self.hf(**self.kwargs(self.ids.repeat(T, 1)), output_hidden_states=True).hidden_states[depth + 1]
            handle.remove()
            kept = self.out.hidden_states[depth + 1][0]  # (T, d)
            distance = 1 - torch.nn.functional.cosine_similarity(moved.double(), kept.double()[None], dim=-1)  # (j, i)
            mixing = distance.T.clamp_min(0)
            R = mixing / mixing.sum(-1, keepdim=True) @ R
        return R[self.position]

    def baseline(self) -> torch.Tensor:
        return torch.where(self.fixed, self.ids, torch.full_like(self.ids, self.pad_id))

    def integrated_gradients(self):
        ig = LayerIntegratedGradients(self.f, self.words)
        return ig.attribute(self.ids, baselines=self.baseline(), n_steps=50)[0].sum(-1)

    def ends(self) -> tuple[float, float]:
        """F(x) and F(baseline), the baseline's word vectors at the input's positions (and segments)."""
        T = self.ids.shape[1]
        positions = torch.arange(T)[None] + (self.pad_id + 1 if self.name == "roberta" else 0)
        extra = {} if self.name == "roberta" else {"token_type_ids": self.segments}
        with torch.no_grad():
            return tuple(float(self.f(inputs_embeds=self.words(ids), position_ids=positions, **extra)[0])
                         for ids in (self.ids, self.baseline()))


@pytest.fixture(scope="module", params=["target", "contrast"])
def explained(member, request):
    """Our explanation and the reference's, of the top guess (or the top guess against the second)."""
    name, hf, tok, ckpt, encoding = member
    top = why(ckpt.model, ckpt.tokenizer, encoding)
    ours = top if request.param == "target" else why(
        ckpt.model, ckpt.tokenizer, encoding,
        Ask(target=top.target, contrast=ckpt.tokenizer.id_to_token(top.guesses.masks[0].candidates[1].id)))
    score = ours.explanation.score
    assert (score.contrast is None) == (request.param == "target")
    reference = Reference(name, hf, tok, torch.tensor([encoding.ids]), torch.tensor([encoding.segment_ids]),
                          ours.position, score.target, score.contrast)
    return ours, reference, {k: torch.as_tensor(v).detach().double().numpy() for k, v in reference.methods().items()}


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_matches_transformers_and_captum(explained, method):
    ours, _, theirs = explained
    mine, ref = ours.explanation.values[method], theirs[method]
    assert mine.shape == ref.shape == (len(ours.encoding),)
    scale = np.abs(ref).max()
    assert scale > 0
    error = np.abs(mine - ref).max()
    assert error <= REL * scale, f"{method}: off by {error:.3g}, largest |value| {scale:.3g}"


def test_f_and_integrated_gradients_add_up(explained):
    """F(x) is the transformers logit (difference); F(baseline) is run where the path starts (RoBERTa numbers
    positions past [PAD]s, so it is not F of the baseline's ids); the attributions sum to F(x) - F(baseline)
    within the reported delta, and that delta is small."""
    ours, reference, _ = explained
    f_x, f_b = reference.ends()
    ig = ours.explanation.ig
    assert ours.explanation.value == pytest.approx(f_x, abs=1e-5) and ig.score == pytest.approx(f_x, abs=1e-5)
    assert ig.baseline_score == pytest.approx(f_b, abs=1e-5)
    assert abs(ig.values.sum() - (f_x - f_b)) <= abs(ig.delta) + 1e-5
    assert abs(ig.delta) < 1e-4 and not ig.flagged and abs(f_x - f_b) > 1e-3


def test_attention_of_any_layer_and_head_matches_transformers(member):
    name, hf, tok, ckpt, encoding = member
    ours = why(ckpt.model, ckpt.tokenizer, encoding, Ask(layer=0, head=1))
    reference = Reference(name, hf, tok, torch.tensor([encoding.ids]), torch.tensor([encoding.segment_ids]),
                          ours.position, ours.explanation.score.target, None)
    theirs = reference.out.attentions[0][0, 1, ours.position].double().numpy()
    np.testing.assert_allclose(ours.explanation.values["attention"], theirs, rtol=0, atol=REL * theirs.max())


def test_a_contrast_is_the_difference_of_the_two_targets(member):
    """gradient x input, integrated gradients and occlusion are linear in F, and F(a vs b) = F(a) - F(b); the
    attention methods never read F, so no target changes them."""
    name, _, _, ckpt, encoding = member
    a, b = WORDS[name]
    run = lambda target, contrast=None: why(ckpt.model, ckpt.tokenizer, encoding,  # noqa: E731
                                            Ask(target=target, contrast=contrast)).explanation
    of_a, of_b, a_vs_b = run(a), run(b), run(a, b)
    assert (a_vs_b.score.target, a_vs_b.score.contrast) == (of_a.score.target, of_b.score.target)
    assert a_vs_b.value == pytest.approx(of_a.value - of_b.value, abs=1e-5)
    for method in ("gradient_x_input", "integrated_gradients", "occlusion"):
        difference = of_a.values[method] - of_b.values[method]
        scale = np.abs(difference).max()
        assert scale > 0
        np.testing.assert_allclose(a_vs_b.values[method], difference, rtol=0, atol=1e-5 * scale, err_msg=method)
    assert np.abs(of_a.values["occlusion"] - of_b.values["occlusion"]).max() > 1e-4  # the targets differ
    for method in ("attention", "rollout", "flow", "value_norm", "value_zeroing"):
        for other in (of_b, a_vs_b):
            np.testing.assert_array_equal(other.values[method], of_a.values[method], err_msg=method)


# Every family (issue point 7): all nine methods, finite, one value per token; nothing attributed to the
# tokens no method may remove; integrated gradients converged; F the model's own number.

GUESSERS = ["roberta", "xlm-roberta", "distilbert", "albert", "electra-generator"]
TEXT = "the cat sat on the [MASK] ."


def family(name, tmp_path_factory):
    hf, _, ckpt = built(name, tmp_path_factory)
    return name, hf, ckpt, inputs.encode(ckpt.tokenizer, ckpt.model, TEXT)


def hf_logits(name, hf, encoding):
    kwargs = {} if name in ("roberta", "xlm-roberta", "distilbert") else \
        {"token_type_ids": torch.tensor([encoding.segment_ids])}
    with torch.no_grad():
        return hf(input_ids=torch.tensor([encoding.ids]), **kwargs).logits[0]


def check_explanation(result):
    e = result.explanation
    T = len(result.encoding)
    assert list(e.values) == list(METHODS)
    for method, values in e.values.items():
        assert values.shape == (T,) and np.isfinite(values).all(), method
    fixed = np.array(result.encoding.special_mask)
    fixed[result.position] = True
    np.testing.assert_array_equal(e.fixed, fixed)
    assert fixed.sum() >= 3 and (~fixed).sum() >= 3
    for method in ("occlusion", "integrated_gradients"):
        assert (e.values[method][fixed] == 0).all(), method
        assert np.abs(e.values[method][~fixed]).max() > 0, method
    assert abs(e.ig.delta) < 1e-4 and not e.ig.flagged
    assert abs(e.ig.values.sum() - (e.ig.score - e.ig.baseline_score)) <= abs(e.ig.delta) + 1e-6
    zeroing = e.values["value_zeroing"]  # a row of a product of row-stochastic matrices: shares that sum to 1
    assert (zeroing >= 0).all() and zeroing.sum() == pytest.approx(1, abs=1e-9) and zeroing.max() < 1


@pytest.mark.parametrize("name", GUESSERS)
def test_every_family_explains_its_guess(tmp_path_factory, name):
    _, hf, ckpt, encoding = family(name, tmp_path_factory)
    assert encoding.tokens.count(ckpt.tokenizer.mask_token) == 1
    result = why(ckpt.model, ckpt.tokenizer, encoding)
    check_explanation(result)
    e = result.explanation
    assert e.score.target == result.guesses.masks[0].candidates[0].id
    assert e.value == pytest.approx(float(hf_logits(name, hf, encoding)[result.position, e.score.target]), abs=1e-5)


def test_the_electra_discriminator_explains_its_replaced_token_logit(tmp_path_factory):
    name, hf, ckpt, encoding = family("electra-discriminator", tmp_path_factory)
    result = why(ckpt.model, ckpt.tokenizer, encoding, Ask(position=3))
    check_explanation(result)
    assert result.position == 3 and result.guesses is None and result.target == ""
    logit = float(hf_logits(name, hf, encoding)[3])
    assert result.explanation.value == pytest.approx(logit, abs=1e-5)
    assert result.explanation.prob == pytest.approx(1 / (1 + np.exp(-logit)), abs=1e-6)
    other = why(ckpt.model, ckpt.tokenizer, encoding, Ask(position=2)).explanation
    assert other.value == pytest.approx(float(hf_logits(name, hf, encoding)[2]), abs=1e-5)
    assert other.value != result.explanation.value


@pytest.mark.parametrize("name, typed, token", [("roberta", "sat", "Ġsat"), ("roberta", "the", "Ġthe"),
                                                ("xlm-roberta", "the", "▁the"), ("albert", "the", "▁the"),
                                                ("albert", "The", "▁the")])
def test_a_typed_word_finds_its_word_start_token(tmp_path_factory, name, typed, token):
    """Byte-level BPE writes a word after a space "Ġword", SentencePiece "▁word"; a learner types "word"."""
    _, _, ckpt = built(name, tmp_path_factory)
    tokenizer = ckpt.tokenizer
    assert tokenizer.token_to_id(token) is not None
    assert target_id(tokenizer, typed) == tokenizer.token_to_id(token)
    encoding = inputs.encode(tokenizer, ckpt.model, TEXT)
    result = why(ckpt.model, tokenizer, encoding, Ask(target=typed))
    assert result.target == token and result.explanation.score.target == tokenizer.token_to_id(token)
