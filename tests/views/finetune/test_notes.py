"""What the Fine-tune page may say about a run, from the run's own numbers and start: chance on its dev set,
the notes under an overlay (near chance or not, pretrained against random, NSP against none), what the
"before" picture can mean for its start; and a tag per token of the text whatever the tokenizer calls its
frame tokens (RoBERTa's <s> and </s>)."""

import pytest
import torch

from bertviz_lab import atomic
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.classifier import TOKEN, BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.tasks import PAIR, SEQUENCE, Example, Task
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views.finetune import dev as fd
from tests.helpers.family_models import build


def test_a_token_head_tags_the_text_and_not_robertas_frame_tokens(tmp_path):
    build("roberta", tmp_path / "roberta")
    tokenizer = load_checkpoint(tmp_path / "roberta").tokenizer
    assert tokenizer.specials["cls"] == "<s>"  # the test is about a tokenizer that does not say [CLS]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=40)
    result = vf.classify(BertClassifier(config, ("O", "X"), TOKEN).eval(), tokenizer, "the cat sat on the mat .")
    tagged = [result.tokens[i] for i in result.rows]
    assert result.tokens[0] == "<s>" and result.tokens[-1] == "</s>"
    assert tagged == result.tokens[1:-1] and len(result.best()) == len(result.probs) == len(tagged)


def task(kind, labels, dev) -> Task:
    return Task("t", kind, labels, "a test task", dev, dev)


def test_chance_is_the_commonest_label_of_the_scored_dev_items():
    tags = task(TOKEN, ("O", "PERSON"), (Example("ali ate a pie", tags=("PERSON", "O", "O", "O")),
                                         Example("bo ran", tags=("PERSON", "O")), Example("x", tags=("PERSON",))))
    assert fd.chance(tags, 2) == fd.Chance("O", 4 / 6, 6)  # words of the first 2 dev sentences, not sentences
    pairs = task(PAIR, ("follows", "unrelated"), tuple(Example("a", "b", y) for y in ["follows"] * 3 + ["unrelated"]))
    assert fd.chance(pairs, 100) == fd.Chance("follows", 0.75, 4)
    assert fd.Chance("follows", 0.5, 400).noise == pytest.approx(0.05)  # two standard errors: 2 x 2.5 points
    assert fd.versus_chance(0.525, fd.Chance("follows", 0.5, 400)).startswith("near chance (within 5.0 points")
    assert fd.versus_chance(0.993, fd.Chance("O", 0.8, 5000)) == "19.3 points above chance"


COIN = fd.Chance("follows", 0.5, 400)  # a balanced task, 400 held-out pairs


def outcome(start, last, task="coherence", base=COIN, legend="run"):
    return fd.Outcome(legend, task, start, (0, 0.25), (200, last), base)


def test_the_overlay_notes_follow_the_runs_own_numbers():
    pretrained, scratch = outcome(vf.WITH_NSP, 0.902, legend="pre"), outcome(vf.RANDOM, 0.525, legend="scratch")
    notes = fd.compare_notes([pretrained, scratch])
    assert notes[0] == ("pre: 25.0% at step 0, 90.2% at step 200; always answering \u201cfollows\u201d scores 50.0%, "
                        "so it ends 40.2 points above chance.")
    assert "scratch" in notes[1] and "ends near chance (within 5.0 points" in notes[1]
    assert "Random weights end near chance on coherence after 200 steps" in " ".join(notes)
    assert "pretrained with NSP against random weights: 90.2% vs 52.5%, +37.7 points" in " ".join(notes)
    assert notes[-1] == fd.COHERENCE_NOTE  # built like NSP: the gain is no evidence of general transfer
    # entities from random weights: far above chance, so the task says little of what pretraining is worth
    tags = fd.Chance("O", 0.8, 5000)
    notes = fd.compare_notes([outcome(vf.RANDOM, 0.993, "entities", tags), outcome(vf.WITH_NSP, 0.994, "entities",
                                                                                     tags)])
    text = " ".join(notes)
    assert "Random weights learn entities too" in text and "near chance" not in text
    assert "99.4% vs 99.3%, no clear difference" in text and fd.COHERENCE_NOTE not in notes
    # NSP against none, on one task; a random start alone on coherence gets no NSP note
    with_without = " ".join(fd.compare_notes([outcome(vf.WITH_NSP, 0.90), outcome(vf.NO_NSP, 0.70)]))
    assert "with NSP against without: 90.0% vs 70.0%, +20.0 points" in with_without
    assert fd.COHERENCE_NOTE not in fd.compare_notes([outcome(vf.RANDOM, 0.6)])


