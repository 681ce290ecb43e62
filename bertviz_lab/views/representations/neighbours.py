"""Nearest neighbours and the geometry of the vectors (the academic manual, seed text 001, exercise 2).

A `SentenceBank` is a few thousand corpus sentences encoded once per model: every word token's
vector at every layer, unit length, in float16. A token of the learner's sentence is then
compared two ways: its row of the input embedding matrix against every other row (the static
view: one vector per vocabulary entry, whatever the context), and its contextual vector against
the bank's vectors at one layer (which sentences, and which senses, come back).

`precision_at_k` measures the same thing for the built-in sense sets: for each built-in sentence,
how many of the k nearest occurrences of the word in the bank share its sense, layer by layer.
`anisotropy` is the mean cosine between unrelated tokens (different words, different sentences):
how much all of a layer's vectors point one way. `position_cosines` compares position embeddings.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.corpus import generate_documents
from bertviz_lab.corpus.senses import SENSE_SETS, examples, sense_of
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.representations.vectors import BATCH, LAYER, cosines, piece_means
from bertviz_lab.views.representations.words import find_word, occurrences, unknown

BANK_SENTENCES = 2_000  # general corpus sentences (a model with wide vectors gets fewer: BANK_BYTES)
PER_SENSE = 40  # sentences per sense of each ambiguous word added to the bank, when the corpus has them
BANK_SEED = 2026  # not the shipped model's training seed: the bank is text the model did not see in this order
BANK_DOCUMENTS = 3_000
BANK_BYTES = 192 * 2**20  # the stored vectors' budget: bertviz-mini needs ~60 MB, BERT-base gets ~1,000 sentences
TOKENS_PER_SENTENCE = 10  # a corpus sentence's word tokens, for the budget (measured: 9.4)
COSINE, TOKEN, SENTENCE, SENSE = "cosine", "token", "sentence", "sense"


@dataclass(frozen=True)
class SentenceBank:
    sentences: tuple[str, ...]
    token_ids: np.ndarray  # (N,) the vocabulary id of each stored token
    sentence_of: np.ndarray  # (N,) which sentence it is in
    position: np.ndarray  # (N,) its position in that sentence's encoding
    vectors: np.ndarray  # (L + 1, N, d) float16, unit length; special tokens ([CLS], <s>, ...) are not stored
    tokens: tuple[tuple[str, ...], ...]  # each sentence's tokens, to show a neighbour in its sentence

    @property
    def size(self) -> int:
        return len(self.token_ids)


def bank_sentences(model: BertForPreTraining) -> list[str]:
    """Distinct corpus sentences: every sense set's word in its senses, then the general stream."""
    stories = generate_documents(BANK_DOCUMENTS, seed=BANK_SEED)
    distinct = list(dict.fromkeys(s for story in stories for s in story))
    chosen: dict[str, None] = {}
    for word, senses in SENSE_SETS.items():
        for sense in senses:
            hits = [s for s in distinct if re.search(rf"\b{word}\b", s) and sense_of(word, s) == sense.name]
            chosen.update(dict.fromkeys(hits[:PER_SENSE]))
    per_sentence = TOKENS_PER_SENTENCE * (model.config.num_hidden_layers + 1) * model.config.hidden_size * 2
    budget = max(200, min(BANK_SENTENCES, BANK_BYTES // per_sentence - len(chosen)))
    general = [s for s in distinct if s not in chosen][:budget]
    return list(chosen) + general


@torch.no_grad()
def build_bank(model: BertForPreTraining, tokenizer: WordPieceTokenizer, sentences: list[str],
               progress: Callable[[float], None] | None = None) -> SentenceBank:
    """Encode `sentences` in padded batches (shortest first) and keep every word token's unit vector per layer."""
    limit = model.config.max_tokens
    encoded = [(s, tokenizer.encode(s)) for s in sentences]
    encoded = sorted([(s, e) for s, e in encoded if len(e) <= limit], key=lambda se: len(se[1]))
    device = next(model.parameters()).device
    chunks, ids, of, where = [], [], [], []
    for start in range(0, len(encoded), BATCH):
        part = encoded[start:start + BATCH]
        batch = inputs.pad_batch([e for _, e in part], tokenizer.pad_id, device)
        hidden = torch.stack(inputs.run_batch(model, batch).hidden_states)  # (L + 1, B, T, d)
        keep = batch.attention_mask.bool() & ~torch.isin(batch.ids, torch.tensor(
            sorted(tokenizer.special_ids), device=device))  # word tokens only
        rows, cols = keep.nonzero(as_tuple=True)
        chunks.append(torch.nn.functional.normalize(hidden[:, rows, cols].float(), dim=-1).half().cpu())
        ids.append(batch.ids[rows, cols].cpu())
        of.append(rows.cpu() + start)
        where.append(cols.cpu())
        if progress:
            progress(min(1.0, (start + len(part)) / len(encoded)))
    return SentenceBank(tuple(s for s, _ in encoded), torch.cat(ids).numpy(), torch.cat(of).numpy(),
                        torch.cat(where).numpy(), torch.cat(chunks, dim=1).numpy(),
                        tuple(tuple(e.tokens) for _, e in encoded))


def marked(text: str, encoding: Encoding, position: int) -> str:
    """The sentence as written, with the characters of the token at `position` wrapped in «»."""
    start, end = encoding.offsets[position]
    while start < end and text[start].isspace():
        start += 1  # a SentencePiece token's offsets may hold the space its ▁ stands for
    inside = text[start:end] or encoding.tokens[position]  # a token of no characters of its own: a lone Ġ
    return f"{text[:start]}«{inside}»{text[end:]}"


def sense_words(tokenizer: WordPieceTokenizer, text: str, encoding: Encoding) -> dict[int, str]:
    """Token position -> the sense-set word it is (a piece of) in `text`, for every such token."""
    return {p: word for word in SENSE_SETS for found in occurrences(tokenizer, text, encoding, word) for p in found}


@torch.no_grad()
def token_vectors(model: BertForPreTraining, encoding: Encoding, position: int) -> np.ndarray:
    """(L + 1, d) unit vectors of one token of the learner's sentence, every layer."""
    out = inputs.run(model, encoding, encoder_only=True)
    stacked = torch.stack([h[0, position] for h in out.hidden_states]).float()
    return torch.nn.functional.normalize(stacked, dim=-1).cpu().numpy()


def contextual_neighbours(bank: SentenceBank, tokenizer: WordPieceTokenizer, query: np.ndarray, layer: int, k: int,
                          *, word: str | None = None, own: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The k bank tokens nearest to `query` (a unit vector) at `layer`, with their sentences (and, for a
    sense-set `word`, their senses). `own`: the query sentence's tokens; a bank sentence the model reads
    the same way is the query itself (cosine 1), so it is left out."""
    scores = bank.vectors[layer].astype(np.float32) @ query.astype(np.float32)  # (N,)
    if own is not None:
        itself = [s for s, tokens in enumerate(bank.tokens) if tokens == tuple(own)]
        scores[np.isin(bank.sentence_of, itself)] = -np.inf
    best = [n for n in np.argsort(-scores, kind="stable")[:k] if np.isfinite(scores[n])]
    rows = []
    for n in best:
        s, p = int(bank.sentence_of[n]), int(bank.position[n])
        text = bank.sentences[s]
        encoding = tokenizer.encode(text)  # as build_bank encoded it: its offsets show the token in its sentence
        row = {COSINE: float(scores[n]), TOKEN: bank.tokens[s][p], SENTENCE: marked(text, encoding, p)}
        if word in SENSE_SETS:
            is_word = sense_words(tokenizer, text, encoding).get(p) == word
            row[SENSE] = (sense_of(word, text) or "—") if is_word else ""
        rows.append(row)
    return pd.DataFrame(rows)


def static_neighbours(model: BertForPreTraining, tokenizer: WordPieceTokenizer, token_id: int,
                      k: int) -> pd.DataFrame:
    """The k rows of the input embedding matrix nearest (by cosine) to `token_id`'s row, itself excluded."""
    table = model.bert.embeddings.word_embeddings.weight.detach().float()
    scores = torch.nn.functional.normalize(table, dim=-1) @ torch.nn.functional.normalize(table[token_id], dim=0)
    scores[token_id] = -2.0
    for special in tokenizer.special_ids:
        scores[special] = -2.0  # [PAD], [CLS] ... are not words
    best = torch.topk(scores, min(k, len(scores) - len(tokenizer.special_ids) - 1))
    return pd.DataFrame({COSINE: best.values.cpu().numpy().astype(float),
                         TOKEN: [tokenizer.id_to_token(int(i)) for i in best.indices]})


def vocabulary_id(tokenizer: WordPieceTokenizer, word: str) -> int:
    """The id of a single vocabulary entry, typed as text; several pieces or an unknown word is an InputError.

    The word is read as it stands inside a sentence (after a space), since that is the row the sentences use:
    byte-level BPE's `Ġbank`, not the `bank` it writes at a sentence's start. A typed entry (`##ing`, `Ġbank`)
    is taken as it is.
    """
    word = word.strip() if isinstance(word, str) else ""
    pieces: list[str] = []
    if word:
        text = f". {word}"  # a word after a space, as most of a sentence's words are
        encoding = tokenizer.encode(text)
        found = find_word(tokenizer, text, encoding, word)
        pieces = [encoding.tokens[p] for p in found] if found else []
    token_id = tokenizer.token_to_id(pieces[0]) if len(pieces) == 1 else tokenizer.token_to_id(word)
    if token_id is None or token_id in tokenizer.special_ids:
        shown = " ".join(pieces) if pieces else "nothing"
        raise InputError(f"type one word of the vocabulary; {word[:40]!r} reads as {shown}")
    return token_id


# --- Retrieval by sense, by layer -------------------------------------------------------------------------
@dataclass(frozen=True)
class SenseVectors:
    """One sense set's word, in its built-in sentences (the queries) and in the bank's tagged sentences."""

    word: str
    queries: tuple[tuple[str, str], ...]  # (sentence, sense)
    query_vectors: np.ndarray  # (L + 1, Q, d)
    pool: tuple[str, ...]  # the bank's sentences that use the word in a sense `sense_of` can tell
    pool_senses: np.ndarray  # (P,) their senses
    pool_vectors: np.ndarray  # (L + 1, P, d)


def _word_vectors(model: BertForPreTraining, tokenizer: WordPieceTokenizer, word: str,
                  sentences: list[str]) -> tuple[list[str], np.ndarray | None]:
    """The word's mean-of-pieces vector in each sentence that holds it (not as an unknown token) and fits the model."""
    found = [(s, e, find_word(tokenizer, s, e, word)) for s in sentences for e in [tokenizer.encode(s)]
             if len(e) <= model.config.max_tokens]
    found = [f for f in found if f[2] is not None and not unknown(tokenizer, f[1], f[2])]
    if not found:
        return [], None
    return [s for s, _, _ in found], piece_means(model, tokenizer.pad_id, [e for _, e, _ in found],
                                                 [p for _, _, p in found])


def sense_vectors(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
                  bank: SentenceBank) -> list[SenseVectors]:
    """Every sense set the model can read, encoded once: `precision_at_k` then only compares."""
    sets = []
    for word in SENSE_SETS:
        queries = examples(word)
        pool, pool_vectors = _word_vectors(model, tokenizer, word,
                                           [s for s in bank.sentences if sense_of(word, s) is not None])
        kept, query_vectors = _word_vectors(model, tokenizer, word, [s for s, _ in queries])
        if len(pool) < 2 or len(kept) < len(queries):
            continue  # this model's vocabulary or length cannot hold the word
        sets.append(SenseVectors(word, tuple(queries), query_vectors, tuple(pool),
                                 np.array([sense_of(word, s) for s in pool], dtype=object), pool_vectors))
    if not sets:
        raise InputError("this model's vocabulary has none of the sense sets' words, so there is nothing to retrieve")
    return sets


def precision_at_k(sets: list[SenseVectors], k: int) -> pd.DataFrame:
    """Per word and layer: for each built-in sentence, the share of its k nearest bank occurrences with its sense.

    The neighbours are the bank's sentences that use the word in a sense `sense_of` can tell; the query's own
    sentence is left out. When a sense has fewer than k other sentences, the share is of those there are, so
    1.0 always means "every neighbour it could have had". `chance` is the share a random pick would get.
    """
    rows = []
    for found in sets:
        Q = len(found.queries)
        for layer in range(found.pool_vectors.shape[0]):
            sims = cosines(np.concatenate([found.query_vectors[layer], found.pool_vectors[layer]]))[:Q, Q:]
            hits, chance = [], []
            for q, (sentence, sense) in enumerate(found.queries):
                others = np.array([s != sentence for s in found.pool])
                order = [i for i in np.argsort(-sims[q], kind="stable") if others[i]]
                relevant = int(((found.pool_senses == sense) & others).sum())
                if relevant == 0:
                    continue
                hits.append(sum(found.pool_senses[i] == sense for i in order[:k]) / min(k, relevant))
                chance.append(relevant / len(order))
            rows.append({"word": found.word, LAYER: layer, "precision": float(np.mean(hits)),
                         "chance": float(np.mean(chance)), "neighbours": len(found.pool)})
    return pd.DataFrame(rows)


def anisotropy(bank: SentenceBank, pairs: int = 4_000, seed: int = 0) -> pd.DataFrame:
    """Per layer, the mean cosine between random pairs of tokens that differ in word and in sentence."""
    rng = random.Random(seed)
    n, a, b = bank.size, [], []
    while len(a) < pairs and n > 1:
        i, j = rng.randrange(n), rng.randrange(n)
        if bank.token_ids[i] != bank.token_ids[j] and bank.sentence_of[i] != bank.sentence_of[j]:
            a.append(i)
            b.append(j)
    if not a:
        raise InputError("the sentence bank is too small to pick unrelated tokens")
    means = [(bank.vectors[layer, a].astype(np.float32) * bank.vectors[layer, b].astype(np.float32)).sum(-1).mean()
             for layer in range(bank.vectors.shape[0])]
    return pd.DataFrame({LAYER: range(len(means)), "mean cosine": np.array(means, dtype=float)})


def position_cosines(model: BertForPreTraining, n: int | None = None) -> np.ndarray:
    """(n, n) cosine similarity between the first n position embeddings (all of them by default)."""
    table = model.bert.embeddings.position_embeddings.weight.detach().float().cpu().numpy()
    return cosines(table[: n or len(table)])
