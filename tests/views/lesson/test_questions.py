"""views/lesson/questions.py, lesson_vectors.py and lesson_runs.py on tiny models: each question's answer against the model's
own numbers, computed here another way, the options it is asked with, the near ties it accepts and the questions
it does not score (the head steps, views/lesson/head_steps.py, in tests/views/lesson/test_head_steps.py; the embedding step in
tests/views/lesson/test_embeddings.py; the probe's logistic regression, finetune/linear_probe.py, in
tests/finetune/test_linear_probe.py)."""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections import Counter

import numpy as np
import pytest
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.metrics import END, EVAL, Metrics
from bertviz_lab.pretrain.loop import EVAL_STREAM, Trainer
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import vector_steps as vlv
from bertviz_lab.views.losses import walkthrough
from bertviz_lab.views.representations import vectors as rv
from tests.helpers.lab import vocab_of_size

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


def test_a_runner_up_within_the_margin_is_a_near_tie_and_three_close_ones_are_not_scored():
    question = vl.Question("?", ("a", "b", "c", "d"))
    clear = vl.ranked(question, {"a": 0.5, "b": 0.4, "c": 0.1, "d": 0.0}, "")
    assert clear.answer == "a" and clear.scored and not clear.is_right("b")
    tie = vl.ranked(question, {"a": 0.5, "b": 0.49, "c": 0.1, "d": 0.0}, "")
    assert tie.answer == "a" and tie.is_right("b") and not tie.is_right("c") and tie.scored
    assert "near tie" in tie.why and "0.010" in tie.why and str(vl.NEAR) in tie.why
    close = vl.ranked(question, {"a": 0.5, "b": 0.49, "c": 0.485, "d": 0.0}, "")
    assert not close.scored and "not scored" in close.why
    two_way = vl.ranked(vl.Question("?", ("a", "b")), {"a": 0.5, "b": 0.49}, "")  # a near tie of two: no answer
    assert not two_way.scored
    unscored = vl.Answered((), "d", close)
    assert not unscored.right and vl.score({1: unscored, 2: vl.Answered((), "b", tie)}) == \
        "1 of 1 right so far (1 with no clear answer, not scored)"


def test_the_mask_guess_is_the_top_logit_and_its_options_hold_a_decoy(tiny_model, tiny_tokenizer):
    enc, out = forward(tiny_model, tiny_tokenizer, CAT)
    position = enc.tokens.index("[MASK]")
    logits = out.mlm_logits[0, position]
    quiz, mask = vl.mask_guess(tiny_model, tiny_tokenizer, enc)
    assert quiz.answer == tiny_tokenizer.id_to_token(int(logits.argmax()))
    top4 = {tiny_tokenizer.id_to_token(int(i)) for i in logits.topk(4).indices}
    assert top4 < set(quiz.question.options) and len(set(quiz.question.options)) == 5
    assert mask.candidates[0].prob == pytest.approx(float(logits.softmax(-1).max()), rel=1e-5)
    with pytest.raises(vpr.NothingMasked):
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


def test_each_loss_band_gives_the_probabilities_it_means():
    assert [label for _, label in vl.LOSS_BANDS] == ["below 0.5: p above 0.61", "0.5 to 2: p from 0.14 to 0.61",
                                                     "2 to 5: p from 0.0067 to 0.14", "above 5: p below 0.0067"]
    for edge, label in vl.LOSS_BANDS[:-1]:
        assert f"{math.exp(-edge):.2g}" in label  # p = e^−loss at the band's edge


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


def test_the_random_sentence_b_is_never_the_typed_one_however_it_is_spaced(tiny_model, tiny_tokenizer):
    drawn = walkthrough.random_sentence(vl.SEED)  # the seed's own draw, as the corpus writes it ("... the cave.")
    for typed in (drawn, drawn.capitalize(), drawn.replace(".", " .")):  # written alike, all three
        quiz, table = vl.next_sentence(tiny_model, tiny_tokenizer, "the cat sat .", typed)
        assert table["sentence B"].tolist() == [vl.spaced(drawn, tiny_tokenizer),  # the next seed's draw instead
                                                vl.spaced(walkthrough.random_sentence(vl.SEED + 1), tiny_tokenizer)]
        assert len(set(quiz.question.options)) == 2


