"""The parallel engine: per-file work over a stream of files, in chunks, results in order.

`run_ordered(work, items, jobs=N)` is the whole interface. `items` is what
[`discover`][trajkit._io.discovery.discover] yields (files to work on, and verdicts reached
while looking); `work` takes a chunk of them and returns a list of results (one per file,
or one per chunk), and must be picklable: a module-level function or a `functools.partial`
of one, such as `partial(check_chunk, spec=None, quick=False, max_bytes=None)`. The results
come back in input order, so the output of N processes is the output of one, and memory
stays bounded however many files there are (at most a few chunks per worker in flight).

This process is one of the `jobs`: it starts `jobs - 1` workers and, whenever the next
results in order are not ready, works through a chunk itself (one the workers have not
started, else the next one from the stream), so that `jobs` processes share `jobs` cores
without a third waiting on them. Chunks are small (`CHUNK_FILES`) and handed out as workers
free up, so that a worker that gets less of the machine (another program holds a core)
holds up little: this process takes back what it has not started.

Workers are forked from this process where that is safe (POSIX but macOS, and no other
Python thread running): they start in milliseconds with everything imported, and import
nothing. Elsewhere they come from a fork server that imports the work's module once (or are
spawned where there is no fork server): a few hundred milliseconds of start-up, paid while
this process works alone.

Small work stays in this process: a stream that ends within `IN_PROCESS_FILES` files and
`IN_PROCESS_BYTES` bytes (`SERVER_FACTOR` times as much when workers cannot be forked) is
worked through here whatever `jobs` says, since starting workers would cost more than they
save; the `trajkit` logger says so (`trajkit validate -v`). More jobs is then never slower,
and large folders still spread over `jobs` processes (or Ray tasks, through `submit`).

Workers go only to cores no other program is using: on Linux, the processes running when
the work starts (`/proc/loadavg`, read before and after the first files are listed; the
fewer counts) each hold a core, and `jobs - 1` workers shrink to the cores left
(`free_workers`), none when every core is held. A worker on a held core would share it with
this process or the other program and only add its start-up and transfers: more jobs is then
never slower than one (`trajkit validate -v` says so).

The process-pool modules (`concurrent.futures`, `multiprocessing`) are imported only when a
pool is started, so that a command on a few files starts as fast as one on a single file.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import signal
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar

from trajkit._io.items import FileCheck, Found
from trajkit._io.remote import runs_in_any_process

if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import Future, ProcessPoolExecutor

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_FILES",
    "IN_PROCESS_BYTES",
    "IN_PROCESS_FILES",
    "LOADAVG",
    "SERVER_FACTOR",
    "WARM_BYTES",
    "Item",
    "Submit",
    "Work",
    "checked_jobs",
    "chunks",
    "cpu_count",
    "free_workers",
    "others_running",
    "pool_broke",
    "run_ordered",
    "start_method",
]

CHUNK_FILES = 32
"""The most files handed to a worker at once."""

CHUNK_BYTES = 16 << 20
"""A chunk is closed once its files hold this many bytes (so large files spread out)."""

IN_PROCESS_FILES = 48
"""A stream of at most this many files (and `IN_PROCESS_BYTES`) is worked through in-process."""

IN_PROCESS_BYTES = 8 << 20
"""A stream of at most this many bytes (and `IN_PROCESS_FILES`) is worked through in-process."""

SERVER_FACTOR = 6
"""How many times the in-process limits grow when workers come from a fork server or are
spawned: each then imports trajkit before it works (about 0.3 s of a core)."""

WARM_BYTES = 1 << 20
"""Before forking workers, the first file is worked through alone (its result dropped) where
it holds at most this many bytes, so that what the work builds once the workers inherit;
else the whole first chunk is worked through here, as the first of the results."""

_WINDOW_PER_JOB = 4  # chunks in flight per worker: enough to keep every worker busy

R = TypeVar("R")

Item: TypeAlias = Found | FileCheck
"""What `discover` yields: a file to work on, or a verdict reached while looking."""


def checked_jobs(jobs: int | None) -> int | None:
    """`jobs` itself, once checked: `None`, or a number of workers (processes or tasks) >= 1.

    Raises:
        ValueError: For anything else (0, a negative number, a bool, a float).

    Examples:
        >>> checked_jobs(None), checked_jobs(2)
        (None, 2)
        >>> checked_jobs(0)
        Traceback (most recent call last):
        ...
        ValueError: jobs must be None or an integer >= 1, got 0
    """
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be None or an integer >= 1, got {jobs!r}")
    return jobs


def cpu_count() -> int:
    """The number of cores this process may use (at least 1)."""
    counter: Callable[[], int | None] | None = getattr(os, "process_cpu_count", None)
    if counter is None and hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return (counter or os.cpu_count)() or 1


def chunks(
    items: Iterable[Item],
    max_files: int | None = None,
    max_bytes: float | None = None,
) -> Iterator[list[Item]]:
    """Group items into chunks of at most `max_files` files, closed early at `max_bytes`.

    The limits default to `CHUNK_FILES` and `CHUNK_BYTES`, read at each call.
    """
    max_files = CHUNK_FILES if max_files is None else max_files
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    chunk: list[Item] = []
    size = 0
    for item in items:
        chunk.append(item)
        size += item.nbytes
        if len(chunk) >= max_files or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


Work: TypeAlias = Callable[[Sequence[Item]], list[R]]
Submit: TypeAlias = Callable[[Work[R], list[Item]], Callable[[], list[R]]]


def run_ordered(
    work: Work[R],
    items: Iterable[Item],
    *,
    jobs: int,
    by_size: bool = True,
    submit: Submit[R] | None = None,
    window: int | None = None,
) -> Iterator[R]:
    """Run `work` over chunks of `items` and yield its results in input order.

    With `jobs == 1` (and no `submit`) everything runs in this process, and so does a stream
    too small to pay for starting workers: one that ends within `IN_PROCESS_FILES` files and
    (with `by_size`) `IN_PROCESS_BYTES` bytes, found by listing that far ahead. Otherwise
    chunks go to a process pool of `jobs` workers (or to `submit`, which returns a function
    that waits for the result), at most `window` chunks in flight, so that memory stays
    bounded whatever the number of files. A chunk holding a `memory://` URL runs in this
    process, the only one that sees that file system. With `by_size`, chunks also close at
    `CHUNK_BYTES` (for work whose cost grows with the file's size); without, they hold
    `CHUNK_FILES` files each (work that reads only the metadata).

    Args:
        work: Chunk -> results; picklable (a module-level function or a `functools.partial`
            of one), since worker processes receive it.
        items: What `discover` yields, consumed lazily.
        jobs: Worker processes (or, with `submit`, tasks in flight), at least 1.
        by_size: Close chunks at `CHUNK_BYTES` too, and count bytes for the in-process rule.
        submit: Run a chunk elsewhere (e.g. as a Ray task) instead of in a process pool.
        window: The most chunks in flight; by default four per job.

    Returns:
        The results of `work`, chunk after chunk, in the order of `items`.

    Examples:
        >>> from functools import partial
        >>> from trajkit._io.discovery import discover
        >>> from trajkit._io.filecheck import check_chunk
        >>> work = partial(check_chunk, spec=None, quick=True, max_bytes=None)
        >>> [c.problems for c in run_ordered(work, discover(["missing.npz"]), jobs=2)]
        [('no such file or directory',)]
    """
    groups = chunks(items, max_bytes=None if by_size else math.inf)
    if submit is not None:
        yield from _pipeline(work, groups, submit, window or _WINDOW_PER_JOB * max(jobs, 1))
        return
    head: list[list[Item]] = []
    if jobs <= 1:
        for group in groups:
            yield from work(group)
        return
    method = start_method()
    running = others_running()
    small = _small(head, groups, by_size, 1 if method == "fork" else SERVER_FACTOR)
    if small is not None:
        _say(
            "%d jobs: %d files (%s) are worked through in this process, too few to pay for "
            "starting worker processes",
            jobs,
            *small,
        )
        for group in head:
            yield from work(group)
        return
    workers = free_workers(jobs - 1, _fewest(running, others_running()))
    if workers < 1:
        for group in chain(head, groups):
            yield from work(group)
        return
    how = {"fork": "forked from it", "forkserver": "from a fork server"}.get(method, method)
    _say("%d jobs: this process and %d worker process(es), %s", jobs, workers, how)
    pool = _pool(work, workers, method)
    try:
        yield from _shared(
            work,
            chain(head, groups),
            pool,
            workers,
            window or _WINDOW_PER_JOB * (workers + 1),
            forked=method == "fork",
        )
    except BaseException:  # Ctrl-C, or the results no longer wanted: stop the work in flight
        for process in list((pool._processes or {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


LOADAVG = "/proc/loadavg"
"""Where Linux says how many processes run now (see `others_running`)."""


def others_running(loadavg: str | None = None) -> int | None:
    """How many other processes are running on this machine now, or `None` where unknown.

    Linux counts the threads running or ready to run, this one included, in the fourth
    field of `/proc/loadavg` (`running/total`); elsewhere nothing says it cheaply.
    """
    try:
        with open(loadavg or LOADAVG, encoding="ascii") as file:
            running = int(file.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - 1)


def free_workers(wanted: int, others: int | None, cores: int | None = None) -> int:
    """How many of `wanted` worker processes to start while `others` processes run.

    Each other process that runs holds a core; a worker on a held core would only share it
    with this process or that one, and cost its start-up and the results' transfers: with
    every core held, the work stays in this process, as with `--jobs 1`, and is never slower
    for asking for more jobs. The `trajkit` logger says so. `cores` counts the machine's
    cores (as `/proc/loadavg` does: all of them), by default `os.cpu_count()`. With no other
    process running, every worker asked for starts, even more than the cores (reading over a
    network waits more than it computes).

    Examples:
        >>> free_workers(3, 0, cores=4), free_workers(3, 2, cores=4), free_workers(1, 1, cores=2)
        (3, 1, 0)
        >>> free_workers(3, None, cores=2), free_workers(7, 0, cores=2)  # as many as asked for
        (3, 7)
    """
    if not others:
        return wanted
    cores = cores or os.cpu_count() or 1
    free = max(0, min(wanted, cores - 1 - others))
    if free < wanted:
        _say(
            "%d worker process(es) asked for; %d other process(es) running on %d cores: %s",
            wanted,
            others,
            cores,
            f"{free} started" if free else "worked through in this process",
        )
    return free


def _fewest(*counts: int | None) -> int | None:
    """The smallest of the counts that are known (a process that ran a moment is no load)."""
    known = [c for c in counts if c is not None]
    return min(known) if known else None


def start_method() -> str:
    """How worker processes start here: `"fork"` where that is safe, else a fork server.

    Forking is safe on POSIX systems but macOS (whose system libraries do not survive a
    fork) while no other Python thread runs: a thread holding a lock at the fork (a progress
    bar's monitor, Ray's driver) would leave it locked in the child for good. Elsewhere
    `"forkserver"`, or `"spawn"` where there is no fork server (Windows, ...).

    Examples:
        >>> start_method() in ("fork", "forkserver", "spawn")
        True
    """
    if hasattr(os, "fork") and sys.platform != "darwin" and threading.active_count() == 1:
        return "fork"
    import multiprocessing

    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def pool_broke(exc: BaseException) -> bool:
    """Whether `exc` says that a worker process stopped (killed, out of memory).

    Checked without importing the process pool, which only a pool that was started needs.
    """
    process = sys.modules.get("concurrent.futures.process")
    return process is not None and isinstance(exc, process.BrokenProcessPool)


def _say(message: str, *args: object) -> None:
    """Tell the `trajkit` logger how the work runs (shown by `trajkit validate -v`).

    Where nothing has imported `logging`, no handler can be listening: the message is
    dropped without importing it (a few milliseconds of every command's start).
    """
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger("trajkit").info(message, *args)


def _pool(work: Work[R], workers: int, method: str) -> ProcessPoolExecutor:
    """A process pool of `workers` processes, started by `method` (not started yet)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context: multiprocessing.context.BaseContext
    if method == "fork":
        context = multiprocessing.get_context("fork")
    else:
        context = _server_context(work, method)
        _start_server(context)
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_interrupts)


class _Chunk(Generic[R]):
    """A chunk on its way: in the pool (`future`) or worked through here (`results`)."""

    def __init__(self, group: list[Item], future: Future[list[R]] | None, results: list[R]):
        self.group = group
        self.future = future
        self.results = results

    def ready(self) -> bool:
        return self.future is None or self.future.done()

    def take_back(self, work: Work[R]) -> bool:
        """Work through this chunk here if no worker has started it; whether it was."""
        if self.future is None or not self.future.cancel():
            return False
        self.future = None
        self.results = work(self.group)
        return True

    def get(self) -> list[R]:
        return self.results if self.future is None else self.future.result()


def _shared(
    work: Work[R],
    groups: Iterable[list[Item]],
    pool: ProcessPoolExecutor,
    workers: int,
    window: int,
    *,
    forked: bool,
) -> Iterator[R]:
    """Chunks to `pool` (at most `window` in it) and to this process; results in order.

    Forked workers are started first, here. Others are started by a thread (starting one
    blocks until the fork server has imported trajkit); meanwhile this process works through
    the stream alone. Then, while the next results are not ready, it takes back the oldest
    chunk no worker has started, else works through the next chunk of the stream (up to
    `window` more chunks held here), else waits.
    """
    stream = iter(groups)
    pending: deque[_Chunk[R]] = deque()
    more = True
    if forked:  # milliseconds, while no other thread runs
        # What the work builds once, such as pydantic's validators, is built here first and
        # the workers inherit it: on the first file alone where it is small (its result
        # dropped; the first chunk is then shared out as any other), else on the whole first
        # chunk (its results held). The workers start 32 small files sooner.
        first = next(stream, None)
        if first is not None and len(first) > 1 and first[0].nbytes <= WARM_BYTES:
            work(first[:1])
            stream = chain([first], stream)
        else:
            more = _add(pending, first, work, None)
        _fork_workers(pool, workers)
    else:
        starting = threading.Thread(target=_start_workers, args=(pool, workers), daemon=True)
        starting.start()
        while more and starting.is_alive():
            more = _add(pending, next(stream, None), work, None)
            while pending:
                yield from pending.popleft().get()
        starting.join()
    while True:
        while more and sum(c.future is not None for c in pending) < window:
            more = _add(pending, next(stream, None), work, pool)
        if not pending:
            return
        if not pending[0].ready():
            if any(c.take_back(work) for c in pending):
                continue
            if more and len(pending) < 2 * window:
                more = _add(pending, next(stream, None), work, None)
                continue
        yield from pending.popleft().get()  # waits for a worker if need be


def _start_workers(pool: ProcessPoolExecutor, count: int) -> None:
    """Start the `count` workers of `pool` (each submission starts one while none is idle).

    A pool that breaks meanwhile (Ctrl-C, a worker killed) is reported by the next
    submission or result in the calling thread, not here.
    """
    with contextlib.suppress(Exception):
        for _ in range(count):
            pool.submit(int)


def _fork_workers(pool: ProcessPoolExecutor, count: int) -> None:
    """Fork the `count` workers of `pool` now (a pool forks them all at its first task).

    Python 3.12 and later warn about any fork while the process has another thread, even
    one a library started and prepared for forks (NumPy's OpenBLAS starts one); no Python
    thread runs here (`start_method` checked), so that warning is silenced for this fork.
    The objects made so far are frozen during the fork (`gc.freeze`), so the workers'
    garbage collections never visit them, and never copy the memory pages that hold them.
    """
    gc.freeze()  # the objects so far stay out of the workers' collections (fewer page copies)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", r"This process \(pid=\d+\) is multi-threaded", DeprecationWarning
            )
            _start_workers(pool, count)
    finally:
        gc.unfreeze()


