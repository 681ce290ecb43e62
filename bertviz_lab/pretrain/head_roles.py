"""Head roles: what each attention head does, as one number per role.

For a set of sentences and every layer and head, a positional score is the mean attention
weight that the word tokens (every position but [CLS] and the final [SEP]) give to

    previous  the token just before      next  the token just after     self  themselves
    cls       [CLS]                      sep   [SEP] (every [SEP] of the input)

averaged over each sentence's word tokens, then over the sentences. A head scoring 0.87 on
"previous" is a previous-token head: 87% of each word's attention goes one token back.
`uniform_scores` is what a head spreading its attention evenly would score; a role is clear at
`CLEAR` times that or more.

On the probe set (`corpus.probes`), whose grammar the generator knows, three syntactic roles
are scored too: the weight from a determiner to its noun, from a verb to its subject, and from
a pronoun to the noun it stands for (from the word's first token, to all of the other word's
tokens), averaged over each sentence's links, then over the sentences that have such a link.
The Time-lapse page and `python -m bertviz_lab heads` show them; the pretraining loop records
them at each checkpoint step.

A syntactic role whose links all go the same one word back (or forward) on the probe set is, there,
the same attention as a positional role: on today's probes every verb's subject is the word just
before it, so a previous-token head scores high on "verb → subject" without knowing any syntax.
`twins` finds such roles from the probes' own links, and `twins_note` says so in one sentence (it
is empty once the probes hold a link that is not to a neighbour).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.corpus.probes import PROBES, SYNTACTIC_ROLES, ProbeSentence
from bertviz_lab.errors import InputError

POSITIONAL_ROLES = ("previous", "next", "self", "cls", "sep")
ROLES = (*POSITIONAL_ROLES, *SYNTACTIC_ROLES)
ROLE_NAMES = {"previous": "previous token", "next": "next token", "self": "itself", "cls": "[CLS]",
              "sep": "[SEP]", "det_noun": "determiner → noun", "verb_subject": "verb → subject",
              "pronoun_referent": "pronoun → referent"}
MAX_SENTENCES = 32
LINK_WORDS = {"det_noun": ("determiner", "noun"), "verb_subject": ("verb", "subject"),
              "pronoun_referent": ("pronoun", "referent")}  # a link's two ends, as the twins' note names them
NEIGHBOURS = {-1: "previous", 1: "next"}  # a link's word offset -> the positional role it is on every link
# A head plays a role clearly only when it scores at least CLEAR times what uniform attention would score
# there (`uniform_scores`): a random model's heads already score near uniform (0.07-0.10 on the probe set,
# whose sentences are 9 to 15 tokens), so only a multiple of it says the head learned to look there.
CLEAR = 2


def twins(probes=PROBES) -> dict[str, str]:
    """Syntactic role -> the positional role ('previous' or 'next') that every one of its links on `probes`
    also is: the linked word is always the word just before (or after) the linking one."""
    out = {}
    for role in SYNTACTIC_ROLES:
        offsets = {b - a for p in probes for a, b in p.links.get(role, ())}
        if len(offsets) == 1 and (offset := offsets.pop()) in NEIGHBOURS:
            out[role] = NEIGHBOURS[offset]
    return out


def twins_note(probes=PROBES) -> str:
    """'In these probe sentences every verb's subject is the word just before it and ..., so ... cannot be
    told apart from previous- and next-token heads here.'; empty when no syntactic role has a twin."""
    found = sorted(twins(probes).items(), key=lambda item: POSITIONAL_ROLES.index(item[1]))
    if not found:
        return ""
    where = {"previous": "before", "next": "after"}
    # the second fact elides its verb: "every verb's subject is the word just before it and every determiner's
    # noun the word just after"
    facts = [f"every {LINK_WORDS[r][0]}'s {LINK_WORDS[r][1]}{' is' if n == 0 else ''} the word just "
             f"{where[t]}{' it' if n == 0 else ''}" for n, (r, t) in enumerate(found)]
    names = " and ".join(f"'{ROLE_NAMES[r]}'" for r, _ in found)
    kinds = list(dict.fromkeys(t for _, t in found))  # previous-, next-token heads
    heads = " and ".join([f"{k}-" for k in kinds[:-1]] + [f"{kinds[-1]}-token heads"])
    return (f"In these probe sentences {' and '.join(facts)}, so {names} cannot be told apart from {heads} "
            "here.")


@dataclass(frozen=True)
class HeadRoles:
    sentences: list[str]
    layers: int
    heads: int
    scores: dict[str, np.ndarray]  # role -> (L, H) in [0, 1]; syntactic roles only where links are known
    twins: dict[str, str] = field(default_factory=dict)  # syntactic role -> positional role it is here (`twins`)

    def to_json(self) -> dict:
        return {"sentences": self.sentences, "layers": self.layers, "heads": self.heads,
                "scores": {role: s.tolist() for role, s in self.scores.items()}, "twins": self.twins}

    def strongest(self, role: str) -> tuple[int, int, float]:
        """(layer, head, score) of the head that plays `role` most."""
        layer, head = np.unravel_index(int(np.argmax(self.scores[role])), self.scores[role].shape)
        return int(layer), int(head), float(self.scores[role][layer, head])