def test_a_cased_model_reads_sentence_b_with_the_capitals_typed(tiny_model):
    cased = WordPieceTokenizer.from_vocab(vocab_of_size(100), lowercase=False)
    quiz, table = vl.next_sentence(tiny_model, cased, "the cat sat .", "It was tired.")
    assert table["sentence B"][0] == "It was tired ." and vl.spaced("It was tired.", cased) == "It was tired ."
    _, out = forward(tiny_model, cased, "the cat sat .", "It was tired .")  # "It": [UNK] to this vocabulary
    assert table["P(IsNext)"][0] == pytest.approx(float(out.nsp_logits[0].softmax(-1)[0]), rel=1e-5)
    assert "capitals as typed" in vl.written_note(cased) and "lower case" not in vl.written_note(cased)
    assert "in lower case" in vl.written_note(WordPieceTokenizer.from_vocab(vocab_of_size(100)))


def test_steps_that_need_a_missing_head_say_which(tiny_config, tiny_tokenizer):
    bare = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False).eval()
    enc = encoded(bare, tiny_tokenizer, CAT)
    with pytest.raises(vl.MissingHead, match="masked-language-model"):
        vl.mask_guess(bare, tiny_tokenizer, enc)
    with pytest.raises(vl.MissingHead, match="masked-language-model"):
        vl.mask_loss(bare, tiny_tokenizer, CAT, "mat")
    with pytest.raises(vl.MissingHead, match="next-sentence"):
        vl.next_sentence(bare, tiny_tokenizer, "the cat sat .", "it was tired .")


def test_contextual_compares_the_same_and_the_other_sense_within_each_layer(tiny_model, tiny_tokenizer):
    sentences = ["i went to the bank to deposit money .", "the river bank was not tired .",
                 "i went to the bank to deposit the money ."]
    quiz, table = vlv.contextual(tiny_model, tiny_tokenizer, "bank", sentences)
    vectors = []
    for text in sentences:
        enc, out = forward(tiny_model, tiny_tokenizer, text)
        vectors.append(torch.stack([h[0, enc.tokens.index("bank")] for h in out.hidden_states]))  # (L + 1, d)
    cosine = torch.nn.functional.cosine_similarity
    assert table[vlv.SAME].tolist() == pytest.approx(cosine(vectors[0], vectors[2], dim=-1).tolist(), abs=1e-5)
    assert table[vlv.OTHER].tolist() == pytest.approx(cosine(vectors[0], vectors[1], dim=-1).tolist(), abs=1e-5)
    # Layer 0 knows only the token and where it stands: "bank" at position 5 in both is one vector there.
    assert table[vlv.SAME][0] == pytest.approx(1.0, abs=1e-6) and table[vlv.OTHER][0] < 0.99
    gap = table[vlv.SAME].iloc[-1] - table[vlv.OTHER].iloc[-1]
    assert quiz.answer == vlv.CLOSER[(True, bool(gap > 0))] and quiz.scored
    assert quiz.also == ((vlv.CLOSER[(False, bool(gap > 0))],) if abs(gap) < vl.NEAR else ())
    assert "sentence 1's and sentence 3's “bank” are one vector (cosine 1)" in quiz.why  # both at position 5
    with pytest.raises(InputError, match="does not contain"):
        vlv.contextual(tiny_model, tiny_tokenizer, "bank", ["i went to the river .", *sentences[1:]])
    with pytest.raises(InputError, match="three sentences"):
        vlv.contextual(tiny_model, tiny_tokenizer, "bank", [*sentences[:2], " "])


def test_a_layer_whose_two_cosines_are_within_the_margin_reads_either_way(tiny_model, tiny_tokenizer):
    same = ["i went to the bank .", "i went to the bank .", "i went to the bank ."]  # every cosine is 1
    quiz, _ = vlv.contextual(tiny_model, tiny_tokenizer, "bank", same)
    assert not quiz.scored and set(quiz.also) | {quiz.answer} == set(vlv.CLOSER.values())
    assert "not scored" in quiz.why


