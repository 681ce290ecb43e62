"""BERT's 15% / 80-10-10 masking rule: rates, invariants, seeding and validation."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.masking import (
    ACTION_KEEP,
    ACTION_MASK,
    ACTION_NAMES,
    ACTION_NONE,
    ACTION_RANDOM,
    MaskingResult,
    mask_tokens,
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
    assert not torch.isin(random_tokens, torch.tensor(SPECIALS)).any()
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
    result = _mask(ids, attention_mask=attention, word_ids=word_ids)
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
