"""What BERT learned, layer by layer: one word's vectors in many sentences, and the logit lens at [MASK].

`word_in_context` runs the sentences as one padded batch and keeps, for every layer (0 = the
embeddings' output, then layers 1..L), the word's vector in each sentence; a word the tokenizer
splits into pieces is the mean of its pieces; views/representations/words.py finds it in each sentence, one rule for
every family. `cosines`, `sense_similarity` and
`projection` turn those vectors into what the Representations page draws, and the `similarity`
command prints.

`logit_lens` applies the MLM head (transform, LayerNorm, tied decoder) to every layer's hidden
state at each [MASK]. The head was trained on the last layer's output only, so an earlier row shows
what that head can decode from the layer, not what the layer holds; its last layer is the Mask &
predict page's prediction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import MASK, Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.representations.words import check_word, find_word, unknown

MAX_SENTENCES = 24  # rows and columns of the similarity matrix a class can still read
BATCH = 64  # sentences per padded forward pass
LAYER, SAME, CROSS = "layer", "same sense", "different senses"
RANK_TOLERANCE = 1e-6  # a singular value below this share of the largest is rounding error, not a direction


@dataclass(frozen=True)
class WordInContext:
    """One word's vector in each sentence, at every layer."""

    word: str
    sentences: tuple[str, ...]
    positions: tuple[tuple[int, ...], ...]  # the word's token positions in each sentence (first occurrence)
    vectors: np.ndarray  # (L + 1, S, d) float32: layer 0 = the embeddings' output, then each layer
    spellings: tuple[tuple[str, ...], ...]  # its tokens in each sentence: byte-level BPE writes `bank` at
    # a sentence's start but `Ġbank` after a space, and a cased model reads `Bank` apart from `bank`

    @property
    def pieces(self) -> tuple[str, ...]:
        """The word as the model reads it in most of the sentences (e.g. RoBERTa's Ġbank); ties: the first
        sentence's."""
        return Counter(self.spellings).most_common(1)[0][0]

    @property
    def layers(self) -> int:
        """L + 1: the embeddings, then every encoder layer."""
        return self.vectors.shape[0]


def embedding_layer(config: BertConfig) -> str:
    """What this model's embedding layer adds up and hands to layer 1, in words: the families differ (segments
    or none, one segment row, embeddings of another width than the layers)."""
    segments = ""  # DistilBERT's kind: no segment embeddings
    if config.type_vocab_size == 1:  # RoBERTa's kind: one row, added to every token alike
        segments = (", plus one segment vector that every token shares (this model does not tell sentence A from "
                    "B that way)")
    elif config.type_vocab_size > 1:
        segments = ", plus its segment's vector (sentence A or B)"
    width, hidden = config.embedding_width, config.hidden_size
    up = (f", and a linear layer projects the result from {width} to the {hidden} numbers layer 1 reads"
          if config.embedding_size else f": layer 1 reads the result, {hidden} numbers per token")
    return (f"This model adds to a token's row the vector of its position{segments}, then normalizes the sum "
            f"(LayerNorm){up}.")


def clean_sentences(sentences: list[str]) -> list[str]:
    """Non-empty lines, stripped; between 2 and MAX_SENTENCES of them."""
    kept = [s.strip() for s in sentences if isinstance(s, str) and s.strip()]
    if len(kept) < 2:
        raise InputError("give at least two sentences to compare, one per line")
    if len(kept) > MAX_SENTENCES:
        raise InputError(f"{len(kept)} sentences are too many to compare at once; give at most {MAX_SENTENCES}")
    return kept


@torch.no_grad()
def word_in_context(model: BertForPreTraining, tokenizer: WordPieceTokenizer, word: str,
                    sentences: list[str]) -> WordInContext:
    """The word's vector in every sentence at every layer, from one padded forward pass."""
    word = check_word(word)
    sentences = clean_sentences(sentences)
    encodings, positions = [], []
    for n, text in enumerate(sentences, 1):
        try:
            encoding = inputs.encode(tokenizer, model, text, allow_truncation=False)
        except InputError as exc:
            raise InputError(f"sentence {n}: {exc}") from None
        found = find_word(tokenizer, text, encoding, word)
        if found is None:
            raise InputError(f"sentence {n} does not contain the word {word!r}: {text[:80]!r}")
        if unknown(tokenizer, encoding, found):
            spelled = text[encoding.offsets[found[0]][0]:encoding.offsets[found[-1]][1]].strip()
            raise InputError(f"this model does not know {spelled!r}: it reads it as {tokenizer.unk_token}"
                             + (f" (sentence {n})" if spelled != word else ""))
        encodings.append(encoding)
        positions.append(found)
    spellings = tuple(tuple(e.tokens[p] for p in found) for e, found in zip(encodings, positions))
    vectors = piece_means(model, tokenizer.pad_id, encodings, positions)
    return WordInContext(word, tuple(sentences), tuple(positions), vectors, spellings)


