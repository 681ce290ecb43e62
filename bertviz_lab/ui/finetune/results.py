"""What a finished (or stopped) fine-tuning run learned, in three tabs, each computed only while open:
the dev set (accuracy, confusion matrix, the examples it still gets wrong), "Try it" on your own
sentence, and the dev set as the classifier sees it before and after fine-tuning.

Every result is cached per (checkpoint folder, its weights file's mtime, device) and shared by every
session; the model it started from is rebuilt once per run (`views.finetune.dev.initial_model`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st

from bertviz_lab.errors import LabError
from bertviz_lab.figures import finetune as ff
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import TASK_FILE
from bertviz_lab.finetune.tasks import PAIR, TOKEN, Task
from bertviz_lab.pretrain import runs
from bertviz_lab.seeds import cite
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import cached_checkpoint, device_name, shown
from bertviz_lab.ui.shell.state import Finetune as K
from bertviz_lab.ui.kit.tables import number, percents, table_height
from bertviz_lab.ui.kit.widgets import chart, say
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views.finetune import dev as fd

MAX_TRY_CHARS = 1_000


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@st.cache_resource(max_entries=8, show_spinner=False)
def _task(run_dir: str, version: int) -> Task:
    return ft_data.load_task(Path(run_dir) / TASK_FILE)


def task_of(run: runs.RunInfo) -> Task:
    return _task(str(run.path), _mtime(run.path / TASK_FILE))


@st.cache_data(max_entries=32, show_spinner=False)
def _chance(run_dir: str, version: int, n: int) -> fd.Chance:
    return fd.chance(_task(run_dir, version), n)


def chance_of(run: runs.RunInfo) -> fd.Chance | None:
    """Chance on the dev items the run's curves score; None while its task or settings cannot be read."""
    try:
        n = FinetuneConfig.from_dict(run.config).eval_examples
        return _chance(str(run.path), _mtime(run.path / TASK_FILE), n)
    except (LabError, TypeError):
        return None


def start_facts(cfg: FinetuneConfig) -> fd.StartFacts:
    """What the run's start brings: read from the names of the weights it started from (its safetensors header;
    else the model itself, cached and shared)."""
    if not cfg.checkpoint:
        return fd.StartFacts(pretrained=False, pooler=False, nsp=False)
    parts = vf.checkpoint_parts(cfg.checkpoint)
    if parts is None:
        model = cached_checkpoint(cfg.checkpoint, device_name()).model
        parts = (model.bert.pooler is not None, model.has_nsp)
    pooler, nsp_head = parts
    return fd.StartFacts(pretrained=True, pooler=pooler, nsp=nsp_head or vf.checkpoint_nsp(cfg.checkpoint) is True)


@st.cache_resource(max_entries=8, show_spinner="Reading the dev set…")
def _dev(run_dir: str, checkpoint: str, version: int, device: str, seq_len: int, limit: int) -> fd.DevPass:
    ckpt = cached_checkpoint(checkpoint, device)
    return fd.dev_pass(vf.require_classifier(ckpt.model), ckpt.tokenizer,
                       _task(run_dir, _mtime(Path(run_dir) / TASK_FILE)), seq_len, limit)


def dev_of(run: runs.RunInfo, cfg: FinetuneConfig) -> fd.DevPass:
    """The run's latest checkpoint on its dev set (the examples its curves score)."""
    return _dev(str(run.path), str(run.checkpoint), _mtime(run.checkpoint / "model.safetensors"), device_name(),
                cfg.seq_len, cfg.eval_examples)


@st.cache_resource(max_entries=4, show_spinner="Rebuilding the model the run started from…")
def _before(run_dir: str, config: str, version: int, device: str) -> fd.DevPass:
    cfg = FinetuneConfig.from_dict(json.loads(config))
    task = _task(run_dir, version)
    model, tokenizer = fd.initial_model(cfg, task, device)
    return fd.dev_pass(model, tokenizer, task, cfg.seq_len, cfg.eval_examples)


# --- The tabs -------------------------------------------------------------------------------------
def dev_tab(run: runs.RunInfo, cfg: FinetuneConfig) -> None:
    report = fd.report(dev_of(run, cfg))
    what = "tagged words" if report.kind == TOKEN else "dev examples"
    base = chance_of(run)
    st.markdown(f"The latest checkpoint, **{run.checkpoint.name}**, gets **{report.accuracy:.1%}** of "
                f"{report.items:,} {what} right" + (f" (in {report.examples:,} dev sentences)" if report.kind == TOKEN
                                                     else "") + "." +
                (f" Always answering \u201c{plain(base.label)}\u201d would get {base.share:.1%}: this is "
                 f"{fd.versus_chance(report.accuracy, base)}." if base is not None else ""))
    left, right = st.columns([3, 2])
    chart(ff.confusion_heatmap(report.confusion, list(report.labels), "Confusion matrix"),
          f"{run.name}-confusion", where=left)
    right.table(percents(fd.per_label(report), "recall", "precision").hide(axis="index"))  # fits its column
    right.caption("Rows of the matrix: the true label; columns: the model's answer. The diagonal is right, every "
                  "other cell a kind of mistake; the colour is the share of the row. Recall: the share of a label's "
                  "items found; precision: the share of its answers that are right.")
    st.subheader("The dev examples it still gets wrong")
    if report.wrong.empty:
        st.success("None: every dev example is right.")
        return
    count = (f"{len(report.wrong):,} of {report.examples:,} dev sentences have a wrong tag" if report.kind == TOKEN
             else f"{len(report.wrong):,} of {report.examples:,} dev examples are wrong")
    st.caption(f"{count}; the most confident mistakes first" + (" (the wrong words in [brackets])" if
                                                                report.kind == TOKEN else "")
               + f". The failure check of {cite('002')}: are they hard cases, wrong labels, or a pattern it has not learned?")
    st.dataframe(percents(report.wrong, "confidence"), hide_index=True, height=table_height(report.wrong),
                 key="finetune.wrong")


