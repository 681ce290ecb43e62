"""Every page with each family's model: it opens, runs, shows the family's own numbers and says what the family
lacks instead of failing. What a page should show is computed here with `transformers` itself: the family's own
tokenizer (its tokens, its special tokens) and its own model classes (their attentions, hidden states and
logits), run on the random checkpoint that `family_models.build` made; the lab reads the same folder."""

from __future__ import annotations

import html
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
import transformers
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.views.representations.vectors import embedding_layer
from tests.helpers.family_models import build
from tests.helpers.family_pages import PAGES
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import open_page
REPRESENTATIONS_TABS = ["Same word, different contexts", "Nearest neighbours", "Logit lens", "Embedding geometry",
                        "Shapes and padding"]
MEMBERS = ["distilbert", "roberta", "xlm-roberta", "electra-generator", "electra-discriminator", "albert"]
# What each family is, written out: the frame its tokenizer puts around a sentence, and its kind of tokens.
SPECIALS = {"distilbert": ("[CLS]", "[SEP]"), "roberta": ("<s>", "</s>"), "xlm-roberta": ("<s>", "</s>"),
            "electra-generator": ("[CLS]", "[SEP]"), "electra-discriminator": ("[CLS]", "[SEP]"),
            "albert": ("[CLS]", "[SEP]")}
KINDS = {"distilbert": "WordPiece", "roberta": "byte-level BPE", "xlm-roberta": "SentencePiece Unigram",
         "electra-generator": "WordPiece", "electra-discriminator": "WordPiece", "albert": "SentencePiece Unigram"}
SAME_WORD = "the"  # one token in every family's vocabulary, so its vector is that token's hidden state
SAME_WORD_LINES = ("a | the cat sat on the mat .\na | i went to the bank to deposit money .\n"
                   "b | he sat by the river bank .\nb | natural language processing is the best !")


class Member(NamedTuple):
    family: str
    folder: Path  # the checkpoint the lab opens
    model: transformers.PreTrainedModel  # the same weights, as transformers runs them
    tokenizer: transformers.PreTrainedTokenizerBase

    @property
    def discriminator(self) -> bool:
        """ELECTRA's discriminator: no MLM head, a replaced-token head instead."""
        return isinstance(self.model, transformers.ElectraForPreTraining)


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory) -> Member:
    folder = tmp_path_factory.mktemp(request.param)
    return Member(request.param, folder, *build(request.param, folder))


# --- The family's own tokenizer and model, through transformers ------------------------------------------
def own_ids(m: Member, text_a: str, text_b: str | None = None) -> list[int]:
    """The family tokenizer's ids for the text, a typed [MASK] read as its own mask token (as the lab does)."""
    typed = [t.replace("[MASK]", m.tokenizer.mask_token) for t in (text_a, text_b) if t is not None]
    return m.tokenizer(*typed)["input_ids"]


def own_tokens(m: Member, text_a: str, text_b: str | None = None) -> list[str]:
    return m.tokenizer.convert_ids_to_tokens(own_ids(m, text_a, text_b))


@torch.no_grad()
def own_run(m: Member, ids: list[int]):
    """The transformers model on one unpadded sentence: logits, hidden states and attention weights."""
    return m.model(input_ids=torch.tensor([ids]), output_hidden_states=True, output_attentions=True)


def framed(m: Member, tokens: list[str]) -> bool:
    """The tokens start and end with the family's own special tokens."""
    return (tokens[0], tokens[-1]) == SPECIALS[m.family]


def page(name: str, folder: Path, **session) -> AppTest:
    """`name` opened on the model in `folder`; `session`: more session-state keys, "." written "__"."""
    script = PAGES.parent / "app.py" if name == "home" else PAGES / f"{name}.py"  # Home is app.py's first page
    return open_page(script, folder, **session)


def subheaders(at: AppTest) -> list[str]:
    return [shown(h.value) for h in at.subheader]


