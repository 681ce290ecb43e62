"""Where is the answer made? The page's activation patching in a notebook: one grid between a clean and a corrupted
run, returned as a `Patched` that shows its heatmap, the sentences written from its numbers and its checks. Both
runs are recorded once per pair (kept on the Lab), so another grid or direction of the same pair patches at once."""

from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go

from bertviz_lab.errors import InputError
from bertviz_lab.explain.patch_grids import DIRECTIONS, GRIDS, Grid
from bertviz_lab.figures import patching as fpa
from bertviz_lab.notebook.lab import Bar, Lab, as_int, choice, flag, index, lab_of
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import DRAWS, PatchAsk
from bertviz_lab.views.patching.reading import Check
from bertviz_lab.views.patching.runs import Patching

TITLES = {"resid": "Residual stream", "attn": "Attention blocks", "mlp": "Feed-forward blocks", "heads": "Heads",
          "qkv": "Query, key and value"}


@dataclass(frozen=True)
class Patched:
    """One patching grid and what it says: `grid` (values normalised, 0 the corrupted run and 1 the clean run; `f`
    the raw scores), `sentences` written from its numbers, `checks` (the residual grid's; [] for the others) and
    `patching`, the two runs. `figure()` draws it; a notebook cell shows the figure, the sentences and the checks."""

    patching: Patching
    grid: Grid
    sentences: list[str]
    checks: list[Check]

    @property
    def values(self):
        return self.grid.values

    @property
    def rows(self) -> list[str]:
        return list(self.grid.rows)

    @property
    def columns(self) -> list[str]:
        """The tokens, or "head 1", "head 2", ... for the heads grid."""
        if self.grid.kind == "heads":
            return [f"head {h + 1}" for h in range(self.grid.values.shape[1])]
        return list(self.patching.tokens)

    @property
    def title(self) -> str:
        g = self.grid
        head = f" of head {g.head[0] + 1}.{g.head[1] + 1}" if g.head is not None else ""
        way = "clean into corrupted" if g.direction == "denoise" else "corrupted into clean"
        return f"{TITLES[g.kind]}{head}, {way} ({g.direction}): {self.patching.metric}"

    def figure(self, height: int | None = None) -> go.Figure:
        """The grid as the page draws it (figures/patching.py): exact values on hover."""
        g, p = self.grid, self.patching
        return fpa.grid_heatmap(g.values, g.f, g.rows, fpa.columns(g.kind, p.tokens, p.heads), self.title,
                                metric=p.metric, height=height)

    def _words(self) -> str:
        items = "".join(f"<li>{'PASS' if c.passed else '<b>FAIL</b>'} {html.escape(c.name)}: "
                        f"{html.escape(c.detail)}</li>" for c in self.checks)
        said = "".join(f"<p>{html.escape(s)}</p>" for s in self.sentences)
        return said + (f"<ul>{items}</ul>" if items else "")

    def _repr_html_(self) -> str:
        return self.figure().to_html(full_html=False, include_plotlyjs="cdn") + self._words()

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.figure())
        display(HTML(self._words()))

    def __repr__(self) -> str:
        checks = "; ".join(f"{'PASS' if c.passed else 'FAIL'} {c.name}" for c in self.checks)
        return f"<Patched {self.title}, {self.values.shape[0]}x{self.values.shape[1]}. " + " ".join(self.sentences) \
            + (f" Checks: {checks}>" if checks else ">")


def patch(lab, clean: str, corrupt: str | None = None, *, answer: str | None = None, foil: str | None = None,
          what: str = "resid", direction: str = "denoise", head: tuple[int, int] | None = None, noise: bool = False,
          noised=(), draws: int = DRAWS, seed: int = 0) -> Patched:
    """Activation patching at the [MASK] of `clean`: how much of the answer comes back when one activation of the
    `clean` run is copied into the `corrupt` run (direction "denoise": is it enough?), or taken from the corrupted run
    into the clean one ("noise": is it needed?). The score F is logit(`answer`) - logit(`foil`) at the [MASK]
    (default answer: the clean run's top guess; foil: the corrupted run's top guess other than the answer),
    normalised: 0 is the corrupted run, 1 the clean run.

    `corrupt`: the clean sentence with one word changed, as many tokens long (its [MASK] at the same place). With
    `noise=True` the corrupted run is the clean one with Gaussian noise (3x the word vectors' standard deviation,
    Meng et al. 2022) on the tokens `noised` (positions from 0; default: where `corrupt` differs), `draws` seeded
    draws averaged.

    `what`: "resid" (the residual stream: the embeddings and each layer's output, by position), "attn" / "mlp"
    (each layer's attention or feed-forward block, its output before the residual add and LayerNorm, by position),
    "heads" (each head's output before W_O, layer x head) or "qkv" (the query, key and value vectors of `head`,
    (layer, head) from 0, patched apart by position). One pair is one example: the metric and the corruption change
    the picture (the result's sentences and the page say how).
    """
    lab = lab_of(lab)
    what, direction = choice(what, GRIDS, "what"), choice(direction, DIRECTIONS, "direction")
    head = _head(lab, what, head)
    ask = PatchAsk(clean, corrupt or "", answer or "", foil or "", noise=flag(noise, "noise"), noised=_tokens(noised),
                   draws=draws, seed=seed)
    patching = lab.remember(("patch", ask), lambda: vpa.prepare(lab.model, lab.tokenizer, ask))

    def run() -> Grid:
        with Bar() as bar:
            return vpa.grid(patching, what, direction, head, progress=bar.fraction)

    grid = lab.remember(("patch grid", ask, what, direction, head), run)
    checks = vpa_read.checks(patching, grid) if what == "resid" else []
    return Patched(patching, grid, vpa_read.sentences(patching, grid), checks)


def _head(lab: Lab, what: str, head) -> tuple[int, int] | None:
    """`head` as (layer, head) from 0 for "qkv", checked against the model; an InputError for any other grid."""
    if what != "qkv":
        if head is not None:
            raise InputError(f"head is for what='qkv' (one head's query, key and value), not what={what!r}")
        return None
    if not isinstance(head, (tuple, list)) or len(head) != 2:
        raise InputError(f"what='qkv' patches one head: give head=(layer, head), each from 0, got {head!r}")
    c = lab.config
    return (index(head[0], c.num_hidden_layers, "layer"), index(head[1], c.num_attention_heads, "head"))


def _tokens(noised) -> tuple[int, ...]:
    """The noised token positions as a tuple of ints (one position alone is accepted too)."""
    if as_int(noised) is not None:
        noised = (noised,)
    if isinstance(noised, str) or not hasattr(noised, "__iter__"):
        raise InputError(f"noised must be token positions (whole numbers from 0), got {noised!r}")
    return tuple(noised)
