"""The Losses walkthrough: one training example of BERT, every number on the way.

`walkthrough` masks a sentence (pair) from a seed with the rule of `masking.mask_tokens`
(each non-special token picked with probability 15%, at least one; 80 / 10 / 10),
runs the model once (eval, no grad) and records each step a teacher writes on the
board: picked positions, the action at each, logits -> softmax -> p(true) -> -log p
(from `losses.mlm_loss`), L_MLM as mean and as sum, the NSP path for the true pair
and for a random second sentence, and the total. `optimizer_step` takes one step on
a copy of the model and reports the loss before and after. The rule checked over
many draws is in views/losses/masking_stats.py. Plain records out: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert import losses, masking
from bertviz_lab.bert.device import to_device
from bertviz_lab.bert.family import FAMILIES
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import ROLES, SPECIAL_TOKENS, Encoding, WordPieceTokenizer
from bertviz_lab.corpus import StoryGenerator
from bertviz_lab.errors import InputError
from bertviz_lab.views.losses import masking_stats

NO_NSP_REASON = "this model has no NSP head, so there is no next-sentence loss to compute"
NO_B_REASON = "there is no sentence B, so there is no true (IsNext) pair: add a second sentence"
OPTIMIZERS = ("AdamW", "SGD")


@dataclass(frozen=True)
class PickedPosition:
    position: int
    original: str  # the token the model must recover
    action: str  # "[MASK]", "random" or "kept"
    fed: str  # the token the model reads there


@dataclass(frozen=True)
class NSPPath:
    """[CLS] hidden state -> pooler dense -> tanh -> NSP logits -> P(IsNext) -> L_NSP, for one pair."""

    title: str
    tokens: list[str]  # what the model read
    sentence_b: str
    label: int  # losses.IS_NEXT or losses.NOT_NEXT
    cls_hidden: np.ndarray  # (d,) last layer's [CLS] vector
    pre_tanh: np.ndarray  # (d,) W_pool h + b_pool
    pooled: np.ndarray  # (d,) tanh of the above
    logits: np.ndarray  # (2,) [IsNext, NotNext] as the model computed them
    logits_by_hand: np.ndarray  # (2,) W_nsp pooled + b_nsp, in float64, for the page to compare
    record: losses.NSPRecord

    @property
    def p_is_next(self) -> float:
        return self.record.p_is_next[0]

    @property
    def loss(self) -> float:
        return self.record.loss


@dataclass(frozen=True)
class Walkthrough:
    seed: int
    rates: tuple[float, float, float]  # mask_rate, mask_prob, random_prob
    tokens: list[str]
    ids: list[int]
    segment_ids: list[int]
    eligible: list[bool]  # could be picked: not a special token ([PAD] [UNK] [CLS] [SEP] [MASK])
    picked: list[PickedPosition]
    corrupted_ids: list[int]
    corrupted_tokens: list[str]
    labels: list[int]  # original id at picked positions, losses.IGNORE_INDEX elsewhere
    shapes: dict[str, tuple[int, ...]]  # tensor shapes of the forward pass
    mlm: losses.MLMRecord
    nsp_true: NSPPath | None
    nsp_random: NSPPath | None
    nsp_reason: str | None  # why nsp_true is None
    total: float  # L_MLM (mean) + L_NSP of the true pair when there is one
    random_tokens: str = "vocabulary"  # a key of bert.config.RANDOM_TOKENS: where the random replacements came from
    random_draws: str = ""  # what they can be for this tokenizer, the tokens never drawn named (masking_stats)
    # How this model's tokenizer reads text, for the Tokens step (BERT's by default):
    tokenizer_kind: str = "WordPiece"  # "WordPiece", "byte-level BPE" or "SentencePiece Unigram"
    framing: str = "[CLS] A [SEP] B [SEP]"  # a pair as this tokenizer frames it (RoBERTa: <s> A </s> </s> B </s>)
    segments: int = 2  # config.type_vocab_size: 2 tells A from B; 1 (RoBERTa) one shared row; 0 (DistilBERT) none
    specials: tuple[str, ...] = SPECIAL_TOKENS  # pad, unk, cls, sep, mask as this tokenizer spells them
    sequence_ids: list[int | None] | None = None  # 0 for A, 1 for B, None for a special token

    @property
    def positions(self) -> list[int]:
        return [p.position for p in self.picked]

    @property
    def expected_picks(self) -> float:
        """The mean number of picks on this sentence under the rule (at-least-one included)."""
        return masking.expected_picks(sum(self.eligible), self.rates[0])

    special_tokens = property(lambda self: self.specials)  # every special token by name: the rule never picks one

    @property
    def excluded(self) -> dict[str, list[int]]:
        """Each special token in this sentence and its positions; none of them can be picked."""
        found: dict[str, list[int]] = {}
        for position, (token, ok) in enumerate(zip(self.tokens, self.eligible)):
            if not ok:
                found.setdefault(token, []).append(position)
        return found

    @property
    def keep_prob(self) -> float:
        return 1.0 - self.rates[1] - self.rates[2]


def check_split(mask_prob: float, random_prob: float, keep_prob: float) -> None:
    """The three shares of the picked tokens must each lie in [0, 1] and add up to 1."""
    for name, value in (("mask_prob", mask_prob), ("random_prob", random_prob), ("keep_prob", keep_prob)):
        if not 0.0 <= value <= 1.0:
            raise InputError(f"{name} must be between 0 and 1, got {value!r}")
    if abs(mask_prob + random_prob + keep_prob - 1.0) > 1e-6:
        raise InputError(f"mask_prob + random_prob + keep_prob must add up to 1, got {mask_prob:g} + "
                         f"{random_prob:g} + {keep_prob:g} = {mask_prob + random_prob + keep_prob:g}")


def special_names(tokenizer: WordPieceTokenizer) -> tuple[str, ...]:
    """The special tokens as this tokenizer spells them, in BERT's order: [PAD] [UNK] [CLS] [SEP] [MASK]."""
    return tuple(tokenizer.specials[role] for role in ROLES)


