"""The Lesson page (AppTest on the shipped model): every step's question answered and revealed, the model's
answer checked against the model's numbers computed here, the score, Back / Next, bad input, missing heads."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.errors import InputError
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.ui.lesson import stepper as ui_lesson
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.lesson import patch_step as vlp
from bertviz_lab.views.lesson import vector_steps as vlv
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.lab import app_test
from tests.helpers.lesson_neurons import expected as neuron_word
from tests.helpers.lesson_page import PAGE, SENSES, SHIPPED, answer, go, options, page, paragraph, score, widget


@pytest.fixture(scope="module")
def mini():
    return load_checkpoint(SHIPPED)


@torch.no_grad()
def run(ckpt, text: str, text_b: str | None = None):
    enc = ckpt.tokenizer.encode(text, text_b)
    out = ckpt.model.eval()(torch.tensor([enc.ids]), torch.tensor([enc.segment_ids]), trace=True)
    return enc, out


def near(values: dict) -> set:
    """The options a near tie accepts: the best and any within the lesson's margin of it."""
    best = max(values.values())
    return {option for option, value in values.items() if best - value < vl.NEAR}


@torch.no_grad()
def hiding_lowers_most(ckpt, enc) -> tuple[str, set]:
    """The word whose hiding under [MASK] lowers the top guess's logit most, and the words within the lesson's
    margin (NEAR of the top drop's size) of it."""
    at = enc.tokens.index("[MASK]")
    words = [i for i, t in enumerate(enc.tokens) if t not in ("[CLS]", "[SEP]", "[MASK]")]
    ids = torch.tensor([enc.ids] * (len(words) + 1))
    ids[torch.arange(1, len(words) + 1), words] = ckpt.tokenizer.mask_id
    logits = ckpt.model.eval()(ids, torch.tensor([enc.segment_ids] * len(ids))).mlm_logits[:, at]
    guess = int(logits[0, :ckpt.tokenizer.vocab_size].argmax())
    labels = vl.token_options(enc.tokens)
    drop = {labels[i]: float(logits[0, guess] - logits[k + 1, guess]) for k, i in enumerate(words)}
    best = max(drop, key=drop.get)
    return best, {w for w, d in drop.items() if drop[best] - d < vl.NEAR * abs(drop[best])}


def first_depth_at_the_mask(ckpt) -> tuple[str, set]:
    """The first depth whose residual vector at [MASK], put back alone into the corrupted run, brings back more than
    any other position's (the built-in agreement pair), from the patching grid computed here."""
    pair = minimal_pairs.by_key(vlp.PAIR)
    patching = vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer,
                                                                foil=pair.foil))
    values = vpa.grid(patching, "resid", "denoise").values
    depth = next(d for d in range(len(values)) if values[d].argmax() == patching.position)
    return ("the embeddings" if depth == 0 else f"layer {depth}"), {f"layer {depth}"}


