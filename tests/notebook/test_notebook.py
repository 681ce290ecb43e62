"""The notebook API (bertviz_lab.notebook). On the shipped model every call returns the figure the app's page draws
(the same view and builder, compared trace by trace) with the model's own numbers; on random `transformers` models
of two families, read from memory without writing a file, the figures hold transformers' own outputs (<= 1e-5);
every mistake is a LabError of one sentence."""

from __future__ import annotations

import builtins
import html
import io
import json
import os
import re
import tempfile

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
import transformers

from bertviz_lab import notebook as nb
from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.errors import CheckpointError, InputError, LabError
from bertviz_lab.explain.report import METHODS
from bertviz_lab.figures import attention as fa
from bertviz_lab.figures import predictions as fp
from bertviz_lab.figures import representations as fr
from bertviz_lab.figures import syntax as fsy
from bertviz_lab.figures import token_labels
from bertviz_lab.figures import why as fy
from bertviz_lab.notebook import grammar
from bertviz_lab.pretrain.head_roles import head_roles
from bertviz_lab.syntax.report import analyse, story_corpus
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.attention import layer as lv
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.representations import vectors as rv
from bertviz_lab.views.syntax import analysis as vs
from bertviz_lab.views.why import explanation as vw
from tests.helpers.family_models import build
from tests.helpers.model_numbers import cosine_matrix, lens, word_vectors

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = dict(atol=1e-5, rtol=0)
TEXT = "the animal did not cross the street because it was too [MASK] ."
BANK = ["i went to the bank to deposit money .", "he sat by the river bank ."]


@pytest.fixture(scope="module")
def lab():
    return nb.load("bertviz-mini", device="cpu")


def assert_same(fig, expected) -> None:
    """`fig` is a plotly figure, JSON-serialisable (so it renders inline), equal to `expected` trace by trace."""
    assert isinstance(fig, go.Figure)
    json.loads(fig.to_json())
    _equal(fig.to_dict(), expected.to_dict())