def planted(monkeypatch, positions, vectors) -> None:
    """word_in_context gives these positions (one "bank" token each) and vectors (L + 1, 3, d)."""
    wic = rv.WordInContext("bank", ("s1", "s2", "s3"), positions, np.array(vectors, dtype=np.float32),
                           (("bank",),) * 3)
    monkeypatch.setattr(vlv.rv, "word_in_context", lambda *args: wic)


def test_equal_layer_0_cosines_are_called_equal_and_every_answer_they_accept_is_named(monkeypatch):
    # Sentences 2 and 3 put "bank" at position 5: one vector at layer 0, so the two cosines there are equal.
    planted(monkeypatch, ((7,), (5,), (5,)), [[[1, 0], [1, 1], [1, 1]],  # layer 0
                                            [[1, 0], [0, 1], [1, 0.1]]])  # the last layer: 3 nearer 1
    quiz, table = vlv.contextual(None, None, "bank", ["s1", "s2", "s3"])
    assert table[vlv.SAME][0] == table[vlv.OTHER][0] and quiz.scored
    assert "sentence 2's and sentence 3's “bank” are one vector: the same token at the same position 5" in quiz.why
    assert "the two cosines are equal there" in quiz.why and "near tie" not in quiz.why
    assert quiz.answer == vlv.CLOSER[(False, True)] and quiz.also == (vlv.CLOSER[(True, True)],)
    both = f"“{vlv.CLOSER[(True, True)]}” and “{vlv.CLOSER[(False, True)]}”"
    assert f"Each of these answers counts: {both}" in quiz.why


def test_a_near_tie_at_layer_0_is_put_down_to_position_and_names_the_answers_it_accepts(monkeypatch):
    planted(monkeypatch, ((7,), (5,), (6,)), [[[1, 0], [1, 1], [1, 1.01]], [[1, 0], [0, 1], [1, 0.1]]])
    quiz, _ = vlv.contextual(None, None, "bank", ["s1", "s2", "s3"])
    assert "the same token at positions 7, 5 and 6, so there they differ only by position" in quiz.why
    assert "(a near tie)" in quiz.why and len(quiz.also) == 1 and "Each of these answers counts" in quiz.why
    planted(monkeypatch, ((7,), (7,), (6,)), [[[1, 0], [1, 0], [1, 1]], [[1, 0], [0, 1], [1, 0.1]]])
    quiz, _ = vlv.contextual(None, None, "bank", ["s1", "s2", "s3"])  # sentences 1 and 2 one vector: no tie
    assert "sentence 1's and sentence 2's “bank” are one vector (cosine 1)" in quiz.why and "though" in quiz.why
    assert quiz.answer == vlv.CLOSER[(False, True)] and not quiz.also and "counts" not in quiz.why


def test_layer_0_is_the_embedding_layer_and_says_what_each_family_adds(tiny_config):
    bert = rv.embedding_layer(tiny_config)
    assert "segment's vector (sentence A or B)" in bert and "layer 1 reads the result, 32 numbers" in bert
    distil = rv.embedding_layer(dataclasses.replace(tiny_config, type_vocab_size=0))
    assert "segment" not in distil and "projects" not in distil
    roberta = rv.embedding_layer(dataclasses.replace(tiny_config, type_vocab_size=1))
    assert "one segment vector that every token shares" in roberta
    albert = rv.embedding_layer(dataclasses.replace(tiny_config, embedding_size=16))
    assert "projects the result from 16 to the 32 numbers layer 1 reads" in albert


def test_the_score_counts_right_answers_of_the_revealed_steps():
    quiz = vl.Quiz(vl.Question("?", ("a", "b")), "a", "")
    assert vl.score({}) == "no answers revealed yet"
    answered = {1: vl.Answered((), "a", quiz), 2: vl.Answered((), "b", quiz), 5: vl.Answered((), "a", quiz)}
    assert vl.score(answered) == "2 of 3 right so far"


