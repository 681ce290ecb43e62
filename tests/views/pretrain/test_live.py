"""What the Pretrain live page shows, without Streamlit: the ETA and progress line, a run's
description, the form's values as a TrainConfig (a bad value names its field), the user's
text checked and saved, curves read from metrics.jsonl and the table of runs."""

import json
from pathlib import Path

import pandas as pd
import pytest

from bertviz_lab.bert.device import cuda_available
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.figures.training import Curves
from bertviz_lab.pretrain import records, runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.views.pretrain import live as vp

SENTENCE = "The cat sat on the mat and looked at the rain over the quiet city."


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    return tmp_path


def form(**changes) -> dict:
    """The form's values as the page reads them: every number field at its default, then `changes`."""
    values = {field.name: field.default for field in vp.FORM.numbers}
    values.update(preset="tiny", nsp=True, device="cpu", precision="auto")
    return {**values, **changes}


def run(status="running", step=10, total=100, config=None, name="r") -> runs.RunInfo:
    return runs.RunInfo(name=name, path=Path(name), status=status, step=step, total_steps=total,
                        config=config if config is not None else TrainConfig().to_dict())


# --- ETA and progress --------------------------------------------------------------------------
def test_eta_is_the_remaining_steps_at_the_recent_speed():
    train = pd.DataFrame({"step": range(1, 11), "elapsed": [0.5 * s for s in range(1, 11)]})
    assert vp.eta_seconds(train, total_steps=100) == pytest.approx(90 * 0.5)
    slow_then_fast = pd.DataFrame({"step": [1, 2, 3, 4], "elapsed": [10.0, 20.0, 20.1, 20.2]})
    assert vp.eta_seconds(slow_then_fast, total_steps=14, window=2) == pytest.approx(10 * 0.1)  # only the last 2


@pytest.mark.parametrize("train", [
    pd.DataFrame({"step": [1], "elapsed": [1.0]}),  # one step: no speed yet
    pd.DataFrame({"step": [1, 2]}),  # an old run without elapsed times
    pd.DataFrame({"step": [1, 2], "elapsed": [3.0, 3.0]}),  # no time passed
])
def test_no_eta_without_a_measured_speed(train):
    assert vp.eta_seconds(train, total_steps=100) is None


def test_progress_text_says_time_left_while_training_and_time_taken_after():
    train = pd.DataFrame({"step": range(1, 11), "elapsed": [6.5 * s for s in range(1, 11)]})
    assert vp.progress_text(run(step=10, total=100), train) == "step 10 / 100 · about 9 min 45 s left"
    assert vp.progress_text(run(step=0, total=1_500), pd.DataFrame()) == (
        "step 0 / 1,500 · preparing the corpus and the model")
    assert vp.progress_text(run("finished", 10, 10), train) == "step 10 / 10 · trained for 1 min 05 s"
    assert vp.duration(59.4) == "59 s" and vp.duration(60) == "1 min 00 s"


# --- Descriptions and the table of runs ------------------------------------------------------
def test_describe_names_shape_text_nsp_random_tokens_and_seed():
    assert vp.describe(TrainConfig().to_dict()) == ("tiny 2×128 (2 heads), built-in text, NSP on, "
                                                    "random tokens: whole vocabulary, seed 0")
    custom = TrainConfig(hidden=64, heads=4, nsp=False, seed=7, corpus="/data/uploads/abc.txt").to_dict()
    assert vp.describe(custom) == "tiny 2×64 (4 heads), text abc.txt, NSP off, random tokens: whole vocabulary, seed 7"
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "random_tokens"}  # a run.json from before
    assert "random tokens: word pieces" in vp.describe(old)


@pytest.mark.parametrize("config", [{"steps": 0}, {"not_a_setting": 1}, {"preset": "huge"}])
def test_describe_of_a_config_that_does_not_load(config):
    assert vp.describe(config) == "settings unknown"


def test_run_rows_take_the_last_held_out_metrics_from_the_given_curves():
    held = pd.DataFrame({"kind": "eval", "step": [0, 5], "loss": [4.6, 3.1], "acc": [0.0, 0.25], "top5": [0.1, 0.5]})
    curves = {Path("a"): Curves(eval=held), Path("b"): Curves()}
    table = vp.run_rows([run(name="a", config=TrainConfig(nsp=False).to_dict()), run("finished", 7, 7, name="b")],
                        curves.__getitem__)
    assert table["run"].tolist() == ["a", "b"] and table["NSP"].tolist() == ["off", "on"]
    assert table["held-out MLM loss"][0] == 3.1 and table["top-1"][0] == 0.25 and table["top-5"][0] == 0.5
    assert pd.isna(table["held-out MLM loss"][1]) and table["steps"][1] == "7 / 7"