def expected_answers(ckpt, at: AppTest) -> dict[str, tuple[object, set]]:
    """Each step's answer and the options it accepts, from the model's own numbers, computed here without the
    page's views."""
    model, tok = ckpt.model, ckpt.tokenizer
    cat, attn = "the cat sat on the [MASK] .", "the animal did not cross the street because it was too tired ."
    enc, out = run(ckpt, cat)
    found = {"tokens": (len(enc.ids), {len(enc.ids)})}
    table = torch.nn.functional.normalize(model.bert.embeddings.word_embeddings.weight.detach(), dim=-1)
    go(at, "embeddings")
    cosine = {w: float(table[tok.token_to_id(w)] @ table[tok.token_to_id("cat")]) for w in options(at, "embeddings")}
    found["embeddings"] = max(cosine, key=cosine.get), near(cosine)
    enc_a, out_a = run(ckpt, attn)
    weights = torch.stack([s.weights[0] for s in out_a.trace])  # (L, H, T, T)
    T = len(enc_a.ids)
    previous = weights[:, :, torch.arange(1, T - 1), torch.arange(0, T - 2)].mean(-1)  # (L, H)
    scores = {f"L{layer} H{head}": float(previous[layer, head]) for layer in range(previous.shape[0])
              for head in range(previous.shape[1])}
    found["heads"] = max(scores, key=scores.get), near(scores)
    go(at, "softmax")
    layer, head = (int(p[1:]) for p in at.selectbox(key="lesson.head").value.split())
    row = weights[layer, head, enc_a.tokens.index("it")]
    labels = [t if enc_a.tokens.count(t) == 1 else f"{t} ({i})" for i, t in enumerate(enc_a.tokens)]
    found["softmax"] = labels[int(row.argmax())], near(dict(zip(labels, row.tolist())))
    probs = out.mlm_logits[0, enc.tokens.index("[MASK]")].softmax(-1)
    top = {tok.id_to_token(int(i)): float(probs[i]) for i in probs.topk(4).indices}
    found["guess"] = max(top, key=top.get), near(top)
    found["why"] = hiding_lowers_most(ckpt, enc)
    found["patching"] = first_depth_at_the_mask(ckpt)
    go(at, "neurons")
    found["neurons"] = neuron_word(ckpt, at)  # the word of largest activation, by a hook on the layer's W_2
    nll = -float(probs[tok.token_to_id("mat")].log())
    band = next(label for edge, label in vl.LOSS_BANDS if nll < edge)
    found["loss"] = band, {band}
    go(at, "nsp")
    p_next = {b: float(run(ckpt, "the cat sat on the mat .", b)[1].nsp_logits[0].softmax(-1)[0])
              for b in options(at, "nsp")}
    found["nsp"] = max(p_next, key=p_next.get), near(p_next)
    step0 = Trainer(lesson_runs.tiny_config(0)).evaluate().loss
    start = min(lesson_runs.start_question(lesson_runs.tiny_vocab_size())[1].items(), key=lambda kv: abs(kv[1] - step0))[0]
    found["training"] = start, {start}
    probes = lesson_runs.compare_probes(model, tok, "acceptability").accuracy
    pre, rnd = probes[lesson_runs.PRETRAINED], probes[lesson_runs.RANDOM]
    two_se = 2 * math.sqrt((pre * (1 - pre) + rnd * (1 - rnd)) / lesson_runs.PROBE_DEV)
    verdict = lesson_runs.probe_question().options[2] if abs(pre - rnd) <= two_se else \
        lesson_runs.PRETRAINED if pre > rnd else lesson_runs.RANDOM
    found["probe"] = verdict, {verdict}
    vectors = [torch.stack([h[0, e.tokens.index("bank")] for h in o.hidden_states])
               for e, o in (run(ckpt, s) for s in SENSES)]
    same = torch.nn.functional.cosine_similarity(vectors[0], vectors[2], dim=-1)[[0, -1]]  # layer 0, the last
    other = torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=-1)[[0, -1]]
    readings = [{True, False} if abs(g) < vl.NEAR else {bool(g > 0)} for g in (same - other).tolist()]
    found["contextual"] = vlv.CLOSER[tuple(bool(g > 0) for g in (same - other).tolist())], \
        {vlv.CLOSER[(a, b)] for a in readings[0] for b in readings[1]}
    return found