def test_the_before_picture_note_fits_the_start():
    nsp, no_pooler = fd.StartFacts(True, True, True), fd.StartFacts(True, False, False)
    random = fd.StartFacts(False, False, False)
    assert "owes nothing to pretraining" in fd.start_note(PAIR, "coherence", random)
    assert "NSP" not in fd.start_note(PAIR, "coherence", random)
    coherence = fd.start_note(PAIR, "coherence", nsp)
    assert "NSP trained its pooler" in coherence and fd.COHERENCE_NOTE in coherence
    other = fd.start_note(SEQUENCE, "acceptability", nsp)
    assert "NSP trained its pooler" in other and fd.COHERENCE_NOTE not in other
    pooler = fd.start_note(PAIR, "coherence", no_pooler, cls="<s>")
    assert "no pooler from pretraining" in pooler and "<s> after the last layer" in pooler
    assert "NSP trained" not in pooler and "NSP" not in fd.start_note(TOKEN, "entities", nsp)


def test_a_runs_start_is_random_or_pretrained_with_or_without_nsp(tmp_path):
    def folder(name, card=None, run_nsp=None):
        where = tmp_path / name / "checkpoints" / "step-000010" if run_nsp is not None else tmp_path / name
        where.mkdir(parents=True)
        if card is not None:
            atomic.write_json(where / "model_card.json", {"train_config": {"nsp": card}})
        if run_nsp is not None:
            atomic.write_json(tmp_path / name / "run.json", {"kind": "pretrain", "config": {"nsp": run_nsp}})
        return FinetuneConfig(task="coherence", checkpoint=str(where))

    assert vf.start_kind(folder("shipped", card=True)) == vf.WITH_NSP
    assert vf.start_kind(folder("run", run_nsp=False)) == vf.NO_NSP
    assert vf.start_kind(folder("hub")) == vf.PRETRAINED  # nothing recorded: no claim either way
    assert vf.start_kind(FinetuneConfig(task="coherence", scratch="tiny")) == vf.RANDOM


def test_random_weights_above_chance_say_little_of_pretraining_only_when_as_good_as_it():
    # docs/benchmarks.md's acceptability runs: 93.5% pretrained, 68.5% random, chance 50% on 400 dev sentences
    base = fd.Chance("acceptable", 0.5, 400)
    scratch, pre = outcome(vf.RANDOM, 0.685, "acceptability", base), outcome(vf.NO_NSP, 0.935, "acceptability", base)
    text = " ".join(fd.compare_notes([pre, scratch]))
    assert "little of what pretraining is worth" not in text
    assert ("Random weights learn some of acceptability from its training examples alone (18.5 points above "
            "chance), but the pretrained without NSP start ends 25.0 points higher.") in text
    close = " ".join(fd.compare_notes([outcome(vf.NO_NSP, 0.70, "acceptability", base), scratch]))
    assert "as well as the pretrained without NSP start (within 6.5 points)" in close
    assert "little of what pretraining is worth" in close
    above = " ".join(fd.compare_notes([outcome(vf.NO_NSP, 0.60, "acceptability", base), scratch]))
    assert "Random weights learn acceptability from its training examples alone (18.5 points above chance), and " \
        "end 8.5 points above the pretrained without NSP start." in above
    alone = " ".join(fd.compare_notes([scratch]))
    assert "little of what pretraining is worth" not in alone and "overlay a pretrained run" in alone


def test_a_run_below_chance_is_not_called_near_it():
    notes = fd.compare_notes([outcome(vf.RANDOM, 0.049, "entities", fd.Chance("O", 0.833, 5000))])
    assert "ends 78.4 points below chance" in notes[0]
    assert "Random weights end below chance on entities after 200 steps" in notes[1]