def _equal(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
    elif isinstance(a, (list, tuple)) and any(isinstance(x, dict) for x in a):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def numbers(trace, name: str = "z") -> np.ndarray:
    return np.asarray(getattr(trace, name), dtype=float)


# --- On the shipped model: the page's figure, the model's numbers ----------------------------------------------
def test_a_lab_says_what_it_holds_and_loads_once(lab):
    assert nb.load("bertviz-mini", device="cpu") is lab  # by name again: the model already loaded
    for part in ("<Lab BERT", "4 layers × 4 heads", "vocabulary of 2,171", "a masked-LM head", "bertviz-mini"):
        assert part in repr(lab)
    assert lab.model is lab.checkpoint.model and lab.tokenizer is lab.checkpoint.tokenizer
    assert nb.load(lab) is lab


def test_predict_draws_the_pages_bars(lab):
    fig = nb.predict(lab, TEXT, top_k=10)
    encoding = inputs.encode(lab.tokenizer, lab.model, TEXT)
    mask = vpr.predict_masks(lab.model, lab.tokenizer, encoding, top_k=10).masks[0]
    assert_same(fig, fp.prediction_bars(vpr.candidate_rows(mask), "Top-10 for mask #1"))
    with torch.no_grad():
        logits = lab.model(torch.tensor([encoding.ids])).mlm_logits[0, encoding.tokens.index("[MASK]")]
    top = logits.double().softmax(-1).topk(10)
    np.testing.assert_allclose(numbers(fig.data[0], "x"), top.values.numpy(), **TOL)
    assert list(fig.data[0].y) == [lab.tokenizer.id_to_token(i) for i in top.indices.tolist()]
    hidden = nb.predict(lab, "the cat sat on the mat .", words=["mat"])  # a word hidden, as a clicked pill
    assert hidden.layout.title.text == "Top-5 for mask #1"


def test_attention_draws_the_pages_matrix_and_grid(lab):
    encoding = inputs.encode(lab.tokenizer, lab.model, TEXT)
    view = av.explore(lab.model, encoding, None, lab.tokenizer.mask_id)
    shown = av.matrix(view, 2, 1)
    assert_same(nb.attention(lab, TEXT, layer=2, head=1),
                fa.attention_heatmap(shown.weights, shown.col_axis, shown.row_axis, shown.title))
    trace = inputs.run(lab.model, encoding, trace=True).trace
    np.testing.assert_allclose(numbers(nb.attention(lab, TEXT, 2, 1).data[0]), trace[2].weights[0, 1].numpy(), **TOL)
    grid = av.grid(view)
    assert_same(nb.attention(lab, TEXT, layer=None, head=None),
                fa.attention_grid(grid.weights, grid.col_axis, grid.row_axis, view.heads_on, grid.title))
    one_layer = nb.attention(lab, TEXT, layer=3, head=None)
    assert [numbers(t).tolist() for t in one_layer.data] == view.weights[3].tolist()
    assert one_layer.layout.annotations[0].text == "L3 H0"
    mean = nb.attention(lab, TEXT, layer=1, head="mean")
    np.testing.assert_allclose(numbers(mean.data[0]), view.weights[1].mean(0), **TOL)
    off = nb.attention(lab, TEXT, layer=1, head=0, heads_off=[(0, 1), "L0 H2"])
    changed = av.explore(lab.model, encoding, av.head_mask(["L0 H1", "L0 H2"], 4, 4), lab.tokenizer.mask_id)
    np.testing.assert_array_equal(numbers(off.data[0]), changed.weights[1, 0])


def test_softmax_and_layer_steps_draw_the_pages_charts(lab):
    encoding = inputs.encode(lab.tokenizer, lab.model, TEXT)
    view = av.explore(lab.model, encoding, None, lab.tokenizer.mask_id)
    steps = av.softmax_steps(view, 1, 2, 3)
    assert_same(nb.softmax_steps(lab, TEXT, layer=1, head=2, query=3),
                fa.softmax_bars(av.weights_by_key(view, steps), f"Layer 1 · head 2 · query {view.axis_labels[3]}"))
    np.testing.assert_allclose(numbers(nb.softmax_steps(lab, TEXT, 1, 2, query="did").data[0], "y"),
                               view.weights[1, 2, 3], **TOL)
    table = nb.softmax_steps(lab, TEXT, layer=1, head=2, query=3, kind="table")  # the page's table of the steps
    assert table.equals(steps) and list(table.columns[:2]) == [av.KEY, av.DOT]
    np.testing.assert_allclose(table[av.WEIGHT], view.weights[1, 2, 3], **TOL)
    layer = np.int64(-1)  # a NumPy integer works where an int does
    assert nb.why(lab, "the cat sat on the [MASK] .", layer=layer, ig_steps=2).layout.title.text.startswith(
        "Each method's answer, token by token (attention at layer 3")
    query = av.default_query(view)  # the pronoun "it"
    rest = lv.layer_steps(lab.model, view, 2, query)
    fig = nb.layer_steps(lab, TEXT, layer=2)
    assert_same(fig, fa.step_norms(list(rest.table[lv.STEP]), rest.table[lv.NORM].to_numpy(),
                                   f"Layer 2 · query {view.axis_labels[query]}: the length of each vector (orange: "
                                   "just normalised)"))
    hidden = inputs.run(lab.model, encoding).hidden_states
    np.testing.assert_allclose(fig.data[0].x[[0, -1]], [hidden[2][0, query].norm(), hidden[3][0, query].norm()],
                               atol=1e-4)


def test_same_word_and_the_lens_draw_the_representations_tab(lab):
    senses = ["money", "river"]
    wic = rv.word_in_context(lab.model, lab.tokenizer, "bank", BANK)
    sims = rv.cosines(wic.vectors)
    fig = nb.same_word(lab, BANK, word="bank", senses=senses, layer=2)
    assert_same(fig, fr.similarity_heatmap(sims[2], fr.sentence_labels(BANK, senses), BANK,
                                           "Cosine similarity of “bank” across the sentences · layer 2"))
    for layer, matrix in enumerate(cosine_matrix(v) for v in word_vectors(lab.checkpoint, "bank", BANK)):
        np.testing.assert_allclose(numbers(nb.same_word(lab, BANK, "bank", layer=layer).data[0]), matrix, atol=1e-6)
    assert nb.same_word(lab, BANK, "bank").layout.title.text.endswith("layer 4")  # the last layer by default
    assert isinstance(nb.same_word(lab, BANK, "bank", senses=senses, kind="senses"), go.Figure)
    assert isinstance(nb.same_word(lab, [*BANK, "the bank was closed ."], "bank", kind="projection"), go.Figure)
    text = "i went to the [MASK] to deposit money ."
    found = rv.logit_lens(lab.model, inputs.encode(lab.tokenizer, lab.model, text), lab.tokenizer.mask_id)
    ids, probs = rv.lens_grid(found.masks[0], 5)
    fig = nb.logit_lens(lab, text)
    assert_same(fig, fr.lens_heatmap(probs, [lab.tokenizer.id_to_token(i) for i in ids],
                                     f"[MASK] at token {found.masks[0].position}: p(token) after each layer"))
    _, layers, own = lens(lab.checkpoint, text)
    np.testing.assert_allclose(numbers(fig.data[0]), layers[0][:, ids], atol=1e-6)
    np.testing.assert_allclose(numbers(fig.data[0])[-1], own[0][ids], atol=1e-6)  # the last layer: the guess


def test_head_roles_draw_the_heads_commands_scores(lab):
    roles = head_roles(lab.model, lab.tokenizer)
    layer, head, best = roles.strongest("det_noun")
    assert_same(nb.head_roles(lab, role="det_noun"), fa.head_summary(
        roles.scores["det_noun"], f"det_noun: to determiner → noun (strongest: layer {layer} head {head}, {best:.2f})",
        ".3f", "mean weight"))
    own = nb.head_roles(lab, ["the cat sat on the mat ."], role="self")
    np.testing.assert_array_equal(numbers(own.data[0]), head_roles(lab.model, lab.tokenizer,
                                                                   ["the cat sat on the mat ."]).scores["self"])


def test_why_and_deletion_draw_the_pages_charts(lab):
    encoding = inputs.encode(lab.tokenizer, lab.model, TEXT)
    result = vw.with_attention(vw.why(lab.model, lab.tokenizer, encoding, vw.Ask(ig_steps=8)), 1, 2)
    e = result.explanation
    assert_same(nb.why(lab, TEXT, layer=1, head=2, ig_steps=8), fy.heat_strips(
        {vw.TITLES[k]: v for k, v in e.values.items()}, {vw.TITLES[k]: m.signed for k, m in METHODS.items()},
        token_labels(e.tokens), "Each method's answer, token by token (attention at layer 1, head 2)"))
    rho = nb.why(lab, TEXT, layer=1, head=2, kind="agreement", ig_steps=8)
    assert re.fullmatch(r"Do the methods rank the tokens alike\? Spearman ρ over \d+ tokens", rho.layout.title.text)
    curves = nb.deletion(lab, TEXT, layer=1, head=2, ig_steps=8, random_orders=4)
    found = vw.deletion_for(result, random_orders=4)
    drawn = {t.name: t.y for t in curves.data}
    for key, curve in found.curves.items():
        np.testing.assert_array_equal(drawn[vw.TITLES[key]], curve)
    assert curves.layout.title.text == f"p({result.target}) after each removal, in each method's order"


def test_syntax_draws_the_pages_charts_from_one_analysis(lab, monkeypatch):
    runs = []
    monkeypatch.setattr(grammar, "analyse", lambda *a, **k: runs.append(k) or analyse(*a, **k))
    figs = {kind: nb.syntax(lab, kind=kind, sentences=8, seed=3, control=False)
            for kind in ("relations", "probe", "agreement")}
    assert len(runs) == 1  # one analysis serves the three figures
    report = analyse(lab.model, lab.tokenizer, story_corpus(8, 3), seed=3, control=False)
    relation = vs.default_relation(report.relations.relations)
    assert_same(figs["relations"], fsy.accuracy_heatmap(report.relations.accuracy[report.relations.index(relation), 0],
                                                       vs.heatmap_title(report, relation, 0)))
    table = vs.probe_table(report)
    assert_same(figs["probe"], fsy.probe_curves({n: table[c].to_numpy() for c, n in vs.PROBE_CURVES.items()},
                                               report.probe.linear_uuas, "The structural probe, layer by layer "
                                                                         "(held-out sentences)"))
    assert_same(figs["agreement"], fsy.agreement_bars(*vs.accuracies(report.agreement), "Right form scored higher, "
                                                                                       "by number of attractors"))


# --- Mistakes: one sentence each ------------------------------------------------------------------------------
@pytest.mark.parametrize("call, said", [
    (lambda lab: nb.predict(lab, "   "), "empty"),
    (lambda lab: nb.predict(lab, "the " * 300 + "[MASK]"), "reads at most 64"),
    (lambda lab: nb.attention(lab, "\u200b\u200b"), "no characters the tokenizer can read"),
    (lambda lab: nb.attention(lab, TEXT, layer=4), "layer 4 does not exist: this model has layers 0 to 3"),
    (lambda lab: nb.softmax_steps(lab, TEXT, head=-1), "head -1 does not exist"),
    (lambda lab: nb.softmax_steps(lab, TEXT, query="zebra"), "no token 'zebra'"),
    (lambda lab: nb.attention(lab, TEXT, block="A→B"), "needs a sentence pair"),
    (lambda lab: nb.attention(lab, TEXT, heads_off=["L7 H0"]), "no head 'L7 H0'"),
    (lambda lab: nb.predict(lab, "the cat sat ."), "no [MASK]"),
    (lambda lab: nb.predict(lab, TEXT, mask=1), "mask 1 does not exist: the text has masks 0 to 0"),
    (lambda lab: nb.predict(lab, TEXT, words=["zebra"]), "no word 'zebra'"),
    (lambda lab: nb.logit_lens(lab, TEXT, top_k=0), "top_k must be a whole number"),
    (lambda lab: nb.same_word(lab, "the bank .", "bank"), "list of sentences"),
    (lambda lab: nb.same_word(lab, [BANK[0], "the cat sat ."], "bank"), "sentence 2 does not contain"),
    (lambda lab: nb.same_word(lab, BANK, "bank", kind="pie"), "kind must be one of"),
    (lambda lab: nb.same_word(lab, BANK, "bank", layer=5), "layer 5 does not exist"),
    (lambda lab: nb.why(lab, TEXT, target="xyzzyq"), "not a single token"),
    (lambda lab: nb.why(lab, TEXT, position=2), "position is for ELECTRA"),
    (lambda lab: nb.head_roles(lab, ["the cat sat ."], role="det_noun"), "role must be one of"),
    (lambda lab: nb.syntax(lab, sentences=3), "sentences must be a whole number from 8"),
    (lambda lab: nb.predict(42, TEXT), "expected a Lab"),
    (lambda lab: nb.load("bertviz-mini", object()), "brings its own tokenizer"),
    (lambda lab: nb.load(lab, device="cpu"), "this is a Lab already"),
    (lambda lab: nb.predict(lab, TEXT, 5), "text_b must be a sentence (a str), not int"),
    (lambda lab: nb.attention(lab, TEXT, text_b=["a", "b"]), "text_b must be a sentence (a str), not list"),
    (lambda lab: nb.predict(lab, "the cat sat .", words=None), "words must be words of the text"),
    (lambda lab: nb.attention(lab, TEXT, heads_off=None), "heads_off must be a list of heads"),
    (lambda lab: nb.attention(lab, TEXT, heads_off=3), "heads_off must be a list of heads"),
    (lambda lab: nb.predict(lab, TEXT, causal="no"), "causal must be True or False, got 'no'"),
    (lambda lab: nb.same_word(lab, BANK, "bank", senses="ab"), "senses must be a list"),
    (lambda lab: nb.why(lab, TEXT, mask=-1), "mask -1 does not exist: the text has masks 0 to 0"),
    (lambda lab: nb.why(lab, TEXT, layer=9), "layer must be a whole number from -4 to 3, got 9"),
    (lambda lab: nb.softmax_steps(lab, TEXT, kind="pie"), "kind must be one of 'bars', 'table'"),
    (lambda lab: nb.why(lab, TEXT, layer=True), "layer True does not exist"),
    (lambda lab: nb.predict(lab, "the cat sat .", words=[True]), "got True"),
    (lambda lab: nb.syntax(lab, control="no"), "control must be True or False, got 'no'"),
])
def test_a_mistake_is_one_sentence(lab, call, said):
    with pytest.raises(LabError) as raised:
        call(lab)
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_a_numpy_integer_names_a_word_as_an_int_does(lab):
    assert_same(nb.predict(lab, "the cat sat on the mat .", words=np.int64(2)),
                nb.predict(lab, "the cat sat on the mat .", words=[2]))


def test_folders_and_hub_ids_that_are_not_there_are_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no model folder"):
        nb.load(tmp_path / "missing")
    with pytest.raises(CheckpointError):  # a Hub id, offline in the tests and not in the cache
        nb.predict("someone/no-such-model", TEXT)


def test_a_folder_loads_once_until_it_changes(tmp_path, tiny_model, tiny_tokenizer):
    folder = save_checkpoint(tiny_model, tiny_tokenizer, tmp_path / "m")
    first = nb.load(folder, device="cpu")
    assert nb.load(str(folder), device="cpu") is first
    assert first.checkpoint.path == folder and str(folder) in repr(first)
    fig = nb.predict(first, "the cat sat on the [MASK] .")  # by name, it would load on "auto": a GPU if there is one
    encoding = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat on the [MASK] .")
    expected = vpr.predict_masks(tiny_model, tiny_tokenizer, encoding).masks[0]
    np.testing.assert_allclose(numbers(fig.data[0], "x"), [c.prob for c in expected.candidates], **TOL)
    os.utime(folder, ns=(0, 0))  # the folder changed (a new save): read again
    assert nb.load(folder, device="cpu") is not first


# --- transformers models in memory -------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["bert", "roberta"])
def family(request, tmp_path_factory):
    hf, tok = build(request.param, tmp_path_factory.mktemp(request.param))
    return hf, tok, nb.load(hf, tok)


def hf_run(hf, tok, text: str):
    ids = tok(text.replace("[MASK]", tok.mask_token))["input_ids"]
    with torch.no_grad():
        out = hf(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    return ids, out


def test_a_model_in_memory_is_read_as_it_is(family):
    hf, tok, lab = family
    assert lab.family.name == hf.config.model_type and lab.checkpoint.path is None
    assert not lab.model.training and lab.device == next(hf.parameters()).device
    assert f"a {type(hf).__name__} in memory" in repr(lab)


def test_predict_is_the_models_own_softmax(family):
    hf, tok, lab = family
    ids, out = hf_run(hf, tok, "the cat sat on the [MASK] .")
    logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
    top = logits[0, ids.index(tok.mask_token_id)].double().softmax(-1).topk(5)
    fig = nb.predict(lab, "the cat sat on the [MASK] .")
    np.testing.assert_allclose(numbers(fig.data[0], "x"), top.values.numpy(), **TOL)
    assert [html.unescape(y) for y in fig.data[0].y] == tok.convert_ids_to_tokens(top.indices.tolist())


def test_attention_and_its_steps_are_the_models_attentions(family):
    hf, tok, lab = family
    _, out = hf_run(hf, tok, "the cat sat on the mat .")
    for layer in range(2):
        grid = nb.attention(lab, "the cat sat on the mat .", layer=layer, head=None)
        for head in range(4):
            theirs = out.attentions[layer][0, head].numpy()
            np.testing.assert_allclose(numbers(nb.attention(lab, "the cat sat on the mat .", layer, head).data[0]),
                                       theirs, **TOL)
            np.testing.assert_allclose(numbers(grid.data[head]), theirs, **TOL)
            bars = nb.softmax_steps(lab, "the cat sat on the mat .", layer, head, query=2)
            np.testing.assert_allclose(numbers(bars.data[0], "y"), theirs[2], **TOL)
        norms = nb.layer_steps(lab, "the cat sat on the mat .", layer, query=2).data[0].x
        np.testing.assert_allclose(norms[[0, -1]], [out.hidden_states[layer][0, 2].norm(),
                                                    out.hidden_states[layer + 1][0, 2].norm()], atol=1e-4)


def test_the_lens_and_same_word_are_the_models_hidden_states(family):
    hf, tok, lab = family
    text = "i went to the [MASK] to deposit money ."
    ids, out = hf_run(hf, tok, text)
    fig = nb.logit_lens(lab, text)
    head = hf.cls.predictions if hasattr(hf, "cls") else hf.lm_head
    chosen = tok.convert_tokens_to_ids([html.unescape(x) for x in fig.data[0].x])
    with torch.no_grad():
        theirs = torch.stack([head(h)[0, ids.index(tok.mask_token_id)] for h in out.hidden_states]).softmax(-1)
    np.testing.assert_allclose(numbers(fig.data[0]), theirs[:, chosen].numpy(), **TOL)
    vectors = []
    for sentence in BANK:
        encoded = tok(sentence, return_offsets_mapping=True)
        start = sentence.index("bank")
        at = [i for i, (a, b) in enumerate(encoded["offset_mapping"]) if a < start + 4 and b > start and b > a]
        with torch.no_grad():
            hidden = hf(input_ids=torch.tensor([encoded["input_ids"]]), output_hidden_states=True).hidden_states
        vectors.append(torch.stack([h[0, at].mean(0) for h in hidden]).double().numpy())
    for layer in range(3):
        matrix = cosine_matrix(np.stack([v[layer] for v in vectors]))
        np.testing.assert_allclose(numbers(nb.same_word(lab, BANK, "bank", layer=layer).data[0]), matrix, **TOL)


def test_head_roles_and_why_read_the_models_attentions(family):
    hf, tok, lab = family
    sentences = ["the cat sat on the mat .", "i went to the bank ."]
    previous = []
    for sentence in sentences:
        _, out = hf_run(hf, tok, sentence)
        w = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)
        previous.append(np.mean([w[:, :, i, i - 1] for i in range(1, w.shape[-1] - 1)], axis=0))
    fig = nb.head_roles(lab, sentences)
    np.testing.assert_allclose(numbers(fig.data[0]), np.mean(previous, axis=0), **TOL)
    text = "the cat sat on the [MASK] ."
    ids, out = hf_run(hf, tok, text)
    at = ids.index(tok.mask_token_id)
    strips = nb.why(lab, text, ig_steps=4)
    row = list(strips.data[0].y).index(vw.TITLES["attention"])
    np.testing.assert_allclose(np.asarray(strips.data[0].customdata)[row], out.attentions[-1][0].mean(0)[at], **TOL)
    logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
    p = logits[0, at].double().softmax(-1)
    curves = nb.deletion(lab, text, ig_steps=4, random_orders=2)
    every = list(ids)
    for i in range(1, len(ids) - 1):
        every[i] = tok.mask_token_id  # every word masked: the end of each curve
    with torch.no_grad():
        emptied = hf(input_ids=torch.tensor([every])).logits if not hasattr(out, "prediction_logits") else \
            hf(input_ids=torch.tensor([every])).prediction_logits
    p_end = emptied[0, at].double().softmax(-1)[p.argmax()]
    for trace in curves.data[3:]:
        np.testing.assert_allclose([trace.y[0], trace.y[-1]], [p.max(), p_end], **TOL)


def test_a_model_without_its_mlm_head_shows_attention_only(family):
    hf, tok, _ = family
    bare = hf.bert if hasattr(hf, "bert") else hf.roberta  # the BertModel (RobertaModel) inside
    lab = nb.load(bare, tok)
    assert "no masked-LM head" in repr(lab)
    _, out = hf_run(bare, tok, "the cat sat on the mat .")
    np.testing.assert_allclose(numbers(nb.attention(lab, "the cat sat on the mat .", 1, 3).data[0]),
                               out.attentions[1][0, 3].numpy(), **TOL)
    for call in (nb.predict, nb.logit_lens, nb.why):
        with pytest.raises(InputError, match=rf"has no masked-language-model \(MLM\) head: a {type(bare).__name__} "
                                             "has no such layer: load the model with AutoModelForMaskedLM"):
            call(lab, "the cat sat on the [MASK] .")


def test_a_decoder_is_refused_not_read_as_an_encoder(family, tmp_path):
    """A BertLMHeadModel with is_decoder=True masks every later token: read as BERT it would draw wrong weights."""
    hf, tok, _ = family
    decoder_class = transformers.BertLMHeadModel if hf.config.model_type == "bert" else transformers.RobertaForCausalLM
    decoder = decoder_class(type(hf.config)(**{**hf.config.to_dict(), "is_decoder": True})).eval()
    with pytest.raises(CheckpointError, match="set up as a decoder"):
        nb.load(decoder, tok)
    decoder.save_pretrained(tmp_path / "decoder")  # and the same model from a folder
    with pytest.raises(CheckpointError, match="set up as a decoder"):
        nb.load(tmp_path / "decoder")


def test_a_bare_electra_encoder_is_not_said_to_be_a_discriminator(tmp_path):
    hf, tok = build("electra-discriminator", tmp_path / "electra")
    lab = nb.load(hf.electra, tok)  # the ElectraModel inside: neither head
    with pytest.raises(InputError, match=r"MLM\) head: an ElectraModel has no such layer") as raised:
        nb.predict(lab, "the cat sat on the [MASK] .")
    assert "replaced" not in str(raised.value)
    assert "replaced" in nb.load(hf, tok).no_mlm()  # the discriminator: never given one
    assert "saved without" in lab.family.no_mlm(False)  # a folder saved without it


def test_what_the_lab_cannot_read_is_said(family):
    hf, tok, _ = family
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10,
                                                                n_positions=8))
    with pytest.raises(CheckpointError, match="not a model of the BERT family: this lab reads BertForMaskedLM"):
        nb.load(gpt2, tok)
    with pytest.raises(CheckpointError, match="needs its tokenizer"):
        nb.load(hf)
    with pytest.raises(CheckpointError, match="is not a transformers model"):
        nb.load(tok, hf)