def test_every_step_reveals_the_models_own_answer_and_the_score_counts(mini):
    at = page()
    expected = expected_answers(mini, at)
    wrong_at = {"heads", "nsp"}  # the class guesses wrong here, right everywhere else
    go(at, "tokens")
    assert score(at) == "**Score:** no answers revealed yet"
    for number, step in enumerate(vls.ids(), 1):
        assert at.subheader[0].value == f"{number}. {vls.by_id(step).title}"
        assert at.button(key=f"lesson.reveal.{step}").disabled  # no guess yet: nothing to reveal
        choices = [] if step == "tokens" else options(at, step)
        right, accepted = expected[step]
        guess = (right + 1 if step == "tokens" else next(c for c in choices if c not in accepted)) \
            if step in wrong_at else right
        verdict = answer(at, step, guess)
        assert verdict.startswith("Right!" if step not in wrong_at else "Not this time.")
        assert f"The model's answer: **{right}**" in verdict
        n_right = number - len([s for s in wrong_at if vls.position(s) <= number])
        assert score(at) == f"**Score:** {n_right} of {number} right so far" and f"{n_right} of {number}" in verdict
        if number < len(vls.STEPS):
            at.button(key="lesson.next").click().run()
    assert at.button(key="lesson.next").disabled
    at.button(key="lesson.back").click().run()
    assert at.subheader[0].value == "12. A linear probe" and at.selectbox(key="lesson.step").value == "probe"
    assert "Dev accuracy" in at.success[0].value.replace("\\", "")  # still revealed, still right


def test_the_revealed_views_hold_the_models_numbers(mini):
    at = go(page(), "loss")
    answer(at, "loss", vl.LOSS_BANDS[0][1])
    enc, out = run(mini, "the cat sat on the [MASK] .")
    nll = -float(out.mlm_logits[0, enc.tokens.index("[MASK]")].log_softmax(-1)[mini.tokenizer.token_to_id("mat")])
    assert {m.label: m.value for m in at.metric}["Loss = −log p"] == f"{nll:.3f}"
    go(at, "training")
    answer(at, "training", options(at, "training")[-1])
    held_out = [r for r in at.session_state["lesson.training"][2]]
    assert held_out[0].step == 0 and held_out[-1].step == lesson_runs.TINY.steps
    assert held_out[-1].loss < held_out[0].loss - 0.5  # it learned something in seconds
    assert held_out[0].loss == pytest.approx(math.log(lesson_runs.tiny_vocab_size()), rel=0.05)
    at.run()  # a rerun does not train again: the run is the same object
    assert at.session_state["lesson.training"][2] == held_out


def test_a_new_sentence_asks_again_and_start_over_clears_the_score(mini):
    at = page()
    assert answer(at, "tokens", 9).startswith("Right!")
    at.text_input(key="lesson.masked").input("the cat sat on the mat today [MASK] .").run()
    assert any("revealed for another sentence" in c.value for c in at.caption)
    assert answer(at, "tokens", 11).startswith("Right!") and score(at) == "**Score:** 1 of 1 right so far"
    at.button(key="lesson.restart").click().run()
    assert score(at) == "**Score:** no answers revealed yet" and widget(at, "tokens").value is None


@pytest.mark.parametrize(("step", "key", "text", "kind", "words"), [
    ("tokens", "lesson.masked", "   ", "warning", "empty"),
    ("tokens", "lesson.masked", "the cat " * 40, "warning", "at most 64"),
    ("guess", "lesson.masked", "the cat sat on the mat .", "info", "no [MASK]"),
    ("why", "lesson.masked", "the cat sat on the mat .", "info", "no [MASK]"),
    ("loss", "lesson.true_word", "blorptastic", "warning", "the loss at one [MASK] needs a word that is one token"),
    ("nsp", "lesson.nsp_b", "", "warning", "second sentence"),
    ("contextual", "lesson.sense_a", "the cat sat on the mat .", "warning", "does not contain"),
    ("contextual", "lesson.sense_c", "  ", "warning", "three sentences"),
])
def test_bad_input_says_what_is_wrong(step, key, text, kind, words):
    at = go(page(), step)
    at.text_input(key=key).input(text).run()
    assert not at.exception, at.exception
    messages = [m.value.replace("\\", "") for m in getattr(at, kind)]
    assert any(words in m for m in messages), messages
    assert not at.button(key="lesson.back" if step == vls.STEPS[-1].id else "lesson.next").disabled  # moves on


