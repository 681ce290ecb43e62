"""Training curves: loss, accuracy, learning rate and throughput of one run or several overlaid.

Input is plain data: `{run name: Curves}`, each with the run's train records and
held-out (eval) records as DataFrames indexed by nothing in particular, one column per
field of `bertviz_lab.metrics.Metrics` (`metrics.frame`): step, loss, acc, ... The
names are the same for pretraining and fine-tuning runs. Train curves are drawn thin and
faint (they are noisy, one point per step); held-out curves bold with markers. Each
run keeps one colour across every chart, so an overlay (e.g. with and without NSP)
reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.figures import house
from bertviz_lab.metrics import EVAL, TRAIN, Metrics, frame

RUN_COLORS = ("#1f5fa8", "#e0791b", "#4c9a2a", "#c2383a", "#8d5ab8", "#6b6b6b", "#1a9e9e", "#b8860b")
MAX_POINTS = 1500  # per trace: longer train curves are thinned so live redraws stay quick
HEIGHT = 300
LEGEND = dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right", font=dict(size=12))


@dataclass
class Curves:
    train: pd.DataFrame = field(default_factory=pd.DataFrame)  # step, loss, acc, nsp_loss, lr, ... (`metrics.frame`)
    eval: pd.DataFrame = field(default_factory=pd.DataFrame)  # step, loss, acc, top5, nsp_...

    @classmethod
    def from_records(cls, train: list[Metrics], held_out: list[Metrics]) -> Curves:
        return cls(frame(train), frame(held_out))

    def has(self, column: str) -> bool:
        return any(column in df.columns and df[column].notna().any() for df in (self.train, self.eval))


def _thin(df: pd.DataFrame) -> pd.DataFrame:
    """Every k-th row (and always the last) so a trace has at most MAX_POINTS points."""
    if len(df) <= MAX_POINTS:
        return df
    k = -(-len(df) // MAX_POINTS)
    return pd.concat([df.iloc[::k], df.iloc[[-1]]]).drop_duplicates("step")


def _trace(df: pd.DataFrame, column: str, *, name: str, color: str, style: str, group: str, fmt: str):
    df = _thin(df[["step", column]].dropna())
    bold = style == "held-out"
    return go.Scatter(
        x=df["step"].to_numpy(), y=df[column].to_numpy(), name=name, legendgroup=group,
        mode="lines+markers" if bold else "lines", line=dict(color=color, width=3 if bold else 1.2,
                                                             dash="dot" if style == "top-5" else None),
        marker=dict(size=6) if bold else None, opacity=1.0 if bold else 0.5,
        hovertemplate=f"step %{{x}}: %{{y:{fmt}}}<extra>{name}</extra>")


def _chart(curves: dict[str, Curves], series: list[tuple[str, str, str]], title: str, y_title: str, *,
           fmt: str = ".4f", y_range: list | None = None, log_y: bool = False, x_range: list | None = None,
           extra: dict | None = None) -> go.Figure:
    """series: (table TRAIN/EVAL, column, label) drawn for every run that has that column; `extra`: more
    layout (shapes, annotations), given here so the figure's layout is built and validated once."""
    traces = []
    for (run, data), color in zip(curves.items(), RUN_COLORS * 8):
        for table, column, label in series:
            df = data.train if table == TRAIN else data.eval
            if column in df.columns and df[column].notna().any():
                name = label if len(curves) == 1 else f"{run} · {label}"
                traces.append(_trace(df, column, name=name, color=color, style=label, group=run, fmt=fmt))
    layout = dict(
        showlegend=True, legend=LEGEND, hovermode="x unified" if len(curves) == 1 else "closest",
        xaxis=dict(title=dict(text="step"), rangemode="tozero", **({"range": x_range} if x_range else {})),
        yaxis=dict(title=dict(text=y_title), type="log" if log_y else "linear",
                   **({"range": y_range} if y_range else {})),
        margin=dict(l=10, r=10, t=60, b=10), **(extra or {}))
    return go.Figure(data=traces, layout=house(layout, title, HEIGHT))


def loss_curves(curves: dict[str, Curves], task: str = "mlm", train: bool = True, *, x_range: list | None = None,
                y_range: list | None = None, extra: dict | None = None) -> go.Figure:
    """MLM (or NSP) cross-entropy, train (unless `train` is False) and held-out, in nats: lower is better.
    `x_range`, `y_range` fix the axes (a live chart that grows); `extra` adds layout, e.g. a reference line."""
    column, what = ("loss", "MLM loss") if task == "mlm" else ("nsp_loss", "NSP loss")
    series = [(TRAIN, column, "train")] * train + [(EVAL, column, "held-out")]
    return _chart(curves, series, what, "loss (nats)", x_range=x_range, y_range=y_range, extra=extra)


def accuracy_curves(curves: dict[str, Curves], task: str = "mlm", train: bool = True) -> go.Figure:
    """Share of masked words guessed right (top-1, top-5 on held-out text), or NSP accuracy."""
    if task == "mlm":
        series = [(TRAIN, "acc", "train")] * train + [(EVAL, "acc", "held-out"), (EVAL, "top5", "top-5")]
        title = "MLM accuracy"
    else:
        series, title = [(TRAIN, "nsp_acc", "train")] * train + [(EVAL, "nsp_acc", "held-out")], "NSP accuracy"
    return _chart(curves, series, title, "accuracy", fmt=".1%", y_range=[0, 1.02])


def lr_curve(curves: dict[str, Curves]) -> go.Figure:
    """The schedule: linear warmup to the peak, then linear decay to 0."""
    return _chart(curves, [(TRAIN, "lr", "train")], "Learning rate", "learning rate", fmt=".2e")


def throughput_curve(curves: dict[str, Curves]) -> go.Figure:
    return _chart(curves, [(TRAIN, "tokens_per_s", "train")], "Speed", "tokens / s",
                  fmt=",.0f")