class SlowTokenizer:
    """What a slow WordPiece tokenizer offers: its vocabulary and its casing, no tokenizer.json."""

    def __init__(self, fast):
        self.vocab, self.do_lower_case = fast.get_vocab(), getattr(fast, "do_lower_case", True)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)


def test_a_slow_wordpiece_tokenizer_is_read_from_its_vocabulary(family):
    hf, tok, lab = family
    if lab.family.name != "bert":
        with pytest.raises(CheckpointError, match="slow RoBERTa tokenizer"):
            nb.load(hf, SlowTokenizer(tok))
        return
    slow = nb.load(hf, SlowTokenizer(tok))
    for text in ("the cat sat on the [MASK] .", "i went to the bank to deposit money ."):
        assert slow.tokenizer.encode(text).ids == tok(text)["input_ids"] == lab.tokenizer.encode(text).ids


class Basic:
    def __init__(self, strip_accents):
        self.strip_accents = strip_accents


@pytest.mark.parametrize("change, said", [
    (lambda slow: setattr(slow, "basic_tokenizer", Basic(strip_accents=False)), "strip_accents=False apart from"),
    (lambda slow: setattr(slow, "special_tokens_map", {"cls_token": "<cls>"}), "uses '<cls>' as its cls token"),
])
def test_a_slow_tokenizer_the_lab_would_misread_is_refused(family, change, said):
    hf, tok, lab = family
    if lab.family.name != "bert":
        pytest.skip("a slow RoBERTa tokenizer is refused whatever it says (above)")
    slow = SlowTokenizer(tok)
    change(slow)
    with pytest.raises(CheckpointError, match=said):
        nb.load(hf, slow)


