"""What every command shares: the exit status of a user's mistake, loading `--checkpoint` (a folder or a
Hugging Face Hub id), and text from files (run records, model cards, labels) made safe to print on one line."""

from __future__ import annotations

import json
import os
import sys

EXIT_USAGE = 2
CHECKPOINT_HELP = "a model folder, the name of a model that comes with the lab (bertviz-mini) or a Hugging Face Hub id"


def load(args):
    """The checkpoint of `--checkpoint`, on the device of `--device` (the CPU for commands without one).

    A folder that exists wins; then the bare name of a model that comes with the lab ("bertviz-mini", from any
    folder); otherwise a Hub id opens from the Hugging Face cache, or is downloaded into it first with a
    progress bar on stderr.
    """
    from bertviz_lab.bert import hub
    from bertviz_lab.bert.checkpoint import load_checkpoint
    from bertviz_lab.bert.device import resolve_device
    from bertviz_lab.files import shipped_model

    folder = args.checkpoint
    if not os.path.lexists(folder) and (shipped := shipped_model(folder)) is not None:
        folder = shipped
    elif hub.looks_like_hub_id(folder) and not os.path.lexists(folder):
        with DownloadBar() as bar:
            folder = hub.fetch(folder, progress=bar)
    ckpt = load_checkpoint(folder, device=resolve_device(getattr(args, "device", "cpu")))
    if ckpt.vocab_warning:  # a tokenizer that leaves rows unread: said once, apart from the answer on stdout
        print(f"warning: {ckpt.vocab_warning}", file=sys.stderr)
    return ckpt


def absolute(path: str) -> str:
    """A relative path the user typed, made absolute where it names something (a run records it in run.json, and
    is resumed by the app or `runs resume` from any folder); anything else (a Hub id, a name) as it is."""
    if isinstance(path, str) and path and not os.path.isabs(path) and os.path.lexists(path):
        return os.path.abspath(path)
    return path


class DownloadBar:
    """`hub.fetch`'s progress as a tqdm bar on stderr, drawn only once bytes arrive (a cached model draws none)."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, done: int, total: int, filename: str) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, desc=filename)
        self.bar.total = total
        self.bar.set_description_str(filename, refresh=False)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> DownloadBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def one_line(value) -> str:
    """No newlines or terminal control codes from a run's files reach the terminal."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())


def printable(value) -> str:
    """A card value on one line with no control characters (JSON for anything but plain text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "".join(c if c.isprintable() else "?" for c in text)
