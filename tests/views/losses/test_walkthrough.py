"""The Losses walkthrough (views/losses/walkthrough.py) and its masking statistics (masking_stats.py): reproducible
masking, losses equal to PyTorch's, one optimizer step, the 15 / 80 / 10 / 10 rule over many draws, its figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertviz_lab.bert import losses, masking
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.figures.losses import masking_frequency_chart, neg_log_p_bars, topk_grid
from bertviz_lab.views.losses import walkthrough
from bertviz_lab.views.losses import masking_stats

A, B = "the cat sat on the mat .", "it was tired ."
LONG = "the cat sat on the mat and the dog went to the bank because it was tired and did not cross the street ."


@pytest.fixture
def pair(tiny_tokenizer):
    return tiny_tokenizer.encode(A, B)


def walk(model, tokenizer, encoding, seed=0, **rates):
    return walkthrough.walkthrough(model, tokenizer, encoding, seed=seed, **rates)


def fingerprint(w):
    return w.positions, [p.action for p in w.picked], w.corrupted_ids, w.mlm.loss_mean


def forward(model, ids, segments):
    with torch.no_grad():
        return model(torch.tensor([ids]), torch.tensor([segments]))


def test_the_same_seed_gives_the_same_walkthrough_and_another_seed_differs(tiny_model, tiny_tokenizer, pair):
    first = walk(tiny_model, tiny_tokenizer, pair, seed=7)
    assert fingerprint(first) == fingerprint(walk(tiny_model, tiny_tokenizer, pair, seed=7))
    assert first.nsp_random.sentence_b == walk(tiny_model, tiny_tokenizer, pair, seed=7).nsp_random.sentence_b
    assert any(fingerprint(walk(tiny_model, tiny_tokenizer, pair, seed=s)) != fingerprint(first) for s in range(8, 12))


def test_picked_positions_actions_and_corruption_are_consistent(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair, seed=3, mask_rate=0.5)
    assert w.positions and all(w.eligible[t] for t in w.positions)
    for p in w.picked:
        assert p.original == w.tokens[p.position] and p.fed == w.corrupted_tokens[p.position]
        assert p.action in ("[MASK]", "random", "kept")
        assert (p.fed == "[MASK]") == (p.action == "[MASK]")
        if p.action == "kept":
            assert p.fed == p.original
    untouched = set(range(len(w.tokens))) - set(w.positions)
    assert all(w.corrupted_tokens[t] == w.tokens[t] and w.labels[t] == -100 for t in untouched)
    assert walkthrough.token_table(w)["picked"].sum() == len(w.picked) == len(walkthrough.prediction_table(w))


def test_mlm_loss_mean_and_sum_equal_cross_entropy_at_the_masked_positions(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair, seed=1, mask_rate=0.4)
    logits = forward(tiny_model, w.corrupted_ids, w.segment_ids).mlm_logits[0]  # (T, V)
    rows, targets = logits[w.positions], torch.tensor([w.ids[t] for t in w.positions])
    assert w.mlm.count == len(w.positions) >= 2
    assert w.mlm.loss_mean == pytest.approx(F.cross_entropy(rows, targets).item(), abs=1e-5)
    assert w.mlm.loss_sum == pytest.approx(F.cross_entropy(rows, targets, reduction="sum").item(), abs=1e-4)
    p = rows.softmax(-1)[range(len(targets)), targets]
    assert [m.p_true for m in w.mlm.predictions] == pytest.approx(p.tolist(), abs=1e-6)


def test_nsp_losses_equal_cross_entropy_with_their_labels(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair, seed=2)
    true_logits = forward(tiny_model, w.corrupted_ids, w.segment_ids).nsp_logits  # (1, 2)
    assert w.nsp_true.label == losses.IS_NEXT and w.nsp_random.label == losses.NOT_NEXT
    assert w.nsp_true.loss == pytest.approx(F.cross_entropy(true_logits, torch.tensor([0])).item(), abs=1e-5)
    assert w.nsp_true.p_is_next == pytest.approx(true_logits.softmax(-1)[0, 0].item(), abs=1e-6)
    other = tiny_tokenizer.encode(A, w.nsp_random.sentence_b)
    assert w.nsp_random.tokens == other.tokens  # A exactly as typed, then the random B
    random_logits = forward(tiny_model, other.ids, other.segment_ids).nsp_logits
    assert w.nsp_random.loss == pytest.approx(F.cross_entropy(random_logits, torch.tensor([1])).item(), abs=1e-5)
    assert w.nsp_true.logits_by_hand == pytest.approx(w.nsp_true.logits, abs=1e-5)
    assert w.nsp_true.pooled == pytest.approx(torch.tanh(torch.tensor(w.nsp_true.pre_tanh)).numpy(), abs=1e-5)
    assert w.total == pytest.approx(w.mlm.loss_mean + w.nsp_true.loss)


@pytest.mark.parametrize("optimizer, lr", [("AdamW", 1e-3), ("SGD", 0.5)])
def test_one_optimizer_step_lowers_the_loss_and_leaves_the_model_alone(tiny_model, tiny_tokenizer, pair,
                                                                       optimizer, lr):
    w = walk(tiny_model, tiny_tokenizer, pair, seed=4)
    original = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    step = walkthrough.optimizer_step(tiny_model, tiny_tokenizer, w, lr=lr, optimizer=optimizer)
    assert step.before["total"] == pytest.approx(w.total, abs=1e-4)
    assert step.before["L_MLM"] == pytest.approx(w.mlm.loss_mean, abs=1e-4)
    assert step.after["total"] < step.before["total"]
    assert all(torch.equal(v, original[k]) for k, v in tiny_model.state_dict().items())
    assert not tiny_model.training and len(step.p_true_after) == w.mlm.count
    assert walk(tiny_model, tiny_tokenizer, pair, seed=4).mlm.loss_mean == w.mlm.loss_mean


def test_optimizer_step_rejects_bad_settings(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair)
    with pytest.raises(InputError, match="optimizer"):
        walkthrough.optimizer_step(tiny_model, tiny_tokenizer, w, optimizer="Lion")
    with pytest.raises(InputError, match="lr"):
        walkthrough.optimizer_step(tiny_model, tiny_tokenizer, w, lr=0.0)


def test_masking_frequencies_match_15_80_10_10(tiny_tokenizer):
    table = masking_stats.masking_frequencies(tiny_tokenizer, tiny_tokenizer.encode(LONG), draws=20_000, seed=0)
    assert table["quantity"].tolist() == list(masking_stats.FREQUENCY_ROWS)
    assert table["bert"].tolist() == [0.15, 0.8, 0.1, 0.1]
    assert (abs(table["empirical"] - table["expected"]) < 4 * table["se_rule"]).all()
    assert (abs(table["empirical"] - table["target"]) < 0.01).all()
    assert table["count"][1:].sum() == table["count"][0]  # every picked token got exactly one action
    # The SE estimated from the draws agrees with the rule's at 20,000 draws.
    assert table["se_draws"].to_numpy() == pytest.approx(table["se_rule"].to_numpy(), rel=0.1)
    inside = (table["low"] <= table["empirical"]) & (table["empirical"] <= table["high"])
    assert table["inside"].tolist() == list(inside)
    assert (table["high"] - table["expected"]).to_numpy() == pytest.approx(1.96 * table["se_rule"].to_numpy(), rel=1e-3)


def test_masking_frequencies_follow_other_rates_and_the_at_least_one_rule(tiny_tokenizer):
    short = tiny_tokenizer.encode("the cat")  # 2 eligible tokens: the rescue rule shows
    table = masking_stats.masking_frequencies(tiny_tokenizer, short.ids, draws=20_000, seed=1, rates=(0.1, 0.5, 0.3))
    assert table["expected"][0] == pytest.approx(0.1 + 0.9 ** 2 / 2)
    assert (abs(table["empirical"] - table["expected"]) < 4 * table["se_rule"]).all()
    assert table["target"].tolist() == pytest.approx([0.1, 0.5, 0.3, 0.2])


def test_the_rules_standard_error_is_the_spread_over_repeated_seeds(tiny_tokenizer):
    """200 repetitions of 300 draws: the SD of each empirical share is what se_rule says (within 15%).

    The old SE of the picked share, sqrt(p(1 − p) / (n·D)), treated the n picks of a draw as
    independent; on 3 eligible tokens it is about three times too wide and fails the same check.
    """
    encoding, draws = tiny_tokenizer.encode("the cat sat"), 300
    tables = [masking_stats.masking_frequencies(tiny_tokenizer, encoding, draws=draws, seed=s) for s in range(200)]
    empirical = np.array([t["empirical"].to_numpy() for t in tables])  # (200, 4)
    spread = empirical.std(axis=0, ddof=1)  # (4,) the SE measured by repetition
    for column in ("se_rule", "se_draws"):
        predicted = np.array([t[column].to_numpy() for t in tables]).mean(axis=0)
        assert predicted / spread == pytest.approx(np.ones(4), abs=0.15), column
    n, p = tables[0]["out_of"][0] // draws, tables[0]["expected"][0]
    old = math.sqrt(p * (1 - p) / (n * draws))
    assert not 0.85 < old / spread[0] < 1.15 and old / spread[0] > 2
    inside = np.array([t["inside"].to_numpy() for t in tables]).mean(axis=0)
    assert (inside > 0.88).all() and (inside < 0.99).all()  # a 95% interval misses about 1 time in 20


def test_picked_share_se_uses_the_variance_of_the_picks_per_draw(tiny_tokenizer):
    encoding = tiny_tokenizer.encode("the cat sat on the mat .", "it was tired .")  # 11 eligible tokens
    table = masking_stats.masking_frequencies(tiny_tokenizer, encoding, draws=500, seed=0)
    n = 11
    assert table["out_of"][0] == n * 500
    assert table["expected"][0] == pytest.approx((11 * 0.15 + 0.85 ** 11) / 11)
    variance = 11 * 0.15 * 0.85 + (11 * 0.15) ** 2 + 0.85 ** 11 - (11 * 0.15 + 0.85 ** 11) ** 2
    assert table["se_rule"][0] == pytest.approx(math.sqrt(variance / 500) / n)
    picked = table["count"][0]
    assert table["se_rule"][1] == pytest.approx(math.sqrt(0.8 * 0.2 / picked))


@pytest.mark.parametrize("rates, field", [
    (dict(mask_rate=0.0), "mask_rate"), (dict(mask_rate=1.5), "mask_rate"),
    (dict(mask_prob=1.2), "mask_prob"), (dict(random_prob=-0.1), "random_prob"),
    (dict(mask_prob=0.8, random_prob=0.3), "mask_prob \\+ random_prob")])
def test_invalid_rates_raise_naming_the_field(tiny_model, tiny_tokenizer, pair, rates, field):
    with pytest.raises(InputError, match=field):
        walk(tiny_model, tiny_tokenizer, pair, **rates)
    with pytest.raises(InputError, match=field):
        masking_stats.masking_frequencies(tiny_tokenizer, pair, draws=10, rates=(
            rates.get("mask_rate", 0.15), rates.get("mask_prob", 0.8), rates.get("random_prob", 0.1)))


def test_the_split_must_add_up_to_one():
    walkthrough.check_split(0.8, 0.1, 0.1)
    with pytest.raises(InputError, match="keep_prob"):
        walkthrough.check_split(0.8, 0.1, 0.2)
    with pytest.raises(InputError, match="keep_prob must be between 0 and 1"):
        walkthrough.check_split(0.8, 0.3, -0.1)


def test_a_model_without_nsp_head_gives_none_with_a_reason(tiny_config, tiny_tokenizer, pair):
    model = BertForPreTraining(tiny_config, nsp_head=False, pooler=False).eval()
    w = walk(model, tiny_tokenizer, pair)
    assert w.nsp_true is None and w.nsp_random is None and "no NSP head" in w.nsp_reason
    assert w.total == w.mlm.loss_mean
    assert "Next sentence prediction (NSP)" not in walkthrough.step_titles(w) and len(walkthrough.step_titles(w)) == 7
    assert walkthrough.optimizer_step(model, tiny_tokenizer, w, lr=1e-3).before.keys() == {"L_MLM", "total"}


def test_a_model_without_mlm_head_is_refused(tiny_config, tiny_tokenizer, pair):
    model = BertForPreTraining(tiny_config, mlm_head=False).eval()
    with pytest.raises(InputError, match="no MLM head"):
        walk(model, tiny_tokenizer, pair)


def test_one_sentence_has_no_true_pair_but_still_a_random_one(tiny_model, tiny_tokenizer):
    w = walk(tiny_model, tiny_tokenizer, tiny_tokenizer.encode("a"), seed=5)
    assert w.positions == [1]  # one eligible token: always picked, so there is something to predict
    assert w.nsp_true is None and w.nsp_reason == walkthrough.NO_B_REASON
    assert w.nsp_random.label == losses.NOT_NEXT and w.total == w.mlm.loss_mean
    assert len(walkthrough.step_titles(w)) == 8


def test_only_special_tokens_are_refused_and_a_typed_cls_in_a_is_kept(tiny_model, tiny_tokenizer):
    with pytest.raises(InputError, match="no token that can be masked"):
        walk(tiny_model, tiny_tokenizer, tiny_tokenizer.encode("[CLS] [SEP]"))
    w = walk(tiny_model, tiny_tokenizer, tiny_tokenizer.encode("[CLS]", "the cat sat ."))
    assert w.nsp_random.tokens[:3] == ["[CLS]", "[CLS]", "[SEP]"] and w.positions


def test_the_walkthrough_names_what_cannot_be_picked_and_expects_the_rules_mean(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair)
    assert w.excluded == {"[CLS]": [0], "[SEP]": [8, 13]}
    assert sum(w.eligible) == 11
    assert w.expected_picks == pytest.approx(11 * 0.15 + 0.85 ** 11)  # 1.817, not 11 × 0.15 = 1.65
    typed = walk(tiny_model, tiny_tokenizer, tiny_tokenizer.encode("the [MASK] zzz sat ."))  # zzz: [UNK]
    assert typed.excluded == {"[CLS]": [0], "[MASK]": [2], "[UNK]": [3], "[SEP]": [6]}
    assert typed.expected_picks == pytest.approx(masking.expected_picks(3, 0.15))
    assert list(w.special_tokens) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_the_walkthrough_records_where_random_tokens_come_from(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair, mask_rate=0.9, mask_prob=0.0, random_prob=1.0)
    assert w.random_tokens == "vocabulary" and all(p.action == "random" for p in w.picked)
    pieces = walk(tiny_model, tiny_tokenizer, pair, mask_rate=0.9, mask_prob=0.0, random_prob=1.0,
                  random_tokens="wordpieces")
    assert pieces.random_tokens == "wordpieces" and pieces.positions == w.positions
    assert not {p.fed for p in pieces.picked} & set(pieces.special_tokens)
    with pytest.raises(InputError, match="random_tokens"):
        walk(tiny_model, tiny_tokenizer, pair, random_tokens="special")


def test_figures_show_the_numbers(tiny_model, tiny_tokenizer, pair):
    w = walk(tiny_model, tiny_tokenizer, pair, seed=0, mask_rate=0.5)
    panels = walkthrough.topk_panels(w)
    fig = topk_grid(panels)
    assert len(fig.data) == len(panels)
    for bar, m in zip(fig.data, w.mlm.predictions):
        red = [c == "#d62728" for c in bar.marker.color]
        assert sum(red) == 1  # exactly the true token is red, added with its rank when outside the top 5
        assert bar.x[red.index(True)] == pytest.approx(m.p_true)
    nll = neg_log_p_bars([str(p) for p in w.positions], [m.neg_log_p for m in w.mlm.predictions], w.mlm.loss_mean)
    assert nll.layout.shapes[0].y0 == pytest.approx(w.mlm.loss_mean)
    table = masking_stats.masking_frequencies(tiny_tokenizer, pair, draws=100)
    freq = masking_frequency_chart(table)
    assert [t.name for t in freq.data] == ["empirical", "target (your rates)", "BERT: 15 / 80 / 10 / 10"]
    assert list(freq.data[2].y) == [0.15, 0.8, 0.1, 0.1]
    # Error bars: the rule's 95% interval, 1.96 standard errors.
    assert list(freq.data[0].error_y.array) == pytest.approx(list(1.96 * table["se_rule"]), rel=1e-3)


def test_html_in_tokens_stays_text():
    fig = topk_grid([{"title": "position 1: true “<b>”", "tokens": ["<b>", "x"], "probs": [0.6, 0.1],
                      "true_token": "<b>", "p_true": 0.6, "rank": 1}])
    assert list(fig.data[0].y) == ["&lt;b&gt;", "x"]
