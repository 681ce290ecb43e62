"""Text for training a small BERT: a seeded story world, or the user's own text.

`StoryGenerator` writes endless short English stories about a small world (pets,
a bank, a river, cities and their weather, food, a tech company, ...) from a
hand-written vocabulary of about two thousand words. The grammar has agreement,
tenses, questions, negation, relative clauses, pronouns that refer back, and
words whose meaning depends on context (bank, apple, bat, bark, match, light),
so a model trained for minutes shows real structure in its attention.

`documents_from_text` and `read_text_file` turn pasted or uploaded text into
the same shape: documents that are lists of sentences.
"""

from bertviz_lab.corpus.generator import (
    SEED_SENTENCES,
    StoryGenerator,
    generate_documents,
    vocabulary,
)
from bertviz_lab.corpus.user_text import documents_from_text, read_text_file

__all__ = [
    "SEED_SENTENCES",
    "StoryGenerator",
    "documents_from_text",
    "generate_documents",
    "read_text_file",
    "vocabulary",
]
