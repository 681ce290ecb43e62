"""The command line run in a child process, and a checkpoint broken on purpose. Moved here from tests/cli/test_cli.py,
which uses them too."""

import subprocess
import sys

from bertviz_lab.cli import main
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT


def run_cli(*args):
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bertviz_lab", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def corrupt(path):
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])


def run_broken(checkpoint, tmp_path, capsys, breaker, command: str, args: list[str]):
    """Break the checkpoint as `breaker` says ("rm": no folder at all), run `command` on it in process (on the
    CPU) and check it exits 2 with one `error:` line; what it printed."""
    folder = tmp_path / "nowhere" if breaker == "rm" else checkpoint
    if callable(breaker):
        breaker(checkpoint)
    capsys.readouterr()  # what the breaker printed (transformers' progress bars)
    assert main([command, "--checkpoint", str(folder), "--device", "cpu", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    return captured
