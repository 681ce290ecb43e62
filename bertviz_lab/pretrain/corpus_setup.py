"""What a run trains on: its tokenizer and its training and held-out document sources.

Built-in corpus: the generated small world, one token per word. A user's .txt:
its documents, 90% to train and 10% held out, with a WordPiece vocabulary
trained on it. With a run folder the tokenizer is saved there first, so a
resumed run reads exactly the vocabulary it started with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.data import DocumentSource, builtin_vocabulary
from bertviz_lab.pretrain.resources import corpus_documents

HELD_OUT_SEED = 2024  # the built-in held-out stories are the same for every run, so runs compare


@dataclass
class CorpusSetup:
    tokenizer: WordPieceTokenizer
    train: DocumentSource
    held_out: DocumentSource
    description: str


def build_corpus(cfg: TrainConfig, run_dir: str | Path | None = None) -> CorpusSetup:
    saved = Path(run_dir) / "tokenizer" if run_dir else None
    if cfg.corpus == "builtin":
        setup = CorpusSetup(WordPieceTokenizer.from_vocab(builtin_vocabulary()),
                            DocumentSource(None, seed=cfg.seed), DocumentSource(None, seed=HELD_OUT_SEED),
                            "built-in small world (generated stories)")
    else:
        setup = _user_corpus(cfg)
    if saved is not None:
        if (saved / "vocab.txt").is_file():
            setup.tokenizer = from_dir(saved)
        else:
            setup.tokenizer.save(saved)
    return setup


def _user_corpus(cfg: TrainConfig) -> CorpusSetup:
    path, documents = corpus_documents(cfg.corpus)  # capped, regular files only, UTF-8 sentences
    held = max(1, len(documents) // 10)
    train_docs, held_docs = documents[:-held], documents[-held:]
    sentences = [s for doc in train_docs for s in doc]
    tokenizer = WordPieceTokenizer.train(sentences, vocab_size=cfg.vocab_size, min_frequency=2)
    words = sum(len(s.split()) for s in sentences)
    return CorpusSetup(tokenizer, DocumentSource(train_docs, seed=cfg.seed), DocumentSource(held_docs, seed=0),
                       f"{path.name}: {len(documents)} documents, {words:,} words")