def test_a_model_without_mlm_or_nsp_head_says_the_step_needs_one(headless_checkpoint):
    at = app_test(PAGE)
    at.session_state["model.path"] = str(headless_checkpoint)
    at.run()
    for step, what in (("guess", "masked-language-model (MLM) head"), ("why", "masked-language-model (MLM) head"),
                       ("patching", "masked-language-model (MLM) head"), ("loss", "masked-language-model (MLM) head"), ("nsp", "next-sentence (NSP) head")):
        go(at, step)
        assert any(what in m.value.replace("\\", "") for m in at.info), [m.value for m in at.info]
        assert f"lesson.reveal.{step}" not in [b.key for b in at.button]  # nothing to ask
    go(at, "heads")  # attention needs no head: the question is asked
    assert widget(at, "heads").options[0] == "L0 H0"


def test_a_link_restores_the_step_and_the_sentences():
    params = {p.name: p for p in links.PAGES["lesson"]}
    assert params["step"].read("3") == "heads" and params["a"].key.name == "lesson.masked"  # a link of before ids
    assert params["step"].read("heads") == "heads"
    with pytest.raises(ValueError):
        params["step"].read(str(len(vls.LINKED_BY_NUMBER) + 1))


def test_the_training_chart_grows_live_but_the_handout_keeps_only_the_finished_chart():
    at = go(page(), "training")
    answer(at, "training", options(at, "training")[0])
    (view,) = at.session_state["handout.views"].values()
    assert [name for name, _ in view.charts.values()] == ["lesson_training"]  # no frame of the live chart
    (held_out,) = [t for t in view.charts[next(iter(view.charts))][1].data if t.name == "held-out"]
    assert len(held_out.x) == 7  # steps 0, 10, ..., 60: the whole run


def test_the_probes_are_trained_once_for_every_session(monkeypatch):
    calls, real = [], lesson_runs.compare_probes
    monkeypatch.setattr(lesson_runs, "compare_probes", lambda *args, **kw: calls.append(args[2]) or real(*args, **kw))
    ui_lesson.PROBES.clear()
    verdicts = []
    for _ in range(2):  # two sessions, one after the other
        at = go(page(), "probe")
        verdicts.append(answer(at, "probe", lesson_runs.PRETRAINED))
        assert not at.progress  # the probes' bar is gone once they are done
    assert calls == ["acceptability"] and verdicts[0] == verdicts[1]


def captions(at: AppTest) -> list[str]:
    return [c.value.replace("\\", "") for c in at.caption]


def test_the_paragraphs_say_what_is_true_for_every_family():
    embeddings, softmax, why = paragraph("embeddings"), paragraph("softmax"), paragraph("why")
    probe, contextual = paragraph("probe"), paragraph("contextual")
    assert "from −1 (opposite directions) through 0 (perpendicular) to 1" in embeddings  # cosine's whole range
    assert "in most models" in embeddings and "where a model's embeddings have another width" in embeddings
    assert "d_head is the number of dimensions of q and k" in softmax and "length" not in softmax
    assert "[MASK]" not in why and "the blank's own token" in why  # the mask token as each family writes it
    assert "linear probe (the feature-based approach)" in probe and "cheapest kind" not in probe
    assert "Layer 0 is the embedding layer's output" in contextual and "layer 0: the embeddings" not in contextual
    assert "within a layer" in contextual and "do not compare" in contextual


def test_the_embedding_step_says_what_this_model_adds_before_layer_1():
    at = go(page(), "embeddings")
    shown = " ".join(captions(at))
    assert "plus its segment's vector (sentence A or B)" in shown and "layer 1 reads the result, 256" in shown


