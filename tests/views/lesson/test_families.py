"""The Lesson's sentences on every family's random checkpoint (tests/helpers/family_models.py): the framing step 1 shows
is the tokenizer's own, the previous-token step names a head only where one clearly does it, the contextual step
says what layer 0 can tell, the embedding step finds its options among the tokenizer's own entries, the step on the
word that mattered most reads occlusion and attention as views/why/explanation.py does and writes the family's mask token, and
step 8 writes sentence B as the model reads it."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import head_steps as vlh
from bertviz_lab.views.lesson import vector_steps as vlv
from bertviz_lab.views.lesson import why_step as vlw
from bertviz_lab.views.why import explanation as vw
from tests.helpers.family_models import build
from tests.helpers.lab import app_test
from tests.helpers.lesson_page import PAGE, SENSES

MEMBERS = ["bert", "distilbert", "roberta", "xlm-roberta", "electra-generator", "albert"]
BERT_FRAME, ROBERTA_FRAME = "`[CLS]` A `[SEP]` B `[SEP]`", "`<s>` A `</s>` `</s>` B `</s>`"
FRAMES = {"roberta": ROBERTA_FRAME, "xlm-roberta": ROBERTA_FRAME}  # the others: BERT's
ATTENTION = "the animal did not cross the street because it was too tired ."


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(request.param, folder)
    return request.param, folder, load_checkpoint(folder)


def test_the_framing_is_read_off_the_tokenizer(member):
    name, _, ckpt = member
    note = vl.framing_note(ckpt.tokenizer)
    assert f"frames two sentences A and B as {FRAMES.get(name, BERT_FRAME)}," in note
    assert f"writes the blank `{ckpt.tokenizer.mask_token}`" in note
    assert ("typing [MASK] works too" in note) == (ckpt.tokenizer.mask_token != "[MASK]")


def test_a_head_is_named_for_the_previous_token_only_where_it_clearly_does_it(member):
    _, _, ckpt = member
    view = av.explore(ckpt.model, inputs.encode(ckpt.tokenizer, ckpt.model, ATTENTION))
    quiz, table = vlh.previous_token(view, vlh.previous_elsewhere(ckpt.model, ckpt.tokenizer, ATTENTION))
    T = len(view.tokens)
    assert quiz.scored == (table["score"][0] >= vlh.CLEAR / T)
    assert ("no head clearly looks at the previous token" in quiz.why) != quiz.scored
    assert "other sentences" in quiz.why and f"1/{T} = " in quiz.why


def test_the_contextual_step_says_what_layer_0_can_tell(member):
    _, _, ckpt = member
    try:
        quiz, table = vlv.contextual(ckpt.model, ckpt.tokenizer, "bank", list(SENSES))
    except InputError as exc:  # a vocabulary without "bank" as the sentences spell it says so
        assert "does not know" in str(exc)
        return
    assert any(reading in quiz.why for reading in ("layer 0 knows only the token and where it stands",
                                                   "so there they differ only by position"))
    accepted = {quiz.answer, *quiz.also}
    assert not quiz.scored or len(accepted) == 1 or all(f"“{o}”" in quiz.why for o in accepted)
    assert np.isfinite(table[[vlv.SAME, vlv.OTHER]].to_numpy()).all()


def whole_words(tokenizer) -> dict[str, int]:
    """The vocabulary's entries that are a word of two letters or more, read as that one entry between two spaces
    (`Ġthe`, `▁the`, `the`), as the class types them, with their ids: the family's own tokenizer decides."""
    def read(text: str) -> list[int]:
        encoding = tokenizer.encode(text)
        return [i for i, s in zip(encoding.ids, encoding.sequence_ids) if s is not None]  # no special tokens

    dots, found = read(". ."), {}
    for i, token in enumerate(tokenizer.vocab):
        word = vlv.shown(token)
        between = read(f". {word} .")
        if len(word) > 1 and word.isascii() and word.isalpha() and i in between:
            between.remove(i)
            if between == dots:  # the word is this one entry there, the dots around it as they are alone
                found.setdefault(word, i)
    return found


