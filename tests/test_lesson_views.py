"""views/lesson.py and views/lesson_runs.py on tiny models: each question's answer against the model's own
numbers, computed here another way, and the options it is asked with."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.views import attention as av
from bertviz_lab.views import inputs, predict
from bertviz_lab.views import lesson as vl
from bertviz_lab.views import lesson_runs as runs

CAT = "the cat sat on the [MASK] ."


def encoded(model, tokenizer, text: str, text_b: str | None = None):
    return inputs.encode(tokenizer, model, text, text_b)


@torch.no_grad()
def forward(model, tokenizer, text: str, text_b: str | None = None, trace: bool = False):
    enc = encoded(model, tokenizer, text, text_b)
    return enc, model.eval()(torch.tensor([enc.ids]), torch.tensor([enc.segment_ids]), trace=trace)


def test_the_token_count_is_the_encoding_length_with_the_special_tokens(tiny_model, tiny_tokenizer):
    quiz = vl.tokens(encoded(tiny_model, tiny_tokenizer, "the cat sat on the mat ."))
    assert quiz.answer == 9 and quiz.question.options == ()
    assert "7 from the text and 2 special" in quiz.why
    assert quiz.is_right(9) and not quiz.is_right(7) and not quiz.is_right(None)


def test_options_are_shuffled_the_same_way_every_time_and_repeated_tokens_keep_their_place():
    options = [f"w{i}" for i in range(8)]
    first, again, other = vl.shuffled(options, "a"), vl.shuffled(options, "a"), vl.shuffled(options, "b")
    assert first == again and sorted(first) == options and first != tuple(options) and other != first
    assert vl.token_options(["[CLS]", "the", "cat", "the", "[SEP]"]) == ["[CLS]", "the (1)", "cat", "the (3)", "[SEP]"]


def test_the_embedding_answer_is_the_option_whose_row_is_nearest(tiny_model, tiny_tokenizer):
    words = vl.embedding_words(encoded(tiny_model, tiny_tokenizer, CAT), tiny_tokenizer)
    assert words == ["the", "cat", "sat", "on"] and vl.content_word(words) == "cat"
    quiz, options, nearest = vl.embeddings(tiny_model, tiny_tokenizer, "cat")
    table = tiny_model.bert.embeddings.word_embeddings.weight.detach()
    unit = torch.nn.functional.normalize(table, dim=-1)
    cosine = {t: float(unit[tiny_tokenizer.token_to_id(t)] @ unit[tiny_tokenizer.token_to_id("cat")])
              for t in quiz.question.options}
    assert len(set(quiz.question.options)) == 4 and "cat" not in quiz.question.options
    assert quiz.answer == max(cosine, key=cosine.get)
    assert options["cosine"].tolist() == pytest.approx(sorted(cosine.values(), reverse=True), abs=1e-5)
    assert nearest["cosine"].iloc[0] >= cosine[quiz.answer] - 1e-6  # the nearest row of all, words or not
    with pytest.raises(InputError):
        vl.embeddings(tiny_model, tiny_tokenizer, "zebra")  # not in the tiny vocabulary


def test_the_previous_token_head_is_found_even_when_planted(tiny_model, tiny_tokenizer):
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, "the animal did not cross the street ."))
    quiz, table = vl.previous_token(view)
    w = view.weights
    T = w.shape[-1]
    scores = np.array([[w[layer, head, np.arange(1, T - 1), np.arange(0, T - 2)].mean() for head in range(4)]
                       for layer in range(2)])
    layer, head = np.unravel_index(scores.argmax(), scores.shape)
    assert quiz.answer == f"L{layer} H{head}" and len(quiz.question.options) == 8
    assert table["score"].is_monotonic_decreasing
    planted = w.copy()
    planted[1, 3] = np.eye(T, k=-1) + np.eye(T, k=0) * (np.arange(T) == 0)[:, None]  # L1 H3 looks one back
    quiz, _ = vl.previous_token(dataclasses.replace(view, weights=planted))
    assert quiz.answer == "L1 H3" and "100%" in quiz.why


def test_the_strongest_key_is_the_largest_weight_of_the_query_row(tiny_model, tiny_tokenizer):
    text = "the animal did not cross because it was tired ."
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, text))
    query = av.default_query(view)
    assert view.tokens[query] == "it"
    for layer, head in ((0, 0), (1, 2)):
        quiz, steps = vl.strongest_key(view, layer, head, query)
        best = int(np.argmax(view.weights[layer, head, query]))
        assert quiz.answer == vl.token_options(view.tokens)[best]
        assert steps[av.WEIGHT].sum() == pytest.approx(1.0) and f"{steps[av.WEIGHT].max():.4f}" in quiz.why


def test_the_mask_guess_is_the_top_logit_and_its_options_hold_a_decoy(tiny_model, tiny_tokenizer):
    enc, out = forward(tiny_model, tiny_tokenizer, CAT)
    position = enc.tokens.index("[MASK]")
    logits = out.mlm_logits[0, position]
    quiz, mask = vl.mask_guess(tiny_model, tiny_tokenizer, enc)
    assert quiz.answer == tiny_tokenizer.id_to_token(int(logits.argmax()))
    top4 = {tiny_tokenizer.id_to_token(int(i)) for i in logits.topk(4).indices}
    assert top4 < set(quiz.question.options) and len(set(quiz.question.options)) == 5
    assert mask.candidates[0].prob == pytest.approx(float(logits.softmax(-1).max()), rel=1e-5)
    with pytest.raises(predict.NothingMasked):
        vl.mask_guess(tiny_model, tiny_tokenizer, encoded(tiny_model, tiny_tokenizer, "the cat sat ."))


def test_the_loss_is_minus_log_p_of_the_true_word_and_lands_in_its_band(tiny_model, tiny_tokenizer):
    enc, out = forward(tiny_model, tiny_tokenizer, CAT)
    log_p = out.mlm_logits[0, enc.tokens.index("[MASK]")].log_softmax(-1)
    for word in ("mat", "rug"):
        quiz, m = vl.mask_loss(tiny_model, tiny_tokenizer, CAT, word)
        nll = -float(log_p[tiny_tokenizer.token_to_id(word)])
        assert m.neg_log_p == pytest.approx(nll, rel=1e-5) and m.true_token == word
        assert m.position == enc.tokens.index("[MASK]") and vl.loss_panel(m)["title"].startswith("[MASK] at position 6")
        assert quiz.answer == next(label for edge, label in vl.LOSS_BANDS if nll < edge)
        assert f"ln 100 = {math.log(100):.2f}" in quiz.why
    with pytest.raises(InputError, match="as 2 tokens \\(mat rug\\)"):
        vl.mask_loss(tiny_model, tiny_tokenizer, CAT, "mat rug")
    with pytest.raises(InputError, match="type the word"):
        vl.mask_loss(tiny_model, tiny_tokenizer, CAT, " ")
    assert vl.word_at_mask(tiny_model, tiny_tokenizer, "the [mask] sat .", "Cat") == tiny_tokenizer.token_to_id("cat")


def test_next_sentence_compares_p_is_next_of_the_true_and_a_random_b(tiny_model, tiny_tokenizer):
    a, b = "the cat sat on the mat .", "it was tired ."
    quiz, table = vl.next_sentence(tiny_model, tiny_tokenizer, a, b)
    _, out = forward(tiny_model, tiny_tokenizer, a, b)
    assert table["P(IsNext)"][0] == pytest.approx(float(out.nsp_logits[0].softmax(-1)[0]), rel=1e-5)
    assert table["label"].tolist() == ["IsNext", "NotNext"] and set(quiz.question.options) == set(table["sentence B"])
    assert quiz.answer == table["sentence B"][int(table["P(IsNext)"].idxmax())]
    assert table["L_NSP"][1] == pytest.approx(-math.log(1 - table["P(IsNext)"][1]), rel=1e-5)
    with pytest.raises(InputError, match="second sentence"):
        vl.next_sentence(tiny_model, tiny_tokenizer, a, " ")


def test_steps_that_need_a_missing_head_say_which(tiny_config, tiny_tokenizer):
    bare = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False).eval()
    enc = encoded(bare, tiny_tokenizer, CAT)
    with pytest.raises(vl.MissingHead, match="masked-language-model"):
        vl.mask_guess(bare, tiny_tokenizer, enc)
    with pytest.raises(vl.MissingHead, match="masked-language-model"):
        vl.mask_loss(bare, tiny_tokenizer, CAT, "mat")
    with pytest.raises(vl.MissingHead, match="next-sentence"):
        vl.next_sentence(bare, tiny_tokenizer, "the cat sat .", "it was tired .")


def test_contextual_cosines_are_those_of_the_words_hidden_states(tiny_model, tiny_tokenizer):
    sentences = ["i went to the bank to deposit money .", "the river bank was not tired ."]
    quiz, table = vl.contextual(tiny_model, tiny_tokenizer, "bank", sentences)
    vectors = []
    for text in sentences:
        enc, out = forward(tiny_model, tiny_tokenizer, text)
        at = enc.tokens.index("bank")
        vectors.append(torch.stack([h[0, at] for h in out.hidden_states]))  # (L + 1, d)
    cosine = torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=-1)
    assert table["cosine"].tolist() == pytest.approx(cosine.tolist(), abs=1e-5)
    assert quiz.answer == quiz.question.options[0 if cosine[0] > cosine[-1] else 1]
    with pytest.raises(InputError, match="does not contain"):
        vl.contextual(tiny_model, tiny_tokenizer, "bank", ["i went to the river .", sentences[1]])


def test_the_score_counts_right_answers_of_the_revealed_steps():
    quiz = vl.Quiz(vl.Question("?", ("a", "b")), "a", "")
    assert vl.score({}) == "no answers revealed yet"
    answered = {1: vl.Answered((), "a", quiz), 2: vl.Answered((), "b", quiz), 5: vl.Answered((), "a", quiz)}
    assert vl.score(answered) == "2 of 3 right so far"


def test_the_start_loss_answer_is_the_option_nearest_the_measured_loss():
    question, levels = runs.start_question(2171)
    assert question.options[0] == "near ln V = ln 2,171 = 7.68" and levels[question.options[0]] == math.log(2171)
    assert runs.start_loss(2171, [{"step": 0, "mlm_loss": 7.9}, {"step": 60, "mlm_loss": 6.0}]).answer == \
        question.options[0]
    assert runs.start_loss(2171, [{"step": 0, "mlm_loss": 1.2}]).answer == "near 1"
    assert runs.start_loss(2171, [{"step": 0, "mlm_loss": 0.3}]).answer == "near 0"


def test_a_tiny_training_run_leaves_threads_and_random_numbers_as_they_were(monkeypatch):
    monkeypatch.setitem(runs.TINY, "steps", 4)
    monkeypatch.setitem(runs.TINY, "eval_every", 2)
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    records = list(runs.train_tiny(seed=3))
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 2, 4] and records[-1]["kind"] == "end"
    held_out = [r for r in records if r["kind"] == "eval"]
    assert held_out[0]["mlm_loss"] == pytest.approx(math.log(runs.tiny_vocab_size()), rel=0.1)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)


def test_a_linear_probe_learns_separable_features_and_not_random_labels():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 16))
    y = (x[:, 3] > 0).astype(int)
    assert runs.fit_probe(x[:200], y[:200], x[200:], y[200:], 2) >= 0.8
    noise = rng.integers(0, 2, 300)
    assert runs.fit_probe(x[:200], noise[:200], x[200:], noise[200:], 2) < 0.65


def test_probes_compare_the_model_with_random_weights_of_its_shape(tiny_model, tiny_tokenizer, monkeypatch):
    monkeypatch.setattr(runs, "PROBE_TRAIN", 60)
    monkeypatch.setattr(runs, "PROBE_DEV", 40)
    shares = []
    result = runs.compare_probes(tiny_model, tiny_tokenizer, "acceptability", lambda s, text: shares.append(s))
    assert list(result.accuracy) == [runs.PRETRAINED, runs.RANDOM] and result.examples == (60, 40)
    assert all(0 <= a <= 1 for a in result.accuracy.values()) and 0.5 <= result.majority <= 1
    assert shares == [0.0, 0.5, 1.0]
    quiz = runs.probe_quiz(dataclasses.replace(result, accuracy={runs.PRETRAINED: 0.8, runs.RANDOM: 0.6}))
    assert quiz.answer == runs.PRETRAINED and "80.0%" in quiz.why
    tie = runs.probe_quiz(dataclasses.replace(result, accuracy={runs.PRETRAINED: 0.6, runs.RANDOM: 0.61}))
    assert tie.answer.startswith("a tie")
