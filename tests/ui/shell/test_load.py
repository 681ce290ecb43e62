"""A class typing at once on one real server: every session gets the right answer and the model loads once.

Ten sessions speaking Streamlit's own websocket protocol (bench.streamlit_client: what a browser sends and
receives, without the browser) open their page on a fresh server at the same moment, so that every first
run imports and loads at once, and each then submits sentences of its own as fast as the server answers.
Six headless-Chromium sessions do the same end to end (marked browser and slow). Each answer must be the
one computed here through the API; the server log must show one model load. Nothing is timed here:
`python -m bench.classroom_load` measures.
"""

from pathlib import Path

import pytest

from bench.classroom_load import (
    CHROMIUM,
    RUN_LINE,
    SHIPPED,
    Job,
    answer,
    digest,
    drive,
    free_port,
    model_loads,
    plan,
    server,
    server_seconds,
    shows_answer,
)
from bench.streamlit_client import Run
from bertviz_lab.bert.checkpoint import load_checkpoint
from tests.helpers.lab import hide_gpu_from_children

CAT = "the cat sat on the [MASK] ."


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(SHIPPED)


def test_the_shipped_model_puts_mat_under_the_cat(shipped):
    assert answer(shipped, "predict", CAT) == "the cat sat on the «mat» ."
    assert answer(shipped, "attention", CAT).startswith("6 [MASK]|mat|")


def run_class(plans: list[list[Job]], tmp_path, driver: str) -> tuple[str, dict[str, list[float]]]:
    """Every session's jobs at once on a fresh server: each must get its right answer, the model must load
    once. The server log and the server's seconds per page. The server sees no GPU (it inherits this process's
    environment): its sidebar's "auto" runs on the CPU, where the answers here are computed."""
    log = tmp_path / "server.log"
    with pytest.MonkeyPatch.context() as mp:
        hide_gpu_from_children(mp)  # bench's server() starts the app with this process's environment
        with server(free_port(), log) as url:
            firsts, redraws = drive(url, plans, timeout_s=150, driver=driver)
    text = log.read_text(errors="replace")
    assert len(firsts) == len(plans)
    failed = [f"session {r.session} {r.job.page} {r.job.text!r}: {r.problem}" for r in redraws if r.browser_s is None]
    assert not failed, "\n".join(failed) + "\n--- server log ---\n" + text[-3000:]
    assert sorted((r.session, r.job.text) for r in redraws) == sorted((i, job.text) for i, jobs in enumerate(plans)
                                                                      for job in jobs)
    loads = model_loads(text)
    assert len(loads) == 1 and loads[0].startswith(f"{SHIPPED} on "), loads
    return text, server_seconds(text, [job for jobs in plans for job in jobs])


def test_ten_sessions_at_once_on_a_fresh_server_get_their_answers_from_one_model_load(shipped, tmp_path):
    plans = plan(shipped, sessions=10, per_session=2, seed=2)  # 5 on each page, 20 distinct sentences
    text, served = run_class(plans, tmp_path, "protocol")
    assert "Traceback" not in text and "partially initialized module" not in text
    assert len(served["predict"]) == 10 and len(served["attention"]) == 10  # one script run per sentence
    assert len({m.group(6) for m in RUN_LINE.finditer(text)}) == 10  # ten sessions, each its own


def test_the_protocol_check_tells_a_right_answer_from_a_wrong_one(shipped):
    from streamlit.proto.Element_pb2 import Element

    job = Job("predict", CAT, answer(shipped, "predict", CAT))
    shown = Element()
    shown.code.code_text = "the cat sat on the «mat» ."
    assert shows_answer(job, Run(elements=[shown]))
    shown.code.code_text = "the cat sat on the «hat» ."
    assert not shows_answer(job, Run(elements=[shown]))
    error = Element()
    error.alert.body, error.alert.format = "Something broke", error.alert.ERROR
    assert Run(elements=[error]).problems() == ["error: Something broke"]


@pytest.mark.browser
@pytest.mark.slow  # about 70 s on 2 quiet cores: ./lab.sh test runs it, -m "not slow" skips it
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")
def test_six_sessions_typing_at_once_get_their_answers_from_one_model_load(shipped, tmp_path):
    cat = {page: Job(page, CAT, answer(shipped, page, CAT)) for page in ("predict", "attention")}
    plans = []
    for jobs in plan(shipped, sessions=6, per_session=1, seed=1):
        own = jobs[0]
        assert own.answer.split("|")[:2] != cat[own.page].answer.split("|")[:2]  # a stale page could not pass
        # Mask & predict opens on the cat sentence, so it must come second there to be a change.
        plans.append([own, cat["predict"]] if own.page == "predict" else [cat["attention"], own])
    text, served = run_class(plans, tmp_path, "browser")
    assert len(served["predict"]) >= 6 and len(served["attention"]) >= 6  # the server timed each redraw
    assert digest(CAT) in text
