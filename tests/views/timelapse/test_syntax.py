"""Syntax as it forms (views/timelapse/syntax.py, ui/timelapse/syntax.py): a tiny run's kept checkpoints measured
into syntax.jsonl, one record a step, each the numbers `analyse` gives on that checkpoint and its probing entry (what
probe_corpus and amnesic give there); a rerun measures only what is new; a file written before probing is read as it
is and measured again gains probing; a damaged file, or a damaged probing entry, is read line by line; and the
Time-lapse page's section, its button and its charts."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.probing.amnesic import amnesic, default_layer
from bertviz_lab.probing.report import probe_corpus
from bertviz_lab.pretrain import checkpoints, process
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.syntax.report import analyse, story_corpus
from bertviz_lab.ui.shell import state
from bertviz_lab.views.syntax import analysis as vs
from bertviz_lab.views.timelapse import syntax as vts
from bertviz_lab.views.timelapse.findings import amnesic_sentence, series
from bertviz_lab.probing.records import Probing
from bertviz_lab.views.timelapse.probing import Probes, entry_of
from bertviz_lab.views.timelapse.probing import parse as parse_probing
from bertviz_lab.views.timelapse.syntax_file import HeadScore, SyntaxAt, SyntaxHistory, as_record, write
from tests.helpers.figure_data import figures
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = str(ROOT / "pages" / "timelapse.py")
TINY = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=20, lr=5e-3, warmup=3,
            eval_every=5, eval_batches=1, checkpoint_every=50, device="cpu", threads=1)
STEPS = [0, 1, 2, 5, 10, 20]  # the 1-2-5 series and the last step
PROBES = Probes(("pos", "dep", "number"), draws=2, amnesic_pairs=2, sentences=80)  # the whole sample
QUICK = vts.Settings(sentences=80, seed=0, probe_steps=10, agreement_pairs=4, probing=PROBES)  # seconds per run
OLD = vts.Settings(sentences=80, seed=0, probe_steps=10, agreement_pairs=4, probing=None)  # before probing was added


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished 20-step run of a 2 x 2 model on the story world: checkpoints at 0, 1, 2, 5, 10 and 20."""
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    assert process.execute(run_dir, TrainConfig(**TINY), resume=False, command=["train"]) == 0
    assert [s for s, _ in checkpoints.kept(run_dir)] == STEPS
    return run_dir


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A copy of the run of its own for each test (measuring writes into it)."""
    return Path(shutil.copytree(trained, tmp_path / "runs" / "tiny"))


@pytest.fixture(scope="module")
def measured(trained, tmp_path_factory) -> str:
    """The run's syntax.jsonl, every kept checkpoint measured with QUICK (once for the tests that start from it)."""
    path = tmp_path_factory.mktemp("measured") / vts.FILE
    vts.measure_checkpoints(dict(checkpoints.kept(trained)), path, settings=QUICK)
    return path.read_text()


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """The number of `analyse` calls measuring makes, one a checkpoint."""
    calls = []

    def analysing(model, *args, **kwargs):
        calls.append(1)
        return analyse(model, *args, **kwargs)

    monkeypatch.setattr(vts, "analyse", analysing)
    return calls


