"""Every page with each family's model: it opens, runs, and says what the family lacks instead of failing."""

from __future__ import annotations

import re

from pathlib import Path

import pytest
from family_models import build
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.views import inputs
from bertviz_lab.views.representations import embedding_layer

PAGES = Path(__file__).resolve().parents[1] / "pages"
REPRESENTATIONS_TABS = ["Same word, different contexts", "Nearest neighbours", "Logit lens", "Embedding geometry",
                        "Shapes and padding"]
MEMBERS = ["distilbert", "roberta", "xlm-roberta", "electra-generator", "electra-discriminator", "albert"]


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(request.param, folder)
    return request.param, folder


def page(name: str, folder: Path, sentence: str | None = None, **session) -> AppTest:
    """`name` opened on the model in `folder`; `session`: more session-state keys, "." written "__"."""
    script = PAGES.parent / "app.py" if name == "home" else PAGES / f"{name}.py"  # Home is app.py's first page
    at = AppTest.from_file(str(script), default_timeout=120)
    at.session_state["model.path"] = str(folder)
    for key, value in session.items():
        at.session_state[key.replace("__", ".")] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def subheaders(at: AppTest) -> list[str]:
    return [shown(h.value) for h in at.subheader]


def shown(markdown: str) -> str:
    """Markdown as the page shows it: backslash escapes (widgets.plain) resolved, so <s> reads as <s>."""
    return re.sub(r"\\(.)", r"\1", markdown)


def notes(at: AppTest) -> str:
    return " ".join(m.value for m in [*at.info, *at.warning, *at.error, *at.caption])


@pytest.mark.parametrize("name", ["home", "predict", "attention", "representations", "losses"])
def test_every_page_opens_with_each_family(member, name):
    family, folder = member
    at = page(name, folder)
    if name == "home":
        assert "has no NSP head" in notes(at) or "no NSP" in notes(at)
    if name == "attention":
        assert at.get("plotly_chart")  # attention is drawn for every family


@pytest.mark.parametrize("tab", REPRESENTATIONS_TABS)
def test_every_representations_tab_runs_with_each_family(member, tab):
    family, folder = member
    at = page("representations", folder, repr__tab=tab, repr__geo_word="the")  # "bank" may be split here
    assert [t.label for t in at.tabs] == REPRESENTATIONS_TABS and not at.warning, notes(at)
    ckpt = load_checkpoint(folder)
    segments = ckpt.config.type_vocab_size
    if tab == "Same word, different contexts":  # layer 0 in this family's words: segments, a projection
        help = at.select_slider(key="repr.layer").help
        assert embedding_layer(ckpt.config) in help and ("segment" in help) == (segments > 0), help
        assert "each layer has its own geometry" in notes(at)
    if tab == "Logit lens" and ckpt.model.has_mlm:
        row0 = next(c.value for c in at.caption if "Row 0" in c.value)
        assert ("its segment" in row0) == (segments > 1) and embedding_layer(ckpt.config) in row0, row0
    if tab == "Embedding geometry":  # the space before a word is part of its row in BPE and SentencePiece only
        row = next(c.value for c in at.caption if c.value.startswith("The row of"))
        assert ("after a space" in row) == (ckpt.tokenizer.kind != "WordPiece"), row
    if tab == "Shapes and padding":  # the random BERT drew; now the active model itself
        at.button_group(key="shapes.model").set_value("active").run()
        assert not at.exception, [e.value for e in at.exception]
        printout, pooled = at.code[0].value, ckpt.model.bert.pooler is not None
        assert ("pooler_output shape : torch.Size([3, 32])" in printout) == pooled, printout
        assert ("This model has no pooler" in notes(at)) != pooled, notes(at)
        pad = ckpt.tokenizer.specials["pad"]  # the padding is shown in the model's own spelling
        assert pad in at.dataframe[0].value.to_numpy() and f"Attention never looks at {pad}" in subheaders(at)


def test_the_family_note_holds_for_the_member_at_hand(member):
    family, folder = member
    at = page("attention", folder)
    ckpt = load_checkpoint(folder)
    note = next(i.value for i in at.info if i.value.startswith(f"**{ckpt.family.title}**"))
    if family == "distilbert":  # the random student has 2 layers: the note must not say it has 6
        assert ckpt.config.num_hidden_layers != 6 and "distilled from BERT" in note and "6 layers trained" not in note
    if family.startswith("electra"):  # one sentence true of the generator and of the discriminator
        assert "open the generator" not in note and "only its generator has an MLM head" in note, note


def test_predict_fills_masks_or_flags_replaced_tokens(member):
    family, folder = member
    at = page("predict", folder)
    if family == "electra-discriminator":
        assert any(h.value == "Which tokens look replaced?" for h in at.subheader)
        assert "no MLM head" in notes(at) and at.get("plotly_chart")
    else:
        assert any(h.value.startswith("The guess") for h in at.subheader), notes(at)


def test_losses_says_why_there_is_no_nsp_term(member):
    family, folder = member
    at = page("losses", folder)
    text = notes(at)
    assert "no NSP head" in text or "no MLM head" in text, text


FRAMES = {"roberta": "<s> A </s> </s> B </s>", "xlm-roberta": "<s> A </s> </s> B </s>"}  # else [CLS] A [SEP] B [SEP]


def test_losses_step_one_says_how_this_tokenizer_frames_a_pair(member):
    family, folder = member
    if family == "electra-discriminator":
        return  # no MLM head: the page says so and has no steps
    at = page("losses", folder)
    ckpt = load_checkpoint(folder)
    step = shown(next(c.value for c in at.caption if c.value.startswith("The tokenizer splits")))
    frame = FRAMES.get(family, "[CLS] A [SEP] B [SEP]")
    assert f"into {ckpt.tokenizer.kind} tokens and frames a pair as {frame}." in step, step
    assert ("Segment A = 0, segment B = 1" in step) == (ckpt.config.type_vocab_size > 1), step
    assert "WordPiece" not in step or ckpt.tokenizer.kind == "WordPiece"
    if ckpt.config.type_vocab_size <= 1:  # the token table has no segment column to contradict it
        assert "segment" not in at.dataframe[0].value.index and "sentence" in at.dataframe[0].value.index
    pair = at.toggle(key="losses.pair")  # its label and help hold whether or not the model has segments
    assert "segment" not in pair.label and ("has no segment embeddings" in pair.help) == (family == "distilbert")
    assert ("one segment vector" in pair.help) == (ckpt.config.type_vocab_size == 1), pair.help
    names = ", ".join(ckpt.tokenizer.specials[role] for role in ("pad", "unk", "cls", "sep", "mask"))
    at.button(key="losses.next").click().run()  # step 2 names the special tokens as this tokenizer spells them
    assert f"Never picked: the special tokens {names}" in "\n".join(t.value for t in at.text)


def test_what_bert_reads_is_the_models_own_tokens(member):
    family, folder = member
    if family == "electra-discriminator":
        return  # it fills no mask: the page shows its replaced-token view instead
    at = page("predict", folder)
    ckpt = load_checkpoint(folder)
    text = at.text_area(key="predict.text_a").value
    expected = " ".join(inputs.encode(ckpt.tokenizer, ckpt.model, text).tokens)
    assert at.code[0].value == expected and ckpt.tokenizer.mask_token in expected
    assert "story world" not in notes(at)  # a Hub-family model is never called the lab's story-world model
