"""A new-run form described once, without Streamlit: each field with its kind, label, help, default, step,
bounds and the grid it is drawn in. The Pretrain live form is `views.pretrain.live.FORM`, the Fine-tune form
`views.finetune.classifier.FORM`; `ui/kit/forms.py` draws a widget of each field's kind from this description, and
`ui/shell/state.py` gives each field its session key ("<page>.<field>").

A field is declared through the function of its kind (`whole`, `shape`, `decimal`, `choice`, `toggle`,
`text`), so a float cannot exist without its step and format, and the grid lays the fields out in the order
they are declared: a field added to a grid gets the next cell, never a cell of its own to keep in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INT, SHAPE, FLOAT = "int", "shape", "float"  # number inputs; SHAPE: a whole number, empty = the preset's
CHOICE, RADIO, TOGGLE, TEXT = "choice", "radio", "toggle", "text"  # a select box, radio buttons, a switch, a line
NUMBERS, CHOICES = (INT, SHAPE, FLOAT), (CHOICE, RADIO)
KINDS = (*NUMBERS, *CHOICES, TOGGLE, TEXT)
MAIN = "main"  # the grid a field is drawn in unless it says otherwise


@dataclass(frozen=True)
class Field:
    """One input of a new-run form. `name` is the setting it gives (a TrainConfig / FinetuneConfig field, or
    one the page reads itself, such as the run's name) and the end of its session key."""
    name: str
    label: str
    kind: str  # one of KINDS
    help: str | None = None
    default: Any = None  # what the widget shows before it is edited (SHAPE: None, an empty box)
    step: int | float | None = None  # numbers: what + and - add
    format: str | None = None  # FLOAT: the decimals shown, e.g. "%.5f"
    low: int | float | None = None  # numbers: the browser refuses a value outside [low, high] at once
    high: int | float | None = None
    options: Mapping[Any, str] | tuple | None = None  # CHOICES: value -> shown label, or values shown as they are;
    # None: offered by the page when it draws the form (e.g. the models a fine-tuning run may start from)
    placeholder: str | None = None  # what an empty box says
    grid: str = MAIN

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"form field {self.name}: unknown kind {self.kind!r} (one of {', '.join(KINDS)})")
        if self.kind in NUMBERS and not self.step:
            raise ValueError(f"form field {self.name}: a number needs its step")
        if self.kind == FLOAT and not self.format:
            raise ValueError(f"form field {self.name}: a decimal number needs its format, e.g. '%.3f'")


def whole(name: str, label: str, help: str, default: int, *, high: int | None = None, low: int | None = None,
          grid: str = MAIN) -> Field:
    return Field(name, label, INT, help, default, step=1, low=low, high=high, grid=grid)


def shape(name: str, label: str, help: str, *, high: int | None = None, grid: str = MAIN) -> Field:
    """A whole number of the model's shape: empty means the size preset's own value."""
    return Field(name, label, SHAPE, help, None, step=1, high=high, placeholder="preset's", grid=grid)


def decimal(name: str, label: str, help: str, default: float, *, step: float, format: str,
            low: float | None = None, high: float | None = None, grid: str = MAIN) -> Field:
    return Field(name, label, FLOAT, help, float(default), step=step, format=format, low=low, high=high, grid=grid)


def choice(name: str, label: str, options: Mapping | tuple | None, default=None, *, help: str | None = None,
           radio: bool = False, grid: str = MAIN) -> Field:
    return Field(name, label, RADIO if radio else CHOICE, help, default, options=options, grid=grid)


def toggle(name: str, label: str, default: bool, *, help: str | None = None, grid: str = MAIN) -> Field:
    return Field(name, label, TOGGLE, help, default, grid=grid)


def text(name: str, label: str, default: str = "", *, placeholder: str | None = None, grid: str = MAIN) -> Field:
    return Field(name, label, TEXT, None, default, placeholder=placeholder, grid=grid)


@dataclass(frozen=True)
class Grid:
    """Rows of columns the fields of one grid fill in order. columns: a count, or the columns' relative widths."""
    name: str
    columns: int | tuple[int, ...]
    fold: str | None = None  # drawn folded in an expander with this label ("Advanced")

    @property
    def width(self) -> int:
        return self.columns if isinstance(self.columns, int) else len(self.columns)


@dataclass(frozen=True)
class Form:
    """A new-run form: its grids, drawn one under the other, and its fields, each in one grid."""
    grids: tuple[Grid, ...]
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        names, grids = [f.name for f in self.fields], {g.name for g in self.grids}
        if len(set(names)) != len(names):
            raise ValueError(f"form fields named twice: {sorted({n for n in names if names.count(n) > 1})}")
        for field in self.fields:
            if field.grid not in grids:
                raise ValueError(f"form field {field.name}: no grid {field.grid!r} (the grids: {', '.join(grids)})")

    def __getitem__(self, name: str) -> Field:
        return {f.name: f for f in self.fields}[name]

    @property
    def numbers(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind in NUMBERS)

    def rows(self, grid: Grid) -> list[tuple[Field, ...]]:
        """The grid's fields in rows of its width, in the order they are declared."""
        mine = [f for f in self.fields if f.grid == grid.name]
        return [tuple(mine[i:i + grid.width]) for i in range(0, len(mine), grid.width)]

    def labels(self, fields: tuple[Field, ...] | None = None) -> dict[str, str]:
        return {f.name: f.label for f in (self.fields if fields is None else fields)}

    def typed(self, values: dict) -> dict:
        """The form's values with whole numbers as ints (a number input gives floats); other values as they are."""
        whole_ones = {f.name for f in self.fields if f.kind in (INT, SHAPE)}
        return {name: int(v) if name in whole_ones and isinstance(v, float) and v.is_integer() else v
                for name, v in values.items()}