def notes(at: AppTest) -> str:
    return " ".join(m.value for m in [*at.info, *at.warning, *at.error, *at.caption])


# --- What each page shows, against transformers --------------------------------------------------------------
def check_home(at: AppTest, m: Member) -> None:
    config = m.model.config
    metrics = {metric.label: metric.value for metric in at.metric}
    assert [metrics[k] for k in ("Layers", "Heads per layer", "Hidden size", "Vocabulary")] == [
        str(config.num_hidden_layers), str(config.num_attention_heads), str(config.hidden_size),
        f"{config.vocab_size:,}"]
    heads = "replaced-token detection (ELECTRA's discriminator), no MLM head" if m.discriminator else "MLM only"
    assert f"heads: {heads}" in notes(at) and "no NSP head" in notes(at), notes(at)


def check_predict(at: AppTest, m: Member) -> None:
    """The tokens the model reads, and its top guess at [MASK]: the argmax of the family model's own logits."""
    ids = own_ids(m, at.text_area(key="predict.text_a").value)
    tokens, logits = m.tokenizer.convert_ids_to_tokens(ids), own_run(m, ids).logits[0].double()  # (T, V)
    assert framed(m, tokens) and at.code[0].value == " ".join(tokens)
    at_mask = logits[ids.index(m.tokenizer.mask_token_id)]
    guesses = at.dataframe[0].value
    assert guesses["token"].iloc[0] == m.tokenizer.convert_ids_to_tokens(int(at_mask.argmax()))
    assert guesses["probability"].iloc[0] == pytest.approx(float(torch.softmax(at_mask, 0).max()), abs=1e-6)
    shown_logits = at_mask[m.tokenizer.convert_tokens_to_ids(guesses["token"].tolist())]
    np.testing.assert_allclose(guesses["logit"], shown_logits, atol=1e-4)  # every candidate's own logit
    assert subheaders(at) == ["The guess"] and "story world" not in notes(at)  # a Hub family is never the lab's


def check_replaced(at: AppTest, m: Member) -> None:
    """ELECTRA's discriminator fills no mask: p(replaced) of each token, the sigmoid of its own logit."""
    ids = own_ids(m, at.text_area(key="predict.text_a").value)
    tokens, logits = m.tokenizer.convert_ids_to_tokens(ids), own_run(m, ids).logits[0].double()  # (T,)
    rows = at.dataframe[0].value  # the text's tokens, the special tokens around them left out
    assert framed(m, tokens) and rows["token"].tolist() == tokens[1:-1]
    assert rows["position"].tolist() == list(range(1, len(ids) - 1))
    np.testing.assert_allclose(rows["logit"], logits[1:-1], atol=1e-5)
    np.testing.assert_allclose(rows["p(replaced)"], torch.sigmoid(logits[1:-1]), atol=1e-6)
    assert subheaders(at) == ["Which tokens look replaced?"] and "no MLM head" in notes(at)


def check_attention(at: AppTest, m: Member) -> None:
    """Layer 0, head 0: the family model's own attention weights, over its own tokens."""
    ids = own_ids(m, at.text_area(key="attn.text_a").value)
    tokens = m.tokenizer.convert_ids_to_tokens(ids)
    heatmap = figures(at)[0]
    assert heatmap["layout"]["title"]["text"] == "Layer 0 · head 0"
    labels = [html.unescape(label).split(" ", 1)[1] for label in heatmap["data"][0]["x"]]  # "3 &lt;s&gt;" -> <s>
    assert framed(m, tokens) and labels == tokens
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), own_run(m, ids).attentions[0][0, 0], atol=1e-5)


