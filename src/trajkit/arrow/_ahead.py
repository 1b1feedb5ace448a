"""A Parquet file's batches, decoded by threads ahead of the caller that checks and copies them.

pyarrow decodes (and verifies page checksums), and NumPy copies, without holding the GIL.
So while the caller checks a batch and copies it into a rollout, reader threads decode the
next ones: each of `READERS` threads reads its own row groups in turn (row group g by
thread g % READERS), one batch ahead at most, and the caller takes the batches in the
file's order. A file of one large column (an image rollout) gets no parallelism from
pyarrow's `use_threads`, which decodes a batch's columns side by side.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Protocol

READERS = 2
"""Threads that decode a file's row groups in turn, besides the caller's."""

_END = object()
_GROUP_END = object()


class Ahead:
    """The items of an iterator, each next one made in a thread while the caller has one.

    One item waits at most. The iterator's error comes out where its item would have. Close
    it (or leave its `with` block) when stopping early: its thread ends after the item it is
    making, and nothing is left running.
    """

    def __init__(self, items: Iterator[Any]) -> None:
        self._handoff: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(
            target=self._make, args=(items,), name="trajkit-parquet-reader", daemon=True
        )
        self._thread.start()

    def _make(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                self._handoff.put(item)
                if self._stop.is_set():
                    break
            self._handoff.put(_END)
        except BaseException as exc:  # handed to the caller, raised there
            self._handoff.put(_Failed(exc))

    def __iter__(self) -> Ahead:
        return self

    def __next__(self) -> Any:
        if self._ended:
            raise StopIteration
        item = self._handoff.get()
        if item is _END or isinstance(item, _Failed):
            self._ended = True
            self._thread.join()
            if isinstance(item, _Failed):
                raise item.error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop: take what the thread still puts until it ends, then join it."""
        if not self._ended:
            self._ended = True
            self._stop.set()
            while not ((item := self._handoff.get()) is _END or isinstance(item, _Failed)):
                pass
        self._thread.join()

    def __enter__(self) -> Ahead:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Failed:
    """An exception of the thread, on its way to the caller."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def file_batches(file: Any, names: list[str], rows: int) -> Iterator[Any]:
    """The file's columns `names`, `rows` rows at a time, one row group after the other.

    One row group per call of pyarrow's reader: given them all, it keeps what it read of
    every row group until the end, the whole file.
    """
    for group in range(file.metadata.num_row_groups):
        yield from file.iter_batches(batch_size=rows, row_groups=[group], columns=names)


class Merge(Protocol):
    """What a reading thread merges into each batch it decodes (its own, not shared)."""

    def __call__(self, row: int, batch: Any) -> Any:
        """`batch` (of the file's rows from `row` on) with what the thread adds."""

    def end(self) -> None:
        """Once the thread's last row group is read (raise what is left over)."""


def _groups(
    file: Any, names: list[str], rows: int, first: int, step: int, merge: Merge | None
) -> Iterator[Any]:
    """`file_batches` of the row groups `first`, `first + step`, ..., each followed by a mark.

    Each batch `merge`d where given (in this thread, the batches in the file's order).
    """
    metadata = file.metadata
    starts = [0]
    for group in range(metadata.num_row_groups):
        starts.append(starts[-1] + metadata.row_group(group).num_rows)
    for group in range(first, metadata.num_row_groups, step):
        row = starts[group]
        for batch in file.iter_batches(batch_size=rows, row_groups=[group], columns=names):
            yield batch if merge is None else merge(row, batch)
            row += batch.num_rows
        yield _GROUP_END
    if merge is not None:
        merge.end()


class Batches:
    """A file's batches in order, decoded ahead by `READERS` threads (see the module).

    `reopen(metadata)` gives another reader of the same open file (the same bytes, whatever
    happens to its path meanwhile), one per thread. `merging(k, n)`, where given, makes
    what thread k of n merges into each batch it decodes (`Merge`).
    """

    def __init__(
        self,
        file: Any,
        reopen: Callable[[Any], Any],
        names: list[str],
        rows: int,
        merging: Callable[[int, int], Merge] | None = None,
    ) -> None:
        count = file.metadata.num_row_groups
        readers = max(1, min(READERS, count))
        files = [file] + [reopen(file.metadata) for _ in range(readers - 1)]
        self._count = count
        self._workers = [
            Ahead(
                _groups(
                    each, names, rows, k, readers, None if merging is None else merging(k, readers)
                )
            )
            for k, each in enumerate(files)
        ]

    def __iter__(self) -> Iterator[Any]:
        for group in range(self._count):
            for batch in self._workers[group % len(self._workers)]:
                if batch is _GROUP_END:
                    break
                yield batch
        for worker in self._workers:  # each to its end: what its merge refuses there is raised
            for _ in worker:
                pass

    def close(self) -> None:
        for worker in self._workers:
            worker.close()

    def __enter__(self) -> Batches:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
