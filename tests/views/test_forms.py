"""A new-run form described once (views/forms.py) and drawn from that description (ui/kit/forms.py): a field added
to a copy of the Pretrain form gets a widget of its kind with its step, bounds, format and help, in the next
cell of its grid, without a table elsewhere to keep in step; a description that lacks what its kind needs is
refused when it is declared, not when the page draws."""

import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.ui.kit import forms as ui_forms
from bertviz_lab.ui.shell.state import FormKeys
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views import forms
from bertviz_lab.views.pretrain import live as vp

SMOOTHING = forms.decimal("label_smoothing", "Label smoothing", "Share of the target spread over the vocabulary.", 0.1,
                          step=0.05, format="%.2f", low=0.0, high=0.5, grid=vp.ADVANCED)
WIDGETS = {forms.INT: "number_input", forms.SHAPE: "number_input", forms.FLOAT: "number_input",
           forms.CHOICE: "selectbox", forms.RADIO: "radio", forms.TOGGLE: "toggle", forms.TEXT: "text_input"}


def draw_form(keys, options):
    import streamlit as st

    from bertviz_lab.ui.kit import forms as ui_forms

    ui_forms.restore(keys)
    with st.form("test.form", border=False):
        ui_forms.draw(keys, options)
        st.form_submit_button("Go")


def drawn(form: forms.Form, page: str = "test", options: dict | None = None) -> tuple[AppTest, FormKeys]:
    keys = FormKeys(page, form)
    return AppTest.from_function(draw_form, args=(keys, options), default_timeout=30).run(), keys


def widget(at: AppTest, field: forms.Field, page: str = "test"):
    return getattr(at, WIDGETS[field.kind])(key=f"{page}.{field.name}")


def names(rows) -> list[list[str]]:
    return [[f.name for f in row] for row in rows]


# --- The description -------------------------------------------------------------------------------
def test_the_pretrain_form_fills_its_grids_in_the_order_it_declares_them():
    main, advanced = vp.FORM.grids
    assert names(vp.FORM.rows(main)) == [["preset", "layers", "heads", "hidden"],
                                         ["steps", "batch_size", "seq_len", "lr"],
                                         ["warmup", "weight_decay", "mask_rate", "seed"],
                                         ["nsp", "device", "name", "random_tokens"]]
    assert advanced.fold == "Advanced" and names(vp.FORM.rows(advanced)) == [
        ["dropout", "eval_every", "eval_batches"], ["checkpoint_every", "threads", "grad_clip"],
        ["grad_accum", "vocab_size", "precision"]]
    grown = dataclasses.replace(vp.FORM, fields=(*vp.FORM.fields, SMOOTHING))
    assert names(grown.rows(advanced))[-1] == ["label_smoothing"]  # a tenth advanced field: a fourth row, none lost


def test_the_fine_tune_form_is_three_choices_four_numbers_and_a_name():
    start, numbers, name = vf.FORM.grids
    assert names(vf.FORM.rows(start)) == [["start", "weights", "mode"]] and start.columns == (3, 3, 2)
    assert names(vf.FORM.rows(numbers)) == [["steps", "lr", "batch_size", "seed"]] and numbers.width == 5
    assert names(vf.FORM.rows(name)) == [["name"]]
    assert vf.CLASS_DEMO == {"steps": 60, "lr": vf.DEFAULTS["lr"], "batch_size": vf.DEFAULTS["batch_size"],
                             "seed": vf.DEFAULTS["seed"]}


@pytest.mark.parametrize("make, words", [
    (lambda: forms.Field("clip", "Clip", forms.FLOAT, format="%.2f"), "clip: a number needs its step"),
    (lambda: forms.Field("clip", "Clip", forms.FLOAT, step=0.5), "clip: a decimal number needs its format"),
    (lambda: forms.Field("clip", "Clip", "slider", step=0.5), "clip: unknown kind 'slider'"),
    (lambda: dataclasses.replace(vp.FORM, fields=(*vp.FORM.fields, vp.FORM["lr"])), "named twice: ['lr']"),
    (lambda: dataclasses.replace(vp.FORM, fields=(*vp.FORM.fields, dataclasses.replace(SMOOTHING, grid="extra"))),
     "label_smoothing: no grid 'extra'"),
])
def test_a_field_without_what_its_kind_needs_is_refused_where_it_is_declared(make, words):
    with pytest.raises(ValueError) as refused:
        make()
    assert words in str(refused.value)


def test_whole_numbers_become_ints_and_decimals_stay_floats():
    typed = vp.FORM.typed({"steps": 20.0, "layers": 2.0, "lr": 1.0, "preset": "tiny", "other": 3.0})
    assert typed == {"steps": 20, "layers": 2, "lr": 1.0, "preset": "tiny", "other": 3.0}
    assert [type(typed[n]) for n in ("steps", "layers", "lr")] == [int, int, float]


# --- Drawn from it ---------------------------------------------------------------------------------
def test_a_float_field_added_to_a_copy_of_the_pretrain_form_is_drawn_with_its_step_and_bounds():
    at, keys = drawn(dataclasses.replace(vp.FORM, fields=(*vp.FORM.fields, SMOOTHING)))
    assert not at.exception
    box = at.number_input(key="test.label_smoothing")
    assert (box.label, box.step, box.min, box.max, box.proto.format) == ("Label smoothing", 0.05, 0.0, 0.5, "%.2f")
    assert box.value == 0.1 and box.help == SMOOTHING.help
    (advanced,) = at.expander
    assert advanced.label == "Advanced"
    inside = {w.key for w in [*advanced.number_input, *advanced.selectbox]}
    assert {"test.label_smoothing", "test.precision", "test.dropout"} <= inside  # Precision keeps its place too
    assert "test.steps" not in inside


@pytest.mark.parametrize("form, options", [(vp.FORM, None), (vf.FORM, {"start": ["bertviz-mini (shipped)", "run x"]})])
def test_every_field_gets_a_widget_of_its_kind_with_its_label_help_and_default(form, options):
    at, keys = drawn(form, options=options)
    assert not at.exception
    for field in form.fields:
        shown = widget(at, field)
        assert shown.label == field.label, field.name
        assert (shown.help or None) == field.help, field.name
        if field.kind in forms.NUMBERS:
            assert shown.step == field.step and shown.max == field.high, field.name
            assert shown.value == field.default, field.name  # SHAPE: None, the empty box
        elif field.kind in forms.CHOICES:
            offered = field.options if field.options is not None else options[field.name]
            assert shown.options == [offered[o] if isinstance(offered, dict) else str(o) for o in offered]
    assert widget(at, form["name"]).placeholder == form["name"].placeholder


def test_pretrain_bounds_are_the_configs_and_a_choice_left_to_the_page_needs_its_options():
    at, _ = drawn(vp.FORM)
    from bertviz_lab.pretrain.config import upper_bound

    assert at.number_input(key="test.seq_len").max == upper_bound("seq_len") == 512
    assert at.number_input(key="test.layers").proto.placeholder == "preset's"
    at, _ = drawn(vf.FORM)  # "Start from" without the starting points the page finds
    assert at.exception
    with pytest.raises(ValueError, match="start: its options are given when the form is drawn"):
        ui_forms.widget(None, vf.FORM["start"], FormKeys("test", vf.FORM)["start"])