def check_representations(at: AppTest, m: Member) -> None:
    """The Same-word tab at the last layer: cosines of the family model's own hidden states of SAME_WORD."""
    vectors = []
    for line in SAME_WORD_LINES.splitlines():
        ids = own_ids(m, line.split("|")[1].strip())
        tokens = m.tokenizer.convert_ids_to_tokens(ids)
        at_word = [t.lstrip("Ġ▁").lower() for t in tokens].index(SAME_WORD)  # its first occurrence
        vectors.append(own_run(m, ids).hidden_states[-1][0, at_word].double().numpy())
    unit = np.array(vectors) / np.linalg.norm(vectors, axis=1, keepdims=True)
    heatmap = figures(at)[0]
    assert f"· layer {m.model.config.num_hidden_layers}" in heatmap["layout"]["title"]["text"]
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), unit @ unit.T, atol=1e-5)


def check_losses(at: AppTest, m: Member) -> None:
    """Step 1's token table: the family tokenizer's own tokens and ids for the pair; no NSP head, no NSP step."""
    if m.discriminator:
        assert any(w.value.startswith("Cannot run this example: this model has no MLM head") for w in at.warning)
        return
    ids = own_ids(m, at.text_area(key="losses.text_a").value, at.text_area(key="losses.text_b").value)
    tables = [d.value for d in at.dataframe if "token" in d.value.index]  # the pair, a few positions a row
    assert [t for table in tables for t in table.loc["token"]] == m.tokenizer.convert_ids_to_tokens(ids)
    assert [int(i) for table in tables for i in table.loc["id"]] == ids
    assert framed(m, m.tokenizer.convert_ids_to_tokens(ids))
    assert "Step “Next sentence prediction” is skipped: this model has no NSP head" in notes(at)


def check_why(at: AppTest, m: Member) -> None:
    """The strips over the family's own tokens, and F the family model's own logit: its top guess's at the mask, or
    the discriminator's replaced-token logit at the first word."""
    ids = own_ids(m, at.text_area(key="why.text_a").value)
    tokens, logits = m.tokenizer.convert_ids_to_tokens(ids), own_run(m, ids).logits[0].double()
    strips = figures(at)[0]
    assert strips["layout"]["title"]["text"].startswith("Each method's answer, token by token")
    assert framed(m, tokens) and [html.unescape(x).split(" ", 1)[1] for x in strips["data"][0]["x"]] == tokens
    line = shown(next(md.value for md in at.markdown if md.value.startswith("**F = ")))
    if m.discriminator:
        f, said = logits[1], "**F = the replaced-token logit** at token 1 "
    else:
        at_mask = logits[ids.index(m.tokenizer.mask_token_id)]
        f, top = at_mask.max(), m.tokenizer.convert_ids_to_tokens(int(at_mask.argmax()))
        said = f"**F = logit({top})** at {m.tokenizer.mask_token} #1 "
    assert line.startswith(said) and f"= {float(f):.4f};" in line, (line, float(f))


CHECKS = {"home": check_home, "predict": check_predict, "attention": check_attention,
          "representations": check_representations, "losses": check_losses, "why": check_why}
SESSION = {"attention": {"attn__text_a": "the cat sat on the mat ."},  # short: no family truncates it
           "representations": {"repr__set": "your own sentences", "repr__word": SAME_WORD,
                               "repr__sentences": SAME_WORD_LINES}}


@pytest.mark.parametrize("name", list(CHECKS))
def test_every_page_shows_each_familys_own_numbers(member, name):
    at = page(name, member.folder, **SESSION.get(name, {}))
    check = check_replaced if name == "predict" and member.discriminator else CHECKS[name]
    check(at, member)