@pytest.fixture
def probed(monkeypatch) -> list[int]:
    """The number of probing entries measuring makes."""
    calls = []

    def probing(*args, **kwargs):
        calls.append(1)
        return measure_probing(*args, **kwargs)

    measure_probing = vts.measure_probing
    monkeypatch.setattr(vts, "measure_probing", probing)
    return calls


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_kept_checkpoint_is_measured_once_and_a_new_one_next_time(run, counted):
    newest = run / "checkpoints" / "step-000020"
    newest.rename(run / "later")  # as if the run had not written it yet
    news = []
    history = vts.measure(run, progress=lambda fraction, message: news.append((fraction, message)), settings=QUICK)
    assert history.steps == STEPS[:-1] and len(counted) == 5 and history.note == ""
    records = lines(run / vts.FILE)
    assert records[0] == {"kind": "syntax-settings", "version": 2, "layers": 2, "heads": 2, "hidden": 32,
                          "sentences": 80, "seed": 0, "probe_steps": 10, "agreement_pairs": 4,
                          "probing": {"tasks": ["pos", "dep", "number"], "draws": 2, "amnesic_pairs": 2,
                                      "sentences": 80}}
    assert [r["step"] for r in records[1:]] == STEPS[:-1] and {r["kind"] for r in records[1:]} == {"syntax"}
    fractions = [f for f, _ in news]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and news[0][1].startswith("step 0 (1 of 5)")
    before = (run / vts.FILE).read_bytes()
    again = vts.measure(run, settings=QUICK)
    assert len(counted) == 5 and again.steps == history.steps and (run / vts.FILE).read_bytes() == before
    (run / "later").rename(newest)
    assert vts.unmeasured(vts.read(run / vts.FILE), STEPS) == [20]
    assert vts.measure(run).steps == STEPS and len(counted) == 6  # the file's own settings go on
    assert lines(run / vts.FILE)[:6] == records  # the steps measured before, as they were
    with pytest.raises(InputError, match="other settings"):
        vts.measure(run, settings=vts.Settings(sentences=90))
    with pytest.raises(InputError, match="other settings"):
        vts.measure(run, settings=OLD)  # a file with probing does not go on without it


def test_a_record_holds_the_numbers_analyse_gives_on_that_checkpoint(run):
    (record,) = [r for r in lines(vts.measure_checkpoints({10: run / "checkpoints" / "step-000010"},
                                                          run / "elsewhere" / vts.FILE, settings=QUICK).path)
                 if r.get("step") == 10]
    ckpt = load_checkpoint(run / "checkpoints" / "step-000010")
    report = analyse(ckpt.model, ckpt.tokenizer, story_corpus(QUICK.sentences, QUICK.seed), seed=QUICK.seed,
                     control=False, agreement_pairs_per_count=QUICK.agreement_pairs, probe_steps=QUICK.probe_steps)
    assert record["uuas"] == [round(s.uuas, 6) for s in report.probe.layers] and len(record["uuas"]) == 3
    assert record["linear_uuas"] == round(report.probe.linear_uuas, 6)
    assert (record["train_sentences"], record["test_sentences"]) == (report.probe.train_sentences,
                                                                     report.probe.test_sentences)
    assert vts.MIN_COUNT is vs.MIN_COUNT  # one threshold for the Syntax page's verdicts and the records
    assert record["agreement"] == {str(k): None if a is None else round(a, 6)
                                   for k, a in report.agreement.accuracy().items()}
    corpus = story_corpus(QUICK.sentences, QUICK.seed)  # probing: on the same sample, what probe_corpus and amnesic give
    probing = probe_corpus(ckpt.model, ckpt.tokenizer, corpus, PROBES.tasks, kinds=("linear",), mix=True,
                           codelength=False, random_weights=False, seed=QUICK.seed)
    removed = amnesic(ckpt.model, ckpt.tokenizer, corpus, "number", default_layer(2), draws=PROBES.draws,
                      seed=QUICK.seed, agreement_pairs=PROBES.amnesic_pairs)
    assert {**record["probing"], "seconds": 0.0} == entry_of(probing, removed, 0.0, removed.note)
    assert set(record["probing"]["tasks"]) | set(record["probing"]["missing"]) == set(PROBES.tasks)
    assert record["probing"]["amnesic"]["layer"] == 1 and record["probing"]["tasks"]["pos"]["test"] > 0
    counts = dict(zip(report.relations.relations, report.relations.counts))
    assert set(record["relations"]) == {n for n, c in counts.items() if n == "all" or c >= vts.MIN_COUNT}
    for name, entry in record["relations"].items():
        (layer, head), accuracy = report.relations.best(name, 0)
        offset, baseline = report.relations.baseline[name]
        assert (entry["layer"], entry["head"], entry["offset"], entry["count"]) == (layer, head, offset, counts[name])
        assert entry["accuracy"] == round(accuracy, 6) and entry["baseline"] == round(baseline, 6)
    (parsed,) = vts.read(run / "elsewhere" / vts.FILE, shape=(2, 2)).records  # read back as written
    assert parsed.uuas == tuple(record["uuas"]) and parsed.best_layer == int(np.argmax(record["uuas"]))
    assert parsed.relations == {name: HeadScore(**entry) for name, entry in record["relations"].items()}
    assert vts.probe_split(parsed) == (record["train_sentences"], record["test_sentences"])
    older = {k: v for k, v in record.items() if k not in ("train_sentences", "test_sentences")}
    (old,) = vts.read(write_records(run / "older" / vts.FILE, older), shape=(2, 2)).records  # written before they were
    tested = max(2, round(record["sentences"] / 4))
    assert vts.probe_split(old) == (record["sentences"] - tested, tested)
    assert "train_sentences" not in as_record(old)  # rewritten as it was, not with made-up counts