def spelling_note(wic: WordInContext) -> str | None:
    """A sentence on how the model reads the word, when it is not one token spelled alike everywhere."""
    by: dict[tuple[str, ...], list[str]] = {}
    for n, spelling in enumerate(wic.spellings, 1):
        by.setdefault(spelling, []).append(str(n))
    if len(by) == 1:
        return None if len(wic.pieces) == 1 else (f"The tokenizer splits “{wic.word}” into {' '.join(wic.pieces)}: "
                                                  "its vector in each sentence is the mean of those pieces' vectors.")
    where = "; ".join(f"{' '.join(spelling)} in sentence{'s' * (len(ns) > 1)} {', '.join(ns)}"
                      for spelling, ns in by.items())
    return (f"The model reads “{wic.word}” as different tokens in these sentences ({where}): a tokenizer can "
            "write a word differently after a space, at the start or in another case. So its vectors differ at "
            "layer 0 by token as well as by position; where it is several pieces, its vector is their mean.")


@torch.no_grad()
def piece_means(model: BertForPreTraining, pad_id: int, encodings: list[Encoding],
                positions: list[tuple[int, ...]]) -> np.ndarray:
    """(L + 1, S, d): in each encoding, the mean of the hidden states at its `positions`, at every layer.

    The encodings run as padded batches of BATCH; [PAD] changes nothing at the real positions.
    """
    device = next(model.parameters()).device
    parts = []
    for start in range(0, len(encodings), BATCH):
        batch = inputs.pad_batch(encodings[start:start + BATCH], pad_id, device)
        hidden = torch.stack(inputs.run_batch(model, batch).hidden_states).float()  # (L + 1, B, T, d)
        parts.append(torch.stack([hidden[:, b, list(p)].mean(dim=1)
                                  for b, p in enumerate(positions[start:start + BATCH])], dim=1))
    return torch.cat(parts, dim=1).cpu().numpy()


