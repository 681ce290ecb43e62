"""From what a learner typed (`PatchAsk`) to the two recorded runs every patching grid reads (`Patching`).

`prepare` checks the pair (one length in tokens, a [MASK] at the same place, not the same sentence twice, answer
and foil single tokens that differ, a score that differs between the runs), picks the default answer and foil,
draws the noise, and records both runs once. `grid` then patches between them (explain/patch_grids.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.explain import patch_grids
from bertviz_lab.explain.patch_grids import Grid, Progress, Traced
from bertviz_lab.explain.patching import Runs, twin
from bertviz_lab.explain.score import Score
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.predict.guesses import Prediction, ReadOptions, predict_at
from bertviz_lab.views.why.explanation import mask_positions, target_id

# The longest input patched: the residual grid alone is (layers + 1) x tokens patched runs (a base-sized model at
# 64 tokens: 832 runs of up to 12 layers).
MAX_TOKENS = 64
TOP_K = 5


@dataclass(frozen=True)
class Patching:
    """Two recorded runs and what they are about."""

    ask: PatchAsk
    clean: Encoding
    corrupt: Encoding | None  # None: noise on the clean sentence
    tokens: list[str]  # the clean run's tokens, as the grids' columns name them
    position: int  # the [MASK] (the discriminator: the token scored)
    answer: str  # vocabulary forms ("" for the discriminator)
    foil: str
    noised: tuple[int, ...]  # token positions noised (() : a typed corruption)
    guesses: tuple[Prediction, Prediction] | None  # clean and corrupted top-k at the [MASK] (None: discriminator,
    # or noise, where the corrupted run has no single sentence)
    traced: Traced
    tops: tuple[str, str] = ("", "")  # the top guesses the clean and the corrupted run (first draw) make here
    logit_size: float = 1.0  # the largest |logit| either run gives at the position: float32 rounding scales with it

    @property
    def f_clean(self) -> float:
        return self.traced.f_clean

    @property
    def f_corrupt(self) -> float:
        return self.traced.f_corrupt

    @property
    def replaced(self) -> bool:
        return self.traced.runs.score.replaced

    @property
    def metric(self) -> str:
        """The score in words: "logit(were) - logit(was)", or "the replaced-token logit"."""
        return "the replaced-token logit" if self.replaced else f"logit({self.answer}) - logit({self.foil})"

    @property
    def layers(self) -> int:
        return self.traced.runs.layers

    @property
    def heads(self) -> int:
        return self.traced.runs.heads


def _encode(tokenizer: WordPieceTokenizer, text: str, which: str) -> Encoding:
    encoding = tokenizer.encode(text)
    if not any(not s for s in encoding.special_mask):
        raise InputError(f"the {which} sentence has no words: type a sentence")
    if len(encoding) > MAX_TOKENS:
        raise InputError(f"the {which} sentence is {len(encoding)} tokens long; this page patches sentences of up to "
                         f"{MAX_TOKENS} tokens (the residual grid alone is one run per layer and token)")
    return encoding


def _differing(clean: Encoding, corrupt: Encoding) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(clean.ids, corrupt.ids)) if a != b]


def _pair(tokenizer: WordPieceTokenizer, ask: PatchAsk) -> tuple[Encoding, Encoding | None, tuple[int, ...]]:
    """The clean and corrupted encodings (None under noise alone) and the noised tokens, checked."""
    clean = _encode(tokenizer, ask.clean, "clean")
    corrupt = _encode(tokenizer, ask.corrupt, "corrupted") if ask.corrupt.strip() else None
    if corrupt is not None and len(corrupt) != len(clean):
        raise InputError(f"the two sentences must be the same length in tokens, to patch position by position: the "
                         f"clean one is {len(clean)} tokens ({' '.join(clean.tokens)}), the corrupted one "
                         f"{len(corrupt)} ({' '.join(corrupt.tokens)}). Change one word for a word of as many tokens.")
    if corrupt is not None and not _differing(clean, corrupt):
        raise InputError("the two sentences are the same: change a word in the corrupted one (patching moves what "
                         "differs between two runs)")
    if not ask.noise:
        return clean, corrupt, ()
    words = [i for i, special in enumerate(clean.special_mask) if not special and clean.ids[i] != tokenizer.mask_id]
    noised = ask.noised or (tuple(_differing(clean, corrupt)) if corrupt is not None else ())
    if not noised:
        raise InputError("pick the tokens to corrupt with noise (for example the subject), or type a corrupted "
                         "sentence: noise goes on the tokens where it differs")
    bad = [i for i in noised if i not in words]
    if bad:
        raise InputError(f"token {bad[0]} is not a word of the clean sentence: noise goes on tokens {words[0]} to "
                         f"{words[-1]} (not [CLS], [SEP] or the [MASK])")
    return clean, None, tuple(sorted(set(noised)))


def _noise(model: BertForPreTraining, ask: PatchAsk, length: int, noised: tuple[int, ...]) -> torch.Tensor:
    """(draws, T, e): Gaussian noise of `scale` times the word vectors' standard deviation on the noised tokens,
    from a generator seeded by `ask.seed` (the same every time)."""
    weight = model.bert.embeddings.word_embeddings.weight
    std = float(weight.detach().float().std())
    rng = torch.Generator().manual_seed(ask.seed)
    noise = torch.zeros(ask.draws, length, weight.shape[1])
    noise[:, list(noised)] = torch.randn(ask.draws, len(noised), weight.shape[1], generator=rng) * ask.scale * std
    return noise.to(weight.device)


def _mlm_score(model: BertForPreTraining, tokenizer: WordPieceTokenizer, ask: PatchAsk, clean: Encoding,
               corrupt: Encoding | None) -> tuple[Score, tuple[Prediction, Prediction] | None]:
    masks = mask_positions(clean, tokenizer)
    if not masks:
        raise InputError(f"the clean sentence has no {tokenizer.mask_token}: write {tokenizer.mask_token} where the "
                         "answer goes (the score is read there)")
    at = masks[0]
    if corrupt is not None and mask_positions(corrupt, tokenizer)[:1] != [at]:
        raise InputError(f"the corrupted sentence must have its {tokenizer.mask_token} at the same place as the clean "
                         f"one (token {at})")
    options = ReadOptions(TOP_K)
    clean_guess = predict_at(model, tokenizer, clean, [at], options)
    guesses = None if corrupt is None else (clean_guess, predict_at(model, tokenizer, corrupt, [at], options))
    answer = target_id(tokenizer, ask.answer, "answer") if ask.answer.strip() else \
        clean_guess.masks[0].candidates[0].id
    if ask.foil.strip():
        foil = target_id(tokenizer, ask.foil, "foil")
    else:
        ranked = (guesses[1] if guesses else clean_guess).masks[0].candidates
        foil = next(c.id for c in ranked if c.id != answer)
    if foil == answer:
        raise InputError("the foil is the answer itself: the score is logit(answer) - logit(foil), so pick another "
                         "word, e.g. what the corrupted sentence should make the model say")
    return Score(at, answer, foil, tokenizer.vocab_size), guesses


def prepare(model: BertForPreTraining, tokenizer: WordPieceTokenizer, ask: PatchAsk) -> Patching:
    """Both runs recorded, for what `ask` asks; an InputError sentence for anything that cannot be patched."""
    clean, corrupt, noised = _pair(tokenizer, ask)
    discriminator = model.has_rtd and not model.has_mlm
    if not model.has_mlm and not discriminator:
        raise InputError("this model has no MLM head (it was saved as a plain BertModel), so it gives no answer to "
                         "patch")
    if discriminator:
        differing = _differing(clean, corrupt) if corrupt is not None else list(noised)
        position = ask.position if ask.position is not None else differing[0]
        if not 0 <= position < len(clean) or clean.special_mask[position]:
            raise InputError(f"token {position} is not a word of this sentence")
        score, guesses = Score(position, None), None
    else:
        score, guesses = _mlm_score(model, tokenizer, ask, clean, corrupt)
    device = next(model.parameters()).device
    ids = torch.tensor([clean.ids], device=device)
    runs = Runs(twin(model), ids, ids if corrupt is None else torch.tensor([corrupt.ids], device=device),
                torch.tensor([clean.segment_ids], device=device), score,
                _noise(model, ask, len(clean), noised) if noised else None)
    traced = patch_grids.trace(runs)
    if abs(traced.f_clean - traced.f_corrupt) < 1e-6:
        raise InputError(f"the two runs give the same score ({traced.f_clean:.6g}), so there is nothing for a patch "
                         "to bring back: change the corrupted sentence, or pick an answer and a foil the change "
                         "moves")
    def name(i) -> str:
        return "" if i is None else tokenizer.id_to_token(int(i))

    tops = ("", "") if discriminator else (name(traced.clean.top[0]), name(traced.corrupt.top[0]))
    return Patching(ask, clean, corrupt, list(clean.tokens), score.position, name(score.target), name(score.contrast),
                    noised, guesses, traced, tops, _logit_size(traced))


@torch.no_grad()
def _logit_size(traced) -> float:
    """The largest |logit| of either run at the scored position (the discriminator's: its one logit)."""
    runs = traced.runs
    h = torch.cat([traced.clean.resid[-1], traced.corrupt.resid[-1]])[:, runs.score.position]  # (R, d)
    f, _, logits = runs.score.read(runs.model, h)
    return float((f if logits is None else logits).abs().max())


def grid(patching: Patching, kind: str, direction: str, head: tuple[int, int] | None = None,
         progress: Progress | None = None) -> Grid:
    """One grid (explain/patch_grids.GRIDS) in one direction; "qkv" needs `head` (layer, head), checked here."""
    if kind not in patch_grids.GRIDS:
        raise InputError(f"no grid called {kind!r}: pick one of {', '.join(patch_grids.GRIDS)}")
    if direction not in patch_grids.DIRECTIONS:
        raise InputError(f"no direction called {direction!r}: pick denoise or noise")
    if kind == "qkv":
        if head is None:
            raise InputError("pick the head whose query, key and value are patched: a layer and a head")
        layer, h = head
        if not (0 <= layer < patching.layers and 0 <= h < patching.heads):
            raise InputError(f"there is no head {layer + 1}.{h + 1}: this model has {patching.layers} layers of "
                             f"{patching.heads} heads (counted from 1)")
    return patch_grids.grid(patching.traced, kind, direction, head, progress)


def tolerance(patching: Patching) -> float:
    """How far from the source's score a whole-depth patch may land, normalised: 1e-5 of the logits' size (float32
    rounding grows with it: the largest |logit| at the position, not the score, a difference of two of them that
    may be far smaller) over the difference the score is normalised by."""
    size = max(1.0, abs(patching.f_clean), abs(patching.f_corrupt), getattr(patching, "logit_size", 1.0))
    return 1e-5 * size / abs(patching.f_clean - patching.f_corrupt)
