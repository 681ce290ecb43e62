"""Waiting for a background run, and a two-process run under torchrun. Moved here from tests/pretrain/test_runs.py,
which uses them too."""

import os
import signal
import subprocess
import sys
import time

from bertviz_lab.pretrain import runs
from tests.helpers.paths import ROOT


def wait(run_dir, until=lambda info: not info.active, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = runs.read(run_dir)
        if until(info):
            return info
        time.sleep(0.1)
    raise AssertionError(f"run {run_dir} did not get there in {timeout}s: {runs.read(run_dir)}")


# Each rank runs `python -m bertviz_lab ...` and then says how many of the process group's threads are left.
RANK_MAIN = """\
import os, runpy, sys
sys.path.insert(0, os.getcwd())
try:
    runpy.run_module("bertviz_lab", run_name="__main__", alter_sys=True)
finally:
    tasks = "/proc/self/task"  # Linux: one folder per thread of this process
    if os.path.isdir(tasks):
        left = [t for t in os.listdir(tasks) if open(f"{tasks}/{t}/comm").read().startswith(("pt_gloo", "gloo"))]
        print(f"gloo threads left: {len(left)}", flush=True)
"""


def torchrun(tmp_path, *args: str) -> tuple[int, dict[str, str]]:
    """`torchrun --standalone --nproc_per_node=2 -m bertviz_lab ARGS`, with every rank's stdout and stderr kept
    whole in a file of its own (torchrun's --log-dir): (exit status, {"torchrun": ..., "rank 1 stderr": ...})."""
    (tmp_path / "rank_main.py").write_text(RANK_MAIN)
    logs = tmp_path / "logs"
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             "--log-dir", str(logs), "--redirects", "3", str(tmp_path / "rank_main.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"},
                            start_new_session=True)
    try:
        console, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its ranks
        console, _ = proc.communicate()
    ranks = {f"rank {p.parent.name} {p.stem}": p.read_text(errors="replace")
             for p in sorted(logs.glob("*/attempt_*/*/std*.log"))}
    return proc.returncode, {"torchrun": console, **ranks}
