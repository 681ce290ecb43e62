"""Reading files a user names, safely: size caps checked before reading, regular files only,
JSON that cannot blow the stack, and the machine's free memory for allocation checks; and writing
every CSV the lab hands out (`csv_text`) so that no cell opens in a spreadsheet as a formula. `ROOT`, `SHIPPED`
and `data_root` are the one place that says where the lab's own files are: in a checkout, the repository (app.py,
pages/, checkpoints/, runs/); installed with pip, the copy of app.py, pages/, .streamlit/ and checkpoints/ that the
wheel carries inside the package (bertviz_lab/lab/), with runs written to the user's data folder instead.

A checkpoint folder, a run folder or a corpus path can be anything a user types or a
visitor uploads: /dev/zero, a FIFO, /proc/self/mem, a 5 GB "config.json", a JSON file of
a million nested brackets. Every function here answers with one `LabError` sentence (or
the error class the caller passes) instead of hanging, allocating without bound or
printing a traceback.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

from bertviz_lab.errors import LabError

PACKAGE = Path(__file__).resolve().parent
# Installed from a wheel, app.py, pages/, .streamlit/ and checkpoints/ are in the package's lab/ folder
# (pyproject.toml's force-include puts them there); a checkout (or an editable install of one) has no lab/ folder,
# and they are beside the package. (Not "an app.py beside the package": a project of the user's may have one.)
CHECKOUT = not (PACKAGE / "lab" / "app.py").is_file()
ROOT = PACKAGE.parent if CHECKOUT else PACKAGE / "lab"  # app.py, pages/, .streamlit/, checkpoints/
SHIPPED = ROOT / "checkpoints"  # the models that come with the lab
APP_NAME = "bertviz-lab"  # the user data folder's name, and the console script's
MAX_PATH_CHARS = 4096  # longer than any real path (PATH_MAX on Linux)
MAX_JSON_BYTES = 4 << 20  # config.json, tokenizer_config.json, model cards, run records
MAX_TEXT_FILE_BYTES = 50 << 20  # vocab.txt and tokenizer files


def data_root() -> Path:
    """Where the lab writes its runs and uploads when `BERTVIZ_RUNS` does not say: the checkout itself, or,
    installed with pip, the user's data folder (~/.local/share/bertviz-lab or $XDG_DATA_HOME/bertviz-lab on
    Linux, ~/Library/Application Support/bertviz-lab on macOS, %LOCALAPPDATA%\\bertviz-lab on Windows)."""
    if CHECKOUT:
        return ROOT
    import platformdirs

    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def shipped_model(name: object) -> Path | None:
    """The folder of a model that comes with the lab, for its bare name ("bertviz-mini"); None for anything else."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name) or ".." in name:
        return None
    folder = SHIPPED / name
    return folder if (folder / "config.json").is_file() else None