def encode(tokenizer, max_length: int, text: str) -> Encoding:
    """One sentence as the model reads it; an InputError when it is empty or does not fit."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("a sentence is empty: write some words")
    encoding = tokenizer.encode(text, None, max_length=max_length)
    if encoding.truncated:
        raise InputError(f"a sentence is {len(encoding) + encoding.truncated} tokens long; this model reads "
                         f"at most {max_length}")
    if len(encoding) < 3:
        raise InputError(f"{text[:60]!r} has no word the model can read")
    return encoding


@torch.no_grad()
def attention(model, encodings: list[Encoding]) -> list[np.ndarray]:
    """Each encoding's attention weights, (L, H, T, T) float32, from one eval-mode forward each."""
    device = next(model.parameters()).device
    training = model.training
    model.eval()
    try:
        out = []
        for enc in encodings:
            result = model(torch.tensor([enc.ids], device=device), torch.tensor([enc.segment_ids], device=device),
                           trace=True, encoder_only=True)
            out.append(np.stack([s.weights[0].float().cpu().numpy() for s in result.trace]))
        return out
    finally:
        model.train(training)


def positional(weights: np.ndarray, sequence_ids: list[int | None]) -> dict[str, np.ndarray]:
    """One sentence's positional scores, role -> (L, H): the mean over its word tokens (1 .. T-2).
    The frame tokens are those of no sequence: [CLS] first, [SEP] after each text (RoBERTa: <s>, </s>)."""
    T = weights.shape[-1]
    rows = np.arange(1, T - 1)  # the word tokens: all but [CLS] and the final [SEP]
    seps = [i for i, s in enumerate(sequence_ids) if s is None and i > 0]
    picked = {
        "previous": weights[:, :, rows, rows - 1],  # (L, H, W)
        "next": weights[:, :, rows, rows + 1],
        "self": weights[:, :, rows, rows],
        "cls": weights[:, :, rows, 0] if sequence_ids[0] is None else np.zeros_like(weights[:, :, rows, 0]),
        "sep": weights[:, :, rows][..., seps].sum(-1),
    }
    return {role: values.mean(-1) for role, values in picked.items()}


def linked(weights: np.ndarray, encoding: Encoding, probe: ProbeSentence) -> dict[str, np.ndarray]:
    """One probe's syntactic scores, role -> (L, H), for the roles it has links for."""
    pieces: dict[int, list[int]] = {}
    for position, word in enumerate(encoding.word_ids):
        if word is not None:
            pieces.setdefault(word, []).append(position)
    scores = {}
    for role, links in probe.links.items():
        values = [weights[:, :, pieces[a][0]][..., pieces[b]].sum(-1) for a, b in links
                  if a in pieces and b in pieces]
        if values:
            scores[role] = np.mean(values, axis=0)
    return scores


def roles_of(weights: list[np.ndarray], encodings: list[Encoding],
             probes: list[ProbeSentence] | None = None) -> dict[str, np.ndarray]:
    """Every role's score, role -> (L, H), from each sentence's attention (and, for probes, its links)."""
    per_sentence = [positional(w, e.sequence_ids) for w, e in zip(weights, encodings)]
    scores = {role: np.mean([s[role] for s in per_sentence], axis=0) for role in POSITIONAL_ROLES}
    if probes is not None:
        found = [linked(w, e, p) for w, e, p in zip(weights, encodings, probes)]
        for role in SYNTACTIC_ROLES:
            values = [f[role] for f in found if role in f]
            if values:
                scores[role] = np.mean(values, axis=0)
    return scores


def uniform_scores(encodings: list[Encoding], probes: list[ProbeSentence] | None = None) -> dict[str, np.ndarray]:
    """What a head that spreads its attention evenly (1/T to every token) would score, role -> (1, 1): the
    line a role must clear to mean anything."""
    return roles_of([np.full((1, 1, len(e), len(e)), 1 / len(e)) for e in encodings], encodings, probes)


def head_roles(model, tokenizer, sentences: list[str] | None = None) -> HeadRoles:
    """The role scores of every head on `sentences` (default: the probe set, with its syntactic roles)."""
    probes = list(PROBES) if not sentences else None
    texts = [p.text for p in PROBES] if probes else list(sentences)
    if len(texts) > MAX_SENTENCES:
        raise InputError(f"{len(texts)} sentences: give at most {MAX_SENTENCES}")
    encodings = [encode(tokenizer, model.config.max_tokens, t) for t in texts]
    weights = attention(model, encodings)
    return HeadRoles(texts, model.config.num_hidden_layers, model.config.num_attention_heads,
                     roles_of(weights, encodings, probes), twins(probes) if probes else {})