def _start_server(context: multiprocessing.context.BaseContext) -> None:
    """Start the fork server now, ignoring Ctrl-C, which is for this process.

    The server inherits the ignored SIGINT (Python keeps a signal ignored at start-up), so a
    Ctrl-C while it imports trajkit prints no traceback of its own. Only the main thread may
    change a signal's handler; elsewhere the server starts with the first worker.
    """
    if context.get_start_method() != "forkserver":
        return
    import multiprocessing.forkserver

    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _add(
    pending: deque[_Chunk[R]],
    group: list[Item] | None,
    work: Work[R],
    pool: ProcessPoolExecutor | None,
) -> bool:
    """Queue `group` for `pool`, or work through it here; False at the end of the stream.

    A chunk with a `memory://` URL is always worked through here, the only process that
    sees that file system.
    """
    if group is None:
        return False
    paths = [item.path for item in group if isinstance(item, Found)]
    if pool is not None and all(runs_in_any_process(path) for path in paths):
        pending.append(_Chunk(group, pool.submit(work, group), []))
    else:
        pending.append(_Chunk(group, None, work(group)))
    return True


def _ignore_interrupts() -> None:
    """Pool worker initializer: Ctrl-C is for the parent, which stops the workers itself.

    A terminal's Ctrl-C signals every process of the command; a worker that raised
    `KeyboardInterrupt` while waiting for work would print its traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _small(
    head: list[list[Item]], groups: Iterator[list[Item]], by_size: bool, scale: int
) -> tuple[int, str] | None:
    """`(files, size)` if the stream ends within the in-process limits, else `None`.

    Reads chunks from `groups` into `head` until the stream ends or its files pass
    `scale * IN_PROCESS_FILES`, or (with `by_size`) its bytes `scale * IN_PROCESS_BYTES`.
    """
    files = size = 0
    for group in groups:
        head.append(group)
        files += len(group)
        size += sum(item.nbytes for item in group)
        if files > scale * IN_PROCESS_FILES or (by_size and size > scale * IN_PROCESS_BYTES):
            return None
    return files, f"{size / 1024:,.0f} KiB"


def _pipeline(
    work: Work[R],
    groups: Iterable[list[Item]],
    submit: Submit[R],
    window: int,
) -> Iterator[R]:
    pending: deque[Callable[[], list[R]]] = deque()
    for group in groups:
        if all(runs_in_any_process(item.path) for item in group if isinstance(item, Found)):
            pending.append(submit(work, group))
        else:
            pending.append(partial(_identity, work(group)))
        while len(pending) >= window:
            yield from pending.popleft()()
    while pending:
        yield from pending.popleft()()


def _identity(value: list[R]) -> list[R]:
    return value


def _server_context(work: Work[R], method: str) -> multiprocessing.context.BaseContext:
    """A `forkserver` (or `spawn`) context, never plain fork: see `start_method`."""
    import multiprocessing

    context = multiprocessing.get_context(method)
    if method == "forkserver":
        # The server imports the engine and the work's module once; each worker forked from
        # it starts ready to work. ("__main__" is the server's default preload, kept.)
        func = work.func if isinstance(work, partial) else work
        module = getattr(func, "__module__", None)
        context.set_forkserver_preload(["__main__", __name__, *([module] if module else [])])
    return context
