"""What the Representations page should show, computed in a test from the shipped model run directly (its hidden
states, its MLM head, its embedding rows) with numpy: cosines, pair means, the PCA and nearest rows by hand, never
through the views the page calls. `ckpt` is a loaded checkpoint (model and tokenizer)."""

import numpy as np
import torch


@torch.no_grad()
def hidden(ckpt, text: str) -> tuple[list[str], np.ndarray]:
    """One sentence alone through the model: its tokens and its hidden states, (L + 1, T, d) in float64."""
    encoding = ckpt.tokenizer.encode(text)
    out = ckpt.model(torch.tensor([encoding.ids]))
    return encoding.tokens, torch.stack(out.hidden_states)[:, 0].double().numpy()


def word_vectors(ckpt, word: str, sentences) -> np.ndarray:
    """(L + 1, S, d): the word's vector in each sentence (one token of the shipped vocabulary, first occurrence)."""
    found = [hidden(ckpt, s) for s in sentences]
    return np.stack([h[:, tokens.index(word)] for tokens, h in found], axis=1)


def cosine_matrix(v: np.ndarray) -> np.ndarray:
    unit = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return unit @ unit.T


def pair_means(sims: np.ndarray, senses) -> tuple[float, float]:
    """The mean cosine over the pairs of sentences with the same sense, and with different senses."""
    pairs = [(i, j) for i in range(len(senses)) for j in range(i + 1, len(senses))]
    same = [sims[i, j] for i, j in pairs if senses[i] == senses[j]]
    return float(np.mean(same)), float(np.mean([sims[i, j] for i, j in pairs if senses[i] != senses[j]]))


def principal_components(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, 2) scores on the first two principal components, and their shares of the variance."""
    u, s, _ = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    return u[:, :2] * s[:2], s[:2] ** 2 / (s ** 2).sum()


def nearest_rows(ckpt, token: str, k: int) -> tuple[list[str], np.ndarray]:
    """The k rows of the word-embedding matrix nearest by cosine to `token`'s, itself and the specials left out."""
    table = ckpt.model.bert.embeddings.word_embeddings.weight.detach().double().numpy()
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    scores = unit @ unit[ckpt.tokenizer.token_to_id(token)]
    left_out = {token, *ckpt.tokenizer.specials.values()}
    best = [i for i in np.argsort(-scores) if ckpt.tokenizer.id_to_token(int(i)) not in left_out][:k]
    return [ckpt.tokenizer.id_to_token(int(i)) for i in best], scores[best]


@torch.no_grad()
def lens(ckpt, text: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Each [MASK]'s position; the MLM head applied there to every layer's hidden state, as probabilities
    (M, L + 1, V); and the model's own MLM output there (M, V)."""
    encoding = ckpt.tokenizer.encode(text)
    out = ckpt.model(torch.tensor([encoding.ids]))
    masks = [i for i, t in enumerate(encoding.tokens) if t == ckpt.tokenizer.specials["mask"]]
    layers = torch.softmax(ckpt.model.mlm_head(torch.stack(out.hidden_states)[:, 0, masks]).double(), dim=-1)
    return masks, layers.transpose(0, 1).numpy(), torch.softmax(out.mlm_logits[0, masks].double(), dim=-1).numpy()


@torch.no_grad()
def contextual_nearest(ckpt, query: str, word: str, sentences, layer: int, k: int) -> np.ndarray:
    """The k highest cosines at `layer` between `word` in `query` and every word token of `sentences` (special
    tokens, sentences too long for the model and the query's own sentence left out): the sentences run through
    the model in one batch, right-padded, the attention mask keeping [PAD] out."""
    tokens, h = hidden(ckpt, query)
    q = h[layer, tokens.index(word)]
    encodings = [e for e in map(ckpt.tokenizer.encode, sentences)
                 if e.tokens != tokens and len(e.tokens) <= ckpt.config.max_tokens]
    T = max(len(e.ids) for e in encodings)
    ids = torch.tensor([e.ids + [ckpt.tokenizer.token_to_id("[PAD]")] * (T - len(e.ids)) for e in encodings])
    mask = torch.tensor([[1] * len(e.ids) + [0] * (T - len(e.ids)) for e in encodings])
    states = ckpt.model(ids, attention_mask=mask).hidden_states[layer].double().numpy()  # (B, T, d)
    specials = set(ckpt.tokenizer.specials.values())
    v = np.array([states[b, i] for b, e in enumerate(encodings) for i, t in enumerate(e.tokens) if t not in specials])
    return np.sort(v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q)))[::-1][:k]