def test_the_pronoun_head_and_the_embedding_question_work_for_every_family(member, monkeypatch):
    _, _, ckpt = member
    model, tokenizer = ckpt.model, ckpt.tokenizer
    found = vlh.pronoun_heads(model, tokenizer, ATTENTION)
    if found is not None:
        assert found.scores.shape[1:] == (ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads)
    whole = whole_words(tokenizer)
    kind, stranger = list(whole)[:vlv.OPTIONS + 1], list(whole)[vlv.OPTIONS + 1]  # each of kind has OPTIONS kin
    monkeypatch.setattr(vlv, "kin", lambda word: [w for w in kind if w != word] if word in kind else [])
    encoding = inputs.encode(tokenizer, model, ". " + " ".join([*kind, stranger]) + " .")  # every word after a space
    words = vlv.askable_words(encoding, tokenizer)
    assert words and {vlv.shown(w) for w in words} <= set(kind)  # this family's own entries, its marks and all
    rows = model.bert.embeddings.word_embeddings.weight.detach().float().numpy()  # (V, d)
    unit = {w: rows[i] / np.linalg.norm(rows[i]) for w, i in whole.items()}
    for word in words:  # options of the word's own kind, OPTIONS of them; the answer the nearest row
        quiz, options, _ = vlv.embeddings(model, tokenizer, word)
        assert set(quiz.question.options) <= set(kind) - {vlv.shown(word)}
        assert len(set(quiz.question.options)) == vlv.OPTIONS
        cosine = {o: float(unit[o] @ unit[vlv.shown(word)]) for o in quiz.question.options}
        assert quiz.answer == max(cosine, key=cosine.get) == options["token"][0]
    unasked = set(vlv.embedding_words(encoding, tokenizer)) - set(words)
    assert vlv.shown(stranger) in {vlv.shown(w) for w in unasked}
    for word in unasked:
        with pytest.raises(InputError, match="kind"):
            vlv.embeddings(model, tokenizer, word)


def test_the_word_that_mattered_most_is_occlusions_and_the_step_writes_the_familys_mask(member):
    _, _, ckpt = member
    tokenizer = ckpt.tokenizer
    encoding = inputs.encode(tokenizer, ckpt.model, f"the cat sat on the {tokenizer.mask_token} .")
    quiz, found = vlw.word_that_mattered(ckpt.model, tokenizer, encoding)
    result = vw.why(ckpt.model, tokenizer, encoding)
    values, movable = result.explanation.values, result.explanation.movable
    labels = vl.token_options([vlv.shown(t) for t in encoding.tokens])
    assert list(quiz.question.options) == [labels[i] for i in movable] == found.labels
    occluded, attended = (labels[vw.strongest(values[k], movable)] for k in ("occlusion", "attention"))
    assert (quiz.answer, found.attended) == (occluded, attended)
    assert ("attention and occlusion agree" in quiz.why) == (occluded == attended)
    assert tokenizer.mask_token in quiz.question.prompt and f"“{vlv.shown(result.target)}”" in quiz.question.prompt
    assert ("[MASK]" in quiz.question.prompt) == (tokenizer.mask_token == "[MASK]")


def test_step_8_writes_sentence_b_as_this_model_reads_it(member):
    _, _, ckpt = member
    tokenizer = ckpt.tokenizer
    typed = "The Cat sat on the mat."
    assert tokenizer.encode(vl.spaced(typed, tokenizer)).ids == tokenizer.encode("The Cat sat on the mat .").ids
    folds = tokenizer.encode("The Cat sat").ids == tokenizer.encode("the cat sat").ids  # this model lower-cases
    assert vl.lowers(tokenizer) == folds and ("in lower case" in vl.written_note(tokenizer)) == folds


def test_the_lesson_page_shows_robertas_own_framing(tmp_path):
    build("roberta", tmp_path / "roberta")
    at = app_test(PAGE, 120)
    at.session_state["model.path"] = str(tmp_path / "roberta")
    at.run()
    assert not at.exception, at.exception
    shown = " ".join(c.value for c in at.caption)
    assert ROBERTA_FRAME in shown and "`<mask>`" in shown
