"""The built-in minimal pairs: each clean and corrupted sentence one length in the shipped model's tokens, the [MASK]
at one place, answer and foil single tokens; and each one patchable on the shipped model."""

from __future__ import annotations

import pytest

from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.patching.runs import prepare


def test_every_pair_is_one_length_with_its_mask_in_place(shipped):
    tok = shipped.tokenizer
    for pair in minimal_pairs.PAIRS:
        clean, corrupt = tok.encode(pair.clean), tok.encode(pair.corrupt)
        assert len(clean) == len(corrupt), pair.key
        assert clean.ids.index(tok.mask_id) == corrupt.ids.index(tok.mask_id), pair.key
        assert clean.ids != corrupt.ids
        assert tok.unk_id not in clean.ids + corrupt.ids, pair.key
        for word in (pair.answer, pair.foil):
            assert tok.token_to_id(word) is not None, (pair.key, word)


def test_agreement_pairs_cover_zero_to_three_attractors_with_the_subject_flipped():
    pairs = [minimal_pairs.by_key(f"agreement-{n}") for n in range(4)]
    for n, pair in enumerate(pairs):
        clean, corrupt = pair.clean.split(), pair.corrupt.split()
        assert [i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b] == [1]  # the subject noun, only
        assert clean.count("the") == n + 1  # every noun in between an attractor
        assert {pair.answer, pair.foil} in ({"was", "were"}, {"is", "are"})


def test_every_pair_patches_on_the_shipped_model(shipped):
    for pair in minimal_pairs.PAIRS:
        patching = prepare(shipped.model, shipped.tokenizer,
                           PatchAsk(pair.clean, pair.corrupt, answer=pair.answer, foil=pair.foil))
        assert (patching.answer, patching.foil) == (pair.answer, pair.foil)
        assert patching.f_clean != patching.f_corrupt


def test_an_unknown_key_is_one_sentence():
    with pytest.raises(InputError, match="no built-in pair called 'nope'"):
        minimal_pairs.by_key("nope")