def write_records(path: Path, *records: dict) -> Path:
    """A syntax.jsonl of QUICK's settings for a 2 x 2 model (hidden 32) holding `records`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, QUICK, (2, 2, 32), {r["step"]: r for r in records})
    return path


def test_a_damaged_file_is_read_line_by_line_and_the_damage_measured_again(run, measured, counted):
    path = run / vts.FILE
    path.write_text(measured)
    header, *records = lines(path)
    records[1]["uuas"] = records[1]["uuas"][:2]  # step 1: one layer short
    records[2]["relations"]["det"]["layer"] = 7  # step 2: a layer the model lacks
    records[3]["agreement"]["0"] = float("nan")  # step 5
    records[4]["step"] = True  # step 10
    path.write_text("\n".join(map(json.dumps, [header, *records])) + "\nnot json\n[1, 2]\n" + "{" * 100_000 + "\n")
    history = vts.read(path, shape=(2, 2))
    assert history.steps == [0, 20]
    assert history.note.startswith("7 lines of syntax.jsonl skipped (line 3: its numbers do not add up")
    assert vts.read(path, shape=(4, 4)).records == () and "2 layers x 2 heads, not this one's 4 x 4" in \
        vts.read(path, shape=(4, 4)).note
    calls = len(counted)
    assert vts.measure(run).steps == STEPS and len(counted) == calls + 4  # the four unreadable steps again
    assert vts.read(path).note == ""  # rewritten without the damage
    path.write_text(json.dumps(records[0]) + "\n")
    assert vts.read(path).records == () and "no settings line" in vts.read(path).note
    path.unlink()
    path.mkdir()
    assert "cannot be read" in vts.read(path).note


def test_a_source_note_in_the_header_is_kept_through_a_new_measurement(run, counted):
    path = run / vts.FILE
    vts.measure_checkpoints({0: run / "checkpoints" / "step-000000"}, path, settings=QUICK,
                            source="Measured on a rerun of this model's recipe.")
    assert vts.read(path).source == "Measured on a rerun of this model's recipe."
    vts.measure(run)  # the rest of the steps, written with the same header
    assert vts.read(path).source == "Measured on a rerun of this model's recipe." and vts.read(path).steps == STEPS
    header, *records = lines(path)
    header["source"] = "\x1b[31mred\x07"  # a terminal escape is not shown
    path.write_text("\n".join(map(json.dumps, [header, *records])) + "\n")
    assert vts.read(path).source == "" and vts.read(path).steps == STEPS


def test_a_file_written_before_probing_is_read_as_it_is_and_measured_again_gains_probing(run, counted, probed):
    path = run / vts.FILE
    vts.measure(run, settings=OLD)
    header, *records = lines(path)
    assert header["version"] == 1 and "probing" not in header and not any("probing" in r for r in records)
    old = vts.read(path)
    assert old.before_probing and old.note == "" and old.steps == STEPS and len(probed) == 0
    assert vts.BEFORE_PROBING == ("This history was measured before probing over training was added; measure again to "
                                  "see it.")
    assert vts.unmeasured(old, STEPS) == STEPS  # each step again, for its probing
    calls = len(counted)
    again = vts.measure(run, settings=QUICK)  # the same settings, with probing
    assert len(counted) == calls and len(probed) == len(STEPS)  # the rest of each record kept, not measured again
    assert not again.before_probing and all(r.probing is not None for r in again.records)
    header, *now = lines(path)
    assert header["version"] == 2 and [{k: v for k, v in r.items() if k != "probing"} for r in now] == records
    assert vts.unmeasured(again, STEPS) == []


def test_the_shipped_history_holds_probing_at_every_step():
    """Measured with probing on a rerun of the shipped model's command (bench/syntax_history.py, docs/guide.md)."""
    shipped = vts.read(ROOT / "checkpoints" / "bertviz-mini" / "history" / vts.FILE, shape=(4, 4))
    assert not shipped.before_probing and shipped.note == "" and len(shipped.records) > 5
    assert all(r.probing is not None for r in shipped.records) and shipped.steps[0] == 0
    assert "rerun of its own command" in shipped.source


