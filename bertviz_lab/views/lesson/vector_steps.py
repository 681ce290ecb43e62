"""The lesson's two steps about a token's vector: its row of the embedding matrix ("embeddings"), and the vectors
the layers give it in context ("contextual").

"embeddings" asks which of four words has the embedding row nearest a word of the sentence, and says in words what
the active model's embedding layer adds to that row (position, segment, a projection: the families differ).
"contextual" compares one word in three sentences, two in one sense and one in another, by cosine within a layer:
at layer 0, the embedding layer's output, a vector depends only on the token and where it stands; the class
predicts where the same-sense pair is the closer one.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import WORD_MARKERS
from bertviz_lab.corpus import lexicon
from bertviz_lab.errors import InputError
from bertviz_lab.views.representations import neighbours as nv
from bertviz_lab.views.representations import vectors as rv
from bertviz_lab.views.lesson.questions import NEAR, Question, Quiz, ranked, shuffled

RANKED = 2_000  # nearest embedding rows ranked to draw the embedding question's options from
OPTIONS = 4  # the embedding question's options, all of the word's kin: the nearest, then three spread (`_spread`)
FUNCTION_WORDS = frozenset("a an the this that on in at of to for from by with and or but is was are were be it he she "
                           "they i you we his her its their my our your not".split())


# --- Embeddings -----------------------------------------------------------------------------------
def shown(token: str) -> str:
    """A vocabulary entry as the class reads it: without the marks of a word start (Ġ, ▁)."""
    return token.lstrip("".join(WORD_MARKERS))


def embedding_words(encoding: Encoding, tokenizer: WordPieceTokenizer) -> list[str]:
    """The sentence's words that are one vocabulary entry each, as the vocabulary writes them (the embedding
    question asks about one of them)."""
    pieces = Counter(w for w in encoding.word_ids if w is not None)
    found: dict[str, str] = {}  # as shown -> the vocabulary entry
    for token, i, word in zip(encoding.tokens, encoding.ids, encoding.word_ids):
        if word is not None and pieces[word] == 1 and i not in tokenizer.special_ids and shown(token).isalpha():
            found.setdefault(shown(token), token)
    return list(found.values())


def askable_words(encoding: Encoding, tokenizer: WordPieceTokenizer) -> list[str]:
    """The sentence's one-entry words (`embedding_words`) with at least OPTIONS kin (the word itself left out)
    that are one entry each: the words the embedding question can ask about with options of the word's own kind."""
    return [w for w in embedding_words(encoding, tokenizer) if len(kin_ids(tokenizer, shown(w))) >= OPTIONS]


def content_word(words: list[str]) -> str:
    """The first word that is not a function word (the embeddings step asks about it first), else the first."""
    return next((w for w in words if shown(w).lower() not in FUNCTION_WORDS), words[0])


def kin(word: str) -> list[str]:
    """The story world's words of `word`'s kind: every word of each lexicon list that holds it (for "cat", the
    pets; "mouse:mice" read as "mouse"), in the lexicon's order, `word` itself left out."""
    found: dict[str, None] = {}
    for name, value in vars(lexicon).items():
        if name.isupper() and isinstance(value, str):
            words = [w.split(":")[0] for w in value.split()]
            if word in words:
                found.update(dict.fromkeys(w for w in words if w != word))
    return list(found)


def kin_ids(tokenizer: WordPieceTokenizer, word: str) -> dict[str, int]:
    """`word`'s kin that are one vocabulary entry each, with their ids."""
    ids = {}
    for other in kin(word):
        try:
            ids[other] = nv.vocabulary_id(tokenizer, other)
        except InputError:  # several pieces or unknown: not one row of the matrix
            continue
    return ids


def _kin_cosines(model: BertForPreTraining, tokenizer: WordPieceTokenizer, token_id: int,
                 word: str) -> pd.DataFrame:
    """`word`'s kin that are one vocabulary entry each, with the cosine of each one's embedding row with
    `token_id`'s, nearest first."""
    ids = kin_ids(tokenizer, word)
    table = torch.nn.functional.normalize(model.bert.embeddings.word_embeddings.weight.detach().float(), dim=-1)
    cosine = (table[list(ids.values())] @ table[token_id]).tolist() if ids else []
    return (pd.DataFrame({nv.COSINE: cosine, nv.TOKEN: list(ids)})
            .sort_values(nv.COSINE, ascending=False, kind="stable").reset_index(drop=True))


