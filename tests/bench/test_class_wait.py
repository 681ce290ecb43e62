"""bench.class_wait on a few steps: it runs the train command, times each phase, and its figures agree."""

import re
import subprocess
import sys

from tests.helpers.paths import ROOT


def test_a_short_preset_run_prints_its_runs_phases_and_median():
    """On threads 0, as the Start button runs it (one thread here: the tests' BERTVIZ_THREADS, conftest.py)."""
    out = subprocess.run([sys.executable, "-m", "bench.class_wait", "--runs", "2", "--steps", "4", "--threads", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    runs = [float(s) for s in re.findall(r"run \d: +([\d.]+) s", out)]
    assert "--threads 0 --steps 4` (the Start button's; BERTVIZ_THREADS=1 fixes it)" in out
    assert len(runs) == 2 and all(0 < s < 120 for s in runs)
    assert re.search(r"held-out loss [\d.]+ at step 4 +\d+ checkpoints", out)
    phases = dict(re.findall(r"^  (\S.*?) +([\d.]+) s$", out, re.M))
    assert {"imports", "steps: the model", "steps: making the batches", "evaluation", "checkpoint writes"} <= set(phases)
    median = float(re.search(r"preset run: median ([\d.]+) s", out).group(1))
    assert min(runs) <= median <= max(runs)