def held(step: int, loss: float) -> Metrics:
    """A held-out record of the tiny run."""
    return Metrics(EVAL, step, loss=loss)


def test_the_start_loss_options_are_of_one_form_and_give_nothing_away():
    question, levels = lesson_runs.start_question(2171)
    assert question.options == ("about 11.5", "about 7.7", "about 3.5", "about 0.8")  # ln 2,171 = 7.68
    assert levels["about 7.7"] == pytest.approx(math.log(2171)) and "2,171" in question.prompt
    assert all(re.fullmatch(r"about \d+\.\d", option) for option in question.options)  # one decimal, every one
    assert not any("ln" in option or "V" in option for option in question.options)
    assert lesson_runs.start_loss(2171, [held(0, 7.9), held(60, 6.0)]).answer == "about 7.7"
    assert lesson_runs.start_loss(2171, [held(0, 1.2)]).answer == "about 0.8"
    assert lesson_runs.start_loss(2171, [held(0, 12.0)]).answer == "about 11.5"
    small, _ = lesson_runs.start_question(20)  # ln 20 = 3.0: its options scale with it
    assert small.options == ("about 4.5", "about 3.0", "about 1.3", "about 0.3")


def test_the_run_is_set_against_a_guess_by_the_corpuss_token_frequencies(monkeypatch):
    frequency, counted = lesson_runs.frequency_loss()
    assert 4.0 < frequency < math.log(lesson_runs.tiny_vocab_size()) - 1 and counted > 30_000
    assert lesson_runs._frequency_loss.__wrapped__() == (frequency, counted)  # computed again: the same, to the bit
    monkeypatch.setattr(lesson_runs, "frequency_loss", lambda: (5.5, 40_000))
    chance = math.log(2171)
    note = lesson_runs.frequency_note([held(0, 7.7), held(60, 6.0)], 2171)
    assert f"ln V = {chance:.2f}" in note and "scores 5.50" in note and "40,000 tokens" in note
    assert f"{(chance - 6.0) / (chance - 5.5):.0%} of the way from the uniform guess to the frequency guess" in note
    below = lesson_runs.frequency_note([held(0, 7.7), held(60, 5.2)], 2171)
    assert "below the frequency guess" in below and "of the way" not in below
    worse = lesson_runs.frequency_note([held(0, 7.7), held(60, 7.9)], 2171)
    assert "no better than the uniform guess yet" in worse


