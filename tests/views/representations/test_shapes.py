"""The Shapes and padding tab: the BERT tutorial's shapes (seed text 002) from the real model, [PAD] keys at weight
exactly 0, padding that changes nothing, clear messages for bad sizes and sentences, and the tab in AppTest."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.representations import shapes as vsh
from tests.helpers.figure_data import array, figures, shown

SEED002 = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
TEXT = ["the cat sat on the mat .", "i went to the bank to deposit money .", "it was tired ."]


def seed002_model_and_batch(**sizes):
    return vsh.random_model(vsh.random_config(vsh.SEED002_VOCAB, **{**SEED002, **sizes})), vsh.seed002_batch()


def seed002_view(**sizes) -> vsh.ShapesView:
    return vsh.shapes_of(*seed002_model_and_batch(**sizes))


def test_seed002_batch_gives_the_seeds_shapes_and_hidden_64_changes_them():
    view = seed002_view()
    assert view.shapes["last_hidden_state"] == (2, 7, 32) and view.shapes["pooler_output"] == (2, 32)
    assert view.shapes["attentions"] == (2, 4, 7, 7) and view.layers == 2
    lines = view.printout().splitlines()
    assert "last_hidden_state shape: torch.Size([2, 7, 32])" in lines  # the seed's printout, verbatim
    assert "pooler_output shape : torch.Size([2, 32])" in lines
    assert "hidden_states: 3 tensors (the embeddings, then 2 layers), each torch.Size([2, 7, 32])" in lines
    wider = seed002_view(hidden_size=64)  # seed text 002, exercise 2
    assert wider.shapes["last_hidden_state"] == (2, 7, 64) and wider.shapes["pooler_output"] == (2, 64)
    assert "last_hidden_state shape: torch.Size([2, 7, 64])" in wider.printout()
    np.testing.assert_array_equal(view.ids, vsh.SEED002_IDS)
    np.testing.assert_array_equal(view.attention_mask, vsh.SEED002_MASK)
    assert view.frame("tokens").loc["sentence 1"].tolist() == ["id 1", "id 5", "id 8", "id 9", "id 2", "[PAD]", "[PAD]"]


def test_the_random_model_is_seeded_and_leaves_the_global_generator_alone():
    config = vsh.random_config(vsh.SEED002_VOCAB, **SEED002)
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a, b = vsh.random_model(config), vsh.random_model(config)
    assert torch.equal(torch.rand(3), expected_next)  # building did not consume the caller's random numbers
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    assert a.architecture == "BertModel" and not a.training


def test_pad_keys_get_weight_exactly_zero_in_every_layer_and_head(tiny_model, tiny_tokenizer):
    padded = vsh.text_batch(tiny_tokenizer, tiny_model, TEXT)
    lengths = padded.batch.lengths
    assert len(set(lengths)) == 3  # three lengths: two sentences padded
    for row, real in enumerate(lengths):
        view = vsh.shapes_of(tiny_model, padded, row)
        L, H, T, _ = view.weights.shape
        assert (L, H, T) == (2, 4, max(lengths))
        assert np.all(view.weights[..., real:] == 0.0)  # every query, layer and head: exactly 0
        assert np.all(view.weights[..., :real] > 0.0)  # the real keys share all of each row
        np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-5)
    assert view.pad_weight == 0.0
    assert view.tokens[2][-1] == "[PAD]" and view.attention_mask[2].tolist() == [1] * lengths[2] + [0] * (T - lengths[2])


def test_a_batch_without_padding_reports_none():
    model = vsh.random_model(vsh.random_config(vsh.SEED002_VOCAB, **SEED002))
    same = inputs.Batch(torch.tensor([[1, 5, 2], [1, 6, 2]]), torch.zeros(2, 3, dtype=torch.long),
                        torch.ones(2, 3, dtype=torch.long), (3, 3))
    view = vsh.shapes_of(model, vsh.Padded(same, (("a",) * 3, ("b",) * 3)))
    assert view.pad_weight is None and view.alone_difference is None


def test_padding_changes_nothing_and_the_mask_is_why(tiny_model, tiny_tokenizer):
    padded = vsh.text_batch(tiny_tokenizer, tiny_model, TEXT)
    view = vsh.shapes_of(tiny_model, padded)
    assert view.alone_difference is not None and view.alone_difference < 1e-5
    batch = padded.batch
    with_mask = inputs.run_batch(tiny_model, batch).hidden_states[-1]
    unmasked = inputs.run_batch(tiny_model, inputs.Batch(batch.ids, batch.segments, torch.ones_like(batch.ids),
                                                         batch.lengths)).hidden_states[-1]
    for row, text in enumerate(TEXT):  # independently of the view: each sentence on its own
        n = batch.lengths[row]
        alone = inputs.run(tiny_model, inputs.encode(tiny_tokenizer, tiny_model, text)).hidden_states[-1][0]
        torch.testing.assert_close(with_mask[row, :n], alone, atol=1e-5, rtol=0)
        if n < batch.ids.shape[1]:  # without the mask, the [PAD] keys would change the padded sentences
            assert (unmasked[row, :n] - alone).abs().max() > 1e-3


def test_a_model_without_a_pooler_has_no_pooler_output_and_still_pads_cleanly(tiny_config, tiny_tokenizer):
    torch.manual_seed(0)  # DistilBERT's, RoBERTa's masked-LM and ELECTRA's kind: no pooler
    model = BertForPreTraining(tiny_config, nsp_head=False, pooler=False).eval()
    view = vsh.shapes_of(model, vsh.text_batch(tiny_tokenizer, model, TEXT))
    assert not view.has_pooler and "pooler_output: None (no pooler)" in view.printout()
    assert view.alone_difference is not None and view.alone_difference < 1e-5
    assert vsh.shapes_of(*seed002_model_and_batch()).has_pooler  # the random BERT keeps its pooler


@pytest.mark.parametrize(("sizes", "message"), [
    (dict(hidden_size=30), "num_attention_heads (4) must divide hidden_size (30)"),
    (dict(hidden_size=2048), "hidden_size must be a whole number from 1 to 768"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a whole number from 1 to 12"),
    (dict(num_attention_heads=True), "num_attention_heads must be a whole number"),
    (dict(intermediate_size=5000), "intermediate_size must be a whole number from 1 to 3,072"),
])
def test_bad_sizes_are_input_errors_that_name_the_field(sizes, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        vsh.random_config(vsh.SEED002_VOCAB, **{**SEED002, **sizes})


@pytest.mark.parametrize(("text", "message"), [
    ("one sentence only .", "write 2 to 4 sentences, one per line (there is 1)"),
    ("a\nb\nc\nd\ne", "write 2 to 4 sentences, one per line (there are 5)"),
    ("a\n\nb", "line 2 is empty"),
    ("  \n", "(there are 0)"),
])
def test_bad_sentences_are_input_errors(text, message):
    with pytest.raises(InputError) as caught:
        vsh.sentences(text)
    assert message in str(caught.value)


def test_blank_lines_at_the_ends_are_dropped_and_a_long_sentence_is_refused(tiny_model, tiny_tokenizer):
    assert vsh.sentences("\nthe cat .\nthe dog .\n\n") == ["the cat .", "the dog ."]
    with pytest.raises(InputError, match="sentence 2: the text is 102 tokens long; this model reads at most 64"):
        vsh.text_batch(tiny_tokenizer, tiny_model, ["the cat .", "cat " * 100])


# --- The tab in AppTest --------------------------------------------------------------------------
def _tab(path: str) -> None:
    from bertviz_lab.ui.shell.models import cached_checkpoint
    from bertviz_lab.ui.representations.shapes import shapes_tab

    shapes_tab(cached_checkpoint(path, "cpu"))


@pytest.fixture
def tab(tiny_checkpoint) -> AppTest:
    return AppTest.from_function(_tab, args=(str(tiny_checkpoint),), default_timeout=60).run()


def printout(at: AppTest) -> str:
    return "\n".join(code.value for code in at.code)


def warnings(at: AppTest) -> str:
    """The warnings as a student reads them: typed text is backslash-escaped for Markdown."""
    return "\n".join(w.value.replace("\\", "") for w in at.warning)


def said(at: AppTest) -> str:
    return shown("\n".join(str(e.value) for kind in ("markdown", "caption", "info", "warning") for e in at.get(kind)))


def test_the_tab_shows_the_shapes_and_hidden_64_changes_them(tab):
    at = tab
    assert not at.exception
    assert "pooler_output shape : torch.Size([3, 32])" in printout(at)  # the three default sentences
    at.button_group(key="shapes.source").set_value("seed002").run()
    assert not at.exception
    assert "last_hidden_state shape: torch.Size([2, 7, 32])" in printout(at)
    assert "pooler_output shape : torch.Size([2, 32])" in printout(at)
    at.number_input(key="shapes.hidden").set_value(64).run()
    assert "last_hidden_state shape: torch.Size([2, 7, 64])" in printout(at)
    assert "torch.Size([2, 7, 32])" not in printout(at)
    heatmap = figures(at)[0]["data"][0]
    z = array(heatmap["z"])  # sentence 1, layer 0, head 0: 5 real tokens, then 2 [PAD]
    np.testing.assert_allclose(z, seed002_view(hidden_size=64).weights[0, 0], atol=1e-6)
    assert np.all(z[:, 5:] == 0.0) and np.all(z[:, :5] > 0.0) and heatmap["x"][-1] == "6 [PAD]"
    assert "[PAD] key, over all 2 sentences, 2 layers and 4 heads: **exactly 0**" in said(at)
    assert "run alone, without [PAD]: **" in said(at)


def test_bad_inputs_show_a_warning_and_no_traceback(tab):
    at = tab
    at.number_input(key="shapes.heads").set_value(5).run()
    assert not at.exception and not at.code  # nothing computed
    assert "num_attention_heads (5) must divide hidden_size (32)" in warnings(at)
    at.number_input(key="shapes.heads").set_value(4)
    at.text_area(key="shapes.text").input("just one sentence .").run()
    assert not at.exception and not at.code
    assert "write 2 to 4 sentences, one per line (there is 1)" in warnings(at)
    at.text_area(key="shapes.text").input("the cat .\nthe dog sat .").run()
    assert not at.exception and "torch.Size([2, 6, 32])" in printout(at)
    at.button_group(key="shapes.model").set_value("active")
    at.text_area(key="shapes.text").input("the cat .\n" + "cat " * 100).run()  # the tiny checkpoint reads 64
    assert not at.exception and not at.code
    assert "sentence 2: the text is 102 tokens long; this model reads at most 64" in warnings(at)


def test_edits_survive_a_run_that_does_not_draw_their_widgets(tab):
    at = tab
    at.text_area(key="shapes.text").input("the cat .\nthe dog sat on the mat .")
    at.number_input(key="shapes.hidden").set_value(64).run()
    at.button_group(key="shapes.source").set_value("seed002").run()
    assert not [w for w in at.button_group if w.key == "shapes.model"]  # not drawn for the seed's batch
    at.button_group(key="shapes.source").set_value("text").run()
    assert at.text_area(key="shapes.text").value == "the cat .\nthe dog sat on the mat ."
    assert "last_hidden_state shape: torch.Size([2, 9, 64])" in printout(at)
    at.button_group(key="shapes.model").set_value("active").run()
    assert not at.exception and "torch.Size([2, 9, 32])" in printout(at)  # the tiny checkpoint is 32 wide


def test_a_random_model_spreads_attention_evenly_and_a_trained_one_does_not(shipped):
    random = seed002_view()
    assert random.evenly_spread(0, 0) and random.evenly_spread(1, 3)
    view = vsh.shapes_of(shipped.model, vsh.text_batch(shipped.tokenizer, shipped.model, TEXT))
    assert not all(view.evenly_spread(layer, head) for layer in range(4) for head in range(4))
