"""A learner's own task from a CSV file, and a run's task as saved in its folder.

Three layouts, told apart by the header (column order is free; names are case-insensitive):

    text,label              one sentence per row             -> a sequence task
    text,text_b,label       a sentence pair per row          -> a pair task
    tokens,tags             words and one tag per word, each separated by spaces -> a token task

An optional `split` column (train, dev or test) fixes the splits; without it the rows are dealt
80 / 10 / 10 by a seeded shuffle. Blank lines before the header are skipped. Every problem is one
InputError naming the row and column: an empty file, a binary one (a NUL byte anywhere), a UTF-16 one,
a missing or repeated column, an empty cell or one over MAX_CELL_CHARS, a row whose tags do not match
its words, one class only, a dev label no training row has, too few rows, a file over MAX_CSV_BYTES.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

from bertviz_lab import atomic, files
from bertviz_lab.bert.classifier import MAX_LABELS
from bertviz_lab.errors import InputError, LabError
from bertviz_lab.finetune import tasks
from bertviz_lab.finetune.tasks import PAIR, SEQUENCE, TOKEN, Example, Task

MAX_CSV_BYTES = 20_000_000  # 20 MB: some 200,000 sentences, far more than a class fine-tunes on
MAX_ROWS = 200_000
MAX_CELL_CHARS = 5_000
MIN_TRAIN, MIN_DEV = 8, 2
SPLITS = ("train", "dev", "test")
LAYOUTS = {SEQUENCE: ("text", "label"), PAIR: ("text", "text_b", "label"), TOKEN: ("tokens", "tags")}
SPLIT_SEED = 13


def task_of(cfg) -> Task:
    """The task a FinetuneConfig names: a built-in one, or its CSV file read and checked."""
    return tasks.builtin(cfg.task) if cfg.task else read_csv(cfg.data)


def read_csv(path) -> Task:
    path = files.check_path(path, "CSV file", InputError)
    raw = files.read_bytes(path, "CSV file", MAX_CSV_BYTES, InputError)
    return parse_csv(raw, path.name)


def parse_csv(raw: bytes, name: str = "data.csv") -> Task:
    """A Task from the bytes of a CSV file (an upload, or a file read by `read_csv`)."""
    if len(raw) > MAX_CSV_BYTES:
        raise InputError(f"{name} is {files.describe_bytes(len(raw))}; the limit is "
                         f"{files.describe_bytes(MAX_CSV_BYTES)}")
    text = _text(raw, name)
    # csv's own cell limit (131,072 characters) would stop a long cell with csv's words; the file's size cap is
    # the real bound, so cells are read whole and `_cell` measures them against MAX_CELL_CHARS. The limit is
    # process-wide, so it is only ever raised.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_BYTES))
    try:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        rows = list(reader)
    except csv.Error as exc:  # an unclosed quote, a stray quote inside a cell
        raise InputError(f"{name} is not a readable CSV file: {exc} near line {reader.line_num:,} "
                         "(a quote left open?)") from None
    start = next((i for i, row in enumerate(rows) if any(cell.strip() for cell in row)), None)  # blank lines skipped
    if start is None:
        raise InputError(f"{name} holds only empty cells; upload a CSV file with a header row and one example per row")
    header = [cell.strip().lower() for cell in rows[start]]
    kind = _kind(header, name)
    body = [(n, row) for n, row in enumerate(rows[start + 1:], start + 2) if any(cell.strip() for cell in row)]
    if len(body) > MAX_ROWS:
        raise InputError(f"{name} has {len(body):,} rows; the limit is {MAX_ROWS:,}")
    split_col = header.index("split") if "split" in header else None
    columns = [header.index(c) for c in LAYOUTS[kind]]
    examples: dict[str, list[Example]] = {s: [] for s in SPLITS}
    for n, row in body:
        cells = [_cell(row, i, header[i], n) for i in columns]
        example = _example(kind, cells, n)
        split = "train"
        if split_col is not None:
            split = _cell(row, split_col, "split", n).lower()
            if split not in SPLITS:
                raise InputError(f"row {n}: split must be train, dev or test, got {split[:20]!r}")
        examples[split].append(example)
    if split_col is None:
        examples = _deal(examples["train"])
    return _checked(kind, examples, name)


UTF_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
            (b"\xfe\xff", "UTF-16"))
SNIFF_BYTES = 8192  # enough to tell UTF-16 without a BOM: every other byte NUL


def _text(raw: bytes, name: str) -> str:
    """The file as text: UTF-8 (a BOM allowed), not UTF-16 or -32, no NUL byte anywhere, not empty."""
    save = "save it as UTF-8 CSV (in Excel: Save As, CSV UTF-8) and upload it again"
    wide = next((enc for bom, enc in UTF_BOMS if raw.startswith(bom)), None) or _utf16(raw[:SNIFF_BYTES])
    if wide:
        raise InputError(f"{name} is {wide} text, which the lab does not read; {save}")
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise InputError(f"{name} is not a text file: it holds binary data (a NUL byte at byte {nul:,}, on line "
                         f"{line:,}); {save}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name} is not UTF-8 text (byte {exc.start:,} cannot be read); {save}") from None
    if not text.strip():
        raise InputError(f"{name} is empty; upload a CSV file with a header row and one example per row")
    return text


def _utf16(head: bytes) -> str | None:
    """'UTF-16' when the bytes read as UTF-16 without a BOM: mostly-ASCII text has a NUL in every other byte."""
    head = head[:len(head) // 2 * 2]
    if len(head) < 4:
        return None
    even, odd = head[0::2].count(0) / (len(head) // 2), head[1::2].count(0) / (len(head) // 2)
    return "UTF-16" if max(even, odd) >= 0.9 and min(even, odd) <= 0.1 else None


def _kind(header: list[str], name: str) -> str:
    first: dict[str, int] = {}
    for i, h in enumerate(header, 1):
        if h and first.setdefault(h, i) != i:  # names are compared as read: stripped, lower case
            raise InputError(f"{name} has two columns named {h[:40]!r} (columns {first[h]:,} and {i:,}); rename or "
                             "remove one of them")
    for kind in (PAIR, SEQUENCE, TOKEN):
        if all(column in header for column in LAYOUTS[kind]):
            return kind
    raise InputError(f"{name} needs a header row naming its columns: text,label (one sentence), "
                     f"text,text_b,label (a pair) or tokens,tags (a tag per word); it has "
                     f"{','.join(h[:20] for h in header[:6]) or 'none'}")


def _cell(row: list[str], i: int, column: str, n: int) -> str:
    value = row[i].strip() if i < len(row) else ""
    if not value:
        raise InputError(f"row {n}: the {column} column is empty")
    if len(value) > MAX_CELL_CHARS:
        raise InputError(f"row {n}: the {column} cell has {len(value):,} characters and a cell may hold at most "
                         f"{MAX_CELL_CHARS:,}; shorten it or split it over several rows")
    return value


def _example(kind: str, cells: list[str], n: int) -> Example:
    if kind == SEQUENCE:
        return Example(cells[0], label=cells[1])
    if kind == PAIR:
        return Example(cells[0], cells[1], label=cells[2])
    words, tags = cells[0].split(), cells[1].split()
    if len(words) != len(tags):
        raise InputError(f"row {n}: {len(words)} words but {len(tags)} tags; give one tag per word")
    return Example(" ".join(words), tags=tuple(tags))


def _deal(rows: list[Example]) -> dict[str, list[Example]]:
    """80 / 10 / 10 by a seeded shuffle (at least MIN_DEV rows to dev when there are enough)."""
    order = list(range(len(rows)))
    random.Random(SPLIT_SEED).shuffle(order)
    dev_n = max(MIN_DEV, len(rows) // 10)
    test_n = len(rows) // 10
    picked = [rows[i] for i in order]
    return {"dev": picked[:dev_n], "test": picked[dev_n:dev_n + test_n], "train": picked[dev_n + test_n:]}


def _labels_of(kind: str, examples: list[Example]) -> list[str]:
    seen = {}
    for example in examples:
        for label in (example.tags if kind == TOKEN else (example.label,)):
            seen.setdefault(label, None)
    return list(seen)


def _checked(kind: str, examples: dict[str, list[Example]], name: str) -> Task:
    train, dev = examples["train"], examples["dev"]
    if len(train) < MIN_TRAIN or len(dev) < MIN_DEV:
        raise InputError(f"{name} has {len(train)} training and {len(dev)} dev rows; fine-tuning needs at least "
                         f"{MIN_TRAIN} and {MIN_DEV}")
    labels = _labels_of(kind, train)
    what = "tag" if kind == TOKEN else "label"
    if len(labels) < 2:
        raise InputError(f"every training row has the {what} {labels[0][:40]!r}: a classifier needs at least "
                         "two classes to tell apart")
    if len(labels) > MAX_LABELS:
        raise InputError(f"{name} has {len(labels):,} different {what}s; the limit is {MAX_LABELS:,}")
    known = set(labels)
    for split in ("dev", "test"):
        unknown = [x for x in _labels_of(kind, examples[split]) if x not in known]
        if unknown:
            raise InputError(f"the {split} rows use the {what} {unknown[0][:40]!r}, which no training row has: "
                             "the model could never predict it")
    if kind == TOKEN and tasks.O_TAG in labels:
        labels.insert(0, labels.pop(labels.index(tasks.O_TAG)))
    description = {SEQUENCE: "Your sentences and their labels.", PAIR: "Your sentence pairs and their labels.",
                   TOKEN: "Your words and their tags."}[kind]
    return Task(Path(name).stem[:60] or "csv", kind, tuple(labels), description, tuple(train), tuple(dev),
                tuple(examples["test"]), source=name)


# --- A run's task.json ---------------------------------------------------------------------------
TASK_JSON_BYTES = 256 << 20


def save_task(task: Task, path) -> None:
    def rows(examples):
        return [[e.text, e.text_b, e.label, list(e.tags) if e.tags is not None else None] for e in examples]

    atomic.write_json(path, {"name": task.name, "kind": task.kind, "labels": list(task.labels),
                             "description": task.description, "source": task.source,
                             "train": rows(task.train), "dev": rows(task.dev), "test": rows(task.test)})


def load_task(path) -> Task:
    """The task a run saved (InputError if the file is missing or not what save_task wrote)."""
    try:
        record = files.read_json(path, max_bytes=TASK_JSON_BYTES, error=InputError)
        labels = tuple(record["labels"])

        def examples(key):
            return tuple(Example(str(t), None if b is None else str(b), None if y is None else str(y),
                                 None if g is None else tuple(map(str, g))) for t, b, y, g in record[key])

        task = Task(str(record["name"]), record["kind"], labels, str(record["description"]), examples("train"),
                    examples("dev"), examples("test"), str(record["source"]))
    except LabError as exc:
        raise InputError(f"the run's task cannot be read: {exc}") from None
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{Path(path).name} is not a saved task") from None
    if task.kind not in LAYOUTS or not all(isinstance(x, str) for x in labels):
        raise InputError(f"{Path(path).name} is not a saved task")
    return task