def framing(tokenizer: WordPieceTokenizer) -> str:
    """How this tokenizer frames a pair: "[CLS] A [SEP] B [SEP]" for BERT, "<s> A </s> </s> B </s>" for RoBERTa,
    read from its own encoding of a pair (each run of a text's tokens written as its letter)."""
    encoding = tokenizer.encode("a", "b")
    parts: list[str] = []
    for token, sequence in zip(encoding.tokens, encoding.sequence_ids):
        part = token if sequence is None else "AB"[sequence]
        if sequence is None or not parts or parts[-1] != part:
            parts.append(part)
    return " ".join(parts)


def walkthrough(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, *, seed: int,
                mask_rate: float = 0.15, mask_prob: float = 0.8, random_prob: float = 0.1,
                random_tokens: str = "vocabulary") -> Walkthrough:
    """Mask `encoding` from `seed`, run the model once and record every step of both losses."""
    if not model.has_mlm:
        why = FAMILIES[model.config.family].lacks or "it was saved as a plain BertModel"
        raise InputError(f"this model has no MLM head ({why}), so it has no masked-language-model loss to show: "
                         "pick a model with an MLM head")
    if all(i in tokenizer.special_ids for i in encoding.ids):
        raise InputError(f"the text has no token that can be masked (only special tokens such as "
                         f"{tokenizer.specials['cls']} and {tokenizer.specials['sep']}): type some words")
    ids = torch.tensor(encoding.ids)
    result = masking.mask_tokens(ids, special_ids=tokenizer.special_ids, vocab_size=tokenizer.vocab_size,
                                 mask_id=tokenizer.mask_id, generator=torch.Generator().manual_seed(seed),
                                 mask_rate=mask_rate, mask_prob=mask_prob, random_prob=random_prob,
                                 random_tokens=random_tokens)
    out = _forward(model, result.input_ids.tolist(), encoding.segment_ids)
    _, mlm = losses.mlm_loss(out.mlm_logits[0].float(), result.labels, top_k=min(5, tokenizer.vocab_size),
                             id_to_token=tokenizer.id_to_token)
    corrupted = [tokenizer.id_to_token(i) for i in result.input_ids.tolist()]
    picked = [PickedPosition(t, encoding.tokens[t], masking.ACTION_NAMES[a], corrupted[t])
              for t, a in enumerate(result.actions.tolist()) if a != masking.ACTION_NONE]
    nsp_true, nsp_random, reason = _nsp_paths(model, tokenizer, encoding, out, corrupted, seed)
    T, V, d = len(encoding), out.mlm_logits.shape[-1], model.config.hidden_size
    shapes = {"input ids": (1, T), "embeddings": (1, T, d), "hidden (last layer)": (1, T, d),
              "MLM logits": (1, T, V), "logits at picked positions": (mlm.count, V)}
    return Walkthrough(seed=seed, rates=(mask_rate, mask_prob, random_prob), tokens=list(encoding.tokens),
                       ids=list(encoding.ids), segment_ids=list(encoding.segment_ids),
                       eligible=[i not in tokenizer.special_ids for i in encoding.ids], picked=picked,
                       corrupted_ids=result.input_ids.tolist(), corrupted_tokens=corrupted,
                       labels=result.labels.tolist(), shapes=shapes, mlm=mlm, nsp_true=nsp_true,
                       nsp_random=nsp_random, nsp_reason=reason,
                       total=losses.total_loss(mlm, nsp_true.record if nsp_true else None),
                       random_tokens=random_tokens, random_draws=masking_stats.random_draws(tokenizer, random_tokens),
                       tokenizer_kind=tokenizer.kind, framing=framing(tokenizer),
                       segments=model.config.type_vocab_size, specials=special_names(tokenizer),
                       sequence_ids=list(encoding.sequence_ids))


