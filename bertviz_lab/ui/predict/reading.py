""""What BERT reads": the input as the model's tokens, with a word of warning where it reads words badly; and the
guesses on one line right under the sentence box, so typing shows its effect without scrolling."""

from __future__ import annotations

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.ui.shell.models import BOX
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.predict.guesses import MaskReport, share
from bertviz_lab.views.predict.reading import MANY_PIECES, listed, reading

HUB_EXAMPLE = "bert-base-uncased"
LINE_GUESSES = 3  # guesses per mask on the line under the sentence box


def guesses_line(report: MaskReport, temperature: float, masks_shown: int) -> str:
    """The top guesses of the first `masks_shown` masks on one line (Markdown); the tables and charts say the rest."""
    masks = report.independent.masks
    parts = [f"#{i + 1} → " + " · ".join(f"**{plain(c.token)}** {share(c.prob)}" if r == 0 else
                                         f"{plain(c.token)} {share(c.prob)}"
                                         for r, c in enumerate(m.candidates[:LINE_GUESSES]))
             for i, m in enumerate(masks[:masks_shown])]
    more = f"; {len(masks) - masks_shown} more masks below" if len(masks) > masks_shown else ""
    tempered = "" if temperature == 1 else f" (at τ = {temperature:g})"
    return f"Guesses{tempered}: " + ";  ".join(parts) + more


def what_bert_reads(ckpt: Checkpoint, encoding: Encoding, text_a: str, text_b: str | None) -> None:
    """The tokens as the model reads them (masks applied), then what it cannot read well, and why."""
    seen = reading(ckpt.tokenizer, encoding, text_a, text_b)
    st.caption("What BERT reads: its tokens, one by one (a word it has no token for is read in pieces)")
    st.code(" ".join(seen.tokens), language=None, wrap_lines=True)
    problems = []
    if seen.unknown:
        problems.append(f"This model reads {plain(listed(list(seen.unknown)))} as {plain(ckpt.tokenizer.unk_token)}, "
                        "its unknown token: nothing of those words reaches it.")
    if seen.split:
        shown = [f"{w.text} ({' '.join(w.pieces)})" for w in seen.split]
        problems.append(f"This model has no token for {plain(listed(shown))} and reads "
                        f"{'it' if len(shown) == 1 else 'each'} in {MANY_PIECES} or more pieces; it must piece the "
                        "meaning together, so a guess that depends on such a word can be weak.")
    if seen.story_world:
        where = (f"{'It' if problems else 'This model'} knows only the lab's story world: its vocabulary is that world's {seen.vocab_size:,} tokens, "
                 "one per word of the stories plus single letters for everything else. For real English, open a "
                 f"BERT from the Hugging Face Hub: type `{HUB_EXAMPLE}` in the sidebar box “{BOX}”.")
        (st.warning if problems else st.caption)(" ".join(problems + [where]))
    elif problems:
        st.warning(" ".join(problems))
