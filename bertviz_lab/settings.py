"""Every setting the lab reads from the environment, read here and only here:

    BERTVIZ_RUNS         the runs folder (default: runs/ in the checkout, or in the user's data folder)
    BERTVIZ_BATCH_CACHE  the folder of the training batches runs keep (default: cache/batches beside it)
    BERTVIZ_NEURON_CACHE the folder of the neurons' top contexts over a corpus (default: cache/neurons beside it)
    BERTVIZ_THREADS      the CPU threads of a run on threads 0, from 1 to the cores (default: watch the machine)
    BERTVIZ_MAX_RUNS     in classroom mode, how many runs visitors may train at once, 1 to 99 (default 2)
    BERTVIZ_CLASSROOM    1 (or true, yes, on): classroom mode, as `bertviz-lab app --classroom` sets it; 0 or unset: off
    BERTVIZ_STARTED_BY   who asked for a run: the app sets it for the trainers it starts

A value the lab cannot use is one ConfigError sentence that starts with the variable's name and says how to fix
it, wherever it is read (the app, the command line, a trainer). Whole numbers are ASCII digits only
(`str.isdigit()` also takes '²' and '٣', which `int` then refuses or reads as another number), and never more
than a few: 5,000 digits are a sentence, not Python's digit limit. A folder has '~' expanded (`~nosuchuser`
is a sentence, not the RuntimeError of `Path.expanduser`) and must be one the lab can write into: an existing
folder it may write to, or one it could create (the nearest existing folder above it writable). A file, a link
to nothing, `/`, the kernel's folders and a folder that cannot be written are refused. Reading a setting
creates nothing. Each read looks at the environment again, so tests can change it.
"""

from __future__ import annotations

import os
from pathlib import Path

from bertviz_lab.errors import ConfigError
from bertviz_lab.files import MAX_PATH_CHARS, in_system_folder

RUNS, BATCH_CACHE, THREADS = "BERTVIZ_RUNS", "BERTVIZ_BATCH_CACHE", "BERTVIZ_THREADS"
NEURON_CACHE = "BERTVIZ_NEURON_CACHE"
MAX_RUNS, CLASSROOM, STARTED_BY = "BERTVIZ_MAX_RUNS", "BERTVIZ_CLASSROOM", "BERTVIZ_STARTED_BY"
MAX_DIGITS = 6  # no whole-number setting is larger; more digits are refused before `int` reads them
MAX_WHO_CHARS = 200  # who started a run, as its records keep it
ON, OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def text(name: str) -> str:
    """The setting as set, without the spaces around it; "" when unset."""
    return os.environ.get(name, "").strip()


def _quoted(value: str) -> str:
    """The value as a message quotes it: in quotes (control characters escaped), or its length if it is long."""
    return repr(value) if len(value) <= 60 else f"a value of {len(value):,} characters"


def whole(name: str, low: int, high: int, default: int, meaning: str = "", unset: str = "") -> int:
    """The setting as a whole number from `low` to `high`, `default` when unset. `meaning`: what the bounds are
    (" (this machine's cores)"); `unset`: what leaving it unset does, for the message."""
    value = text(name)
    if not value:
        return default
    if value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS and low <= int(value) <= high:
        return int(value)
    raise ConfigError(f"{name} must be a whole number from {low} to {high}{meaning}, not {_quoted(value)}: set it "
                      f"to one, or unset it{unset or ' for the default'}")


def flag(name: str) -> bool:
    """The setting as on (1, true, yes, on) or off (0, false, no, off, or unset), in any case."""
    value = text(name).lower()
    if value in ON or value in OFF:
        return value in ON
    raise ConfigError(f"{name} must be 1 (on) or 0 (off), not {_quoted(text(name))}: set it to one of them, or "
                      "unset it for off")


def who(name: str, default: str) -> str:
    """A name the setting carries (who started a run) on one line, at most MAX_WHO_CHARS; `default` when unset."""
    value = " ".join("".join(c if c.isprintable() else " " for c in text(name)).split())
    return value[:MAX_WHO_CHARS] or default


def folder(name: str, default: Path) -> Path:
    """The folder the setting names (absolute, '~' expanded), or `default` when unset (not checked: the lab's
    own place). A ConfigError naming the variable when the lab could not write into it."""
    value = text(name)
    if not value:
        return Path(default).absolute()
    path = Path(_expanded(name, value)).absolute()
    problem = _unusable(path)
    if problem:
        raise ConfigError(f"{name} {_quoted(value)} {problem}: set it to a folder you can write to, or unset it "
                          "for the default")
    return path


def _expanded(name: str, value: str) -> str:
    if len(value) > MAX_PATH_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{name} is not a usable path ({_quoted(value)}: "
                          + ("longer than any real path" if len(value) > MAX_PATH_CHARS else "control characters")
                          + "): set it to a folder you can write to, or unset it for the default")
    try:
        return os.fspath(Path(value).expanduser())
    except RuntimeError:  # "~nosuchuser", or "~" with no home folder known
        user = value[1:].split("/", 1)[0]
        whose = f"the home folder of a user this machine does not have ({user!r})" if user else "a home folder"
        raise ConfigError(f"{name} {_quoted(value)} names {whose}: set it to a folder you can write to, such as "
                          "~/bertviz-lab, or unset it for the default") from None


def _unusable(path: Path) -> str:
    """Why the lab could not keep files in `path`, or "" if it could (it exists as a writable folder, or the
    nearest folder above it that exists is writable, so it can be made)."""
    if path == Path(path.anchor):
        return "is the top folder of the disk, not a folder for the lab's files"
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
        return "is a loop of links"
    if in_system_folder(resolved):
        return "is inside the kernel's own folders (/proc, /sys, /dev)"
    above = path
    while not os.path.lexists(above):
        above = above.parent
    if os.path.islink(above) and not above.exists():
        return "is a link to nothing" if above == path else f"is below {above}, a link to nothing"
    if not above.is_dir():
        return "is a file, not a folder" if above == path else f"is below {above}, which is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return "is a folder that cannot be written" if above == path else (
            f"cannot be written: it would be made in {above}, which this user cannot write to")
    return ""