def try_tab(run: runs.RunInfo, cfg: FinetuneConfig) -> None:
    task = task_of(run)
    ckpt = cached_checkpoint(str(run.checkpoint), device_name())
    if state.get(K.TRY_RUN) != run.name:  # another run: start from its first dev example that fits the model
        first = vf.first_fitting(task.dev, ckpt.tokenizer, ckpt.config.max_tokens)
        state.put(K.TEXT, first.text if first else "")
        state.put(K.TEXT_B, (first.text_b or "") if first else "")
        state.put(K.TRY_RUN, run.name)
    pair = task.kind == PAIR
    cols = st.columns(2) if pair else [st]
    text = cols[0].text_input("Sentence A" if pair else "Your sentence", key=K.TEXT.name, max_chars=MAX_TRY_CHARS)
    text_b = cols[1].text_input("Sentence B", key=K.TEXT_B.name, max_chars=MAX_TRY_CHARS) if pair else None
    if pair and not (text_b or "").strip():
        st.info("Type sentence B too: this model was fine-tuned on sentence pairs.")
        return
    try:
        if task.kind == TOKEN:
            table = vf.word_tags(ckpt.model, ckpt.tokenizer, text)
        else:
            result = vf.classify(ckpt.model, ckpt.tokenizer, text, text_b)
    except LabError as exc:
        say("warning", shown(str(exc)))
        return
    if task.kind == TOKEN:
        st.caption("The tag of each word, read at its first piece as in training; the probability of that tag, "
                   "then of every tag.")
        st.dataframe(percents(table, *(f"p({label})" for label in task.labels)), hide_index=True, key="finetune.tags",
                     column_config={"probability": st.column_config.ProgressColumn(format="percent", min_value=0,
                                                                                   max_value=1)})
        return
    left, right = st.columns([3, 2])
    chart(ff.probability_bars(list(result.labels), result.probs, f"Its answer: {result.best()}"),
          f"{run.name}-try", where=left)
    right.dataframe(percents(pd.DataFrame({"label": result.labels, "probability": result.probs,
                                           "logit": result.logits}), "probability"),
                    hide_index=True, key="finetune.probs", column_config={"logit": number("%.4f")})
    right.caption(f"The classifier reads {plain(ckpt.tokenizer.specials['cls'])} after the last layer, through the pooler "
                  "(tanh of a linear map), and gives one logit per label; the probabilities are their softmax.")


def picture_tab(run: runs.RunInfo, cfg: FinetuneConfig) -> None:
    after = dev_of(run, cfg)
    before = _before(str(run.path), json.dumps(cfg.to_dict(), sort_keys=True), _mtime(run.path / TASK_FILE),
                     device_name())
    pic = fd.picture(before, after)
    cls = plain(cached_checkpoint(str(run.checkpoint), device_name()).tokenizer.specials["cls"])
    what = (f"the first {len(pic.labels):,} tagged words of the dev set (each word's vector at its first piece)"
            if after.kind == TOKEN else f"the {len(pic.labels):,} dev examples (the pooled {cls} vector of each)")
    chart(ff.before_after(pic.points, pic.explained, pic.labels, pic.texts, "The dev set as the classifier sees it",
                            list(after.labels)), f"{run.name}-before-after")
    start = "the pretrained encoder with a fresh, random classifier" if cfg.checkpoint else "random weights"
    st.caption(f"Each point is one of {what}, projected to 2-D by PCA (each picture its own axes) and coloured by "
               f"its true label; hover for the text. Before: the model the run started from ({start}), rebuilt "
               f"with its seed. After: {run.checkpoint.name}. "
               + ("This run is a linear probe: the encoder stays frozen, so both pictures are the same and only "
                  "the classifier's boundary through them moved. " if cfg.freeze_encoder else
                  "Full fine-tuning moves the vectors as the loss asks, toward colours one linear layer separates. ")
               + fd.start_note(after.kind, cfg.task, start_facts(cfg), cls))


TABS = {"On the dev set": dev_tab, "Try it": try_tab, "Before and after": picture_tab}


def results(run: runs.RunInfo) -> None:
    """The chosen run's results, once it stopped with a checkpoint; only the open tab computes."""
    if run.active:
        st.info("The dev set, Try it and the before/after picture appear when the run finishes or is stopped.")
        return
    if run.status not in ("finished", "stopped") or run.checkpoint is None:
        say("info", f"This run {run.status} without a usable checkpoint: {run.message}")
        return
    try:
        cfg = FinetuneConfig.from_dict(run.config)
    except (LabError, TypeError) as exc:
        say("warning", f"This run's settings cannot be read: {exc}")
        return
    state.keep_valid(K.TAB, list(TABS))
    for tab, draw in zip(st.tabs(list(TABS), key=K.TAB.name, on_change="rerun"), TABS.values()):
        if tab.open:
            with tab:
                try:
                    draw(run, cfg)
                except LabError as exc:  # a checkpoint or task.json that no longer reads, a model that is not a classifier
                    say("warning", shown(str(exc)))
