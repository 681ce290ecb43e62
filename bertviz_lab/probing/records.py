"""The records of careful probing, read by the Syntax page's "Probing, carefully" tab, the `probe` command, `nb.probe`
and the Time-lapse: plain numpy arrays and numbers, one entry per hidden state (0 = the embeddings' output, then
layers 1..L), so a record says the same thing wherever it is drawn.

A task (TASKS) is a labelling of the corpus's words or word pairs: part of speech (a word's UPOS), dependency label
(a dependent and its head -> the relation without its subtype), coreference (a pronoun and a noun before it -> is it
the pronoun's referent) and noun number (a noun -> singular or plural, from the story world's lexicon).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TASKS = ("pos", "dep", "coref", "number")
TASK_NAMES = {"pos": "part of speech", "dep": "dependency label", "coref": "pronoun and referent",
              "number": "noun number"}
KINDS = ("linear", "mlp")  # the probes: softmax regression, and one hidden layer (MLP_HIDDEN units, ReLU)


@dataclass(frozen=True)
class Features:
    """Every word of a corpus at every hidden state, read once by one model and shared by every probe."""

    vectors: np.ndarray  # (n_words, L + 1, d) float32: each word's tokens averaged, sentence after sentence
    sentence: np.ndarray  # (n_words,) int64: the sentence each word is in (0-based, the corpus's order)
    start: np.ndarray  # (sentences + 1,) int64: sentence s's words are rows start[s]:start[s + 1]

    @property
    def layers(self) -> int:
        return self.vectors.shape[1]


@dataclass(frozen=True)
class Examples:
    """One task's examples over a corpus: rows into `Features.vectors` and a label each."""

    task: str
    classes: tuple[str, ...]  # label names; labels index into them
    labels: np.ndarray  # (N,) int64
    keys: tuple[str, ...]  # (N,) the word type the control label is fixed by (Hewitt & Liang)
    first: np.ndarray  # (N,) int64: the word (a pair task's first word: the dependent, the pronoun)
    second: np.ndarray | None  # (N,) int64: a pair task's second word (the head, the candidate); None for a word task
    train: np.ndarray  # (N,) bool: in the training split (the corpus's first sentences), else the test split
    texts: tuple[str, ...]  # (N,) the example in words: "cats", "he -> boy"

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class LayerFits:
    """One kind of probe at every hidden state: test accuracy on the task and on its control task."""

    kind: str  # "linear" or "mlp"
    accuracy: np.ndarray  # (L + 1,) test accuracy, the task's labels
    control: np.ndarray  # (L + 1,) test accuracy, the control task's labels (fixed per word type)

    @property
    def selectivity(self) -> np.ndarray:
        """(L + 1,) task accuracy minus control accuracy (Hewitt & Liang 2019)."""
        return self.accuracy - self.control


@dataclass(frozen=True)
class Mix:
    """Tenney et al. 2019's scalar mix: a linear probe over a learned softmax-weighted sum of the hidden states."""

    weights: np.ndarray  # (L + 1,) the mix over every hidden state: its softmax weights, summing to 1
    cumulative: np.ndarray  # (L + 1,) test accuracy of a probe whose mix may use hidden states 0..l only
    expected_layer: float | None  # sum_l l * delta_l / sum_l delta_l, delta_l = cumulative[l] - cumulative[l - 1]
    centre: float  # centre of gravity: sum_l l * weights[l]


@dataclass(frozen=True)
class Codelength:
    """Voita & Titov 2020's online code, in bits, for the linear probe at every hidden state."""

    online: np.ndarray  # (L + 1,) the task's labels, this model's vectors
    control: np.ndarray  # (L + 1,) the control task's labels, this model's vectors
    random_weights: np.ndarray | None  # (L + 1,) the task's labels, the random-weights twin's vectors
    uniform: float  # the labels sent with no vector at all: examples * log2(classes)
    examples: int  # training examples coded
    blocks: tuple[int, ...]  # the block ends (examples), the first block sent with the uniform code

    def compression(self, bits: np.ndarray) -> np.ndarray:
        """uniform / codelength: how many times shorter than sending the labels with no vector."""
        return self.uniform / np.asarray(bits, dtype=np.float64)


@dataclass(frozen=True)
class TaskProbes:
    """Everything measured for one task on one model."""

    task: str
    classes: tuple[str, ...]
    train: int  # training examples
    test: int  # test examples
    majority: float  # test accuracy of always guessing the commonest training label
    linear: LayerFits
    mlp: LayerFits | None  # None when not asked for
    random_weights: np.ndarray | None  # (L + 1,) the linear probe's test accuracy on the random-weights twin
    mix: Mix | None
    codelength: Codelength | None
    note: str = ""  # anything the reader should know (examples capped, classes merged)


@dataclass(frozen=True)
class Probing:
    """Careful probing of one model over one corpus."""

    corpus: str  # the corpus's name ("the story world (seed 0)", a treebank's file name)
    sentences: int  # read
    train_sentences: int
    hidden_states: int  # L + 1
    tasks: dict[str, TaskProbes]  # in TASKS order, the tasks that could be probed
    missing: dict[str, str]  # task -> one sentence: why it was not probed (too few examples, no labels)
    seconds: dict[str, float] = field(default_factory=dict)
    note: str = ""  # the corpus's note (sentences left out)


@dataclass(frozen=True)
class Amnesic:
    """Elazar et al. 2021's amnesic probing at one hidden state: the task's linear information removed by INLP
    (Ravfogel et al. 2020), against random projections of the same rank."""

    task: str
    layer: int  # the hidden state projected (0 = the embeddings' output)
    rank: int  # directions removed
    iterations: int  # INLP's rounds
    majority: float  # the test split's commonest-label accuracy
    probe_before: float  # a linear probe's test accuracy at the layer before the projection
    probe_after: float  # a fresh linear probe's, after it
    probe_random: float  # a fresh linear probe's after a random projection of the same rank (mean over draws)
    masked: int  # held-out tokens the masked-LM loss is measured on (0: the model has no masked-LM head)
    loss_before: float  # mean masked-LM loss (nats), nothing removed
    loss_after: float  # the task's directions removed
    loss_random: np.ndarray  # (draws,) random directions of the same rank removed
    accuracy_before: float  # masked-LM top-1 accuracy on the same tokens
    accuracy_after: float
    accuracy_random: np.ndarray  # (draws,)
    agreement_before: dict[int, float | None] | None  # number only: attractors -> agreement accuracy
    agreement_after: dict[int, float | None] | None
    agreement_random: dict[int, float | None] | None  # the mean over the draws
    agreement_pairs: dict[int, int] | None  # attractors -> pairs scored
    draws: int
    seed: int
    note: str = ""
