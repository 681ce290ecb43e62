"""Figures of the Losses step-by-step page: plain Python / pandas in, plotly figures out.

`topk_grid`: per masked position, the model's top-k probabilities with the true
token highlighted (added as an extra bar, with its rank, when it is not in the top k).
`neg_log_p_bars`: each masked position's -log p(true) with the mean (L_MLM) as a line.
`masking_frequency_chart`: empirical shares of the masking rule against the chosen
rates and BERT's 15 / 80 / 10 / 10, with the rule's 95% interval as error bars. Tokens are HTML-escaped: plotly renders some HTML.
"""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertviz_lab.figures import house_layout

OTHER_COLOR, TRUE_COLOR = "#9ecae1", "#d62728"  # light blue for guesses, red for the true token
BAR_COLOR, TARGET_COLOR, LINE_COLOR = "#1f77b4", "#bdbdbd", "#7f7f7f"


def topk_grid(panels: list[dict], columns: int = 2) -> go.Figure:
    """One horizontal bar chart per masked position.

    panels: dicts with "title", "tokens", "probs" (top-k, best first), "true_token",
    "p_true" and "rank" (1 = the model's top guess).
    """
    cols = max(1, min(columns, len(panels)))
    rows = max(1, math.ceil(len(panels) / cols))
    height = 110 + 230 * rows
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.12, vertical_spacing=min(0.3, 70 / height),
                        subplot_titles=[html.escape(p["title"]) for p in panels])
    for i, panel in enumerate(panels):
        tokens, probs = list(panel["tokens"]), [float(p) for p in panel["probs"]]
        is_true = [t == panel["true_token"] for t in tokens]
        labels = [f"{html.escape(t)}" for t in tokens]
        if not any(is_true):  # the true token is outside the top k: show it anyway, with its rank
            labels.append(f"{html.escape(panel['true_token'])} (rank {panel['rank']})")
            probs.append(float(panel["p_true"]))
            is_true.append(True)
        fig.add_trace(go.Bar(
            x=probs, y=labels, orientation="h", showlegend=False, cliponaxis=False,
            marker_color=[TRUE_COLOR if t else OTHER_COLOR for t in is_true],
            text=[f"{p:.1%}" for p in probs], textposition="outside", textfont=dict(size=14),
            hovertemplate="<b>%{y}</b><br>p = %{x:.6g}<extra></extra>"), row=i // cols + 1, col=i % cols + 1)
    fig.update_yaxes(type="category", autorange="reversed", tickfont=dict(size=15))
    fig.update_xaxes(range=[0, 1.25], tickformat=".0%", showticklabels=False)
    fig.update_annotations(font=dict(size=15))
    return house_layout(fig, "Top guesses per masked position (red = the true token)", height=height)


def neg_log_p_bars(labels: list[str], neg_log_p: list[float], mean: float, title: str | None = None) -> go.Figure:
    """Bars of -log p(true) per masked position and a dashed line at their mean, L_MLM."""
    names = [html.escape(label) for label in labels]
    fig = go.Figure(go.Bar(
        x=names, y=neg_log_p, marker_color=BAR_COLOR, text=[f"{v:.3f}" for v in neg_log_p],
        textposition="outside", textfont=dict(size=15), cliponaxis=False,
        hovertemplate="%{x}<br>−log p = %{y:.6f}<extra></extra>"))
    fig.add_hline(y=mean, line_dash="dash", line_color=TRUE_COLOR, annotation_position="top left",
                  annotation_text=f"mean = L_MLM = {mean:.4f}", annotation_font=dict(size=14, color=TRUE_COLOR),
                  annotation_bgcolor="rgba(255,255,255,0.9)")
    fig.update_xaxes(type="category", tickfont=dict(size=15))
    top = max([mean, *neg_log_p], default=1.0)
    fig.update_yaxes(title="−log p(true)", range=[0, top * 1.25 or 1.0])
    return house_layout(fig, title, height=360)


def masking_frequency_chart(table: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Grouped bars: empirical share vs the chosen target; BERT's rates as marks.

    table: columns "quantity", "empirical", "target", "bert", "se_rule", "low" and "high"
    (as `masking_stats.masking_frequencies` returns it). The error bars are the half
    width of the rule's 95% interval, (high − low) / 2 = 1.96 × se_rule, drawn around
    the empirical share: the bar's whisker reaches "expected" exactly when the
    empirical share lies inside that interval.
    """
    x = [html.escape(q) for q in table["quantity"]]
    half = (table["high"] - table["low"]) / 2
    fig = go.Figure()
    fig.add_trace(go.Bar(name="empirical", x=x, y=table["empirical"], marker_color=BAR_COLOR,
                         error_y=dict(type="data", array=half, color=LINE_COLOR),
                         text=[f"{v:.1%}" for v in table["empirical"]], textposition="outside",
                         textfont=dict(size=14), cliponaxis=False, customdata=table["se_rule"],
                         hovertemplate="%{x}<br>empirical %{y:.4f}<br>SE (rule) %{customdata:.5f}<extra></extra>"))
    fig.add_trace(go.Bar(name="target (your rates)", x=x, y=table["target"], marker_color=TARGET_COLOR,
                         text=[f"{v:.0%}" for v in table["target"]], textposition="outside",
                         textfont=dict(size=14), cliponaxis=False,
                         hovertemplate="%{x}<br>target %{y:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(name="BERT: 15 / 80 / 10 / 10", x=x, y=table["bert"], mode="markers",
                             marker=dict(symbol="line-ew-open", size=46, color=TRUE_COLOR,
                                         line=dict(width=3, color=TRUE_COLOR)),
                             hovertemplate="%{x}<br>BERT %{y:.2f}<extra></extra>"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.12, yanchor="top", x=0))
    fig.update_yaxes(title="share", tickformat=".0%", range=[0, 1.12])
    fig.update_xaxes(tickfont=dict(size=15))
    house_layout(fig, title, height=430)
    fig.update_layout(margin=dict(b=60))
    return fig