@torch.no_grad()
def _forward(model: BertForPreTraining, ids: list[int], segments: list[int]):
    device = next(model.parameters()).device
    model.eval()
    return model(torch.tensor([ids], device=device), torch.tensor([segments], device=device))


def _nsp_paths(model, tokenizer, encoding, out, corrupted, seed):
    """The true pair (the same forward pass as the MLM loss) and A with a random B (unmasked)."""
    if not model.has_nsp:
        return None, None, FAMILIES[model.config.family].lacks or NO_NSP_REASON
    has_b = 1 in encoding.segment_ids
    true_pair = None
    if has_b:
        b_text = tokenizer.decode([i for i, s in zip(encoding.ids, encoding.segment_ids) if s == 1],
                                  skip_special_tokens=True)
        true_pair = _nsp_path(model, out, corrupted, "True pair: B follows A", b_text, losses.IS_NEXT)
    b_random = random_sentence(seed, avoid=tokenizer.decode(encoding.ids, skip_special_tokens=True))
    ids, segments = _random_pair(tokenizer, encoding, b_random, model.config.max_tokens)
    random_out = _forward(model, ids, segments)
    random_pair = _nsp_path(model, random_out, [tokenizer.id_to_token(i) for i in ids],
                            "Random B: a sentence from another story", b_random, losses.NOT_NEXT)
    return true_pair, random_pair, None if has_b else NO_B_REASON


