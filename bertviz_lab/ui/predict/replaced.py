"""ELECTRA's discriminator on the Mask & predict page: it guesses no word, it says which tokens are fakes.

ELECTRA trains a small generator to fill masks and the discriminator to spot, at every token, whether
the generator replaced it. So in place of guesses at [MASK] this page shows each token's probability of
having been replaced: type a sentence with one word swapped for a plausible wrong one and see it flagged.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.figures.predictions import replaced_bars
from bertviz_lab.ui.kit.tables import number
from bertviz_lab.ui.kit.widgets import chart, encode_or_stop, family_note
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.predict import guesses as vpr

COLUMNS = {"p(replaced)": st.column_config.ProgressColumn("p(replaced)", format="%.4f", min_value=0, max_value=1),
           "logit": number("%.3f", "logit")}


def replaced_tokens(ckpt: Checkpoint, text_a: str, text_b: str | None) -> None:
    family_note(ckpt, what="This is a discriminator: it has no MLM head, so it fills no [MASK]. It reads every "
                           "token and gives the probability that the generator replaced it. Swap one word for a "
                           "plausible wrong one (\"the chef ate the meal\" for \"the chef cooked the meal\") and "
                           "see whether it is flagged; open the generator to fill masks")
    encoding = encode_or_stop(ckpt, text_a, text_b)
    rows = vpr.replaced_rows(ckpt.model, encoding)
    flagged = [f"{plain(r['token'])} ({r['p(replaced)']:.0%})" for r in rows if r["p(replaced)"] > 0.5]
    st.subheader("Which tokens look replaced?")
    st.caption("Flagged, above 50%: " + (", ".join(flagged) if flagged else "none: every token looks original"))
    table, right = st.columns([2, 3])
    table.dataframe(rows, hide_index=True, column_config=COLUMNS)
    chart(replaced_bars(rows, "p(replaced) = sigmoid(logit) per token; dashed: 50%"), "replaced_tokens", right,
          key="predict.replaced", theme="streamlit")