def test_a_damaged_probing_entry_is_left_out_with_a_note_and_measured_again(run, measured, counted, probed):
    path = run / vts.FILE
    path.write_text(measured)
    header, *records = lines(path)
    records[3]["probing"]["tasks"]["pos"]["layer"] = 9  # step 5: a hidden state the model lacks
    records[4]["probing"] = "soon"  # step 10
    path.write_text("\n".join(map(json.dumps, [header, *records])) + "\n")
    history = vts.read(path, shape=(2, 2))
    assert history.steps == STEPS  # the records stand, without their probing
    assert [r.step for r in history.records if r.probing is None] == [5, 10]
    assert history.note == "The probing of steps 5, 10 does not add up and is not shown."
    assert vts.unmeasured(history, STEPS) == [5, 10]
    calls, probes = len(counted), len(probed)
    assert vts.measure(run).note == "" and len(counted) == calls and len(probed) == probes + 2
    assert all(r.probing is not None for r in vts.read(path).records)


def test_the_time_asked_counts_a_whole_step_for_a_new_one_and_only_probing_for_one_held_without(tmp_path):
    probing = entry_of(Probing("s", 8, 6, 3, {}, {}), None, 2.0)
    records = (replace(at(0, 0.5), seconds=4.0), replace(at(1, 0.5), seconds=6.0, probing=parse_probing(probing, 2)))
    history = SyntaxHistory(records, vts.SETTINGS, (2, 2, 32))
    assert vts.unmeasured(history, [0, 1, 2]) == [0, 2]  # step 0 lacks its probing, step 2 everything
    assert vts.seconds_needed(history, [0, 2], tmp_path) == 2.0 + (5.0 + 2.0)  # the means of what they took
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 12, "hidden_size": 768}))
    scale = 13 / 5 * 768 * 64 / (256 * 64)  # nothing measured yet: the shipped model's times, scaled to bert-base
    assert vts.seconds_needed(SyntaxHistory(), [0, 2], tmp_path) == 2 * (vts.SECONDS_MINI + vts.PROBING_MINI) * scale


def at(step: int, best: float, linear: float = 0.5) -> SyntaxAt:
    return SyntaxAt(step, (0.3, best), linear, {"all": HeadScore(0, 0, 0.2, 1, 0.4, 9)}, {0: 0.5, 1: None})


@pytest.mark.parametrize(("bests", "found"), [
    ([0.4, 0.5, 0.65, 0.55, 0.7, 0.75], 10),  # above 0.6 at 2, below again at 5, above for good from 10
    ([0.62, 0.63, 0.8, 0.9, 0.9, 0.9], 2),  # the untrained model scores 0.62: the tree needs 0.72
    ([0.4, 0.5, 0.55, 0.58, 0.59, 0.55], None),
])
def test_the_tree_appears_where_the_best_uuas_stays_clear_of_what_needs_no_training(bests, found):
    history = SyntaxHistory(tuple(at(s, b) for s, b in zip(STEPS, bests)))
    assert vts.tree_step(history) == found
    sentence = vts.tree_sentence(history)
    if found is None:
        assert sentence.startswith("No tree yet: at step 20") and "a tree shows from 0.60 on" in sentence
    else:
        assert sentence.startswith(f"The tree appears at step **{found:,}**")
        assert ("the untrained model's 0.62 (step 0)" if bests[0] > 0.5 else "the linear baseline's 0.50") in sentence


def test_without_a_step_0_record_no_step_is_named():
    """The linear baseline alone is far below what a probe finds on random weights: no verdict against it."""
    history = SyntaxHistory(tuple(at(s, b) for s, b in zip(STEPS[1:], [0.7, 0.75, 0.8, 0.9, 0.9])))
    assert vts.reference(history) is None and vts.tree_step(history) is None
    sentence = vts.tree_sentence(history)
    assert sentence.startswith("At step 20 the structural probe's best layer (layer 1) scores a UUAS of 0.90, but ")
    assert "this run kept no untrained checkpoint (step 0) to compare with, so no step is named" in sentence
    assert "tree appears" not in sentence and "No tree yet" not in sentence
    assert vts.tree_step(SyntaxHistory()) is None and vts.tree_sentence(SyntaxHistory()) == ""