def _random_pair(tokenizer, encoding: Encoding, b_text: str, max_length: int) -> tuple[list[int], list[int]]:
    """[CLS] A [SEP] B' [SEP] with A's ids exactly as encoded (A cut from its end if too long)."""
    a_ids = [i for i, seq in zip(encoding.ids, encoding.sequence_ids) if seq == 0]  # A's own tokens
    b_ids = tokenizer.encode(b_text).ids[1:-1][: max_length // 2]
    a_ids = a_ids[: max_length - 3 - len(b_ids)]
    ids = [tokenizer.cls_id, *a_ids, tokenizer.sep_id, *b_ids, tokenizer.sep_id]
    return ids, [0] * (len(a_ids) + 2) + [1] * (len(b_ids) + 1)


def random_sentence(seed: int, avoid: str = "") -> str:
    """A sentence from a story of the built-in world, reproducible from `seed`."""
    generator = StoryGenerator(seed)
    for _ in range(20):
        story = generator.story()
        sentence = story[seed % len(story)]
        if sentence.strip().lower() != avoid.strip().lower():
            return sentence
    return sentence


@torch.no_grad()
def _nsp_path(model, out, tokens, title, sentence_b, label) -> NSPPath:
    cls = out.hidden_states[-1][0, 0].double()  # (d,)
    pool, head = model.bert.pooler.dense, model.cls.seq_relationship
    pre = pool.weight.double() @ cls + pool.bias.double()  # (d,)
    by_hand = head.weight.double() @ torch.tanh(pre) + head.bias.double()  # (2,)
    _, record = losses.nsp_loss(out.nsp_logits[0].float(), torch.tensor(label))
    return NSPPath(title=title, tokens=list(tokens), sentence_b=sentence_b, label=label,
                   cls_hidden=cls.cpu().numpy(), pre_tanh=pre.cpu().numpy(),
                   pooled=out.pooled[0].double().cpu().numpy(), logits=out.nsp_logits[0].double().cpu().numpy(),
                   logits_by_hand=by_hand.cpu().numpy(), record=record)


@dataclass(frozen=True)
class OptimizerStep:
    optimizer: str
    lr: float
    before: dict[str, float]  # "L_MLM", "L_NSP" (when the example has one), "total"
    after: dict[str, float]
    p_true_before: list[float]  # per picked position
    p_true_after: list[float]


def optimizer_step(model: BertForPreTraining, tokenizer: WordPieceTokenizer, walk: Walkthrough, *,
                   lr: float = 1e-4, optimizer: str = "AdamW") -> OptimizerStep:
    """One step on exactly this example's loss, on a copy of the model (the original is untouched).

    The copy stays in eval mode (no dropout) so the loss before and after are
    computed the same way on the same corrupted input.
    """
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise InputError(f"lr (learning rate) must be a number in (0, 10], got {lr!r}")
    copy = _copy(model)
    opt = (torch.optim.AdamW if optimizer == "AdamW" else torch.optim.SGD)(copy.parameters(), lr=lr)
    with_nsp = walk.nsp_true is not None
    before, p_before = _example_loss(copy, walk, with_nsp)
    opt.zero_grad()
    before["total"].backward()
    opt.step()
    with torch.no_grad():
        after, p_after = _example_loss(copy, walk, with_nsp)
    return OptimizerStep(optimizer, float(lr), _floats(before), _floats(after), p_before, p_after)


def _floats(parts: dict[str, torch.Tensor]) -> dict[str, float]:
    return {k: v.detach().item() for k, v in parts.items()}


def _copy(model: BertForPreTraining) -> BertForPreTraining:
    """A fresh model with copied weights: same heads, same device, gradients on, eval mode."""
    copy = BertForPreTraining(model.config, mlm_head=model.has_mlm, nsp_head=model.has_nsp,
                              pooler=model.bert.pooler is not None)
    copy.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
    copy.attention_backend, copy.fast = model.attention_backend, model.fast
    device = next(model.parameters()).device
    return to_device(copy, device, "a copy of the model for its gradients").float().requires_grad_(True).eval()


def _example_loss(model, walk: Walkthrough, with_nsp: bool):
    device = next(model.parameters()).device
    out = model(torch.tensor([walk.corrupted_ids], device=device), torch.tensor([walk.segment_ids], device=device))
    mlm, record = losses.mlm_loss(out.mlm_logits[0], torch.tensor(walk.labels, device=device))
    parts = {"L_MLM": mlm}
    if with_nsp:
        parts["L_NSP"], _ = losses.nsp_loss(out.nsp_logits[0], torch.tensor(losses.IS_NEXT, device=device))
    parts["total"] = sum(parts.values())
    return parts, [p.p_true for p in record.predictions]


# --- Tables and figure inputs for the page (numbers unrounded: the page only formats) ---------

def step_titles(walk: Walkthrough) -> list[str]:
    """The stepper's steps; the NSP step is left out for a model without an NSP head."""
    titles = ["Tokens", "Pick the positions to predict", "Corrupt each picked position (80 / 10 / 10)",
              "Forward pass", "Logits → softmax → p(true) → −log p", "L_MLM: mean and sum",
              "Next sentence prediction (NSP)", "Total loss"]
    return titles if walk.nsp_random is not None else titles[:6] + titles[7:]


def token_table(walk: Walkthrough) -> pd.DataFrame:
    """One row per position: the token, its id, its segment (or, for a model without segments to tell A from B,
    the sentence it belongs to: A, B or — for a special token), and what masking did there."""
    action = {p.position: p.action for p in walk.picked}
    if walk.segments > 1 or walk.sequence_ids is None:
        where = {"segment": ["A" if s == 0 else "B" for s in walk.segment_ids]}
    else:
        where = {"sentence": ["—" if s is None else "AB"[s] for s in walk.sequence_ids]}
    return pd.DataFrame({"position": range(len(walk.tokens)), "token": walk.tokens, "id": walk.ids, **where,
                         "can be picked": walk.eligible, "picked": [t in action for t in range(len(walk.tokens))],
                         "action": [action.get(t, "") for t in range(len(walk.tokens))],
                         "fed to the model": walk.corrupted_tokens})


def picked_table(walk: Walkthrough) -> pd.DataFrame:
    return pd.DataFrame([{"position": p.position, "original": p.original, "action": p.action, "fed": p.fed}
                         for p in walk.picked])


def prediction_table(walk: Walkthrough) -> pd.DataFrame:
    """One row per masked position: the true token's logit, the softmax denominator, p, -log p, rank."""
    fed = {p.position: p.fed for p in walk.picked}
    return pd.DataFrame([{"position": m.position, "true token": m.true_token, "fed": fed[m.position],
                          "top guess": m.top_tokens[0], "true logit": m.true_logit, "logsumexp": m.logsumexp,
                          "p(true)": m.p_true, "−log p": m.neg_log_p, "rank": m.rank}
                         for m in walk.mlm.predictions])


def topk_panels(walk: Walkthrough) -> list[dict]:
    return [{"title": f"position {m.position}: true “{m.true_token}”", "tokens": m.top_tokens,
             "probs": m.top_probs, "true_token": m.true_token, "p_true": m.p_true, "rank": m.rank}
            for m in walk.mlm.predictions]


def nsp_vectors(path: NSPPath, dims: int = 8) -> pd.DataFrame:
    """The first `dims` dimensions of the [CLS] vector on its way through the pooler."""
    n = min(dims, len(path.cls_hidden))
    return pd.DataFrame({"h_[CLS]": path.cls_hidden[:n], "W·h + b": path.pre_tanh[:n],
                         "tanh(W·h + b)": path.pooled[:n]}, index=[f"dim {i}" for i in range(n)])
