"""BERT's 15% / 80-10-10 masking rule: rates, invariants, seeding, where random tokens come from,
the expected number of picks, and validation."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.masking import (
    ACTION_KEEP,
    ACTION_MASK,
    ACTION_NAMES,
    ACTION_NONE,
    ACTION_RANDOM,
    RANDOM_TOKENS,
    MaskingResult,
    expected_picks,
    mask_tokens,
    picks_variance,
)
from bertviz_lab.errors import InputError

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = (PAD, UNK, CLS, SEP, MASK)
VOCAB = 1000


def _batch(rows: int = 480, length: int = 256, seed: int = 0):
    """(B, T) random ordinary ids with [CLS]/[SEP] framing, stray specials and right padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIALS), VOCAB, (rows, length), generator=g)  # (B, T) non-special
    ids[:, 0] = CLS
    stray = torch.rand(rows, length, generator=g) < 0.02
    ids[stray] = SEP  # specials in the middle must never be picked either
    lengths = torch.randint(length * 3 // 4, length + 1, (rows,), generator=g)  # (B,)
    attention = (torch.arange(length) < lengths.unsqueeze(1)).long()  # (B, T)
    ids[attention == 0] = PAD
    ids[torch.arange(rows), lengths - 1] = SEP
    return ids, attention


def _mask(ids, seed=0, **options):
    options.setdefault("special_ids", SPECIALS)
    return mask_tokens(ids, vocab_size=VOCAB, mask_id=MASK,
                       generator=torch.Generator().manual_seed(seed), **options)


@pytest.fixture(scope="module")
def big():
    ids, attention = _batch()
    original = ids.clone()
    result = _mask(ids, attention_mask=attention)
    return ids, original, attention, result


def test_selection_rate_is_fifteen_percent(big):
    ids, _, attention, result = big
    eligible = (attention == 1) & ~torch.isin(ids, torch.tensor(SPECIALS))
    assert eligible.sum() >= 100_000
    rate = (result.selected & eligible).sum().item() / eligible.sum().item()
    assert rate == pytest.approx(0.15, abs=0.005)


def test_action_split_is_80_10_10(big):
    _, _, _, result = big
    chosen = result.actions[result.selected]
    total = chosen.numel()
    assert (chosen == ACTION_MASK).sum().item() / total == pytest.approx(0.80, abs=0.01)
    assert (chosen == ACTION_RANDOM).sum().item() / total == pytest.approx(0.10, abs=0.01)
    assert (chosen == ACTION_KEEP).sum().item() / total == pytest.approx(0.10, abs=0.01)
    assert (result.actions[~result.selected] == ACTION_NONE).all()
    assert result.actions.dtype == torch.int8
    assert ACTION_NAMES[ACTION_MASK] == "[MASK]" and ACTION_NAMES[ACTION_NONE] == ""


def test_specials_and_padding_never_selected(big):
    ids, _, attention, result = big
    assert not result.selected[torch.isin(ids, torch.tensor(SPECIALS))].any()
    assert not result.selected[attention == 0].any()


def test_input_is_not_mutated(big):
    ids, original, _, _ = big
    assert torch.equal(ids, original)


def test_corrupted_ids_follow_actions(big):
    ids, _, _, result = big
    actions, out = result.actions, result.input_ids
    assert (out[actions == ACTION_MASK] == MASK).all()
    assert torch.equal(out[actions == ACTION_KEEP], ids[actions == ACTION_KEEP])
    assert torch.equal(out[actions == ACTION_NONE], ids[actions == ACTION_NONE])
    random_tokens = out[actions == ACTION_RANDOM]
    assert ((random_tokens >= 0) & (random_tokens < VOCAB)).all()
    # Replacements are drawn from the vocabulary, not copied: most differ from the original.
    assert (random_tokens != ids[actions == ACTION_RANDOM]).float().mean() > 0.95


def test_labels_hold_originals_only_at_selected(big):
    ids, _, _, result = big
    assert result.labels.dtype == torch.long
    assert torch.equal(result.labels[result.selected], ids[result.selected])
    assert (result.labels[~result.selected] == -100).all()


def test_every_sequence_gets_at_least_one():
    # Short sequences with a low rate: without the fix-up most would have none selected.
    ids = torch.randint(len(SPECIALS), VOCAB, (2000, 4), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, -1] = CLS, SEP
    result = _mask(ids, mask_rate=0.01)
    assert (result.selected.sum(dim=1) >= 1).all()
    # The rescued position is spread uniformly over the two eligible slots.
    share = result.selected[:, 1].float().mean().item()
    assert share == pytest.approx(0.5, abs=0.05)


def test_sequence_with_nothing_eligible_is_left_alone():
    ids = torch.tensor([[CLS, SEP, PAD, PAD], [CLS, 10, 11, SEP]])
    result = _mask(ids)
    assert not result.selected[0].any()
    assert result.selected[1].sum() >= 1


def test_same_seed_same_result_different_seed_differs():
    ids, attention = _batch(rows=32, length=64)
    a = _mask(ids, seed=7, attention_mask=attention)
    b = _mask(ids, seed=7, attention_mask=attention)
    c = _mask(ids, seed=8, attention_mask=attention)
    for field in ("input_ids", "labels", "actions"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.labels, c.labels)


def test_one_dimensional_input():
    ids = torch.tensor([CLS, 10, 11, 12, 13, 14, SEP])
    result = _mask(ids)
    assert isinstance(result, MaskingResult)
    assert result.input_ids.shape == result.labels.shape == result.actions.shape == (7,)
    assert result.selected.sum() >= 1
    assert not result.selected[[0, 6]].any()
    one_d = _mask(ids, attention_mask=torch.ones(7, dtype=torch.long))
    assert torch.equal(one_d.labels, result.labels)


def test_int32_input_keeps_dtype():
    ids = torch.tensor([[CLS, 10, 11, 12, SEP]], dtype=torch.int32)
    result = _mask(ids)
    assert result.input_ids.dtype == torch.int32
    assert torch.equal(ids, torch.tensor([[CLS, 10, 11, 12, SEP]], dtype=torch.int32))


def _word_batch(rows: int = 300, words: int = 40, seed: int = 3):
    """(B, T) ids and word ids: [CLS] w0 w0 w1 w1 w1 ... [SEP] [SEP] w0' ... [SEP] [PAD]..."""
    g = torch.Generator().manual_seed(seed)
    pieces = torch.randint(1, 4, (rows, words), generator=g)  # pieces per word
    length = int(pieces.sum(dim=1).max()) + 4
    ids = torch.full((rows, length), PAD)
    word_ids = torch.full((rows, length), -1)
    for r in range(rows):  # building the fixture only; mask_tokens itself is vectorized
        sequence = [(CLS, -1)]
        for w, n in enumerate(pieces[r].tolist()):
            if w == words // 2:
                sequence.append((SEP, -1))  # a sentence pair: word numbering restarts after [SEP]
            sequence += [(100 + w, w % (words // 2))] * n
        sequence.append((SEP, -1))
        ids[r, :len(sequence)] = torch.tensor([t for t, _ in sequence])
        word_ids[r, :len(sequence)] = torch.tensor([w for _, w in sequence])
    return ids, word_ids, (ids != PAD).long()


def test_whole_word_pieces_share_selection_and_action():
    ids, word_ids, attention = _word_batch()
    result = _mask(ids, attention_mask=attention, word_ids=word_ids, random_tokens="wordpieces")
    # Pieces of one word have the same token id here, and distinct words distinct ids per row.
    same_word = (ids[:, 1:] == ids[:, :-1]) & (word_ids[:, 1:] >= 0)  # (B, T-1)
    assert same_word.sum() > 1000
    assert torch.equal(result.actions[:, 1:][same_word], result.actions[:, :-1][same_word])
    assert not result.selected[word_ids < 0].any()
    assert (result.selected.sum(dim=1) >= 1).all()
    # Selection is per word: about 15% of words, not of pieces.
    starts = (word_ids >= 0) & ~torch.cat([torch.zeros(len(ids), 1, dtype=torch.bool), same_word], 1)
    assert result.selected[starts].float().mean().item() == pytest.approx(0.15, abs=0.02)
    random_pieces = result.input_ids[result.actions == ACTION_RANDOM]
    assert not torch.isin(random_pieces, torch.tensor(SPECIALS)).any()


def test_whole_word_numbering_restart_is_two_words():
    # Word 0 of sentence A and word 0 of sentence B are different words.
    ids = torch.tensor([[CLS, 10, 11, SEP, 20, 21, SEP]] * 500)
    word_ids = torch.tensor([[-1, 0, 0, -1, 0, 0, -1]] * 500)
    result = _mask(ids, word_ids=word_ids, mask_rate=0.5)
    a, b = result.selected[:, 1], result.selected[:, 4]
    assert torch.equal(a, result.selected[:, 2]) and torch.equal(b, result.selected[:, 5])
    assert (a & ~b).any() and (b & ~a).any()


# --- Where the random tokens come from ------------------------------------------------------------
def _tiny_vocab_draw(random_tokens: str, seed: int = 5):
    """4,000 rows of 10 ordinary ids from a 12-token vocabulary (5 of them special), masked at rate 0.5."""
    ids = torch.randint(len(SPECIALS), 12, (4000, 10), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    result = mask_tokens(ids, special_ids=SPECIALS, vocab_size=12, mask_id=MASK, generator=generator,
                         mask_rate=0.5, random_tokens=random_tokens)
    return result, generator


def test_vocabulary_draws_random_tokens_from_every_id_special_ones_included():
    result, _ = _tiny_vocab_draw("vocabulary")
    drawn = result.input_ids[result.actions == ACTION_RANDOM]
    assert len(drawn) > 1500
    assert set(drawn.tolist()) == set(range(12))  # as BERT: [PAD], [CLS], [MASK] ... come up too
    special_share = torch.isin(drawn, torch.tensor(SPECIALS)).float().mean().item()
    assert special_share == pytest.approx(5 / 12, abs=0.04)
    assert "as in BERT" in RANDOM_TOKENS["vocabulary"]


def test_wordpieces_never_draw_a_special_token_and_only_the_replacements_differ():
    words, g_words = _tiny_vocab_draw("wordpieces")
    vocab, g_vocab = _tiny_vocab_draw("vocabulary")
    drawn = words.input_ids[words.actions == ACTION_RANDOM]
    assert set(drawn.tolist()) == set(range(len(SPECIALS), 12))
    # The same seed picks the same positions with the same actions under either option...
    assert torch.equal(words.labels, vocab.labels) and torch.equal(words.actions, vocab.actions)
    assert torch.equal(words.input_ids[words.actions != ACTION_RANDOM], vocab.input_ids[vocab.actions != ACTION_RANDOM])
    # ...and consumes the same stream of the generator.
    assert torch.equal(g_words.get_state(), g_vocab.get_state())


def test_the_draws_taken_from_the_generator_do_not_depend_on_the_data():
    ids, attention = _batch(rows=16, length=32)
    states = []
    for data, mask in ((ids, attention), (torch.full_like(ids, SEP), None), (ids.flip(1), attention.flip(1))):
        generator = torch.Generator().manual_seed(3)
        mask_tokens(data, special_ids=SPECIALS, vocab_size=VOCAB, mask_id=MASK, generator=generator,
                    attention_mask=mask)
        states.append(generator.get_state())
    assert all(torch.equal(states[0], s) for s in states[1:])


@pytest.mark.parametrize("value", ["everything", "Vocabulary", None, ["vocabulary"]])
def test_bad_random_tokens(value):
    with pytest.raises(InputError, match="random_tokens must be one of 'vocabulary', 'wordpieces'"):
        _mask(torch.tensor([[CLS, 10, SEP]]), random_tokens=value)


# --- The expected number of picks ---------------------------------------------------------------
def test_expected_picks_is_the_closed_form_not_n_times_the_rate():
    assert expected_picks(13, 0.15) == pytest.approx(13 * 0.15 + 0.85 ** 13) == pytest.approx(2.0709055, abs=1e-7)
    assert expected_picks(13, 0.15) != pytest.approx(1.95, abs=0.1)  # the at-least-one rule adds 0.12
    assert expected_picks(1, 0.15) == 1.0 and expected_picks(0, 0.15) == 0.0
    mean = 13 * 0.15
    assert picks_variance(13, 0.15) == pytest.approx(mean * 0.85 + mean ** 2 + 0.85 ** 13 - expected_picks(13, 0.15) ** 2)
    assert picks_variance(1, 0.15) == pytest.approx(0.0, abs=1e-12)  # one token: always exactly one pick
    # Whole words: sizes 2, 1, 3 -> 0.2·6 + 0.8³·6/3
    assert expected_picks([2, 1, 3], 0.2) == pytest.approx(0.2 * 6 + 0.8 ** 3 * 2)
    assert expected_picks([1] * 13, 0.15) == expected_picks(13, 0.15)


@pytest.mark.parametrize("units, word_ids", [
    (13, None),
    ([2, 1, 3, 1], [-1, 0, 0, 1, 2, 2, 2, 3, -1]),
])
def test_expected_picks_and_variance_match_many_draws_of_the_rule(units, word_ids):
    draws = 40_000
    length = 15 if word_ids is None else len(word_ids)
    ids = torch.arange(100, 100 + length).expand(draws, length).clone()
    ids[:, 0], ids[:, -1] = CLS, SEP
    words = None if word_ids is None else torch.tensor(word_ids).expand(draws, -1)
    picks = _mask(ids, seed=11, word_ids=words).selected.sum(dim=1).double()  # (D,)
    mean, variance = expected_picks(units, 0.15), picks_variance(units, 0.15)
    assert abs(picks.mean().item() - mean) < 4 * (variance / draws) ** 0.5
    assert picks.var().item() == pytest.approx(variance, rel=0.05)


@pytest.mark.parametrize("units, rate, field", [
    (-1, 0.15, "units"), ([1, 0], 0.15, "units"), ("13", 0.15, "units"), (True, 0.15, "units"),
    (13, 0.0, "mask_rate"), (13, 1.0, "mask_rate"), (13, "0.15", "mask_rate"),
])
def test_expected_picks_rejects_what_cannot_be_counted(units, rate, field):
    with pytest.raises(InputError, match=field):
        expected_picks(units, rate)


@pytest.mark.parametrize("rate", [0, 1, -0.1, 1.5])
def test_bad_mask_rate(rate):
    with pytest.raises(InputError, match="mask_rate"):
        _mask(torch.tensor([[CLS, 10, SEP]]), mask_rate=rate)


@pytest.mark.parametrize("options, field", [
    ({"mask_prob": 0.8, "random_prob": 0.3}, "mask_prob \\+ random_prob"),
    ({"mask_prob": -0.1}, "mask_prob"),
    ({"random_prob": 1.2}, "random_prob"),
    ({"special_ids": range(VOCAB)}, "vocab_size"),
    ({"attention_mask": torch.ones(1, 5)}, "attention_mask"),
    ({"word_ids": torch.zeros(2, 3)}, "word_ids"),
])
def test_bad_options(options, field):
    with pytest.raises(InputError, match=field):
        _mask(torch.tensor([[CLS, 10, SEP]]), **options)


def test_bad_input_and_generator():
    with pytest.raises(InputError, match="input_ids"):
        _mask(torch.tensor([[2.0, 10.0, 3.0]]))
    with pytest.raises(InputError, match="mask_id"):
        mask_tokens(torch.tensor([5]), special_ids=SPECIALS, vocab_size=VOCAB, mask_id=VOCAB,
                    generator=torch.Generator())
    with pytest.raises(InputError, match="generator"):
        mask_tokens(torch.tensor([5]), special_ids=SPECIALS, vocab_size=VOCAB, mask_id=MASK,
                    generator=0)
