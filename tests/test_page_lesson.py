"""The Lesson page (AppTest on the shipped model): every step's question answered and revealed, the model's
answer checked against the model's numbers computed here, the score, Back / Next, bad input, missing heads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.ui import lesson as ui
from bertviz_lab.ui import links
from bertviz_lab.views import lesson as vl
from bertviz_lab.views import lesson_runs as runs

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "pages" / "lesson.py")
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"


@pytest.fixture(scope="module")
def mini():
    return load_checkpoint(SHIPPED)


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def widget(at: AppTest, step: int):
    """The guess widget of a step, whatever its kind."""
    key = f"lesson.guess.{step}"
    for kind in (at.number_input, at.pills, at.radio, at.selectbox):
        try:
            return kind(key=key)
        except KeyError:
            continue
    raise AssertionError(f"no guess widget for step {step}")


def answer(at: AppTest, step: int, guess) -> str:
    """Guess, Reveal, and the verdict the page shows."""
    widget(at, step).set_value(guess).run()
    at.button(key=f"lesson.reveal.{step}").click().run()
    assert not at.exception, at.exception
    (shown,) = [*at.success, *at.error]
    return shown.value.replace("\\", "")


def go(at: AppTest, step: int) -> AppTest:
    at.selectbox(key="lesson.step").set_value(step).run()
    assert not at.exception, at.exception
    return at


def score(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Score:**"))


def options(at: AppTest, step: int) -> list[str]:
    """The options as the class reads them (labels arrive Markdown-escaped)."""
    return [o.replace("\\", "") for o in widget(at, step).options]


def other(choices: list[str], right: str) -> str:
    return next(c for c in choices if c != right)


@torch.no_grad()
def run(ckpt, text: str, text_b: str | None = None):
    enc = ckpt.tokenizer.encode(text, text_b)
    out = ckpt.model.eval()(torch.tensor([enc.ids]), torch.tensor([enc.segment_ids]), trace=True)
    return enc, out


def expected_answers(ckpt, at: AppTest) -> dict[int, object]:
    """Each step's answer from the model's own numbers, computed here without the page's views/lesson.py."""
    model, tok = ckpt.model, ckpt.tokenizer
    cat, attn = "the cat sat on the [MASK] .", "the animal did not cross the street because it was too tired ."
    enc, out = run(ckpt, cat)
    found = {1: len(enc.ids)}
    table = torch.nn.functional.normalize(model.bert.embeddings.word_embeddings.weight.detach(), dim=-1)
    go(at, 2)
    found[2] = max(options(at, 2), key=lambda w: float(table[tok.token_to_id(w)] @ table[tok.token_to_id("cat")]))
    enc_a, out_a = run(ckpt, attn)
    weights = torch.stack([s.weights[0] for s in out_a.trace])  # (L, H, T, T)
    T = len(enc_a.ids)
    previous = weights[:, :, torch.arange(1, T - 1), torch.arange(0, T - 2)].mean(-1)  # (L, H)
    layer, head = divmod(int(previous.argmax()), previous.shape[1])
    found[3] = f"L{layer} H{head}"
    go(at, 4)
    layer, head = (int(p[1:]) for p in at.selectbox(key="lesson.head").value.split())
    best = int(weights[layer, head, enc_a.tokens.index("it")].argmax())
    token = enc_a.tokens[best]
    found[4] = token if enc_a.tokens.count(token) == 1 else f"{token} ({best})"
    logits = out.mlm_logits[0, enc.tokens.index("[MASK]")]
    found[5] = tok.id_to_token(int(logits.argmax()))
    nll = -float(logits.log_softmax(-1)[tok.token_to_id("mat")])
    found[6] = next(label for edge, label in vl.LOSS_BANDS if nll < edge)
    go(at, 7)
    p_next = {b: float(run(ckpt, "the cat sat on the mat .", b)[1].nsp_logits[0].softmax(-1)[0])
              for b in options(at, 7)}
    found[7] = max(p_next, key=p_next.get)
    step0 = Trainer(runs.tiny_config(0)).evaluate()["mlm_loss"]
    found[8] = min(runs.start_question(runs.tiny_vocab_size())[1].items(), key=lambda kv: abs(kv[1] - step0))[0]
    probes = runs.compare_probes(model, tok, "acceptability").accuracy
    gap = probes[runs.PRETRAINED] - probes[runs.RANDOM]
    found[9] = runs.probe_question().options[2] if abs(gap) < runs.TIE else runs.PRETRAINED if gap > 0 else runs.RANDOM
    vectors = [torch.stack([h[0, e.tokens.index("bank")] for h in o.hidden_states])
               for e, o in (run(ckpt, s) for s in ("a fisherman was fishing on the bank .",
                                                     "i went to the bank to deposit money ."))]
    cosine = torch.nn.functional.cosine_similarity(*vectors, dim=-1)
    found[10] = "at layer 0 (the embeddings)" if cosine[0] > cosine[-1] else f"at the last layer ({len(cosine) - 1})"
    return found