# --- The page ---------------------------------------------------------------------------------------------------
@pytest.fixture
def page_run(run, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(run.parent))
    monkeypatch.setattr(vts, "SETTINGS", QUICK)
    return run


def lapse_page() -> AppTest:
    at = app_test(PAGE, 120).run()
    return at.selectbox(key=state.TimeLapse.SOURCE.name).set_value("run tiny").run()


def errors(at: AppTest) -> list:
    return [e.value for e in at.exception] + [e.value for e in at.error]


PROBING_CHARTS = ("Expected layer of each task", "Selectivity of the linear probe", "Agreement with noun number removed")


def syntax_charts(at: AppTest) -> dict[str, dict]:
    names = ("Structural probe", "Agreement by attractors", "Each relation's best head", *PROBING_CHARTS)
    return {f["layout"]["title"]["text"]: f for f in figures(at) if f["layout"]["title"]["text"].startswith(names)}


def test_the_page_measures_a_run_at_the_press_of_a_button_and_draws_it(page_run):
    at = lapse_page()
    assert not errors(at) and not syntax_charts(at)
    (button,) = [b for b in at.button if b.key == "lapse.syntax.measure"]
    assert button.label.startswith("Measure syntax at each kept checkpoint (about ") and button.label.endswith(" s)")
    at = button.click().run()
    assert not errors(at)
    assert vts.read(page_run / vts.FILE).steps == STEPS
    assert not [b for b in at.button if b.key == "lapse.syntax.measure"]  # nothing left to measure
    charts = syntax_charts(at)
    removed = (series(vts.read(page_run / vts.FILE))["rank"] > 0).any()  # a tiny model's number may be unreadable
    assert set(charts) == {"Structural probe: UUAS at each step", "Agreement by attractors",
                           "Each relation's best head, dependent → head", *PROBING_CHARTS[:2 + removed]}
    expected = charts["Expected layer of each task"]
    assert [t["name"] for t in expected["data"]] == ["part of speech", "dependency label", "noun number"][
        :len(expected["data"])]
    captions = " ".join(c.value for c in at.caption)
    assert "Tenney et al.'s expected layer" in captions and "At step 20 " in captions
    assert "the linear probe is most selective on" in captions
    assert ("Elazar et al.'s amnesic probing" in captions) == removed
    assert amnesic_sentence(vts.read(page_run / vts.FILE)) in captions
    uuas = charts["Structural probe: UUAS at each step"]
    names = [t["name"] for t in uuas["data"]]
    assert {"best layer", "linear baseline", "held-out MLM loss (right)"} <= set(names)
    assert any(m.value.startswith(("The tree appears at step", "No tree yet")) for m in at.markdown)


def test_the_page_reads_the_file_a_run_has_and_says_when_there_is_nothing_to_measure(page_run, measured):
    (page_run / vts.FILE).write_text(measured)
    at = lapse_page()
    assert not errors(at) and {"Expected layer of each task", "Structural probe: UUAS at each step"} <= set(
        syntax_charts(at))
    assert not [b for b in at.button if b.key == "lapse.syntax.measure"]
    (page_run / vts.FILE).unlink()
    for folder in (page_run / "checkpoints").iterdir():
        shutil.rmtree(folder)
    at = lapse_page()
    assert not errors(at) and not syntax_charts(at)
    assert "No syntax measured: this run keeps no checkpoint to measure it on." in [c.value for c in at.caption]


def test_the_shipped_model_shows_its_syntax_and_its_probing_over_training():
    at = app_test(PAGE, 120).run()  # the shipped model's history, the page's first source
    assert not errors(at)
    charts = syntax_charts(at)
    assert set(PROBING_CHARTS) <= set(charts) and len(charts) == 3 + len(PROBING_CHARTS)
    assert vts.BEFORE_PROBING not in [c.value for c in at.caption]
    assert not [b for b in at.button if b.key == "lapse.syntax.measure"]  # no checkpoints to measure