def test_curves_are_read_from_the_metrics_file(tmp_path):
    assert vp.metrics_version(tmp_path) is None and vp.read_curves(tmp_path).train.empty
    rows = [{"kind": "train", "step": 1, "mlm_loss": 4.0}, {"kind": "eval", "step": 0, "mlm_loss": 4.5},
            {"kind": "train", "step": 2, "loss": 3.5}]  # a run's from before metrics.Metrics, then one of today's
    (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n{half a li")
    curves = vp.read_curves(tmp_path)
    assert curves.train["loss"].tolist() == [4.0, 3.5] and curves.eval["step"].tolist() == [0]
    info = (tmp_path / "metrics.jsonl").stat()
    assert vp.metrics_version(tmp_path) == (info.st_dev, info.st_ino, info.st_size)  # which file, how long
    with open(tmp_path / "metrics.jsonl", "a") as out:
        out.write("ne\n")  # the half line ends (not a record) and the version moves on with the size
    assert vp.metrics_version(tmp_path)[2] == info.st_size + 3 and records.metrics_note(tmp_path) == ""


# --- The form ----------------------------------------------------------------------------------
def test_form_values_become_a_train_config_with_whole_numbers_as_ints():
    new = vp.form_config(form(steps=20.0, hidden=64.0, heads=4.0, lr=0.002, nsp=False))
    cfg = new.config
    assert new.text is None and cfg == TrainConfig(steps=20, hidden=64, heads=4, lr=0.002, nsp=False, device="cpu")
    assert type(cfg.steps) is int and type(cfg.hidden) is int and cfg.layers is None  # empty: the preset's
    assert cfg.corpus == "builtin"
    assert cfg.random_tokens == "vocabulary"  # as BERT, unless the form says otherwise
    assert vp.form_config(form(random_tokens="wordpieces")).config.random_tokens == "wordpieces"
    assert "Runs saved before this setting existed used wordpieces" in vp.RANDOM_TOKEN_HELP


@pytest.mark.parametrize("changes, field", [
    (dict(steps=0.0), "steps"), (dict(steps=2.5), "steps"), (dict(heads=3.0), "heads"),
    (dict(mask_rate=1.5), "mask_rate"), (dict(seq_len=4.0), "seq_len"), (dict(preset="huge"), "preset"),
    (dict(random_tokens="special"), "random_tokens"),
])
def test_a_bad_value_is_refused_naming_its_field_and_its_label(changes, field):
    with pytest.raises(ConfigError) as caught:
        vp.form_config(form(**changes))
    assert str(caught.value).startswith(f"{field} ")
    assert vp.explain(caught.value).startswith(f"**{vp.LABELS[field]}**: {field} ")


@pytest.mark.skipif(cuda_available(), reason="this machine has a CUDA GPU")
def test_cuda_without_a_gpu_is_refused_by_name():
    with pytest.raises(ConfigError) as caught:
        vp.form_config(form(device="cuda"))
    assert vp.explain(caught.value).startswith("**Device**: device cuda")


def test_an_error_naming_no_field_is_shown_as_is():
    assert vp.explain(ValueError("something else went wrong")) == "something else went wrong"


# --- The user's text ---------------------------------------------------------------------------
@pytest.mark.parametrize("corpus, text, words", [
    ("upload", None, "choose a .txt file"),
    ("upload", "café au lait. ".encode("latin-1") * 50, "(the file class.txt): the file is not UTF-8"),
    ("upload", b"\x00\x01binary\x00" * 40, "binary"),
    ("paste", SENTENCE * 3, "(the pasted text): "),
    ("paste", None, "(the pasted text): "),
])
def test_unusable_text_is_refused_as_the_corpus_and_nothing_is_saved(runs_dir, corpus, text, words):
    with pytest.raises(InputError) as caught:
        vp.form_config(form(), corpus, text, "class.txt")
    assert str(caught.value).startswith("corpus") and words in str(caught.value)
    assert vp.explain(caught.value).startswith("**Training text**: corpus")
    assert not (runs_dir / "uploads").exists()


@pytest.mark.parametrize("corpus", ["paste", "upload"])
def test_usable_text_is_checked_now_and_saved_once_only_when_its_run_starts(runs_dir, corpus, monkeypatch):
    text = " ".join([SENTENCE] * 30)
    given = text.encode("utf-8-sig") if corpus == "upload" else text  # a BOM is allowed in a file
    new = vp.form_config(form(), corpus, given, "class.txt")
    saved = Path(new.config.corpus)
    assert saved.parent == runs_dir / "uploads" and new.text == text
    assert not saved.exists()  # validated, not yet written
    assert vp.form_config(form(), "paste", text).config.corpus == new.config.corpus  # named by its content
    started = []
    monkeypatch.setattr(runs, "start", lambda cfg, name, **kw: started.append((cfg, name, kw)) or "run")
    assert vp.start_run(new, "mine", "visitor 10.0.0.7", 2) == "run"
    assert saved.read_text(encoding="utf-8") == text
    assert started == [(new.config, "mine", {"started_by": "visitor 10.0.0.7", "max_active": 2})]
    vp.start_run(new, "again")
    assert len(list((runs_dir / "uploads").iterdir())) == 1


def test_a_run_that_does_not_start_leaves_no_text_behind(runs_dir):
    text = " ".join([SENTENCE] * 30)
    (runs_dir / "taken").mkdir()
    new = vp.form_config(form(), "paste", text)
    with pytest.raises(ConfigError, match="already exists"):
        vp.start_run(new, "taken")
    assert not Path(new.config.corpus).exists()
    Path(new.config.corpus).parent.mkdir(exist_ok=True)
    Path(new.config.corpus).write_text(text)  # written for a run that is starting: it stays
    with pytest.raises(ConfigError, match="already exists"):
        vp.start_run(new, "taken")
    assert Path(new.config.corpus).read_text() == text


def test_unreadable_runs_describe_themselves_and_show_who_started_each_run():
    rows = vp.run_rows([run("unreadable", config={}, name="bad"), run(name="ok")], lambda path: Curves())
    broken = runs.RunInfo(name="x", path=Path("x"), status="unreadable", message="status.json: step should be ...")
    assert vp.run_rows([broken], lambda path: Curves())["settings"].tolist() == ["status.json: step should be ..."]
    assert rows["started by"].tolist() == ["owner", "owner"] and vp.describe({}) == "settings unknown"


# --- Who may do what --------------------------------------------------------------------------
VISITOR, OTHER = "visitor 10.0.0.7", "visitor 10.0.0.8"


@pytest.mark.parametrize("started_by, who, allowed", [
    ("owner", "owner", True), (VISITOR, "owner", True),  # the machine's owner controls every run
    (VISITOR, VISITOR, True),  # a visitor its own
    (OTHER, VISITOR, False), ("owner", VISITOR, False),  # not another visitor's, not the owner's
    ("", VISITOR, False), ("visitor 10.0.0.7 ", VISITOR, False),  # no near misses
])
def test_who_may_stop_resume_or_delete_a_run(started_by, who, allowed):
    target = runs.RunInfo(name="r", path=Path("r"), status="running", started_by=started_by)
    assert vp.can_control(target, who) is allowed


def test_the_note_says_whose_run_it_is():
    note = lambda by: vp.control_note(runs.RunInfo(name="r", path=Path("r"), status="stopped", started_by=by))  # noqa: E731
    assert note(OTHER) == f"Started by {OTHER}: only they or this machine's owner can stop, resume or delete it."
    assert note("owner").startswith("Started by this machine's owner: only the owner")
    assert note("").startswith("Started by someone else: ")


@pytest.mark.parametrize("active, who, cap, allowed", [
    (0, VISITOR, 2, True), (1, VISITOR, 2, True), (2, VISITOR, 2, False), (5, VISITOR, 2, False),
    (5, "owner", 2, True),  # the owner is not capped
    (0, VISITOR, 1, True), (1, VISITOR, 1, False),
])
def test_visitors_start_runs_only_below_the_cap(active, who, cap, allowed):
    assert vp.start_allowed(active, who, cap) is allowed
    assert str(cap) in vp.cap_note(active, cap)


def test_the_help_and_the_curves_note_say_the_built_in_sentences_recur():
    from bertviz_lab.corpus import StoryGenerator
    from bertviz_lab.pretrain.corpus_setup import HELD_OUT_SEED
    from bertviz_lab.pretrain.data import DocumentSource, _mix
    from bertviz_lab.pretrain.loop import EVAL_STREAM, TRAIN_STREAM
    from bertviz_lab.ui.pretrain.live import CURVES_NOTE

    sentences = [s for story in StoryGenerator(0).stories(2000) for s in story]
    assert len(set(sentences)) < 0.9 * len(sentences)  # about a fifth are repeats
    held = {s for story in DocumentSource(None, HELD_OUT_SEED).sample(256, _mix(EVAL_STREAM, 0, 0)) for s in story}
    trained = {s for step in range(10) for story in DocumentSource(None, 0).sample(256, _mix(TRAIN_STREAM, step, 0))
               for s in story}
    assert len(held & trained) > 0.2 * len(held)  # held-out stories, not unseen sentences
    help_text = vp.FORM["dropout"].help
    assert "never repeats" not in help_text and "sentences do recur" in help_text
    assert "never trains on" not in CURVES_NOTE and "sentences recur in both" in CURVES_NOTE