def _spread(words: pd.DataFrame) -> pd.DataFrame:
    """Four rows of a ranking (nearest first), or none when it has fewer: its first, then three spread over the
    rest, first, middle and last, taken from those at least NEAR below it where three are (so the answer is
    clear of a near tie when the list allows)."""
    if len(words) < OPTIONS:
        return words.iloc[:0]
    clear = words.iloc[1:][words[nv.COSINE].iloc[1:] <= words[nv.COSINE].iloc[0] - NEAR]
    rest = clear if len(clear) >= 3 else words.iloc[1:]
    n = len(rest)
    return pd.concat([words.iloc[:1], rest.iloc[[0, n // 2, n - 1]]])


def embeddings(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
               token: str) -> tuple[Quiz, pd.DataFrame, pd.DataFrame]:
    """Which of four words has the embedding row nearest to `token`'s (a vocabulary entry)? The options are four
    words of the story world's list of its kind (`kin`: the pets for "cat"), so every option is a plausible
    neighbour of one kind and the class must think about the vectors; a word without four such words is an
    InputError. Returns the quiz, the options' cosines (best first) and the ranking's first rows."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None or token_id in tokenizer.special_ids:
        raise InputError(f"{token!r} is not a word of this model's vocabulary")
    k = min(RANKED, tokenizer.vocab_size - len(tokenizer.special_ids) - 1)
    nearest = nv.static_neighbours(model, tokenizer, token_id, k)
    nearest[nv.TOKEN] = nearest[nv.TOKEN].map(shown)
    word = shown(token)
    picks = _spread(_kin_cosines(model, tokenizer, token_id, word))
    if len(picks) < OPTIONS:  # options of another kind would give the answer away: the one of the word's kind
        raise InputError(f"this model's vocabulary has too few words of “{word}”'s kind in the story world (each "
                         "one token) to ask about it: pick another word")
    chosen = (f"The options are four of the story world's words of the same kind as “{word}” (the lexicon "
              f"lists {', '.join(kin(word))}): the nearest of them, then three spread over the rest.")
    options = shuffled(picks[nv.TOKEN].tolist(), word)
    cosine = dict(zip(picks[nv.TOKEN], picks[nv.COSINE].astype(float)))
    rest = ", ".join(f"{t} {c:.3f}" for t, c in cosine.items())
    return (ranked(Question(f"Which word's embedding is closest to the embedding of “{word}”?", options), cosine,
                   f"Cosine similarity of each embedding row with “{word}”'s: {rest}. {chosen}"),
            picks.reset_index(drop=True), nearest.head(8))


# --- Contextual vectors -------------------------------------------------------------------------
SAME, OTHER = "same sense (1 with 3)", "other sense (1 with 2)"  # the contextual step's two cosines
CLOSER = {(True, True): "at layer 0 and at the last layer", (False, True): "at the last layer only",
          (True, False): "at layer 0 only", (False, False): "at neither"}  # (at layer 0, at the last) -> option


def _at(positions: tuple[int, ...]) -> str:
    return f"position {positions[0]}" if len(positions) == 1 else f"positions {positions[0]} to {positions[-1]}"


def _same(spelling: tuple[str, ...]) -> str:
    """'the same token', or 'the same 3 pieces (▁b an k)' for a word the model reads in several."""
    return "the same token" if len(spelling) == 1 else f"the same {len(spelling)} pieces ({' '.join(spelling)})"


def layer_zero(wic: rv.WordInContext, tie: bool) -> str:
    """What layer 0 can say about the three words, in words: a vector there is a function of the token and where
    it stands (the sentences are single, so the segment is the same), so two words of one spelling at one position
    are one vector, and any other difference there is one of position (or spelling), not of sense. `tie`: the two
    cosines are within NEAR at layer 0."""
    word, knows = wic.word, "layer 0 knows only the token and where it stands"
    same = [(i, j) for i, j in ((0, 1), (0, 2), (1, 2))
            if wic.positions[i] == wic.positions[j] and wic.spellings[i] == wic.spellings[j]]
    if len(same) == 3:
        return (f"At layer 0 the three “{word}”s are one vector: {_same(wic.spellings[0])} at the same "
                f"{_at(wic.positions[0])}, and {knows}.")
    if (1, 2) in same:
        return (f"At layer 0 sentence 2's and sentence 3's “{word}” are one vector: {_same(wic.spellings[1])} at "
                f"the same {_at(wic.positions[1])}, and {knows}. So the two cosines are equal there whatever the "
                "senses, and either reading of layer 0 counts.")
    if same:
        i, j = same[0]
        senses = "though their senses differ" if j == 1 else "and their senses agree"
        why = (f"At layer 0 sentence {i + 1}'s and sentence {j + 1}'s “{word}” are one vector (cosine 1): "
               f"{_same(wic.spellings[i])} at the same {_at(wic.positions[i])}, {senses}; {knows}.")
    else:
        where = ("positions {}, {} and {}".format(*(p[0] for p in wic.positions))
                 if all(len(p) == 1 for p in wic.positions) else
                 ", ".join(_at(p) for p in wic.positions[:2]) + " and " + _at(wic.positions[2]))
        if len(set(wic.spellings)) == 1:
            why = f"At layer 0 the three “{word}”s are {_same(wic.spellings[0])} at {where}, so there they differ "
            why += "only by position"
        else:
            spelled = ", ".join(" ".join(t) for t in wic.spellings)
            why = f"At layer 0 {knows}; here the model reads “{word}” as {spelled} at {where}"
        why += ": which pair is closer there says nothing about sense."
    if tie:
        why += (f" The two cosines are within {NEAR} of each other there (a near tie), so either reading of layer 0 "
                "counts.")
    return why


def contextual(model: BertForPreTraining, tokenizer: WordPieceTokenizer, word: str,
               sentences: list[str]) -> tuple[Quiz, pd.DataFrame]:
    """Sentence 1's word against sentence 3's (the same sense) and sentence 2's (another sense), by cosine within
    each layer (cosines of different layers do not compare: each layer has its own geometry). Is the same-sense
    pair the closer one at layer 0, at the last layer? A layer whose two cosines are within NEAR reads either way,
    and the answer says every reading it accepts; with both layers that close it is not scored."""
    if len(sentences) != 3 or not all(s.strip() for s in sentences):
        raise InputError("type three sentences: the word in one sense, in another sense, and in the first sense "
                         "again")
    word = word.strip()
    wic = rv.word_in_context(model, tokenizer, word, sentences)
    cosine = rv.cosines(wic.vectors)  # (L + 1, 3, 3)
    table = pd.DataFrame({rv.LAYER: np.arange(len(cosine)), SAME: cosine[:, 0, 2], OTHER: cosine[:, 0, 1]})
    ends = table.iloc[[0, -1]]  # layer 0 and the last layer
    gaps = (ends[SAME] - ends[OTHER]).tolist()
    readings = [(True, False) if abs(g) < NEAR else (g > 0,) for g in gaps]  # each layer's possible verdicts
    accepted = [o for (a, b), o in CLOSER.items() if a in readings[0] and b in readings[1]]
    answer = CLOSER[(gaps[0] > 0, gaps[1] > 0)]
    last = len(table) - 1
    why = (f"Cosine of sentence 1's “{word}” with sentence 3's (same sense) and with sentence 2's (other "
           f"sense): {ends[SAME].iloc[0]:.3f} and {ends[OTHER].iloc[0]:.3f} at layer 0, {ends[SAME].iloc[1]:.3f} "
           f"and {ends[OTHER].iloc[1]:.3f} at layer {last}. " + layer_zero(wic, len(readings[0]) == 2))
    if len(readings[1]) == 2:
        why += f" At layer {last} the two are within {NEAR} of each other (a near tie), so either reading of it counts."
    scored = not (len(readings[0]) == 2 and len(readings[1]) == 2)
    if not scored:
        why += " With both layers that close, the question has no clear answer on this model and is not scored."
    elif len(accepted) > 1:
        why += " Each of these answers counts: " + " and ".join(f"“{o}”" for o in accepted) + "."
    question = Question(f"Where is sentence 1's “{word}” closer to the “{word}” of sentence 3 (the same sense) "
                        f"than to that of sentence 2 (another sense)? Compare within a layer, at layer 0 and at the "
                        f"last layer ({last}).", tuple(CLOSER.values()))
    also = tuple(o for o in accepted if o != answer)
    return Quiz(question, answer, why, also=also, scored=scored), table
