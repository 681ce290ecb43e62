"""Export (figures/export.py, ui/shell/handout.py, the Export menu of ui/widgets.chart): every figure builder's
numbers read back against the data put in; PNG and SVG drawn by Chromium (skipped without one); the
sentence a machine without a browser shows; the handout zip and its index.html; the buttons in AppTest."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import pkgutil
import re
import struct
import xml.etree.ElementTree as ET
import zipfile
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import bertviz_lab.figures as figures_package
from bertviz_lab.errors import ExportError
from bertviz_lab.figures import attention as fa
from bertviz_lab.figures import export, token_labels
from bertviz_lab.figures import finetune as ff
from bertviz_lab.figures import lesson as fle
from bertviz_lab.figures import losses as fl
from bertviz_lab.figures import neurons as fne
from bertviz_lab.figures import patching as fpa
from bertviz_lab.figures import predictions as fp
from bertviz_lab.figures.probing import (accuracy_by_layer, agreement_removal, codelength_curves, control_curves,
                                         lm_effect, mix_heatmap, probe_removal, selectivity_bars, task_depths)
from bertviz_lab.figures import representations as fr
from bertviz_lab.figures import shapes as fsh
from bertviz_lab.figures import syntax as fsy
from bertviz_lab.figures import timelapse as ft
from bertviz_lab.figures import timelapse_syntax as fts
from bertviz_lab.figures import training as ftr
from bertviz_lab.figures import why as fy
from bertviz_lab.figures import worked as fw
from bertviz_lab.metrics import EVAL, TRAIN, Metrics
from bertviz_lab.ui.shell import handout
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT
from bertviz_lab.ui.shell.text import plain
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

HAS_BROWSER = export.browser_path() is not None
needs_browser = pytest.mark.skipif(not HAS_BROWSER, reason="no Chrome or Chromium on this machine (BROWSER_PATH, "
                                                          "PATH): PNG/SVG export cannot run")
W = np.array([[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [0.0, 0.4, 0.6]])  # rows sum to 1, no two cells equal by chance
TOKENS = ["[CLS]", "a<b", "[SEP]"]  # "<" is escaped in the figure and must read back as typed
LABELS = token_labels(TOKENS)
CURVES = {"run": ftr.Curves.from_records([Metrics(TRAIN, 1, loss=3.0, acc=0.1, lr=1e-4, tokens_per_s=900.0)],
                                         [Metrics(EVAL, 1, loss=2.5, acc=0.2, top5=0.5)])}  # pretraining
FINETUNE_CURVES = {"run": ftr.Curves.from_records([Metrics(TRAIN, 1, loss=1.1, acc=0.4)],
                                                  [Metrics(EVAL, 1, loss=0.9, acc=0.6)])}


def cell(table: pd.DataFrame, x, y, **where) -> float:
    """The value of one heatmap cell."""
    rows = table[(table["x"] == x) & (table["y"] == y)]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    (value,) = rows["value"]
    return value


def column(table: pd.DataFrame, name: str, **where) -> list:
    for key, value in where.items():
        table = table[table[key] == value]
    return table[name].tolist()


# --- numbers(): one case per builder, checked against what was put in ----------------------------------
# Each check gives its verdict, True or False (the test refuses anything else, so a check that forgets to
# return cannot pass by giving None).
def check_heatmap(t) -> bool:
    return (len(t) == 9 and list(t.columns[:3]) == ["x", "y", "value"]
            and cell(t, "1 a<b", "0 [CLS]") == 0.2 and cell(t, "0 [CLS]", "1 a<b") == 0.25  # key across, query down
            and "text" not in t)  # a texttemplate is formatting, not data


def check_grid(t) -> bool:
    return (sorted(set(t["panel"])) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1 (off)"]
            and cell(t, "2 [SEP]", "2 [SEP]", panel="L1 H1 (off)") == 0.6 * 4 and len(t) == 4 * 9)


def check_vector(t) -> bool:
    return column(t, "y", trace="q × k") == [3.0, 8.0] and column(t, "x", trace="q") == [0, 1]


CASES = {
    "why.heat_strips": (lambda: fy.heat_strips({"occlusion": np.array([1.0, -2.0]), "attention": np.array([0.2, 0.4])},
                                               {"occlusion": True, "attention": False}, ["0 a<b", "1 c"], "h"),
                        lambda t: column(t, "method value", y="occlusion") == [1.0, -2.0]
                        and column(t, "method value", y="attention", x="1 c") == [0.4]
                        and cell(t, "1 c", "occlusion") == 0.0 and cell(t, "1 c", "attention") == 1.0),  # colour
    "why.agreement_matrix": (lambda: fy.agreement_matrix(np.array([[1.0, -0.5], [-0.5, np.nan]]), ["a", "<b>"], "r"),
                             lambda t: cell(t, "<b>", "a") == -0.5 and np.isnan(cell(t, "<b>", "<b>"))),
    "why.deletion_curves": (lambda: fy.deletion_curves({"flow": np.array([0.5, 0.2, 0.1])},
                                                       np.array([[0.5, 0.4, 0.1], [0.5, 0.2, 0.3]]), {"flow"}, "p", "d"),
                            lambda t: column(t, "y", trace="flow") == [0.5, 0.2, 0.1]
                            and column(t, "y", trace="random orders: mean (band: ±1 sd)") == pytest.approx([0.5, 0.3, 0.2])
                            and column(t, "y", trace="random orders: mean + 1 sd") == pytest.approx([0.5, 0.4, 0.3])
                            and column(t, "y", trace="random orders: mean − 1 sd") == pytest.approx([0.5, 0.2, 0.1])),
    "why.strips": (lambda: fy.strips({"occlusion": np.array([1.0, -2.0])}, {"occlusion": True}, ["a<b", "c"], 1, None),
                   lambda t: column(t, "method value", y="occlusion", x="1 c") == [-2.0]),
    "why.agreement": (lambda: fy.agreement({"a": {"a": 1.0, "<b>": None}, "<b>": {"a": None, "<b>": 1.0}}, 5),
                      lambda t: cell(t, "<b>", "<b>") == 1.0 and np.isnan(cell(t, "a", "<b>"))),
    "why.deletion": (lambda: fy.deletion({"flow": np.array([0.5, 0.2])}, np.array([[0.5, 0.4]]), {"flow"}, "p(<b>)"),
                     lambda t: column(t, "y", trace="flow") == [0.5, 0.2]),
    "patching.grid_heatmap": (lambda: fpa.grid_heatmap(np.array([[1.0, 0.0], [0.25, -0.5]]),
                                                        np.array([[2.0, 0.5], [1.0, -1.0]]), ["embeddings", "layer 1"],
                                                        ["0 a<b", "1 c"], "t"),
                              lambda t: cell(t, "1 c", "layer 1") == -0.5 and cell(t, "0 a<b", "embeddings") == 1.0
                              and len(t) == 4),
    "neurons.activation_heatmap": (lambda: fne.activation_heatmap(W, TOKENS, 1, top=2),  # peaks 0.7, 0.5, 0.6
                                   lambda t: sorted(set(t["x"])) == ["n 0", "n 2"] and cell(t, "n 2", "1 a<b") == 0.25
                                   and cell(t, "n 0", "2 [SEP]") == 0.0 and len(t) == 6),
    "neurons.top_neurons_bar": (lambda: fne.top_neurons_bar([4, 9], [2.5, -0.1], ["fish", "<b>"], "a<b", 2),
                                lambda t: column(t, "x") == [2.5, -0.1] and column(t, "y") == ["n 4 → fish", "n 9 → <b>"]),
    "neurons.factor_strips": (lambda: fne.factor_strips(W[:, :2], TOKENS, ["factor 1", "factor 2"], "t"),
                              lambda t: column(t, "strength", y="factor 2") == [0.2, 0.5, 0.4]
                              and cell(t, "1 a<b", "factor 2") == 1.0 and cell(t, "2 [SEP]", "factor 1") == 0.0),
    "neurons.attribution_bar": (lambda: fne.attribution_bar(["L1 n 3", "L0 n <2>"], np.array([0.5, -0.25]), "F", "a"),
                                lambda t: column(t, "x", y="L0 n <2>") == [-0.25] and len(t) == 2),
    "neurons.causal_test": (lambda: fne.causal_test(1.5, np.array([0.1, -0.2, 0.4]), 10, "logit(fish)", "c"),
                            lambda t: column(t, "y", trace="top 10 neurons") == [1.5]
                            and column(t, "y", trace="10 random neurons: each draw") == [0.1, -0.2, 0.4]
                            and column(t, "y", trace="10 random neurons: mean") == pytest.approx([0.1])),
    "neurons.outlier_weights": (lambda: fne.outlier_weights(np.array([[1.0, 5.0, 1.1], [0.9, 1.0, -3.0]]),
                                                            np.array([[1], [2]]), "w"),
                                lambda t: column(t, "y", trace="layer 1") == [0.9, 1.0, -3.0]
                                and column(t, "layer", trace="outliers") == [0, 1]
                                and column(t, "x", trace="outliers") == [1, 2]),
    "neurons.outlier_loss": (lambda: fne.outlier_loss(2.0, 5.0, np.array([2.1, 2.2]), (7, 9), "l"),
                             lambda t: column(t, "y", trace="nothing zeroed") == [2.0]
                             and column(t, "y", trace="dims 7, 9 zeroed") == [5.0]
                             and column(t, "y", trace="2 random dims zeroed: each draw") == [2.1, 2.2]),
    "attention.attention_heatmap": (lambda: fa.attention_heatmap(W, LABELS, LABELS, "T"), check_heatmap),
    "attention.attention_grid": (lambda: fa.attention_grid(np.stack([[W, W * 2], [W * 3, W * 4]]), LABELS, LABELS,
                                                           np.array([[True, True], [True, False]]), "g"), check_grid),
    "attention.softmax_bars": (lambda: fa.softmax_bars(pd.DataFrame({"model": W[0], "what-if": W[1]}, index=LABELS),
                                                       "s"),
                               lambda t: column(t, "y", trace="what-if") == [0.25, 0.5, 0.25]
                               and column(t, "x", trace="model") == ["0 [CLS]", "1 a<b", "2 [SEP]"]),
    "attention.vector_bars": (lambda: fa.vector_bars(pd.DataFrame({"q": [1.0, 2.0], "k": [3.0, 4.0],
                                                                   "q × k": [3.0, 8.0]}), "v", lower=["q × k"]),
                              check_vector),
    "attention.step_norms": (lambda: fa.step_norms(["input", "LayerNorm 1"], np.array([2.5, 1.0]), "n"),
                             lambda t: t["x"].tolist() == [2.5, 1.0] and t["y"].tolist() == ["input", "LayerNorm 1"]),
    "attention.head_summary": (lambda: fa.head_summary(W[:2], "h", ".2f", "nats"),
                               lambda t: cell(t, "head 2", "layer 1") == 0.25 and len(t) == 6),
    "finetune.loss_curves": (lambda: ff.loss_curves(FINETUNE_CURVES),
                             lambda t: column(t, "y", trace="train") == [1.1] and column(t, "y", trace="held-out") == [0.9]),
    "finetune.accuracy_curves": (lambda: ff.accuracy_curves(FINETUNE_CURVES), lambda t: column(t, "y", trace="held-out") == [0.6]),
    "finetune.confusion_heatmap": (lambda: ff.confusion_heatmap(np.array([[3, 1], [0, 4]]), ["yes", "<no>"], "c"),
                                   lambda t: cell(t, "<no>", "yes") == 0.25 and column(t, "text", x="<no>", y="yes") == [1]),
    "finetune.probability_bars": (lambda: ff.probability_bars(["pos", "neg"], np.array([0.8, 0.2])),
                                  lambda t: t["x"].tolist() == [0.8, 0.2] and t["y"].tolist() == ["pos", "neg"]),
    "finetune.before_after": (lambda: ff.before_after(np.arange(8.0).reshape(2, 2, 2), np.array([[0.5, 0.2]] * 2),
                                                      ["x", "y"], ["first", "second"], "b"),
                              lambda t: column(t, "x", panel=t["panel"][0], trace="y") == [2.0]
                              and column(t, "x", trace="y")[1] == 6.0 and t["panel"].str.startswith("after").sum() == 2
                              and column(t, "hover", trace="x") == ["first", "first"]),
    "lesson.answer_bars": (lambda: fle.answer_bars(["cat", "a <dog>"], [0.75, 0.25], "cat", "a <dog>", "q",
                                                   reference=(0.5, "chance")),
                           lambda t: t["y"].tolist() == ["cat", "a <dog>"] and t["x"].tolist() == [0.75, 0.25]
                           and t["text"].tolist() == ["0.750", "0.250"]),
    "lesson.labelled_grid": (lambda: fle.labelled_grid(fa.attention_grid(np.stack([[W, W * 2], [W * 3, W * 4]]), LABELS,
                                                                          LABELS, np.array([[True, True], [True, False]]),
                                                                          "g"), 2, 2), check_grid),  # labels only
    "lesson.with_level": (lambda: fle.with_level(ftr.loss_curves(CURVES), 4.6, "ln V"),
                          lambda t: t["y"].tolist() == [3.0, 2.5] and len(t) == 2),  # the level is a line, not data
    "lesson.training_loss": (lambda: fle.training_loss(CURVES["run"].train, CURVES["run"].eval, 4.6, 60),
                             lambda t: column(t, "y", trace="train") == [3.0] and column(t, "y", trace="held-out")
                             == [2.5] and len(t) == 2),  # ln V is a line drawn across, not data
    "losses.topk_grid": (lambda: fl.topk_grid([{"title": "pos 3", "tokens": ["a", "b"], "probs": [0.6, 0.3],
                                                "true_token": "c", "p_true": 0.01, "rank": 7}]),
                         lambda t: t["y"].tolist() == ["a", "b", "c (rank 7)"] and t["x"].tolist() == [0.6, 0.3, 0.01]),
    "losses.neg_log_p_bars": (lambda: fl.neg_log_p_bars(["3 cat", "5 <mat>"], [1.25, 0.5], 0.875),
                              lambda t: t["x"].tolist() == ["3 cat", "5 <mat>"] and t["y"].tolist() == [1.25, 0.5]),
    "losses.masking_frequency_chart": (lambda: fl.masking_frequency_chart(pd.DataFrame(
        {"quantity": ["picked", "[MASK]"], "empirical": [0.16, 0.79], "target": [0.15, 0.8], "bert": [0.15, 0.8],
         "se_rule": [0.01, 0.02], "low": [0.13, 0.76], "high": [0.17, 0.84]})),
        lambda t: column(t, "error", trace="empirical") == pytest.approx([0.02, 0.04])
        and column(t, "SE (rule)", trace="empirical") == [0.01, 0.02]
        and column(t, "y", trace="target (your rates)") == [0.15, 0.8]),
    "predictions.prediction_bars": (lambda: fp.prediction_bars([{"token": "mat", "probability": 0.5, "logit": 3.25},
                                                                {"token": "<b>", "probability": 0.25, "logit": 1.0}]),
                                    lambda t: t["y"].tolist() == ["mat", "<b>"] and t["logit"].tolist() == [3.25, 1.0]),
    "predictions.confidence_strip": (lambda: fp.confidence_strip([{"mask": 1, "position": 4, "independent": "mat",
                                                                   "entropy (nats)": 1.5}], 9.0),
                                     lambda t: t["y"].tolist() == [1.5] and t["token position"].tolist() == [4]),
    "predictions.replaced_bars": (lambda: fp.replaced_bars([{"position": 1, "token": "ate", "p(replaced)": 0.9}]),
                                  lambda t: t["x"].tolist() == ["1 · ate"] and t["y"].tolist() == [0.9]),
    "representations.similarity_heatmap": (lambda: fr.similarity_heatmap(W, ["1 a: x", "2 b: y", "3 c: z"],
                                                                          ["s1", "s2", "s<3>"], "s"),
                                           lambda t: cell(t, "3 c", "1 a: x") == 0.1
                                           and column(t, "hover", x="3 c", y="1 a: x") == ["s1 | s<3>"]),
    "probing.accuracy_by_layer": (lambda: accuracy_by_layer({"a<b": np.array([0.5, 0.9])}, {"a<b": 0.25}, "t"),
                                  lambda t: column(t, "y", trace="a<b") == [0.5, 0.9]
                                  and column(t, "y", trace="a<b: majority baseline") == [0.25, 0.25]
                                  and column(t, "x label", trace="a<b") == ["0 (emb.)", "1"]),
    "probing.task_depths": (lambda: task_depths(["pos", "a<b"], [1.25, None], np.array([1.5, 2.0]), 3, "o"),
                            lambda t: column(t, "x", trace="expected layer", y="pos") == [1.25]
                            and np.isnan(column(t, "x", trace="expected layer", y="a<b")[0])
                            and column(t, "x", trace="centre of gravity (the mix's weights)") == [1.5, 2.0]),
    "probing.mix_heatmap": (lambda: mix_heatmap(np.array([[0.25, 0.75]]), ["a<b"], "m"),
                            lambda t: cell(t, "1", "a<b") == 0.75 and cell(t, "0 (emb.)", "a<b") == 0.25),
    "probing.control_curves": (lambda: control_curves({"linear": np.array([0.8, 0.9])}, {"linear": np.array([0.4, 0.5])},
                                                      0.3, "c", np.array([0.6, 0.65])),
                               lambda t: column(t, "y", trace="linear probe, task") == [0.8, 0.9]
                               and column(t, "y", trace="linear probe, control task") == [0.4, 0.5]
                               and column(t, "y", trace="linear probe, random-weights model") == [0.6, 0.65]
                               and column(t, "y", trace="majority baseline") == [0.3, 0.3]),
    "probing.selectivity_bars": (lambda: selectivity_bars({"linear": np.array([0.25, -0.5])}, "s"),
                                 lambda t: column(t, "y", trace="linear probe") == [25.0, -50.0]),
    "probing.codelength_curves": (lambda: codelength_curves(np.array([500.0, 250.0]), np.array([1000.0, 750.0]),
                                                            np.array([800.0, 600.0]), 1500.0, "c"),
                                  lambda t: column(t, "y", trace="the task") == [0.5, 0.25]
                                  and column(t, "y", trace="the task, random-weights model") == [0.8, 0.6]
                                  and column(t, "y", trace="no vector (uniform code)") == [1.5, 1.5]),
    "probing.probe_removal": (lambda: probe_removal(0.9, 0.5, 0.875, 0.5, "p"),
                              lambda t: column(t, "y", trace="probe accuracy") == [0.9, 0.5, 0.875]
                              and column(t, "text", trace="probe accuracy") == ["90.0%", "50.0%", "87.5%"]),
    "probing.lm_effect": (lambda: lm_effect(1.5, 2.0, np.array([1.5, 1.75]), "loss", "l"),
                          lambda t: column(t, "y", trace="random directions: each draw") == [1.5, 1.75]
                          and column(t, "draw", trace="random directions: each draw") == [1, 2]
                          and column(t, "y", trace="random directions: mean") == [1.625]),
    "probing.agreement_removal": (lambda: agreement_removal([0, 1], np.array([0.75, 0.5]), np.array([0.5, 0.25]),
                                                            np.array([0.75, np.nan]), [4, 2], "a"),
                                  lambda t: column(t, "y", trace="number removed") == [0.5, 0.25]
                                  and column(t, "pairs", trace="number removed") == [4, 2]
                                  and np.isnan(column(t, "y", trace="random directions removed (mean)")[1])),
    "representations.sense_lines": (lambda: fr.sense_lines(pd.DataFrame({"layer": [0, 1], "same": [0.9, 0.7]}),
                                                           ["same"], "s"),
                                    lambda t: t["y"].tolist() == [0.9, 0.7] and t["x label"].tolist() == ["emb", "1"]),
    "representations.projection_scatter": (lambda: fr.projection_scatter(np.array([[1.0, 2.0], [3.0, 4.0]]),
                                                                         ["money", None], ["s1", "s2"],
                                                                         np.array([0.6, 0.3]), "p"),
                                           lambda t: column(t, "y", trace="no sense given") == [4.0]
                                           and column(t, "text", trace="money") == ["1"]),
    "representations.lens_heatmap": (lambda: fr.lens_heatmap(W, ["mat", "rug", "<x>"], "l"),
                                     lambda t: cell(t, "<x>", "0 (embeddings)") == 0.1 and len(t) == 9),
    "representations.precision_lines": (lambda: fr.precision_lines(pd.DataFrame(
        {"word": ["bank", "bank"], "layer": [0, 1], "precision": [0.5, 0.75], "chance": [0.25, 0.25]}), 5, "p"),
        lambda t: column(t, "y", trace="bank") == [0.5, 0.75] and column(t, "y", trace="") == [0.25, 0.25]),
    "representations.position_heatmap": (lambda: fr.position_heatmap(W, "p"), lambda t: cell(t, 2, 1) == 0.25),
    "shapes.padded_attention": (lambda: fsh.padded_attention(W, TOKENS, 2, "p"), check_heatmap),
    "syntax.accuracy_heatmap": (lambda: fsy.accuracy_heatmap(np.array([[0.5, 0.25], [1.0, 0.0]]), "a"),
                                lambda t: cell(t, "head 1", "layer 0") == 0.25 and cell(t, "head 0", "layer 1") == 1.0
                                and len(t) == 4),
    "syntax.share_bars": (lambda: fsy.share_bars(["nsubj", "a<b"], np.array([0.5, 0.25]), np.array([0.1, 0.05]), "s"),
                          lambda t: column(t, "x", trace="this head's picks") == [0.5, 0.25]
                          and column(t, "x", trace="all word pairs (the base rate)", y="a<b") == [0.05]),
    "syntax.probe_curves": (lambda: fsy.probe_curves({"UUAS": np.array([0.4, 0.6]), "root accuracy": np.array([0.3, 0.9])},
                                                     0.45, "p", control=np.array([0.4, 0.41])),
                            lambda t: column(t, "y", trace="UUAS") == [0.4, 0.6]
                            and column(t, "y", trace="root accuracy") == [0.3, 0.9]
                            and column(t, "y", trace="UUAS, random weights (control)") == [0.4, 0.41]
                            and column(t, "y", trace="UUAS of LINEAR (each word to the next)") == [0.45, 0.45]
                            and column(t, "x label", trace="UUAS") == ["0 (emb.)", "1"]),
    "syntax.tree_arcs": (lambda: fsy.tree_arcs(["the", "cat<", "sat"], [(0, 1), (1, 2)], [(0, 1), (0, 2)], "t"),
                         lambda t: column(t, "text", trace="words") == ["the", "cat<", "sat"]
                         and column(t, "text", trace="gold edge the probe found") == ["the — cat<"]
                         and column(t, "text", trace="gold edge the probe missed") == ["cat< — sat"]
                         and column(t, "text", trace="probe's edge, wrong") == ["the — sat"]
                         and column(t, "y", trace="probe's edge, right")[0] < 0),  # the probe's arcs under the words
    "syntax.agreement_bars": (lambda: fsy.agreement_bars([0, 1, 2], np.array([0.75, 0.5, np.nan]), [3, 1, 0], [4, 2, 0],
                                                         "g"),
                              lambda t: t["y"].tolist()[:2] == [0.75, 0.5] and np.isnan(t["y"][2])
                              and t["text"].tolist() == ["3 of 4", "1 of 2", "no pairs"]
                              and t["pairs"].tolist() == [4, 2, 0]),
    "timelapse.role_lines": (lambda: ft.role_lines([0, 10, 100], np.arange(6.0).reshape(3, 1, 2) / 10, "previous",
                                                   1, "r"),
                             lambda t: column(t, "y", trace="L0 H1") == [0.1, 0.3, 0.5]
                             and column(t, "step", trace="L0 H1") == [0, 10, 100]
                             and column(t, "x label", trace="L0 H1") == ["0", "10", "100"]),
    "timelapse.word_map": (lambda: ft.word_map(np.array([[0.5, -1.0]]), ["<cat>"], ["animals"], "w"),
                           lambda t: t[["x", "y"]].values.tolist() == [[0.5, -1.0]] and t["text"].tolist() == ["<cat>"]),
    "timelapse.fixed_probability_axis": (lambda: ft.fixed_probability_axis(fp.prediction_bars(
        [{"token": "mat", "probability": 0.5, "logit": 3.25}, {"token": "<b>", "probability": 0.25, "logit": 1.0}]), 0.75),
        lambda t: t["y"].tolist() == ["mat", "<b>"] and t["x"].tolist() == [0.5, 0.25]),  # the axis, not the data
    "timelapse.mark_step": (lambda: ft.mark_step(ftr.loss_curves(CURVES), 1),
                            lambda t: column(t, "y", trace="train") == [3.0] and column(t, "y", trace="held-out") == [2.5]),
    "timelapse_syntax.uuas_lines": (lambda: fts.uuas_lines([0, 10, 100], np.array([[0.4, 0.5], [0.6, 0.7], [0.8, 0.75]]),
                                                           0.5, "u", np.array([0, 5, 100, 200]), np.array([7.0, 6.0, 3.0, 2.0])),
                                    lambda t: column(t, "y", trace="best layer") == [0.5, 0.7, 0.8]
                                    and column(t, "layer", trace="best layer") == [1, 1, 0]
                                    and column(t, "y", trace="linear baseline") == [0.5] * 3
                                    and column(t, "x", trace="held-out MLM loss (right)") == [0.0, 0.5, 2.0]  # 200: past
                                    and column(t, "step", trace="held-out MLM loss (right)") == [0, 5, 100]),
    "timelapse_syntax.relation_lines": (lambda: fts.relation_lines([0, 10], ["all", "<det>"], np.array([[0.1, 0.2], [0.3, 0.4]]),
                                                                   np.array([["L0 H0", "L1 H1"], ["L0 H1", "L1 H0"]],
                                                                            dtype=object), np.array([0.45, 0.9]), "r"),
                                        lambda t: column(t, "y", panel="<det>", trace="best head") == [0.2, 0.4]
                                        and column(t, "head", panel="<det>", trace="best head") == ["L1 H1", "L1 H0"]
                                        and column(t, "y", panel="all", trace="fixed-offset baseline") == [0.45, 0.45]
                                        and column(t, "x label", panel="all", trace="best head") == ["0", "10"]),
    "timelapse_syntax.agreement_lines": (lambda: fts.agreement_lines([0, 10], np.array([[0.5, np.nan], [0.75, 0.25]]), "a"),
                                         lambda t: column(t, "y", trace="0 attractors") == [0.5, 0.75]
                                         and np.isnan(column(t, "y", trace="1 attractor")[0])
                                         and column(t, "step", trace="1 attractor") == [0, 10]),
    "timelapse_syntax.expected_layer_lines": (lambda: fts.expected_layer_lines([0, 10], ["pos", "<dep>"], np.array([[1.5, np.nan], [0.5, 1.25]]),
                                                                               np.array([[1.0, 2.0], [0.75, 1.5]]), 2, "e"),
                                              lambda t: column(t, "y", trace="pos") == [1.5, 0.5]
                                              and np.isnan(column(t, "y", trace="<dep>")[0])
                                              and column(t, "centre of gravity", trace="<dep>") == [2.0, 1.5]
                                              and column(t, "x label", trace="pos") == ["0", "10"]),
    "timelapse_syntax.selectivity_lines": (lambda: fts.selectivity_lines([0, 10], ["pos"], np.array([[0.25], [0.5]]), np.array([[0.75], [0.875]]),
                                                                         np.array([[0.5], [0.375]]), np.array([[1], [2]]), "s"),
                                           lambda t: column(t, "y", trace="pos") == [0.25, 0.5]
                                           and column(t, "hidden state", trace="pos") == [1, 2]
                                           and column(t, "text", trace="pos") == ["accuracy 0.750, control 0.500", "accuracy 0.875, control 0.375"]
                                           and column(t, "y", trace="not selective") == [0.0, 0.0]),
    "timelapse_syntax.amnesic_lines": (lambda: fts.amnesic_lines([0, 10], np.array([np.nan, 0.25]), np.array([np.nan, 0.0625]), np.array([np.nan, 0.5]),
                                                                 np.array([np.nan, 0.125]), "noun number", "a"),
                                       lambda t: column(t, "y", trace="noun number removed")[1] == 25.0
                                       and np.isnan(column(t, "y", trace="noun number removed")[0])
                                       and column(t, "y", trace="random directions, same rank")[1] == 6.25
                                       and column(t, "masked-LM loss rise", trace="random directions, same rank")[1] == 0.125),
    "training.loss_curves": (lambda: ftr.loss_curves(CURVES), lambda t: t["y"].tolist() == [3.0, 2.5]),
    "training.accuracy_curves": (lambda: ftr.accuracy_curves(CURVES),
                                 lambda t: column(t, "y", trace="top-5") == [0.5] and column(t, "y", trace="train") == [0.1]),
    "training.lr_curve": (lambda: ftr.lr_curve(CURVES), lambda t: t["y"].tolist() == [1e-4] and t["x"].tolist() == [1]),
    "training.throughput_curve": (lambda: ftr.throughput_curve(CURVES), lambda t: t["y"].tolist() == [900.0]),
    "worked.weight_bars": (lambda: fw.weight_bars(["the", "<mask>"], [0.25, 0.75], other=[0.3, 0.7]),
                           lambda t: column(t, "y", trace="exact") == [0.25, 0.75]
                           and column(t, "x", trace="as printed") == ["0 the", "1 <mask>"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_read_back_the_data_put_in(name):
    build, check = CASES[name]
    fig = build()
    table = export.numbers(fig)
    verdict = check(table)
    assert isinstance(verdict, bool | np.bool_), f"the check of {name} gives {verdict!r}, not a verdict"
    assert verdict, table.to_string()
    csv = pd.read_csv(io.StringIO(export.numbers_csv(fig)), float_precision="round_trip")  # the Export menu's file
    assert list(csv.columns) == list(table.columns) and len(csv) == len(table)
    for heading in table.select_dtypes("number"):  # every number as drawn, not rounded on the way out
        np.testing.assert_array_equal(csv[heading].to_numpy(), table[heading].to_numpy(), err_msg=heading)


def builders() -> set[str]:
    """Every public function of figures/*.py that returns a figure."""
    found = set()
    for info in pkgutil.iter_modules(figures_package.__path__):
        module = importlib.import_module(f"bertviz_lab.figures.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ == module.__name__ and not name.startswith("_") \
                    and inspect.signature(function).return_annotation in ("go.Figure", "'go.Figure'"):
                found.add(f"{info.name}.{name}")
    return found


def test_every_figure_builder_has_a_numbers_case():
    assert builders() - set(CASES) == set()
    assert len(builders()) >= 30


def test_numbers_of_an_empty_figure_is_an_empty_table():
    import plotly.graph_objects as go
    assert export.numbers(go.Figure()).empty


# --- image(): PNG, SVG, and no browser --------------------------------------------------------------
@needs_browser
def test_png_has_the_magic_bytes_and_twice_the_layout_size():
    fig = fa.attention_heatmap(W, LABELS, LABELS, "Layer 1 · head 2")
    width, height = export.size(fig)
    data = export.image(fig, "png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (width * export.PNG_SCALE, height * export.PNG_SCALE)
    assert (width, height) == (1000, 420)  # a 420-high heatmap: the minimum width


@needs_browser
def test_svg_is_xml_with_the_title_and_the_labels_as_typed():
    fig = fa.softmax_bars(pd.DataFrame({"model": W[0]}, index=LABELS), "Softmax of query 1")
    root = ET.fromstring(export.image(fig, "svg"))
    texts = [t.text for t in root.iter() if t.tag.endswith("text") and t.text]
    assert root.tag.endswith("svg") and "Softmax of query 1" in texts and "1 a<b" in texts
    assert int(float(root.get("width"))) == export.size(fig)[0]


@pytest.fixture
def no_browser_here(monkeypatch):
    """A machine without Chrome or Chromium, as kaleido sees it: BROWSER_PATH names a file that is not there, and
    the warm browser (if an earlier test started one) is closed, so the next image looks for one again."""
    export.close()
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")


def test_without_a_browser_images_say_so_in_one_sentence(no_browser_here):
    assert export.browser_path() is None
    with pytest.raises(ExportError, match=r"^PNG/SVG export needs Chrome or Chromium .* still saves a PNG\.$"):
        export.image(fa.head_summary(W, "h", ".2f", "nats"), "png")
    with pytest.raises(ValueError, match="format"):
        export.image(fa.head_summary(W, "h", ".2f", "nats"), "gif")


# --- The handout zip ---------------------------------------------------------------------------------
class Links(HTMLParser):
    """Every src= and href= of a page, the restore links apart."""

    def __init__(self):
        super().__init__()
        self.files, self.restore, self.images = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        target = attrs.get("src") or attrs.get("href")
        if target:
            (self.restore if attrs.get("class") == "restore" else self.files).append(target)


def fake_draw(fig, fmt):
    return {"png": b"\x89PNG fake", "svg": b"<svg/>"}[fmt]


def no_browser(fig, fmt):
    raise ExportError(export.NO_BROWSER)


PAGES = [handout.Page("Attention", "http://localhost:8501/attention?text_a=a",
                      (("attention_L0_H0", fa.attention_heatmap(W, LABELS, LABELS, "Layer 0 · head 0")),
                       ("softmax_L0_H0_q1", fa.softmax_bars(pd.DataFrame({"model": W[1]}, index=LABELS), "Softmax"))),
                      (("softmax steps", pd.DataFrame({"key": TOKENS, "weight": W[1]})),)),
         handout.Page("Mask & predict", None, (("predict_mask1", fp.prediction_bars([{"token": "mat",
                                                                                     "probability": 0.5}])),), ())]


def read_zip(data: bytes) -> tuple[set[str], str, zipfile.ZipFile]:
    z = zipfile.ZipFile(io.BytesIO(data))
    return set(z.namelist()), z.read("index.html").decode(), z


def links_of(index: str) -> Links:
    links = Links()
    links.feed(index)
    return links


CHARTS = ("01_Attention/01_attention_L0_H0", "01_Attention/02_softmax_L0_H0_q1", "02_Mask_predict/01_predict_mask1")
TABLE = "01_Attention/table_softmax_steps.csv"


def test_handout_zip_holds_each_chart_three_ways_and_an_index_that_links_only_inside():
    names, index, z = read_zip(handout.handout_zip(PAGES, draw=fake_draw))
    assert names == {"index.html", "01_Attention/01_attention_L0_H0.png", "01_Attention/01_attention_L0_H0.svg",
                     "01_Attention/01_attention_L0_H0.csv", "01_Attention/02_softmax_L0_H0_q1.png",
                     "01_Attention/02_softmax_L0_H0_q1.svg", "01_Attention/02_softmax_L0_H0_q1.csv",
                     "01_Attention/table_softmax_steps.csv", "02_Mask_predict/01_predict_mask1.png",
                     "02_Mask_predict/01_predict_mask1.svg", "02_Mask_predict/01_predict_mask1.csv"}
    assert all(z.read(f"{c}.png") == b"\x89PNG fake" and z.read(f"{c}.svg") == b"<svg/>" for c in CHARTS)  # as drawn
    links = links_of(index)
    assert sorted(links.files) == sorted(names - {"index.html"})  # every file linked, once
    assert links.images == [f"{c}.png" for c in CHARTS]
    assert links.restore == ["http://localhost:8501/attention?text_a=a"]
    assert not re.search(r"(src|href)=\"(https?:)?//", index.replace(links.restore[0], ""))  # nothing from outside
    assert "<h2>Attention</h2>" in index and "<h2>Mask &amp; predict</h2>" in index and "No link to this view" in index
    heat = pd.read_csv(io.BytesIO(z.read("01_Attention/01_attention_L0_H0.csv")))
    assert cell(heat, "1 a<b", "0 [CLS]") == 0.2
    assert pd.read_csv(io.BytesIO(z.read("01_Attention/table_softmax_steps.csv")))["weight"].tolist() == W[1].tolist()


@needs_browser
def test_handout_images_are_drawn_by_the_browser():
    names, index, z = read_zip(handout.handout_zip(PAGES[1:]))
    assert z.read("01_Mask_predict/01_predict_mask1.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.fromstring(z.read("01_Mask_predict/01_predict_mask1.svg")).tag.endswith("svg")
    assert '<img src="01_Mask_predict/01_predict_mask1.png"' in index and "without images" not in index


def test_handout_without_a_browser_keeps_the_numbers_and_says_why():
    names, index, z = read_zip(handout.handout_zip(PAGES, draw=no_browser))
    csvs = [f"{CHARTS[0]}.csv", f"{CHARTS[1]}.csv", TABLE, f"{CHARTS[2]}.csv"]  # in the order the index shows them
    assert names == {"index.html", *csvs}
    assert "<img" not in index and "without images: PNG/SVG export needs Chrome or Chromium" in index
    assert links_of(index).files == csvs
    bars = pd.read_csv(io.BytesIO(z.read(f"{CHARTS[2]}.csv")))
    assert bars["y"].tolist() == ["mat"] and bars["x"].tolist() == [0.5]


def test_handout_caps_the_charts_and_says_how_many_were_left_out():
    names, index, _ = read_zip(handout.handout_zip(PAGES, draw=fake_draw, limit=2))
    assert names == {"index.html", TABLE, *(f"{c}.{ext}" for c in CHARTS[:2] for ext in ("png", "svg", "csv"))}
    assert "1 more chart(s) were left out" in index and "2 more chart(s)" not in index
    assert links_of(index).images == [f"{c}.png" for c in CHARTS[:2]]


# --- In the app: the Export menu and the handout button ----------------------------------------------
APP = """
import streamlit as st
from bertviz_lab.ui.shell.handout import handout_button
page = st.navigation([st.Page({attention!r}, title="Attention"), st.Page({worked!r}, title="Worked examples")])
try:
    page.run()
finally:  # as app.py does
    handout_button(st.sidebar, page.title, "http://localhost:8501/" + page.url_path)
"""


def app(tmp_path) -> AppTest:
    script = tmp_path / "app.py"
    script.write_text(APP.format(attention=str(ROOT / "pages" / "attention.py"), worked=str(ROOT / "pages" / "worked.py")))
    at = app_test(str(script), 120).run()
    assert not at.exception, at.exception
    return at


def test_a_chart_export_menu_makes_its_files_on_click(tmp_path, downloads, no_browser_here):
    at = app(tmp_path)
    assert [p.proto.popover.label for p in at.get("popover")].count("Export") == 5
    assert at.download_button[0].proto.label == "Download this matrix (CSV)"  # closed menus hold no buttons
    at.session_state["export.attention_L0_H0"] = True  # open the heatmap's menu
    at.run()
    menu = [b for b in at.download_button if b.key and b.key.startswith("export.attention_L0_H0")]
    assert [b.key for b in menu] == ["export.attention_L0_H0.csv"]
    assert plain(export.NO_BROWSER) in [c.value for c in at.caption]  # as plain text: it may quote a path
    csv = pd.read_csv(io.StringIO(downloads[menu[0].proto.deferred_file_id]()))
    assert len(csv) == 15 * 15 and set(csv.columns) == {"x", "y", "value"}
    np.testing.assert_allclose(csv.groupby("y", sort=False)["value"].sum(), 1.0, atol=1e-5)  # rows of a softmax


@needs_browser
def test_with_a_browser_the_menu_offers_png_and_svg(tmp_path, downloads):
    at = app(tmp_path)
    at.session_state["export.context"] = True
    at.run()
    keys = {b.key: b for b in at.download_button if b.key and b.key.startswith("export.context")}
    assert set(keys) == {"export.context.png", "export.context.svg", "export.context.csv"}
    assert downloads[keys["export.context.png"].proto.deferred_file_id]()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.fromstring(downloads[keys["export.context.svg"].proto.deferred_file_id]()).tag.endswith("svg")
    numbers = pd.read_csv(io.StringIO(downloads[keys["export.context.csv"].proto.deferred_file_id]()))
    shipped = json.loads((DEFAULT_CHECKPOINT / "config.json").read_text())
    d_head = shipped["hidden_size"] // shipped["num_attention_heads"]
    assert numbers["x"].tolist() == list(range(d_head)) and numbers["y"].notna().all()  # one bar a dimension


def test_the_handout_holds_the_latest_run_of_every_page_visited(tmp_path, downloads, no_browser_here):
    at = app(tmp_path)
    at.selectbox(key="attn.query").set_value(1).run()  # a new query: new softmax charts and tables
    at.switch_page(str(ROOT / "pages" / "worked.py")).run()
    assert not at.exception, at.exception
    (button,) = at.sidebar.download_button
    assert button.proto.label == "Download handout (.zip)" and not button.proto.disabled
    names, index, _ = read_zip(downloads[button.proto.deferred_file_id]())
    folders = sorted({n.split("/")[0] for n in names if "/" in n})
    assert folders == ["01_Worked_examples", "02_Attention"]  # the page on screen first
    attention = {n.split("/")[1] for n in names if n.startswith("02_")}
    assert "table_softmax_steps_L0_H0_q1.csv" in attention and "table_softmax_steps_L0_H0_q9.csv" not in attention
    assert {"01_attention_L0_H0.csv", "02_softmax_L0_H0_q1.csv"} <= attention
    assert not any("softmax_L0_H0_q9" in n for n in attention)  # the first run's chart is gone
    assert 'class="restore" href="http://localhost:8501/worked"' in index and "without images" in index
    assert 'class="restore" href="http://localhost:8501/"' in index  # Attention: the app's default page


def test_the_live_training_chart_draws_ln_v_in_its_one_layout_as_with_level_does():
    """training_loss builds its axes and ln V into the layout it starts with (every live frame pays once)."""
    fig = fle.training_loss(CURVES["run"].train, CURVES["run"].eval, 4.6, 60)
    drawn = fle.with_level(ftr.loss_curves(CURVES), 4.6, "ln V = 4.60 (a uniform guess)")
    for part in ("shapes", "annotations"):
        assert [s.to_plotly_json() for s in fig.layout[part]] == [s.to_plotly_json() for s in drawn.layout[part]]
    assert list(fig.layout.xaxis.range) == [0, 60] and list(fig.layout.yaxis.range) == pytest.approx([0, 5.29])
    assert fig.layout.margin.t == drawn.layout.margin.t == 60  # loss_curves' room for the title and the legend