@pytest.mark.parametrize("tab", REPRESENTATIONS_TABS)
def test_every_representations_tab_runs_with_each_family(member, tab):
    at = page("representations", member.folder, repr__tab=tab, repr__geo_word="the")  # "bank" may be split here
    assert [t.label for t in at.tabs] == REPRESENTATIONS_TABS and not at.warning, notes(at)
    ckpt = load_checkpoint(member.folder)
    segments = getattr(member.model.config, "type_vocab_size", 0)  # DistilBERT has no segment embeddings
    if tab == "Same word, different contexts":  # layer 0 in this family's words: segments, a projection
        help = at.select_slider(key="repr.layer").help
        assert embedding_layer(ckpt.config) in help and ("segment" in help) == (segments > 0), help
        assert "each layer has its own geometry" in notes(at)
    if tab == "Logit lens" and not member.discriminator:
        row0 = next(c.value for c in at.caption if "Row 0" in c.value)
        assert ("its segment" in row0) == (segments > 1) and embedding_layer(ckpt.config) in row0, row0
    if tab == "Embedding geometry":  # the space before a word is part of its row in BPE and SentencePiece only
        row = next(c.value for c in at.caption if c.value.startswith("The row of"))
        assert ("after a space" in row) == (KINDS[member.family] != "WordPiece"), row
    if tab == "Shapes and padding":  # the random BERT drew; now the active model itself
        at.button_group(key="shapes.model").set_value("active").run()
        assert not at.exception, [e.value for e in at.exception]
        tokens = [own_tokens(member, line) for line in at.text_area(key="shapes.text").value.splitlines()]
        T, pad = max(map(len, tokens)), member.tokenizer.pad_token  # padded in the model's own spelling
        assert all(framed(member, t) for t in tokens)
        assert at.dataframe[0].value.values.tolist() == [t + [pad] * (T - len(t)) for t in tokens]
        assert f"Attention never looks at {pad}" in subheaders(at)
        assert not any("pooler" in name for name, _ in member.model.named_parameters())  # none of these has one
        printout = at.code[0].value
        assert f"last_hidden_state shape: torch.Size([{len(tokens)}, {T}, 32])" in printout, printout
        assert "pooler_output: None (no pooler)" in printout and "This model has no pooler" in notes(at)


def test_the_family_note_holds_for_the_member_at_hand(member):
    at = page("attention", member.folder)
    ckpt = load_checkpoint(member.folder)
    note = next(i.value for i in at.info if i.value.startswith(f"**{ckpt.family.title}**"))
    if member.family == "distilbert":  # the random student has 2 layers: the note must not say it has 6
        assert member.model.config.num_hidden_layers == 2 and "distilled from BERT" in note
        assert "6 layers trained" not in note, note
    if member.family.startswith("electra"):  # one sentence true of the generator and of the discriminator
        assert "open the generator" not in note and "only its generator has an MLM head" in note, note


FRAMES = {"roberta": "<s> A </s> </s> B </s>", "xlm-roberta": "<s> A </s> </s> B </s>"}  # else [CLS] A [SEP] B [SEP]


def test_losses_step_one_says_how_this_tokenizer_frames_a_pair(member):
    if member.discriminator:
        pytest.skip("no MLM head: the page says so and has no steps (check_losses)")
    at = page("losses", member.folder)
    tok, segments = member.tokenizer, getattr(member.model.config, "type_vocab_size", 0)
    step = shown(next(c.value for c in at.caption if c.value.startswith("The tokenizer splits")))
    frame = FRAMES.get(member.family, "[CLS] A [SEP] B [SEP]")
    assert f"into {KINDS[member.family]} tokens and frames a pair as {frame}." in step, step
    assert ("Segment A = 0, segment B = 1" in step) == (segments > 1), step
    if segments <= 1:  # the token table has no segment column to contradict it
        assert "segment" not in at.dataframe[0].value.index and "sentence" in at.dataframe[0].value.index
    pair = at.toggle(key="losses.pair")  # its label and help hold whether or not the model has segments
    assert "segment" not in pair.label and ("has no segment embeddings" in pair.help) == (segments == 0)
    assert ("one segment vector" in pair.help) == (segments == 1), pair.help
    names = ", ".join([tok.pad_token, tok.unk_token, tok.cls_token, tok.sep_token, tok.mask_token])
    at.button(key="losses.next").click().run()  # step 2 names the special tokens as this tokenizer spells them
    assert f"Never picked: the special tokens {names}" in "\n".join(t.value for t in at.text)
