"""Lesson figures: a question's options as the model scores them, its answer dark and the class's guess
outlined; the short training run's loss on fixed axes; a reference level (chance, ln V) drawn across.

Numbers and labels in, plotly out; labels arrive as typed and are HTML-escaped here.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.figures import house
from bertviz_lab.figures.training import Curves, loss_curves

ANSWER_COLOR, OTHER_COLOR = "#1f5fa8", "#c6dbef"  # the model's answer; the other options
GUESS_COLOR, LEVEL_COLOR = "#e0791b", "#7f7f7f"  # the outline of the class's guess; a reference line
LABEL_CHARS = 48  # a longer option (a sentence) is cut on the axis; the hover has it whole


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def answer_bars(labels: list[str], values: list[float], answer: str, guess: str | None, title: str,
                value_format: str = ".3f", x_title: str = "", reference: tuple[float, str] | None = None
                ) -> go.Figure:
    """One horizontal bar per option, in the order given (top to bottom); the answer's bar dark, the guess's
    outlined in orange; `reference` (value, name) a dashed vertical line, e.g. chance level."""
    shown = [html.escape(_short(str(label))) for label in labels]
    bar = go.Bar(
        x=[float(v) for v in values], y=shown, orientation="h", cliponaxis=False,
        marker=dict(color=[ANSWER_COLOR if label == answer else OTHER_COLOR for label in labels],
                    line=dict(color=[GUESS_COLOR if label == guess else "rgba(0,0,0,0)" for label in labels],
                              width=4)),
        text=[format(float(v), value_format) for v in values], textposition="outside", textfont=dict(size=15),
        customdata=[html.escape(str(label)) for label in labels],
        hovertemplate=f"<b>%{{customdata}}</b><br>%{{x:{value_format}}}<extra></extra>")
    top = max([float(v) for v in values] + [reference[0] if reference else 0.0, 1e-9])
    low = min([float(v) for v in values] + [0.0])
    room = 0.25 * (top - low)  # for the numbers at the bars' ends, left of a negative bar too
    if value_format.endswith("%") and 0 <= low and top <= 1:  # shares: the whole scale, 0 to 100%
        top, room = 1.0, 0.15
    layout = dict(
        yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=15)),
        xaxis=dict(title=dict(text=x_title), range=[low - room if low < 0 else 0, top + room], zeroline=True,
                   zerolinecolor="#888", tickformat=".0%" if value_format.endswith("%") else None),
        showlegend=False, bargap=0.35)
    if reference is not None:
        layout["shapes"] = [dict(type="line", x0=reference[0], x1=reference[0], yref="paper", y0=0, y1=1,
                                 line=dict(color=LEVEL_COLOR, dash="dash", width=2))]
        layout["annotations"] = [dict(x=reference[0], y=1, yref="paper", yanchor="bottom", showarrow=False,
                                      text=html.escape(reference[1]), font=dict(color=LEVEL_COLOR, size=13))]
    return go.Figure(data=[bar], layout=house(layout, title, 130 + 44 * len(labels)))


def training_loss(train: pd.DataFrame, held_out: pd.DataFrame, chance: float, steps: int) -> go.Figure:
    """A run's MLM loss (train faint, held-out bold) on fixed axes, 0 to `steps` and 0 to above ln V, so a
    live chart grows without its axes jumping; ln V (`chance`) drawn across. Axes and line go into the one
    layout the figure is built with (a live chart redraws it every few steps)."""
    return loss_curves({"tiny BERT": Curves(train, held_out)}, x_range=[0, steps], y_range=[0, chance * 1.15],
                       extra=_level_line(chance, f"ln V = {chance:.2f} (a uniform guess)"))


def _level_line(level: float, name: str) -> dict:
    """Layout (shapes, annotations) for a dashed horizontal line at `level` across the plot, named at its right
    end: what `with_level` draws, for a figure built in one go."""
    return dict(shapes=[dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=level, y1=level,
                             line=dict(color=LEVEL_COLOR, dash="dash", width=2))],
                annotations=[dict(xref="x domain", x=1, xanchor="right", yref="y", y=level, yanchor="bottom",
                                  showarrow=False, text=html.escape(name), font=dict(color=LEVEL_COLOR, size=13))])


def with_level(fig: go.Figure, level: float, name: str) -> go.Figure:
    """`fig` with a dashed horizontal line at `level`, named at its right end (e.g. ln V on a loss chart)."""
    return fig.add_hline(y=level, line=dict(color=LEVEL_COLOR, dash="dash", width=2),
                         annotation_text=html.escape(name), annotation_position="top right",
                         annotation_font=dict(color=LEVEL_COLOR, size=13))


GRID_TICKS = 11  # px: the token labels of the heads grid, small enough to fit a square (plotly thins the rest)
MAX_TITLED_HEADS = 6  # more heads across than this and a title per square ("L0 H0") runs into the next one


def grid_is_compact(layers: int, heads: int) -> bool:
    """Whether `labelled_grid` names the heads on its axes (head numbers on top, layers left) instead of a title per
    square and token labels: BERT-base's 12 x 12 squares are too small for either."""
    return heads > MAX_TITLED_HEADS or layers > MAX_TITLED_HEADS


def labelled_grid(fig: go.Figure, layers: int, heads: int) -> go.Figure:
    """A copy of `figures.attention.attention_grid`'s figure labelled to be read: with a few heads, token labels
    where they fit (the queries left of the first head of each layer, the keys under the last layer's squares); with
    many (`grid_is_compact`), no title per square but the head numbers (H) once above the top row and the layers down the
    left, the tokens in the hover. Short enough (about 440 px, 15% more on a projector) to sit beside the question on
    one 1024 x 768 screen for a few heads."""
    square = max(48, 350 // layers) if not grid_is_compact(layers, heads) else max(30, 480 // layers)  # px per row
    out = go.Figure(fig)
    compact = grid_is_compact(layers, heads)
    for n in range(1, layers * heads + 1):
        layer, head = divmod(n - 1, heads)
        suffix = "" if n == 1 else str(n)
        out.layout[f"yaxis{suffix}"].update(showticklabels=head == 0 and not compact, tickfont_size=GRID_TICKS)
        out.layout[f"xaxis{suffix}"].update(showticklabels=layer == layers - 1 and not compact,
                                            tickfont_size=GRID_TICKS, tickangle=-90)
    if not compact:
        return out.update_layout(height=90 + square * layers, margin_b=80)
    size = GRID_TICKS if heads <= 12 else GRID_TICKS - 1
    top = [dict(text=str(head), x=sum(out.layout[f"xaxis{'' if head == 0 else head + 1}"].domain) / 2, y=1,
                xref="paper", yref="paper", xanchor="center", yanchor="bottom", showarrow=False,
                font=dict(size=size)) for head in range(heads)]
    left = [dict(text=f"L{layer}", x=0, xshift=-4, y=sum(out.layout[f"yaxis{'' if n == 1 else n}"].domain) / 2,
                 xref="paper", yref="paper", xanchor="right", yanchor="middle", showarrow=False, font=dict(size=size))
            for layer, n in ((layer, layer * heads + 1) for layer in range(layers))]
    corner = dict(text="H", x=0, xshift=-4, y=1, xref="paper", yref="paper", xanchor="right", yanchor="bottom",
                  showarrow=False, font=dict(size=size))  # "H" once: "H10H11" ran together at 1024 px
    out.layout.annotations = [corner] + top + left  # replaced: update_layout would merge them into the titles by index
    return out.update_layout(height=90 + square * layers, margin_l=36, margin_b=20)