def test_every_step_reveals_the_models_own_answer_and_the_score_counts(mini):
    at = page()
    expected = expected_answers(mini, at)
    wrong_at = {3, 7}  # the class guesses wrong here, right everywhere else
    go(at, 1)
    assert score(at) == "**Score:** no answers revealed yet"
    for step in range(1, 11):
        assert at.subheader[0].value == f"{step}. {vl.STEPS[step - 1]}"
        assert at.button(key=f"lesson.reveal.{step}").disabled  # no guess yet: nothing to reveal
        choices = [] if step == 1 else options(at, step)
        right = expected[step]
        guess = (right + 1 if step == 1 else other(choices, right)) if step in wrong_at else right
        verdict = answer(at, step, guess)
        assert verdict.startswith("Right!" if step not in wrong_at else "Not this time.")
        assert f"The model's answer: **{right}**" in verdict
        n_right = step - len([s for s in wrong_at if s <= step])
        assert score(at) == f"**Score:** {n_right} of {step} right so far" and f"{n_right} of {step}" in verdict
        if step < 10:
            at.button(key="lesson.next").click().run()
    assert at.button(key="lesson.next").disabled
    at.button(key="lesson.back").click().run()
    assert at.subheader[0].value == "9. Fine-tuning" and at.progress[0].value == 90
    assert "Dev accuracy" in at.success[0].value.replace("\\", "")  # still revealed, still right


def test_the_revealed_views_hold_the_models_numbers(mini):
    at = go(page(), 6)
    answer(at, 6, vl.LOSS_BANDS[0][1])
    enc, out = run(mini, "the cat sat on the [MASK] .")
    nll = -float(out.mlm_logits[0, enc.tokens.index("[MASK]")].log_softmax(-1)[mini.tokenizer.token_to_id("mat")])
    assert {m.label: m.value for m in at.metric}["Loss = −log p"] == f"{nll:.3f}"
    go(at, 8)
    answer(at, 8, "near 0")
    held_out = [r for r in at.session_state["lesson.training"][2]]
    assert held_out[0]["step"] == 0 and held_out[-1]["step"] == runs.TINY["steps"]
    assert held_out[-1]["mlm_loss"] < held_out[0]["mlm_loss"] - 0.5  # it learned something in seconds
    assert held_out[0]["mlm_loss"] == pytest.approx(math.log(runs.tiny_vocab_size()), rel=0.05)
    at.run()  # a rerun does not train again: the run is the same object
    assert at.session_state["lesson.training"][2] == held_out


def test_a_new_sentence_asks_again_and_start_over_clears_the_score(mini):
    at = page()
    assert answer(at, 1, 9).startswith("Right!")
    at.text_input(key="lesson.masked").input("the cat sat on the mat today [MASK] .").run()
    assert any("revealed for another sentence" in c.value for c in at.caption)
    assert answer(at, 1, 11).startswith("Right!") and score(at) == "**Score:** 1 of 1 right so far"
    at.button(key="lesson.restart").click().run()
    assert score(at) == "**Score:** no answers revealed yet" and widget(at, 1).value is None


@pytest.mark.parametrize(("step", "key", "text", "kind", "words"), [
    (1, "lesson.masked", "   ", "warning", "empty"),
    (1, "lesson.masked", "the cat " * 40, "warning", "at most 64"),
    (5, "lesson.masked", "the cat sat on the mat .", "info", "no [MASK]"),
    (6, "lesson.true_word", "blorptastic", "warning", "the loss at one [MASK] needs a word that is one token"),
    (7, "lesson.nsp_b", "", "warning", "second sentence"),
    (10, "lesson.sense_a", "the cat sat on the mat .", "warning", "does not contain"),
])
def test_bad_input_says_what_is_wrong(step, key, text, kind, words):
    at = go(page(), step)
    at.text_input(key=key).input(text).run()
    assert not at.exception, at.exception
    messages = [m.value.replace("\\", "") for m in getattr(at, kind)]
    assert any(words in m for m in messages), messages
    assert not at.button(key="lesson.back" if step == 10 else "lesson.next").disabled  # the class moves on


def test_a_model_without_mlm_or_nsp_head_says_the_step_needs_one(headless_checkpoint):
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["model.path"] = str(headless_checkpoint)
    at.run()
    for step, what in ((5, "masked-language-model (MLM) head"), (6, "masked-language-model (MLM) head"),
                       (7, "next-sentence (NSP) head")):
        go(at, step)
        assert any(what in m.value.replace("\\", "") for m in at.info), [m.value for m in at.info]
        assert f"lesson.reveal.{step}" not in [b.key for b in at.button]  # nothing to ask
    go(at, 3)  # attention needs no head: the question is asked
    assert widget(at, 3).options[0] == "L0 H0"


def test_a_link_restores_the_step_and_the_sentences():
    params = {p.name: p for p in links.PAGES["lesson"]}
    assert params["step"].read("3") == 3 and params["a"].key.name == "lesson.masked"
    with pytest.raises(ValueError):
        params["step"].read("11")


def test_the_training_chart_grows_live_but_the_handout_keeps_only_the_finished_chart():
    at = go(page(), 8)
    answer(at, 8, options(at, 8)[0])
    (view,) = at.session_state["handout.views"].values()
    assert [name for name, _ in view.charts.values()] == ["lesson_training"]  # no frame of the live chart
    (held_out,) = [t for t in view.charts[next(iter(view.charts))][1].data if t.name == "held-out"]
    assert len(held_out.x) == 7  # steps 0, 10, ..., 60: the whole run


def test_the_probes_are_trained_once_for_every_session(monkeypatch):
    calls, real = [], runs.compare_probes
    monkeypatch.setattr(runs, "compare_probes", lambda *args, **kw: calls.append(args[2]) or real(*args, **kw))
    ui._probes.clear()
    verdicts = []
    for _ in range(2):  # two sessions, one after the other
        at = go(page(), 9)
        verdicts.append(answer(at, 9, runs.PRETRAINED))
        assert [p.value for p in at.progress] == [90]  # the stepper's bar; the probes' bar is gone
    assert calls == ["acceptability"] and verdicts[0] == verdicts[1]