def test_loading_a_model_in_memory_writes_nothing(family, monkeypatch, tmp_path):
    hf, tok, _ = family
    written = []

    def refuse(opener):
        def checked(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+"):
                written.append(file)
            return opener(file, mode, *args, **kwargs)
        return checked

    monkeypatch.setattr(builtins, "open", refuse(builtins.open))
    monkeypatch.setattr(io, "open", refuse(io.open))
    real_open = os.open

    def low_level(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            written.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", low_level)
    monkeypatch.setattr(torch, "save", lambda *a, **k: written.append(a))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lab = nb.load(hf, tok)
    nb.predict(lab, "the cat sat on the [MASK] .")
    assert written == [] and list(tmp_path.iterdir()) == []


def test_a_discriminator_in_memory_says_which_tokens_look_replaced(tmp_path):
    hf, tok = build("electra-discriminator", tmp_path / "electra")
    lab = nb.load(hf, tok)
    fig = nb.predict(lab, "the cat ate the mat .")
    ids = tok("the cat ate the mat .")["input_ids"]
    with torch.no_grad():
        p = torch.sigmoid(hf(input_ids=torch.tensor([ids])).logits[0, 1:-1])
    np.testing.assert_allclose(numbers(fig.data[0], "y"), p.numpy(), **TOL)
    with pytest.raises(InputError, match="mask, target and contrast are for models that guess words"):
        nb.why(lab, "the cat ate the mat .", target="cat")
    assert isinstance(nb.why(lab, "the cat ate the mat .", position=2, ig_steps=4), go.Figure)


def test_why_gradients_are_the_models_own(family):
    """The gradient rows of `why` are dF/de of transformers' own model, F the top guess's logit at the [MASK] and e
    the token vectors (the word embeddings' output)."""
    hf, tok, lab = family
    text = "the cat sat on the [MASK] ."
    ids = tok(text.replace("[MASK]", tok.mask_token))["input_ids"]
    at = ids.index(tok.mask_token_id)
    kept = []
    hook = hf.get_input_embeddings().register_forward_hook(lambda m, i, out: kept.append(out.retain_grad() or out))
    try:
        out = hf(input_ids=torch.tensor([ids]))
    finally:
        hook.remove()
    logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
    logits[0, at, logits[0, at].argmax()].backward()
    e, grad = kept[0][0].detach().double(), kept[0].grad[0].double()
    hf.zero_grad()
    strips = nb.why(lab, text, ig_steps=4)
    rows = list(strips.data[0].y)
    values = np.asarray(strips.data[0].customdata, dtype=float)
    np.testing.assert_allclose(values[rows.index(vw.TITLES["gradient"])], grad.norm(dim=-1).numpy(), atol=1e-5)
    np.testing.assert_allclose(values[rows.index(vw.TITLES["gradient_x_input"])], (grad * e).sum(-1).numpy(), atol=1e-5)


def test_syntax_on_a_model_in_memory_is_the_same_as_from_its_folder(family, tmp_path):
    hf, tok, lab = family
    hf.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    from_memory = nb.syntax(lab, sentences=40, control=False)
    from_folder = nb.syntax(nb.load(tmp_path / "model", device="cpu"), sentences=40, control=False)  # where lab is
    assert_same(from_memory, from_folder)
    assert np.isfinite(numbers(from_memory.data[0])).all()
