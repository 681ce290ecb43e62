"""Where a run's training batches come from: a file of them kept by an earlier run with the same seed and
settings, or shipped with the lab (batch_cache.py), checked; past its end, the loop makes each itself
(data.make_batch), as it always did. The same batches either way. A run that began at step 0 and made
batches the file lacked writes them to its file when it ends, for the next run.

(Making them ahead in a background process was tried: on 2 cores, where the step's two threads keep both
busy, it did not pay, where a file made once saves the whole time of making each batch. Measured by
python -m bench.class_wait; figures in docs/benchmarks.md, "A whole live run".)
"""

from __future__ import annotations

from collections.abc import Callable

from bertviz_lab.pretrain import batch_cache
from bertviz_lab.pretrain.data import Batch


class BatchSupply:
    """The batches start.. stop - 1 of `make` (indices rising); `name`: the file that keeps them, or None."""

    def __init__(self, make: Callable[[int], Batch], start: int, stop: int, *, name: str | None, seq_len: int,
                 batch_size: int, vocab_size: int):
        self.make, self.seq_len = make, seq_len
        self.cache = None if name is None else batch_cache.folder() / name  # where this run writes
        found = None if name is None else batch_cache.find(name)  # the run's own file, or the shipped one
        self.kept = None if found is None else batch_cache.load(found, make, start, stop, seq_len=seq_len,
                                                                batch_size=batch_size, vocab_size=vocab_size)
        self.n_kept = 0 if self.kept is None else len(self.kept["tokens"])
        # what this run makes, packed, to keep: only a run from the first batch that goes past the file's end
        self.made: list[dict] | None = [] if name is not None and start == 0 and self.n_kept < stop else None

    def get(self, index: int) -> Batch:
        batch = batch_cache.unpack(self.kept, index) if index < self.n_kept else self.make(index)
        if self.made is not None and index == len(self.made):
            self.made.append(batch_cache.pack([batch], self.seq_len))
        return batch

    def close(self, keep: bool) -> None:
        """With `keep`, write what was made (from the first batch) if it is more than the file has; once."""
        if keep and self.made is not None and len(self.made) > self.n_kept:
            batch_cache.save(self.cache, self.made)
        self.made = None
