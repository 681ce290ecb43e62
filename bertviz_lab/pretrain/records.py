"""A run's record files read as they grow, and the caps that keep them small.

The trainer appends one JSON record a line to RUN/metrics.jsonl and RUN/snapshots.jsonl while pages
poll them. A `Tail` remembers how far it has read its file, so a refresh reads only the lines appended
since; a half-written last line is left for the next read. A file that was replaced (another inode: the
trainer rewrites it whole on resume and when it thins it), that shrank, or whose bytes before the
offset changed is read again from the start. Nothing is read whole: the file goes by in chunks, a line
longer than the reader's limit is passed over unread, and a file above SLACK caps is read from its last
SLACK caps, with a note (a run never writes one: `CappedFile` thins a file once it passes its cap, and a page
may look in between); the writer's own rewrites read all of it (`WHOLE` caps).

Caps, from what runs write (record sizes measured by `wc -c -l RUN/*.jsonl`): METRICS_CAP, 8 MiB, holds
30,000-45,000 records, six times all of a 5,000-step run's; past it the trainer rewrites the file at about a
quarter of the cap (`shrink_metrics`, once per 25,000 steps or so), keeping every eval and checkpoint record and
train records on an even stride. A reader keeps MAX_RECORDS at most (about 30 MB) and reads a file above SLACK caps
from its last 16 MiB, so a 200 MB file left in a run folder costs the Pretrain page a fraction of a second and tens
of MB, not seconds and gigabytes (measured by python -m bench.run_records; figures in docs/benchmarks.md, "Run
records a hostile user could leave").
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bertviz_lab import atomic, files
from bertviz_lab.metrics import CHECKPOINT, EVAL, TRAIN

METRICS = "metrics.jsonl"
METRICS_CAP = 8 * 2**20  # bytes of metrics.jsonl a run writes at most (past it, the trainer thins the file)
SLACK = 2  # a reader reads a file's last SLACK caps: one just past its cap, not yet thinned, is read whole
WHOLE = 32  # caps the writer's own rewrites read of a file (all of one a run wrote before the caps existed)
METRICS_LINE = 4096  # a metrics record is 100-300 bytes; a longer line is not ours
MAX_RECORDS = 50_000  # records a reader keeps (a cap-sized file of the shortest train records holds 45,000)
CHUNK = 1 << 20  # bytes read at a time
MARK = 32  # bytes before the offset that must not change between two reads
CACHE_BYTES = 256 * 2**20  # what the cached readers of all runs may hold together (estimated)
RECORD_BYTES = 600  # a kept record's memory: a dict of about ten floats


def identity_of(info: os.stat_result) -> tuple[int, int]:
    """Which file this is: another after a rename over it (how the trainer rewrites a record file)."""
    return info.st_dev, info.st_ino


def identity(f) -> tuple[int, int]:
    return identity_of(os.fstat(f.fileno()))


class Tail:
    """One JSONL file read incrementally. Subclasses keep what they want of each line: `restart` drops
    what was kept, `add(offset, head, length)` gets each whole line (head: its first `keep` bytes), and
    `measure` says how much memory that takes (kept in `_weight` under the lock, so `weight` needs none).
    cap: what a run writes at most; window: how many of the file's last bytes are read (SLACK caps)."""

    def __init__(self, path, cap: int, max_line: int, keep: int | None = None, window: int | None = None):
        self.path, self.cap, self.max_line = Path(path), cap, max_line
        self.keep = max_line if keep is None else keep
        self.window = SLACK * cap if window is None else window
        self._weight = 0  # `measure()` after the last change; read without the lock by `cached`
        self.lock = threading.RLock()  # pages of several sessions refresh one reader
        self.offset = 0  # where the next read starts (the start of a half-written line, if any)
        self.bytes_read = 0  # by the last refresh, for tests and the bench
        self.note = ""  # for the page: the file was above its window
        self._identity: tuple | None = None
        self._mark = b""
        self._skipping = False  # inside a line too long to keep

    def restart(self) -> None:
        raise NotImplementedError

    def add(self, offset: int, head: bytes, length: int) -> None:
        raise NotImplementedError

    def measure(self) -> int:
        """Bytes of memory what is kept takes, about (called under the lock, after each change)."""
        return 0

    def weight(self) -> int:
        """`measure()` as of the last change: an int, safe to read while another thread refreshes."""
        return self._weight

    def refresh(self) -> None:
        """Read what was appended since the last refresh (or the whole file, when it changed otherwise)."""
        with self.lock:
            try:
                self._refresh()
            finally:
                self._weight = self.measure()

    def _refresh(self) -> None:
        self.bytes_read = 0
        try:
            if not self.path.is_file():  # never open a FIFO or device planted in its place
                raise FileNotFoundError
            f = open(self.path, "rb")  # noqa: SIM115 - kept open across reads, closed by the reader
        except OSError:
            if self._identity is not None or self.offset:
                self._start(None, 0, 0)
            return
        with f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return
            identity, size = identity_of(info), info.st_size
            if (identity != self._identity or size < self.offset or size - self.offset > self.window
                    or not self._unchanged(f)):
                self._start(f, identity, size)
            self._read(f, size)

    def _unchanged(self, f) -> bool:
        if not self.offset:
            return True
        f.seek(self.offset - len(self._mark))
        return f.read(len(self._mark)) == self._mark

    def _start(self, f, identity: tuple | None, size: int) -> None:
        """Read again from the start: of the file, or of its last `window` bytes (from the first whole line)."""
        self.restart()
        self._identity, self._mark = identity, b""
        self.offset = max(0, size - self.window)
        self._skipping = False
        self.note = ""
        if self.offset and f is not None:
            f.seek(self.offset - 1)
            self._skipping = f.read(1) != b"\n"  # the line cut in two is passed over
            self.note = (f"{self.path.name} holds more than a run writes ({files.too_big(size, self.cap)}), so the "
                         f"records that begin in its first {files.describe_bytes(self.offset)} were not read.")

    def _read(self, f, end: int) -> None:
        pos = self.offset
        f.seek(pos)
        start, head, length, skipping = pos, b"", 0, self._skipping
        while pos < end:
            chunk = f.readline(min(CHUNK, end - pos))
            if not chunk:
                break
            pos += len(chunk)
            length += len(chunk)
            if len(head) < self.keep:
                head += chunk[: self.keep - len(head)]
            if chunk.endswith(b"\n"):
                if not skipping and length <= self.max_line:
                    self.add(start, head, length)
                start, head, length, skipping = pos, b"", 0, False
        # a line still open at the end: a long one is passed over for good, a short one is read again next time
        self._skipping = skipping or length > self.max_line
        self.bytes_read = pos - self.offset
        self.offset = pos if self._skipping else start
        f.seek(max(0, self.offset - MARK))
        self._mark = f.read(min(MARK, self.offset))