def test_the_frequency_guess_scores_the_held_out_masks_of_any_seed():
    """Its number, computed here another way: the counts from the generator, the masks from another seed's run."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        trainer = Trainer(lesson_runs.tiny_config(7))
    torch.set_num_threads(threads)
    tok = trainer.tokenizer
    counts = Counter(i for story in trainer.corpus.train.sample(lesson_runs.FREQUENCY_STORIES, key=0)  # seed 7's stream
                     for sentence in story for i in tok.encode(sentence).ids if i not in tok.special_ids)
    total = sum(counts.values()) + tok.vocab_size - len(tok.special_ids)
    targets = torch.cat([trainer.batch(i, stream=EVAL_STREAM).labels.flatten() for i in range(2)])
    nll = [-math.log((counts[int(t)] + 1) / total) for t in targets if t >= 0]
    assert lesson_runs.frequency_loss()[0] == pytest.approx(sum(nll) / len(nll), abs=0.05)  # seed 0's counts: close


def test_a_tiny_training_run_leaves_threads_and_random_numbers_as_they_were(monkeypatch):
    monkeypatch.setattr(lesson_runs, "TINY", dataclasses.replace(lesson_runs.TINY, steps=4, eval_every=2))
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    reported = []
    records = lesson_runs.train_tiny(seed=3, report=reported.append)
    assert reported == records  # each one handed on as it came
    assert [r["step"] for r in records if r["kind"] == EVAL] == [0, 2, 4] and records[-1]["kind"] == END
    held_out = [r for r in records if r["kind"] == EVAL]
    assert held_out[0]["loss"] == pytest.approx(math.log(lesson_runs.tiny_vocab_size()), rel=0.1)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)


def test_a_tiny_run_in_another_thread_waits_for_the_global_generator_and_is_a_pure_function_of_its_seed(monkeypatch):
    monkeypatch.setattr(lesson_runs, "TINY", dataclasses.replace(lesson_runs.TINY, steps=2, eval_every=2))
    alone = [r["loss"] for r in lesson_runs.train_tiny(seed=5) if r["kind"] == EVAL]
    reported, done = [], []
    with global_rng(seed=99):  # another thread seeds torch's generator and draws from it meanwhile
        worker = threading.Thread(target=lambda: done.append(lesson_runs.train_tiny(seed=5, report=reported.append)))
        worker.start()
        torch.randn(1000)
        worker.join(0.3)
        assert not reported  # the run builds its model only once the generator is free
    worker.join(60)
    assert [r["loss"] for r in done[0] if r["kind"] == EVAL] == alone  # the same run, to the bit


def test_probes_compare_the_model_with_random_weights_of_its_shape(tiny_model, tiny_tokenizer, monkeypatch):
    monkeypatch.setattr(lesson_runs, "PROBE_TRAIN", 60)
    monkeypatch.setattr(lesson_runs, "PROBE_DEV", 40)
    shares = []
    result = lesson_runs.compare_probes(tiny_model, tiny_tokenizer, "acceptability", lambda s, text: shares.append(s))
    assert list(result.accuracy) == [lesson_runs.PRETRAINED, lesson_runs.RANDOM] and result.examples == (60, 40)
    assert all(0 <= a <= 1 for a in result.accuracy.values()) and 0.5 <= result.majority <= 1
    assert shares == [0.0, 0.5, 1.0]
    quiz = lesson_runs.probe_quiz(dataclasses.replace(result, accuracy={lesson_runs.PRETRAINED: 0.9, lesson_runs.RANDOM: 0.6}))
    assert quiz.answer == lesson_runs.PRETRAINED and "90.0%" in quiz.why  # 30 points; two standard errors on 40: 18
    tie = lesson_runs.probe_quiz(dataclasses.replace(result, accuracy={lesson_runs.PRETRAINED: 0.6, lesson_runs.RANDOM: 0.61}))
    assert tie.answer.startswith("a tie")


def test_a_tie_is_a_gap_within_two_standard_errors_of_the_dev_sets_noise():
    result = lesson_runs.ProbeResult("coherence", {lesson_runs.PRETRAINED: 0.88, lesson_runs.RANDOM: 0.85}, 0.5, (400, 200))
    band = 2 * math.sqrt((0.88 * 0.12 + 0.85 * 0.15) / 200)  # 6.7 points: 3 points is noise on 200 examples
    assert lesson_runs.tie_band(result) == pytest.approx(band)
    quiz = lesson_runs.probe_quiz(result)
    assert quiz.answer == lesson_runs.probe_question().options[2]
    assert "a gap of 3.0 points" in quiz.why and f"{band * 100:.1f} points" in quiz.why
    wide = lesson_runs.probe_quiz(dataclasses.replace(result, accuracy={lesson_runs.PRETRAINED: 0.9, lesson_runs.RANDOM: 0.55}))
    assert wide.answer == lesson_runs.PRETRAINED and "is not a tie" in wide.why


def test_full_fine_tuning_is_quoted_for_the_shipped_model_only():
    shipped = lesson_runs.full_fine_tuning("coherence", shipped=True)
    assert "90.2%" in shipped and "55.0%" in shipped and "bench.finetune_gain" in shipped
    # The random start's figure is the better of two learning rates (bench/finetune_gain.py): the caption says so.
    assert "learning rate 1e-4" in shipped and "the better of two runs at learning rates 1e-4 and 5e-4" in shipped
    assert not any(ch.isdigit() for ch in lesson_runs.full_fine_tuning("coherence", shipped=False))
