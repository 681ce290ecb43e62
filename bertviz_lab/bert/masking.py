"""BERT's masked-language-model corruption rule, seeded and vectorized.

Each real (non-padding) token that is not one of `special_ids` ([PAD], [UNK], [CLS],
[SEP] and [MASK] for this lab's tokenizer) is picked with probability `mask_rate`
(0.15 in BERT), independently; a sequence where nothing was picked gets one token
anyway, so every example has something to predict (`expected_picks` gives the exact
mean). Google's original script picks a fixed count instead, max(1, round(0.15 ·
length)); Hugging Face's collator draws per token as here, with no at-least-one
rule. Of the picked tokens, 80% become
[MASK], 10% a random token and 10% stay unchanged. The random token comes from the
whole vocabulary, special tokens included, as in BERT (`random_tokens="vocabulary"`),
or from the word pieces only (`"wordpieces"`, what this lab did before). The model is
asked to recover the original token at every picked position, so `labels` holds
the original id there and -100 (PyTorch's "ignore" index) everywhere else.

Every random draw comes from the caller's `torch.Generator` and the same number
of draws is made whatever the input contains, so one seed gives one result. The
input tensor is never modified.

With `word_ids`, whole-word masking: a word's WordPiece pieces are picked
together and share one action, so the model cannot peek at `##ing` to guess
`play`. A word is a maximal run of positions with the same non-negative word id,
so the per-segment numbering `tokenizer.word_ids()` gives for sentence pairs
works as is (the [SEP] between segments ends a run).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import torch

from bertviz_lab.bert.config import RANDOM_TOKENS
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.bert.tokenizer import MASK
from bertviz_lab.errors import InputError

ACTION_NONE, ACTION_MASK, ACTION_RANDOM, ACTION_KEEP = 0, 1, 2, 3  # per-position action codes
ACTION_NAMES = {ACTION_NONE: "", ACTION_MASK: MASK, ACTION_RANDOM: "random", ACTION_KEEP: "kept"}


@dataclass(frozen=True)
class MaskingResult:
    input_ids: torch.Tensor  # (B, T) or (T,) corrupted ids fed to the model
    labels: torch.Tensor  # same shape, long: original id at selected positions, -100 elsewhere
    actions: torch.Tensor  # same shape, int8 action code per position

    @property
    def selected(self) -> torch.Tensor:
        """(B, T) bool: the positions the model is asked to predict."""
        return self.labels != IGNORE_INDEX


def mask_tokens(input_ids: torch.Tensor, *, special_ids: Collection[int], vocab_size: int,
                mask_id: int, generator: torch.Generator, mask_rate: float = 0.15,
                mask_prob: float = 0.8, random_prob: float = 0.1,
                attention_mask: torch.Tensor | None = None, word_ids: torch.Tensor | None = None,
                random_tokens: str = "vocabulary") -> MaskingResult:
    """Corrupt `input_ids` the way BERT pre-training does; see the module docstring."""
    specials = sorted({int(i) for i in special_ids})  # ints, whether given as list, set or tensor
    _check_options(input_ids, specials, vocab_size=vocab_size, mask_id=mask_id, generator=generator,
                   rates=(mask_rate, mask_prob, random_prob))
    if not isinstance(random_tokens, str) or random_tokens not in RANDOM_TOKENS:
        raise InputError(f"random_tokens must be one of {', '.join(map(repr, RANDOM_TOKENS))}, got {random_tokens!r}")
    squeeze = input_ids.dim() == 1
    ids = input_ids.unsqueeze(0) if squeeze else input_ids  # (B, T), a view: never written to
    attention = _as_batch(attention_mask, ids, "attention_mask", squeeze)
    words = _as_batch(word_ids, ids, "word_ids", squeeze)

    special = torch.tensor(specials, dtype=torch.long, device=ids.device)
    eligible = ~torch.isin(ids, special)  # (B, T)
    if attention is not None:
        eligible &= attention != 0
    unit = _unit_index(words, ids)  # (B, T) word (or position) index, -1 outside any word
    eligible &= unit >= 0
    unit = unit.clamp(min=0)  # safe for gather; ineligible positions are masked out anyway

    # All draws are made up front, one value per slot, so the stream consumed from
    # the generator does not depend on the data (nor on random_tokens: randint draws
    # as many values whatever its upper bound).
    pick_draw, rescue_draw, action_draw = (_uniform(ids, generator) for _ in range(3))  # (B, T) by unit
    allowed = _allowed_ids(vocab_size, special, random_tokens)  # (A,) ids a replacement may take
    random_index = torch.randint(len(allowed), ids.shape, generator=generator,
                                 device=generator.device).to(ids.device)  # (B, T)

    selected = eligible & (pick_draw < mask_rate).gather(1, unit)  # (B, T)
    selected |= _rescue(selected, eligible, unit, rescue_draw)

    u = action_draw.gather(1, unit)  # (B, T) one action draw per word, shared by its pieces
    actions = torch.full(ids.shape, ACTION_KEEP, dtype=torch.int8, device=ids.device)
    actions[u < mask_prob + random_prob] = ACTION_RANDOM
    actions[u < mask_prob] = ACTION_MASK
    actions[~selected] = ACTION_NONE

    corrupted = torch.where(actions == ACTION_MASK, torch.full_like(ids, mask_id), ids)
    random_tokens = allowed[random_index].to(ids.dtype)  # (B, T) each piece its own token
    corrupted = torch.where(actions == ACTION_RANDOM, random_tokens, corrupted)
    labels = torch.where(selected, ids.long(), torch.full_like(ids, IGNORE_INDEX, dtype=torch.long))

    if squeeze:
        return MaskingResult(corrupted[0], labels[0], actions[0])
    return MaskingResult(corrupted, labels, actions)


def expected_picks(units: int | Sequence[int], rate: float) -> float:
    """The mean number of tokens `mask_tokens` picks in one sequence, from its rule.

    units: how many tokens can be picked (each its own unit), or the size of each
    unit (whole-word masking: a word's pieces). Each of the m units is picked with
    probability `rate`; when none is, one unit is picked uniformly. For N tokens in
    m units: E[K] = rate·N + (1 − rate)^m · N/m, which is n·r + (1 − r)^n for n
    single tokens (13 tokens at 0.15: 2.0709, not 13 × 0.15 = 1.95).
    """
    sizes, rate = _unit_sizes(units, rate)
    if not sizes:
        return 0.0
    m, total = len(sizes), math.fsum(sizes)
    return rate * total + (1 - rate) ** m * total / m


def picks_variance(units: int | Sequence[int], rate: float) -> float:
    """The variance of the number of tokens picked in one sequence (arguments as `expected_picks`).

    K = S + [S = 0]·s_J with S = Σ s_i·Bernoulli(rate) and J a uniform unit, so
    E[K²] = r(1 − r)·Σs² + (r·N)² + (1 − r)^m·Σs²/m; for n single tokens
    E[K²] = n·r(1 − r) + (n·r)² + (1 − r)^n. Picks within a sequence are dependent
    (the at-least-one rule), so this is not n·p(1 − p).
    """
    sizes, rate = _unit_sizes(units, rate)
    if not sizes:
        return 0.0
    m, total, squares = len(sizes), math.fsum(sizes), math.fsum(s * s for s in sizes)
    second = rate * (1 - rate) * squares + (rate * total) ** 2 + (1 - rate) ** m * squares / m
    return max(0.0, second - expected_picks(sizes, rate) ** 2)


def _unit_sizes(units, rate) -> tuple[list[int], float]:
    """Check `expected_picks`'s arguments; one-token units for an int."""
    if isinstance(rate, bool) or not isinstance(rate, Real) or not 0.0 < rate < 1.0:
        raise InputError(f"mask_rate must be between 0 and 1 (exclusive), got {rate!r}")
    if isinstance(units, Integral) and not isinstance(units, bool):
        sizes = [1] * int(units) if units >= 0 else None
    else:
        sizes = list(units) if isinstance(units, Sequence) else None
    if sizes is None or any(isinstance(s, bool) or not isinstance(s, Integral) or s < 1 for s in sizes):
        raise InputError(f"units must be a token count >= 0 or a list of unit sizes >= 1, got {units!r}")
    return [int(s) for s in sizes], float(rate)


def _uniform(ids: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(B, T) floats in [0, 1), drawn on the generator's device so a CPU seed works for GPU ids."""
    return torch.rand(ids.shape, generator=generator, device=generator.device).to(ids.device)


def _rescue(selected: torch.Tensor, eligible: torch.Tensor, unit: torch.Tensor,
            scores: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: one whole unit for each sequence that could be masked but was not.

    A sequence with nothing to predict contributes no gradient, which on short
    teaching sentences would happen often; BERT's data pipeline avoids it too.
    """
    unit_ok = torch.zeros_like(unit).scatter_reduce(1, unit, eligible.long(), reduce="amax")  # (B, T)
    scores = scores.masked_fill(unit_ok == 0, -1.0)  # argmax of uniform scores = a uniform pick
    chosen = scores.argmax(dim=1, keepdim=True)  # (B, 1)
    needed = (unit_ok.any(dim=1) & ~selected.any(dim=1)).unsqueeze(1)  # (B, 1)
    return needed & eligible & (unit == chosen)


def _unit_index(words: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) long: which masking unit each position belongs to, -1 for none.

    Without word ids every position is its own unit. With them, a unit starts
    wherever a non-negative word id differs from the previous position's.
    """
    batch, length = ids.shape
    if words is None:
        return torch.arange(length, device=ids.device).expand(batch, length)
    words = words.long()
    previous = torch.cat([torch.full_like(words[:, :1], -1), words[:, :-1]], dim=1)  # (B, T)
    starts = (words >= 0) & (words != previous)
    unit = starts.long().cumsum(dim=1) - 1  # (B, T) 0-based run number, at most T - 1
    return torch.where(words >= 0, unit, torch.full_like(unit, -1))


def never_drawn(vocab_size: int, special_ids: Collection[int], random_tokens: str) -> list[int]:
    """The ids `mask_tokens` never puts at a position it replaces with a random token: none under "vocabulary",
    every special id under "wordpieces" (read from the rule itself, `_allowed_ids`)."""
    special = torch.tensor(sorted({int(i) for i in special_ids}), dtype=torch.long)
    allowed = _allowed_ids(vocab_size, special, random_tokens)
    return sorted(set(range(vocab_size)) - set(allowed.tolist()))


def _allowed_ids(vocab_size: int, special: torch.Tensor, random_tokens: str) -> torch.Tensor:
    """(A,) long: the ids a random replacement may take: all of them, or all but the special ones."""
    every = torch.arange(vocab_size, device=special.device)
    if random_tokens == "vocabulary":
        return every
    allowed = every[~torch.isin(every, special)]
    if len(allowed) == 0:
        raise InputError("vocab_size leaves no non-special token to use as a random replacement")
    return allowed


def _as_batch(tensor: torch.Tensor | None, ids: torch.Tensor, name: str,
              squeeze: bool) -> torch.Tensor | None:
    """Bring an optional per-position tensor to (B, T), checking it matches the ids."""
    if tensor is None:
        return None
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"{name} must be a torch tensor")
    tensor = tensor.unsqueeze(0) if squeeze and tensor.dim() == 1 else tensor
    if tensor.shape != ids.shape:
        raise InputError(f"{name} shape {tuple(tensor.shape)} does not match input_ids {tuple(ids.shape)}")
    return tensor.to(ids.device)


def _check_options(input_ids, specials, *, vocab_size, mask_id, generator, rates) -> None:
    """Raise InputError naming the first argument that cannot work; rates = (mask_rate, mask_prob, random_prob)."""
    mask_rate, mask_prob, random_prob = rates
    if not isinstance(input_ids, torch.Tensor):
        raise InputError("input_ids must be a torch tensor")
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise InputError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    if input_ids.dim() not in (1, 2) or input_ids.shape[-1] == 0:
        raise InputError(f"input_ids must have shape (T,) or (B, T) with T > 0, got {tuple(input_ids.shape)}")
    if not isinstance(generator, torch.Generator):
        raise InputError("generator must be a torch.Generator (seed it for a repeatable result)")
    for name, value in (("mask_rate", mask_rate), ("mask_prob", mask_prob), ("random_prob", random_prob)):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise InputError(f"{name} must be a number, got {value!r}")
    if not 0.0 < mask_rate < 1.0:
        raise InputError(f"mask_rate must be between 0 and 1 (exclusive), got {mask_rate!r}")
    for name, value in (("mask_prob", mask_prob), ("random_prob", random_prob)):
        if not 0.0 <= value <= 1.0:
            raise InputError(f"{name} must be between 0 and 1, got {value!r}")
    if mask_prob + random_prob > 1.0 + 1e-12:
        raise InputError(f"mask_prob + random_prob must be at most 1, got {mask_prob} + {random_prob}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, Integral) \
            or vocab_size <= len(specials):
        raise InputError(f"vocab_size must be an integer larger than the number of special ids, "
                         f"got {vocab_size!r}")
    if isinstance(mask_id, bool) or not isinstance(mask_id, Integral) or not 0 <= mask_id < vocab_size:
        raise InputError(f"mask_id must be a token id below vocab_size, got {mask_id!r}")