# --- Metrics -----------------------------------------------------------------------------------------
_NAMES: dict[str, str] = {}  # one copy of each key name for all records (a dozen names, bounded)


def parse_metric(line: bytes) -> dict | None:
    """A metrics record from one line; None for a line that is not one (train and eval records hold numbers)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    if record.get("kind") in (TRAIN, EVAL) and not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in record.items() if k != "kind"):
        return None
    if len(_NAMES) < 256:
        _NAMES.update((k, k) for k in record if k not in _NAMES and len(k) < 40)
    return {_NAMES.get(k, k): v for k, v in record.items()}


def spread(values, k: int) -> list[int]:
    """The indices of at most k of the ascending `values`, evenly spread over their range (the first and last
    kept): for each of k evenly spaced points, the nearest value."""
    n = len(values)
    if k >= n:
        return list(range(n))
    if k <= 0:
        return []
    if k == 1:
        return [n - 1]
    values = np.asarray(values, dtype=np.float64)
    targets = np.linspace(values[0], values[-1], k)
    right = np.clip(np.searchsorted(values, targets), 1, n - 1)
    nearer_left = (targets - values[right - 1]) <= (values[right] - targets)
    return sorted(set((right - nearer_left).tolist()))


def thin(records: list[dict], target: int) -> list[dict]:
    """At most `target` of the records, in their order: every eval and checkpoint record (while they fit; else
    they too evenly spread), and the train records whose step is a multiple of the smallest power of two that
    lets them fit over their span, and the last one. A later thinning's stride is a multiple of an earlier
    one's (the span only grows), so the curve stays evenly spaced."""
    step = [_step(r) for r in records]
    train = [i for i, r in enumerate(records) if r.get("kind") == TRAIN]
    other = sorted((i for i, r in enumerate(records) if r.get("kind") != TRAIN), key=step.__getitem__)
    if len(other) >= target:
        keep = [other[i] for i in spread([step[j] for j in other], target)]
    else:
        room, stride = target - len(other), 1
        span = max((step[i] for i in train), default=0) - min((step[i] for i in train), default=0)
        while stride < 2**62 and (stride * room < span  # never below the stride an earlier thinning used
                                  or sum(int(step[i]) % stride == 0 for i in train[:-1]) >= room):
            stride *= 2
        keep = other + [i for i in train[:-1] if int(step[i]) % stride == 0][: room - 1] + train[-1:]
    return [records[i] for i in sorted(keep)]


def _step(record: dict) -> float:
    value = record.get("step", 0)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e18
    return float(value) if ok else 0.0  # (NaN fails the test too)


