"""A new-run form drawn from its description (views/forms.py): a widget of each field's kind, with its label,
help, step, bounds and format, in the grids it names; and the form's values kept while another page is open.

The widgets take no `value=`: the session holds each value (`restore` stores it first), so what the learner
entered outlives a visit to another page, where Streamlit drops a widget's value.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import FormKeys
from bertviz_lab.views import forms
from bertviz_lab.views.forms import Field


def widget(where, field: Field, key: state.Key, options: list | None = None) -> None:
    """The field's widget in `where` (a column). options: a choice's options when its description leaves them to
    the page (`Field.options` None)."""
    if field.kind in forms.NUMBERS:
        where.number_input(field.label, min_value=field.low, max_value=field.high, step=field.step,
                           format=field.format, key=key.name, help=field.help, placeholder=field.placeholder)
    elif field.kind in forms.CHOICES:
        shown = field.options if field.options is not None else options
        if shown is None:
            raise ValueError(f"form field {field.name}: its options are given when the form is drawn")
        draw = where.selectbox if field.kind == forms.CHOICE else where.radio
        labels = shown.get if isinstance(shown, dict) else str
        draw(field.label, list(shown), format_func=labels, key=key.name, help=field.help)
    elif field.kind == forms.TOGGLE:
        where.toggle(field.label, key=key.name, help=field.help)
    else:
        where.text_input(field.label, key=key.name, help=field.help, placeholder=field.placeholder)


def draw(keys: FormKeys, options: dict[str, list] | None = None) -> None:
    """Every grid of the form, one under the other: rows of columns filled in the fields' order (a folded grid
    inside its expander). options: field name -> the options of a choice the page offers when it draws."""
    for grid in keys.form.grids:
        with st.expander(grid.fold) if grid.fold else contextlib.nullcontext():
            for row in keys.form.rows(grid):
                for column, field in zip(st.columns(grid.columns), row):
                    widget(column, field, keys[field.name], (options or {}).get(field.name))


def restore(keys: FormKeys) -> None:
    """The form's values as the learner left them (Streamlit drops a widget's value while another page is open);
    at first, each field's default. A choice without a value is left unset: None would empty its box, and its
    first option is the default (an empty number box is a value: the preset's)."""
    saved = state.get(keys.saved)
    choices = {keys[f.name].name for f in keys.form.fields if f.kind in forms.CHOICES}
    for key in (*keys.others, *keys.fields.values()):
        value = saved.get(key.name, key.default)
        if value is not None or key.name not in choices:
            state.setdefault(key, value)


def save(keys: FormKeys) -> None:
    """Keep the form's values for the next visit (see `restore`); the file uploaders' are not kept."""
    state.put(keys.saved, {key.name: state.get(key) for key in (*keys.others, *keys.fields.values())})


def values(keys: FormKeys) -> dict:
    """The form's values, read from the session: field name -> value."""
    return {name: state.get(key) for name, key in keys.fields.items()}
