"""BERT's fine-tuning heads (the paper's Figure 4): one linear layer on top of the pretrained encoder.

- Sequence classification (one sentence, or a pair A [SEP] B): the pooler's output, tanh(W h_[CLS] + b),
  then dropout and `classifier`, one logit per label. As Hugging Face's `BertForSequenceClassification`.
- Token classification (a tag per word): every position of last_hidden_state, then dropout and
  `classifier`. As `BertForTokenClassification`, which has no pooler.

`BertClassifier` is a `BertForPreTraining` without MLM or NSP heads plus `classifier`, so its weights
are named exactly as in `transformers` (bert.*, classifier.*) and every page that reads attention or
hidden states works on a fine-tuned model too. `hf_config` adds num_labels, id2label and label2id to
config.json, so `BertFor*Classification.from_pretrained` loads a saved folder and gives the same logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bertviz_lab.bert.config import BertConfig, show
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import Dropout, Linear
from bertviz_lab.errors import CheckpointError, ConfigError

SEQUENCE, TOKEN = "sequence", "token"  # what the head classifies: the whole input, or each token
ARCHITECTURES = {SEQUENCE: "BertForSequenceClassification", TOKEN: "BertForTokenClassification"}
MAX_LABELS = 1000


class BertClassifier(BertForPreTraining):
    """The encoder (+ pooler for sequence tasks) and one linear classifier over `labels`."""

    def __init__(self, cfg: BertConfig, labels: Sequence[str], level: str = SEQUENCE):
        if level not in ARCHITECTURES:
            raise ConfigError(f"a classifier is {SEQUENCE} or {TOKEN}-level, got {level!r}")
        labels = check_labels(labels)
        super().__init__(cfg, mlm_head=False, nsp_head=False, pooler=level == SEQUENCE)
        self.labels, self.level = labels, level
        self.dropout = Dropout(cfg.hidden_dropout_prob)
        self.classifier = Linear(cfg.hidden_size, len(labels))
        self._init_weights(self.classifier)

    @property
    def architecture(self) -> str:
        return ARCHITECTURES[self.level]

    @property
    def heads_summary(self) -> str:
        """What the classifier reads and the labels it chooses from (the first 8), for the model card."""
        shown = ", ".join(self.labels[:8]) + (f" and {len(self.labels) - 8} more" if len(self.labels) > 8 else "")
        what = "a sentence classifier on the pooled CLS vector" if self.level == SEQUENCE else \
            "a tag classifier on every token"
        return f"{what}, no MLM head ({len(self.labels)} labels: {shown})"

    def hf_config(self) -> dict:
        id2label = {str(i): label for i, label in enumerate(self.labels)}
        extra = {"num_labels": len(self.labels), "id2label": id2label,
                 "label2id": {label: i for i, label in enumerate(self.labels)}}
        if self.level == SEQUENCE:
            extra["problem_type"] = "single_label_classification"
        return {**super().hf_config(), **extra}

    def classify(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, *, return_hidden: bool = False):
        """Logits: (B, num_labels) for a sequence head, (B, T, num_labels) for a token head.
        return_hidden: also the vector each logit reads ((B, d) pooled [CLS], or (B, T, d))."""
        out = self(input_ids, token_type_ids, attention_mask, encoder_only=True)
        features = out.pooled if self.level == SEQUENCE else out.hidden_states[-1]
        logits = self.classifier(self.dropout(features))
        return (logits, features) if return_hidden else logits


def check_labels(labels: Sequence[str]) -> tuple[str, ...]:
    """The labels as a tuple of distinct, non-empty strings (2 to MAX_LABELS of them)."""
    labels = tuple(labels)
    if not 2 <= len(labels) <= MAX_LABELS:
        raise ConfigError(f"a classifier needs 2 to {MAX_LABELS} labels, got {len(labels)}")
    if not all(isinstance(label, str) and label.strip() for label in labels):
        raise ConfigError("every label must be a non-empty string")
    if len(set(labels)) != len(labels):
        raise ConfigError("the labels must be distinct")
    return labels


def saved_head(raw: dict, hidden_size: int, found: dict, heads: dict) -> tuple[tuple[str, ...], str] | None:
    """(labels, level) of a fine-tuned checkpoint's classifier, or None for a pretrained one.
    raw: config.json; found: weight name -> (shape, is float); heads: which other heads the weights hold.

    A classifier is built when the weights hold classifier.weight and config.json names a
    BertFor*Classification (or the checkpoint has no MLM head). The labels come from id2label
    (`transformers`' LABEL_0, LABEL_1, ... when it is absent) and must match the weight's rows.
    """
    if "classifier.weight" not in found:
        return None
    names = raw.get("architectures")
    name = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else ""
    levels = {arch: level for level, arch in ARCHITECTURES.items()}
    if name not in levels and heads["mlm"]:
        return None
    level = levels.get(name, SEQUENCE if heads["pooler"] else TOKEN)
    if level == SEQUENCE and not heads["pooler"]:
        raise CheckpointError("a sequence classifier reads the pooler, but the weights lack bert.pooler.dense")
    shape = tuple(found["classifier.weight"][0])
    rows = shape[0] if len(shape) == 2 else 0
    if not 2 <= rows <= MAX_LABELS:
        raise CheckpointError(f"classifier.weight has shape {shape}: a classifier needs 2 to {MAX_LABELS} "
                              f"rows of {hidden_size} (one per label)")
    expected = {"classifier.weight": (rows, hidden_size), "classifier.bias": (rows,)}
    for key, shape in expected.items():
        if key not in found or tuple(found[key][0]) != shape or not found[key][1]:
            raise CheckpointError(f"weights do not match config.json: {key} should be a float tensor of shape "
                                  f"{shape}, got {found[key][0] if key in found else 'nothing'}")
    labels = _labels(raw.get("id2label"), rows)
    try:
        return check_labels(labels), level
    except ConfigError as exc:
        raise CheckpointError(f"config.json: {exc}") from None


def _labels(id2label, rows: int) -> list[str]:
    """The label of each classifier row from config.json's id2label ({"0": "ok", "1": "broken"})."""
    if id2label is None:
        return [f"LABEL_{i}" for i in range(rows)]
    if not isinstance(id2label, dict) or len(id2label) != rows:
        count = len(id2label) if isinstance(id2label, dict) else show(id2label)
        raise CheckpointError(f"config.json: id2label should name the classifier's {rows} labels, got {count}")
    try:
        by_id = {int(k): v for k, v in id2label.items()}
    except (TypeError, ValueError):
        raise CheckpointError("config.json: id2label's keys must be the label numbers 0, 1, ...") from None
    if sorted(by_id) != list(range(rows)) or not all(isinstance(v, str) for v in by_id.values()):
        raise CheckpointError(f"config.json: id2label must map 0 to {rows - 1} to label names")
    return [by_id[i] for i in range(rows)]