def describe_bytes(n: int) -> str:
    """'1.5 GB', '320 MB', '12 kB', '17 bytes' (decimal units, as file browsers show them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def in_system_folder(path: Path) -> bool:
    """True for /proc, /sys, /dev and anything under them: the kernel's files, never a user's."""
    return (str(path) + "/").startswith(("/proc/", "/sys/", "/dev/"))


def too_big(size: int, limit: int) -> str:
    """'41.9 MB; the limit is 21 MB', or in bytes where rounding would make the two look equal."""
    if describe_bytes(size) == describe_bytes(limit):
        return f"{size:,} bytes; the limit is {limit:,} bytes"
    return f"{describe_bytes(size)}; the limit is {describe_bytes(limit)}"


def _named(what: str, path: Path, short: bool = False) -> str:
    """'vocabulary file vocab.txt' or 'corpus file /x/y.txt'; just 'config.json' when `what` is the name."""
    if what == path.name:
        return what
    return f"{what} {path.name if short else path}"


def check_path(path, what: str = "path", error: type[LabError] = LabError) -> Path:
    """`path` as a Path if it is a sensible thing to open: a str or PathLike, not too long, no NUL
    or control characters; '~' expanded. Raises `error` with one sentence otherwise."""
    if not isinstance(path, (str, os.PathLike)):
        raise error(f"the {what} must be text, got {type(path).__name__}")
    text = os.fspath(path)
    if isinstance(text, bytes):
        raise error(f"the {what} must be text, not bytes")
    if not text.strip():
        raise error(f"the {what} is empty")
    if len(text) > MAX_PATH_CHARS:
        raise error(f"the {what} is {len(text):,} characters long; no real path is longer than {MAX_PATH_CHARS:,}")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise error(f"the {what} contains control characters (a NUL, newline or similar); type a plain path")
    try:
        return Path(text).expanduser()
    except RuntimeError:  # "~nosuchuser"
        raise error(f"the {what} {text[:80]!r} names a home folder that does not exist") from None


def regular_file(path, what: str, max_bytes: int, error: type[LabError] = LabError) -> Path:
    """`path` if it is a regular file of at most `max_bytes` that this process can read.

    Refuses folders, devices (/dev/zero), FIFOs and sockets, and /proc or /sys files (whose
    reported size is 0 or fake), each with one sentence naming `what` the file was meant to be.
    """
    path = check_path(path, what, error)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise error(f"cannot open {_named(what, path)}: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{_named(what, path)} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{_named(what, path)} is not a regular file (a device, pipe or socket cannot be read as one)")
    if in_system_folder(path.resolve()):
        raise error(f"{_named(what, path)} is a system file, not one of yours")
    if info.st_size > max_bytes:
        raise error(f"{_named(what, path, short=True)} is {too_big(info.st_size, max_bytes)}")
    if not os.access(path, os.R_OK):
        raise error(f"{_named(what, path)} cannot be read (permission denied)")
    return path


def read_bytes(path, what: str, max_bytes: int, error: type[LabError] = LabError) -> bytes:
    """The bytes of a regular file, never more than `max_bytes` + 1 read even if it grows meanwhile."""
    path = regular_file(path, what, max_bytes, error)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read {_named(what, path)}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise error(f"{_named(what, path, short=True)} is larger than the limit of {describe_bytes(max_bytes)}")
    return data


def read_text(path, what: str, max_bytes: int = MAX_TEXT_FILE_BYTES, error: type[LabError] = LabError) -> str:
    """A UTF-8 text file (BOM allowed) under the size cap."""
    data = read_bytes(path, what, max_bytes, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{_named(what, Path(path), short=True)} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                    f"position {exc.start})") from None


def parse_json(text: str | bytes, what: str, error: type[LabError] = LabError):
    """json.loads with every failure as one sentence: bad syntax, deep nesting, huge numbers."""
    try:
        return json.loads(text)
    except RecursionError:
        raise error(f"{what} is nested too deeply to be a real file") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, and ints past Python's digit limit
        raise error(f"{what} is not valid JSON ({str(exc).splitlines()[0][:160]})") from None


def read_json(path, what: str | None = None, max_bytes: int = MAX_JSON_BYTES, error: type[LabError] = LabError):
    """A JSON file under the size cap (default 4 MB), parsed safely."""
    what = what or Path(os.fspath(path)).name
    return parse_json(read_text(path, what, max_bytes, error), what, error)


def typed_fields(record, what: str, kinds: dict, most: int, error: type[LabError] = LabError) -> dict:
    """The fields of a JSON record (a run's status.json) that have the types `kinds` names: str and dict as they
    are (texts cut to 1,000 characters), int a whole number from 0 to `most`, float a time in seconds (0 to 1e11);
    a field that is missing or null is left out. `error` names the first field of another type."""
    if not isinstance(record, dict):
        raise error(f"{what} holds {type(record).__name__} data, not a record")
    wanted = {str: "text", dict: "a record", int: f"a whole number from 0 to {most:.0e}", float: "a time in seconds"}
    out = {}
    for key, kind in kinds.items():
        value = record.get(key)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = (isinstance(value, kind) if kind in (str, dict) else
              number and isinstance(value, int) and 0 <= value <= most if kind is int else
              number and math.isfinite(value) and 0 <= value < 1e11)
        if not ok:
            shown = (f"a {len(str(abs(value)))}-digit number" if number and isinstance(value, int)
                     else type(value).__name__)
            raise error(f"{what}: {key} should be {wanted[kind]}, not {shown}")
        out[key] = value[:1000] if kind is str else value
    return out


def free_memory_bytes() -> int | None:
    """Memory this machine can still give a process (psutil's `available`), or None if unknown."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - an unknown answer is fine: the check is then skipped
        return None


def check_memory(needed: int, what: str, error: type[LabError] = LabError, headroom: float = 0.8) -> None:
    """Refuse `what` if it needs more than `headroom` of the free memory (skipped when unknown)."""
    free = free_memory_bytes()
    if free is not None and needed > headroom * free:
        raise error(f"{what} needs about {describe_bytes(needed)} of memory; this machine has "
                    f"{describe_bytes(free)} free")


# --- CSV out ---------------------------------------------------------------------------------------
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula (OWASP)
PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)  # "-1", "+3", "-0.5", "1e-3"
NOT_TEXT = "biufcmM"  # dtype kinds of bool, numbers, complex, timedeltas and datetimes: never a user's text


def inert(value):
    """A text cell that would start a formula (`=HYPERLINK(...)`, `+cmd|...`, `-2+3`, `@SUM(...)`, a tab) with a
    `'` in front, which spreadsheets read as "text follows"; anything else as it is: numbers, and text that is
    exactly a plain number ("-1", "-0.5", "1e-3": a label or a typed value, which no spreadsheet runs)."""
    if isinstance(value, tuple):  # a label of a MultiIndex
        return tuple(inert(v) for v in value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(frame, index: bool | None = None) -> str:
    """`frame` (a pandas DataFrame) as CSV text, every text cell, column label and index label made `inert`;
    numeric columns are written as numbers (-0.5 stays -0.5). The only way the lab writes a CSV: tokens, labels
    and file names are a user's text. `index`: whether to write the index; by default, unless it is exactly
    0, 1, ..., n-1 without a name (a RangeIndex that starts at 1, or a named one, is written).
    Lines end in CRLF (RFC 4180), so a cell holding a lone CR is quoted rather than splitting its row."""
    import pandas as pd  # only the callers that write a CSV pay for it

    if index is None:
        index = frame.index.names != [None] or not frame.index.equals(pd.RangeIndex(len(frame)))
    out = frame.copy()
    for i, dtype in enumerate(out.dtypes):
        if dtype.kind not in NOT_TEXT:  # object, string (numpy, pandas or Arrow) and category columns: text
            out.isetitem(i, out.iloc[:, i].astype(object).map(inert))
    out.columns = out.columns.map(inert)
    out.columns.names = [inert(n) for n in out.columns.names]
    if index:
        out.index = out.index.map(inert)
        out.index.names = [inert(n) for n in out.index.names]
    return out.to_csv(index=index, lineterminator="\r\n")  # RFC 4180's line end: a CR inside a cell gets quoted