def test_the_softmax_step_shows_the_heads_held_out_score_beside_the_example():
    at = go(page(), "softmax")
    (note,) = [c for c in captions(at) if "held-out sentences" in c]
    assert "sentences other than this one" in note and "A weight shows where a head looks" in note
    at.selectbox(key="lesson.head").set_value("L0 H0").run()  # another head: its own held-out score
    assert any("L0 H0, the head shown here" in c for c in captions(at))


def test_the_probe_step_names_its_band_in_points_and_full_fine_tunings_figure():
    at = go(page(), "probe")
    verdict = answer(at, "probe", lesson_runs.PRETRAINED)
    assert "points" in verdict and "standard errors" in verdict
    full = [c for c in captions(at) if "Full fine-tuning" in c]
    assert full and "93.5%" in full[0] and "bench.finetune_gain" in full[0]  # the shipped model, acceptability


def test_the_default_senses_put_bank_at_different_places_in_sentences_2_and_3(mini):
    sentences = [K.SENSE_A.default, K.SENSE_B.default, K.SENSE_C.default]
    assert sentences == list(SENSES)
    vocab = set((SHIPPED / "vocab.txt").read_text(encoding="utf-8").split())
    assert all(set(s.split()) <= vocab for s in sentences), sentences
    where = [mini.tokenizer.encode(s).tokens.index(K.SENSE_WORD.default) for s in sentences]
    assert where[1] != where[2]  # else their layer-0 vectors are one, and the layer-0 question a tie by construction


def test_the_contextual_step_says_what_layer_0_can_tell():
    at = go(page(), "contextual")
    verdict = answer(at, "contextual", vlv.CLOSER[(False, True)])
    assert "sentence 1's and sentence 2's “bank” are one vector (cosine 1): the same token at the same " \
        "position 7, though their senses differ" in verdict
    assert verdict.startswith("Right!")  # on the shipped model: apart only at the last layer


def test_the_first_step_shows_how_this_model_frames_a_pair():
    text = paragraph("tokens")
    assert "RoBERTa's kind writes them" not in text and "the line below shows the active model's" in text
    at = go(page(), "tokens")
    assert "frames two sentences A and B as `[CLS]` A `[SEP]` B `[SEP]`, and writes the blank `[MASK]`." in \
        " ".join(c.value for c in at.caption)


def test_the_previous_token_step_asks_about_this_sentence_and_measures_the_head_elsewhere():
    at = go(page(), "heads")
    assert "On this sentence, which head puts the most weight on the previous token?" in \
        " ".join(m.value.replace("\\", "") for m in at.markdown)
    verdict = answer(at, "heads", "L0 H2")
    assert "other sentences, from the probe set and the pronoun sentences (this one left out)" in verdict
    assert "Attention spread evenly over the 15 tokens would give 1/15" in verdict


def test_the_training_step_measures_what_the_run_learned_against_word_frequencies():
    at = go(page(), "training")
    assert options(at, "training") == ["about 11.5", "about 7.7", "about 3.5", "about 0.8"]  # ln 2,171 = 7.68 among them
    answer(at, "training", "about 7.7")
    (note,) = [c for c in captions(at) if c.startswith("Seed 0")]
    frequency, counted = lesson_runs.frequency_loss()
    assert "mostly learned which words are common" not in note
    assert f"each token's frequency in the corpus ({counted:,} tokens counted) scores {frequency:.2f}" in note


def test_the_probe_step_is_called_a_linear_probe_while_it_trains(monkeypatch):
    monkeypatch.setattr(lesson_runs, "compare_probes", mock.Mock(side_effect=InputError("stopped here to read the bar")))
    ui_lesson.PROBES.clear()
    at = go(page(), "probe")
    widget(at, "probe").set_value(lesson_runs.PRETRAINED).run()
    at.button(key="lesson.reveal.probe").click().run()
    texts = [p.text for p in at.progress]
    assert "Linear probe: reading the task…" in texts and not any("Fine-tuning" in t for t in texts), texts
    ui_lesson.PROBES.clear()