class MetricsLog(Tail):
    """metrics.jsonl's records, read as they come; more than MAX_RECORDS are thinned to half (see `thin`)."""

    def __init__(self, path, cap: int = METRICS_CAP, max_records: int = MAX_RECORDS, window: int | None = None):
        super().__init__(path, cap, METRICS_LINE, window=window)
        self.max_records = max_records
        self.records: list[dict] = []
        self.thinned = self.thinned_other = 0  # train records, and the others, dropped by `thin`

    def restart(self) -> None:
        self.records, self.thinned, self.thinned_other = [], 0, 0

    def add(self, offset: int, head: bytes, length: int) -> None:
        record = parse_metric(head)
        if record is not None:
            self.records.append(record)
            if len(self.records) > self.max_records:
                kept = thin(self.records, self.max_records // 2)
                trains = sum(r.get("kind") == TRAIN for r in self.records)
                kept_trains = sum(r.get("kind") == TRAIN for r in kept)
                self.thinned += trains - kept_trains
                self.thinned_other += len(self.records) - trains - (len(kept) - kept_trains)
                self.records = kept

    def measure(self) -> int:
        return RECORD_BYTES * len(self.records)

    def notes(self) -> str:
        kept, n = f"were left out to keep {len(self.records):,}", self.thinned
        thinned = (f"{n:,} train records and {self.thinned_other:,} others (evaluations, checkpoints) {kept}, evenly "
                   "spread over the steps." if self.thinned_other else f"{n:,} train records {kept} (every evaluation "
                   "and checkpoint record kept, the train records evenly spread over the steps)." if n else "")
        return f"{self.note} {thinned}".strip()


_cache: OrderedDict[tuple, Tail] = OrderedDict()
_cache_lock = threading.Lock()


def cached(key: tuple, make: Callable[[], Tail]) -> Tail:
    """The reader kept under `key` (made now if none is); the least recently used ones are dropped while all
    together hold more than CACHE_BYTES."""
    with _cache_lock:
        reader = _cache.pop(key, None) or make()
        _cache[key] = reader
        total = sum(r.weight() for r in _cache.values())
        while total > CACHE_BYTES and len(_cache) > 1:
            total -= _cache.popitem(last=False)[1].weight()
        return reader


def metrics_log(run_dir) -> MetricsLog:
    """The cached, refreshed reader of a run folder's metrics.jsonl."""
    path = Path(run_dir) / METRICS
    log = cached(("metrics", str(path.absolute())), lambda: MetricsLog(path))
    log.refresh()
    return log


def read_metrics(run_dir, kind: str | None = None) -> list[dict]:
    """The records of metrics.jsonl (a half-written line, or one that is not a record of numbers, is skipped);
    each a copy, so a caller may change it. `metrics.table` (or `metrics.curve`) reads them, whatever their names."""
    log = metrics_log(run_dir)
    with log.lock:
        return [dict(r) for r in log.records if kind is None or r.get("kind") == kind]


def metrics_note(run_dir) -> str:
    """What the page should say about how the metrics were read: empty for a file a run wrote."""
    log = metrics_log(run_dir)
    with log.lock:
        return log.notes()


# --- Writing -----------------------------------------------------------------------------------------
class CappedFile:
    """A JSONL file the trainer appends to, flushed line by line; past `cap` bytes (or `max_lines` lines)
    `shrink(path)` rewrites it smaller, whole (atomic), and appending goes on in the new file."""

    def __init__(self, path, cap: int, shrink: Callable[[Path], None], max_lines: int | None = None):
        self.path, self.cap, self.shrink, self.max_lines = Path(path), cap, shrink, max_lines
        self._open()

    def _open(self) -> None:
        self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - the writer holds it until close()
        self.size = self.file.tell()
        self.lines = None if self.max_lines is None else _count_lines(self.path)

    def write(self, record: dict) -> None:
        line = json.dumps(record) + "\n"  # ASCII: characters are bytes
        self.file.write(line)
        self.file.flush()
        self.size += len(line)
        self.lines = None if self.lines is None else self.lines + 1
        if self.size > self.cap or (self.lines is not None and self.lines > self.max_lines):
            self.file.close()
            self.shrink(self.path)
            self._open()

    def close(self) -> None:
        self.file.close()


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(CHUNK), b""))


def shrink_metrics(path: Path, cap: int = METRICS_CAP) -> None:
    """Rewrite a metrics file at half its cap or less: every eval and checkpoint record, train records on an
    even stride (`thin`)."""
    size = max(path.stat().st_size, 1)
    log = MetricsLog(path, cap, window=WHOLE * cap)  # all of it: our own file, a line past its cap
    log.refresh()
    kept = thin(log.records, max(2, len(log.records) * (cap // 2) // size))
    atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def keep_until(path: Path, step: int, cap: int = METRICS_CAP) -> None:
    """On resume: keep the train, eval and checkpoint records up to `step` (those past it are about to be
    redone). A file from before the cap is read up to WHOLE caps, its records thinned as they come."""
    log = MetricsLog(path, cap, window=WHOLE * cap)
    log.refresh()
    kept = [r for r in log.records if r.get("kind") in (TRAIN, EVAL, CHECKPOINT) and _step(r) <= step]
    atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
