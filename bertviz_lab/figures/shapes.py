"""Figures of the Shapes and padding tab: one padded sentence's attention, its [PAD] keys framed.

The matrix is `attention_heatmap`'s; what is added is a dashed frame around the [PAD] columns
(right padding: the last T - n keys) and a note above it, so a learner sees at a glance that
every query gives those keys weight 0.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import token_labels
from bertviz_lab.figures.attention import attention_heatmap

PAD_FRAME = "#c0392b"  # a red that stands out against the blues of the weights


def padded_attention(weights: np.ndarray, tokens: list[str], real: int, title: str) -> go.Figure:
    """(T, T) weights of one sentence of a padded batch whose first `real` positions are real tokens."""
    labels = token_labels(tokens)
    fig = attention_heatmap(weights, labels, labels, title)
    T = weights.shape[1]
    if real < T:  # one update for the frame and its note: a single extra layout validation
        frame = dict(type="rect", xref="x", yref="paper", x0=real - 0.5, x1=T - 0.5, y0=0, y1=1,
                     line=dict(color=PAD_FRAME, width=2, dash="dash"))
        note = dict(text="[PAD] keys", xref="x", yref="paper", x=(real + T - 1) / 2, y=1, yanchor="bottom",
                    showarrow=False, font=dict(color=PAD_FRAME, size=13))
        fig.update_layout(shapes=[frame], annotations=[note])
    return fig
