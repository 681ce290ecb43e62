"""A model card (model_card.json) as short sentences of plain text, and what markdown may show as typed.

Torch-free, so Home and the CLI's info read a card without loading a model.
"""

from __future__ import annotations

import re

# What a model card may say, and how a page or the CLI shows it: plain text, facts whose keys
# are missing or of the wrong type left out. Streamlit's markdown (st.caption, st.subheader)
# also turns ":name:" into emoji, "->" into arrows and ":material/..." into icons, which no
# escaping prevents, so text from a file goes into markdown only if `markdown_safe` says so.
_MARKDOWN_SAFE = re.compile(r"(?:[^\W_]|[ ,.()'%+/?·\-]|:(?=\s|$)|(?<=[^\W_])_(?=[^\W_]))*")  # a_b: no emphasis


def markdown_safe(text: str) -> bool:
    """True if `text` shows exactly as written when passed to Streamlit's markdown."""
    return (bool(_MARKDOWN_SAFE.fullmatch(text)) and text[:1].isalnum() and "--" not in text
            and "www." not in text.lower() and not re.match(r"\d+[.)]", text))


# a run's card says which autocast its forwards ran under (pretrain/loop.py); older cards do not
AUTOCAST_FACTS = {"bf16": "trained under bf16 autocast", "fp16": "trained under fp16 autocast",
                  "off": "trained in fp32"}


def card_facts(card: object) -> list[str]:
    """The model card's training facts as short sentences of plain text (torch-free)."""
    if not isinstance(card, dict):
        return []
    facts = []
    corpus, steps = _plain(card.get("corpus")), card.get("steps")
    if corpus:
        count = f"{steps:,}" if _whole(steps) else "?"
        facts.append(f"trained on the {corpus} for {count} steps")
    task = _plain(card.get("fine_tuned_on"))
    if task:
        count = f"{steps:,}" if _whole(steps) else "?"
        start = _plain(card.get("started"))
        facts.append(f"fine-tuned on {task} for {count} steps" + (f", {start}" if start else ""))
    autocast = AUTOCAST_FACTS.get(card.get("autocast"))
    if autocast:
        facts.append(autocast)
    held = card.get("held_out")
    held = held if isinstance(held, dict) else {}
    top1, top5, nsp = (_fraction(held.get(k)) for k in ("mlm_top1", "mlm_top5", "nsp_acc"))
    if top1 is not None:
        facts.append(f"held-out masked-word accuracy {top1:.0%} (top-1)"
                     + (f", {top5:.0%} (top-5)" if top5 is not None else ""))
    if nsp is not None:
        facts.append(f"next-sentence accuracy {nsp:.0%}")
    return facts


def _plain(value: object, limit: int = 120) -> str | None:
    """A card's string on one line: control characters and runs of spaces collapsed, length capped."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(c if c.isprintable() else " " for c in value[: 4 * limit]).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**15


def _fraction(value: object) -> float | None:
    """A rate in [0, 1] (accuracy), or None for anything else: strings, bools, NaN, 7."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return None
    return float(value)