def cosines(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair of rows: (..., S, d) -> (..., S, S), in float64."""
    v = vectors.astype(np.float64)
    v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    return np.clip(v @ np.swapaxes(v, -1, -2), -1.0, 1.0)


def sense_similarity(sims: np.ndarray, senses: list[str | None]) -> pd.DataFrame:
    """Per layer, the mean cosine over pairs of sentences with the same sense and with different senses.

    Sentences without a sense take no part; a mean with no pair to average is NaN.
    """
    tagged = np.array([s is not None for s in senses])
    labels = np.array([s if s is not None else "" for s in senses], dtype=object)
    same = (labels[:, None] == labels[None, :]) & tagged[:, None] & tagged[None, :]
    cross = (labels[:, None] != labels[None, :]) & tagged[:, None] & tagged[None, :]
    np.fill_diagonal(same, False)
    rows = []
    for layer, m in enumerate(sims):
        rows.append({LAYER: layer, SAME: m[same].mean() if same.any() else np.nan,
                     CROSS: m[cross].mean() if cross.any() else np.nan})
    return pd.DataFrame(rows)


def projection(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PCA to 2-D per layer: (L + 1, S, d) -> scores (L + 1, S, 2) and explained variance ratios (L + 1, 2).

    Each layer's axes are its own first two principal components; a component the points do not span (two
    points span one direction, identical points none) is 0 in both, so `components` counts the real ones.
    A component's sign is chosen so
    the points move as little as possible from the layer below (the sign of a component is arbitrary).
    """
    layers, S, _ = vectors.shape
    scores = np.zeros((layers, S, 2))
    explained = np.zeros((layers, 2))
    for layer in range(layers):
        x = vectors[layer].astype(np.float64)
        x = x - x.mean(axis=0)
        u, s, _ = np.linalg.svd(x, full_matrices=False)
        # S points span at most S - 1 directions: a singular value at rounding level is no direction (two
        # points have one component, and a "PC2" of 1e-15 drawn to scale is noise read as a picture)
        k = int(min(2, (s > s[:1].max(initial=0.0) * RANK_TOLERANCE).sum()))
        scores[layer, :, :k] = u[:, :k] * s[:k]
        total = float((s ** 2).sum())
        explained[layer, :k] = (s[:k] ** 2) / total if total > 0 else 0.0
        for c in range(k):
            reference = scores[layer - 1, :, c] if layer else np.abs(scores[layer, :, c]) ** 3
            if scores[layer, :, c] @ reference < 0:
                scores[layer, :, c] *= -1
    return scores, explained


def components(explained: np.ndarray) -> int:
    """How many of a layer's two principal components the points span (0, 1 or 2), from `projection`'s ratios."""
    return int((np.asarray(explained) > 0).sum())


def pairs(senses: list[str | None]) -> tuple[int, int]:
    """(same-sense pairs, different-sense pairs) among the sentences with a sense: what `sense_similarity` means."""
    tagged = [s for s in senses if s is not None]
    same = sum(n * (n - 1) // 2 for n in Counter(tagged).values())
    return same, len(tagged) * (len(tagged) - 1) // 2 - same


# --- The logit lens -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MaskLens:
    """One [MASK]: the MLM head's distribution over the vocabulary after every layer."""

    position: int
    probs: np.ndarray  # (L + 1, V) float32; row 0 reads the embeddings' output, row L the last layer

    def top(self, layer: int, k: int) -> list[tuple[int, float]]:
        """(token id, probability) of the k most likely tokens at `layer`, most likely first."""
        row = self.probs[layer]
        ids = np.argsort(-row, kind="stable")[:k]
        return [(int(i), float(row[i])) for i in ids]


@dataclass(frozen=True)
class Lens:
    tokens: list[str]
    masks: list[MaskLens]
    final_difference: float  # max |last layer's lens - the model's own MLM output| over masks and vocabulary


@torch.no_grad()
def logit_lens(model: BertForPreTraining, encoding: Encoding, mask_id: int) -> Lens:
    """The MLM head on every layer's hidden state at each [MASK] of `encoding`."""
    if not model.has_mlm:
        raise InputError("this checkpoint has no MLM head, so there is nothing to read at [MASK]")
    positions = [i for i, t in enumerate(encoding.ids) if t == mask_id]
    if not positions:
        raise InputError(f"type {MASK} where a word should be predicted, e.g. \"the cat sat on the {MASK} .\"")
    out = inputs.run(model, encoding, masked_positions=positions)
    hidden = torch.stack([h[0, positions] for h in out.hidden_states])  # (L + 1, M, d)
    probs = torch.softmax(model.mlm_head(hidden).float(), dim=-1)  # (L + 1, M, V)
    own = torch.softmax(out.mlm_logits.float(), dim=-1)  # (M, V): what Mask & predict shows
    difference = float((probs[-1] - own).abs().max())
    probs = probs.cpu().numpy()
    return Lens(list(encoding.tokens), [MaskLens(p, probs[:, m]) for m, p in enumerate(positions)], difference)


def lens_table(lens: MaskLens, tokenizer: WordPieceTokenizer, k: int) -> pd.DataFrame:
    """One row per layer: its top-k as "token p", and where the last layer's answer stands there."""
    last = lens.probs.shape[0] - 1
    answer = lens.top(last, 1)[0][0]
    rows = []
    for layer in range(last + 1):
        row = {LAYER: "embeddings (0)" if layer == 0 else str(layer)}
        for rank, (i, p) in enumerate(lens.top(layer, k), 1):
            row[f"#{rank}"] = f"{tokenizer.id_to_token(i)}  {p:.3f}"
        row[f"p({tokenizer.id_to_token(answer)})"] = float(lens.probs[layer, answer])
        row[f"rank of {tokenizer.id_to_token(answer)}"] = int((lens.probs[layer] > lens.probs[layer, answer]).sum()) + 1
        rows.append(row)
    return pd.DataFrame(rows)


def lens_grid(lens: MaskLens, k: int, limit: int = 30) -> tuple[list[int], np.ndarray]:
    """The tokens in any layer's top-k (the last layer's first, at most `limit`) and their (L + 1, n) probabilities."""
    last = lens.probs.shape[0] - 1
    chosen: list[int] = [i for i, _ in lens.top(last, k)]
    others = {i for layer in range(last) for i, _ in lens.top(layer, k)} - set(chosen)
    chosen += sorted(others, key=lambda i: -float(lens.probs[:, i].max()))
    chosen = chosen[:limit]
    return chosen, lens.probs[:, chosen]
