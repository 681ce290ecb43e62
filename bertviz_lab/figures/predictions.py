"""Figures of the Mask & predict page: top-k bars for one mask, and entropy per mask.

Both take table rows (a DataFrame or a list of dicts, as `views.predict.guesses.candidate_rows`
and `views.predict.guesses.mask_rows` return them) so a chart always shows the numbers of the
table next to it. Tokens are HTML-escaped: plotly renders some HTML in labels.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.figures import house, house_layout

BAR_COLOR = "#1f77b4"
LINE_COLOR = "#7f7f7f"
# Tick and axis-title text, written into each figure: drawn with Streamlit's theme, a chart's ticks are otherwise
# the theme's pale grey at 12 px, unreadable on a projector (projector.enlarge sizes them but keeps their colour).
TEXT_COLOR = "#1b1b1b"
TICKS = dict(size=14, color=TEXT_COLOR)
AXIS_TITLE = dict(color=TEXT_COLOR)


def prediction_bars(rows: pd.DataFrame | list[dict], title: str | None = None) -> go.Figure:
    """Horizontal bars of the top-k probabilities of one mask, the most probable on top.

    rows: columns "token", "probability" and optionally "logit", most probable first.
    """
    table = pd.DataFrame(rows)
    tokens = [html.escape(str(t)) for t in table["token"]]
    probs = table["probability"].astype(float).tolist()
    logits = table["logit"].astype(float).tolist() if "logit" in table else [float("nan")] * len(probs)
    bar = go.Bar(
        x=probs, y=tokens, orientation="h", marker_color=BAR_COLOR,
        text=[f"{p:.1%}" for p in probs], textposition="auto", textfont=dict(size=15), cliponaxis=False,
        customdata=logits, hovertemplate="<b>%{y}</b><br>probability %{x:.6g}<br>logit %{customdata:.4f}"
                                         "<extra></extra>")
    top = max(probs, default=0.0)
    layout = dict(
        # Category axis: tokens such as "1" or "." must stay labels, in the table's order.
        yaxis=dict(type="category", autorange="reversed", tickfont=dict(TICKS, size=16)),
        # Room on the right for the label of a short top bar; a long one carries its label inside.
        # Percent ticks; below 10% with decimals, so an untrained model's 0.05% bars do not read "0%, 0%, 0%".
        xaxis=dict(title=dict(text="probability", font=AXIS_TITLE), tickfont=TICKS,
                   tickformat=".0%" if top >= 0.1 else ".2~%",
                   range=[0, min(1.0, top * 1.3) or 1.0]))
    return go.Figure(bar, layout=house(layout, title, 90 + 34 * len(tokens)))


def confidence_strip(rows: pd.DataFrame | list[dict], max_entropy: float, title: str | None = None,
                     column: str = "entropy (nats)") -> go.Figure:
    """Entropy of each mask's prediction (nats), with the entropy of a uniform guess as a line.

    rows: columns "mask", "position", "independent" (the top-1 token) and `column` (the entropy;
    its name says the temperature when it is not 1).
    Low bars: the model is sure; a bar near the line: it has no idea.
    """
    table = pd.DataFrame(rows)
    labels = [f"#{m} → {html.escape(str(t))}" for m, t in zip(table["mask"], table["independent"])]
    entropy = table[column].astype(float).tolist()
    fig = go.Figure(go.Bar(
        x=labels, y=entropy, marker_color=BAR_COLOR,
        text=[f"{h:.2f}" for h in entropy], textposition="outside", textfont=dict(size=15), cliponaxis=False,
        customdata=table["position"].tolist(),
        hovertemplate="%{x}<br>token position %{customdata}<br>entropy %{y:.4f} nats<extra></extra>"))
    fig.add_hline(y=max_entropy, line_dash="dash", line_color=LINE_COLOR,
                  annotation_text=f"no idea at all: log V = {max_entropy:.2f}", annotation_position="top left")
    fig.update_xaxes(type="category", tickangle=-45 if len(labels) > 8 else 0, tickfont=TICKS)
    fig.update_yaxes(title=dict(text=column, font=AXIS_TITLE), range=[0, max_entropy * 1.15], tickfont=TICKS)
    return house_layout(fig, title, height=340)


def replaced_bars(rows: pd.DataFrame | list[dict], title: str | None = None) -> go.Figure:
    """ELECTRA's discriminator: each token's probability of having been replaced, in sentence order.

    rows: columns "position", "token" and "p(replaced)" (as `views.predict.guesses.replaced_rows` returns them).
    """
    table = pd.DataFrame(rows)
    labels = [f"{p} · {html.escape(str(t))}" for p, t in zip(table["position"], table["token"])]
    probs = table["p(replaced)"].astype(float).tolist()
    fig = go.Figure(go.Bar(
        x=labels, y=probs, marker_color=[("#d62728" if p > 0.5 else BAR_COLOR) for p in probs],
        text=[f"{p:.0%}" for p in probs], textposition="outside", textfont=dict(size=14), cliponaxis=False,
        hovertemplate="%{x}<br>p(replaced) %{y:.4f}<extra></extra>"))
    fig.add_hline(y=0.5, line_dash="dash", line_color=LINE_COLOR)  # the title names it: no label over the bars
    fig.update_xaxes(type="category", tickangle=-45 if len(labels) > 10 else 0, tickfont=TICKS)
    fig.update_yaxes(title=dict(text="p(replaced)", font=AXIS_TITLE), range=[0, 1.12], tickformat=".0%",
                     tickfont=TICKS)
    return house_layout(fig, title, height=360)
