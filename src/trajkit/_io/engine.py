"""Many rollout files: discovery, per-file checks and statistics, and an ordered process pool.

The per-file functions (`check_file`, `file_stats`) are pure and picklable: they take a path
and options and return a small result, so that any engine can run them (a process pool here,
Ray tasks in `trajkit.ray`). `run_ordered` runs them over a lazily discovered stream of files
in chunks, with a bounded number of chunks in flight, and yields the results in input order:
the output of N processes is the output of one, and memory stays bounded however many files
there are.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TypeAlias, TypeVar

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import ArrayLike
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import (
    file_size,
    filesystem,
    is_url,
    join_url,
    local_copy,
    mappable,
    metadata_and_size,
    naming,
    runs_in_any_process,
)
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_FILES",
    "SUFFIX",
    "DatasetStats",
    "FileCheck",
    "Found",
    "Moments",
    "check_chunk",
    "check_file",
    "checked_jobs",
    "conform",
    "count_files",
    "cpu_count",
    "discover",
    "file_stats",
    "list_files",
    "run_ordered",
    "stats_chunk",
    "validate_files",
    "walk_key",
]

SUFFIX = ".npz"
"""Files with this suffix are found when a folder is searched."""

CHUNK_FILES = 64
"""The most files handed to a worker at once."""

CHUNK_BYTES = 16 << 20
"""A chunk is closed once its files hold this many bytes (so large files spread out)."""

_WINDOW_PER_JOB = 4  # chunks in flight per worker: enough to keep every worker busy

R = TypeVar("R")


# ----------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class FileCheck:
    """The verdict on one rollout file: its path, the problems found (none if valid), its size.

    Attributes:
        path: The path or URL, as given or as found in a folder.
        problems: One sentence per problem; empty when the file is valid.
        nbytes: The size of the file in bytes (0 when it could not be read).

    Examples:
        >>> check = FileCheck("runs/a.npz", ("member rews.npy: CRC-32 mismatch",), 1024)
        >>> check.ok, check.to_json()["problems"]
        (False, ['member rews.npy: CRC-32 mismatch'])
    """

    path: str
    problems: tuple[str, ...] = ()
    nbytes: int = 0

    @property
    def ok(self) -> bool:
        """Whether the file is valid (no problems).

        Examples:
            >>> FileCheck("a.npz").ok
            True
        """
        return not self.problems

    def to_json(self) -> dict[str, object]:
        """The JSON object `trajkit validate --json` prints: `{path, ok, problems}`.

        Examples:
            >>> FileCheck("a.npz", nbytes=10).to_json()
            {'path': 'a.npz', 'ok': True, 'problems': []}
        """
        return {"path": self.path, "ok": self.ok, "problems": list(self.problems)}


@dataclass(frozen=True)
class Moments:
    """Count, mean, population standard deviation, min and max of a set of values.

    Mergeable: `Moments.of(a).merge(Moments.of(b))` equals `Moments.of(concatenate(a, b))`
    up to rounding (Chan, Golub and LeVeque's pairwise update of the mean and the sum of
    squared deviations), so statistics over many files stream file by file. Without values,
    every statistic is NaN.

    Attributes:
        count: The number of values.
        mean: Their mean.
        std: Their population standard deviation (`ddof=0`, as `numpy.std`).
        min: The smallest value.
        max: The largest value.

    Examples:
        >>> m = Moments.of([1.0, 2.0]).merge(Moments.of([3.0, 4.0]))
        >>> m.count, m.mean, round(m.std, 6), m.min, m.max
        (4, 2.5, 1.118034, 1.0, 4.0)
    """

    count: int = 0
    mean: float = math.nan
    std: float = math.nan
    min: float = math.nan
    max: float = math.nan

    @classmethod
    def of(cls, values: ArrayLike) -> Moments:
        """The moments of `values` (any shape; computed in float64).

        Examples:
            >>> Moments.of([])
            Moments(count=0, mean=nan, std=nan, min=nan, max=nan)
        """
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size == 0:
            return cls()
        return cls(int(v.size), float(v.mean()), float(v.std()), float(v.min()), float(v.max()))

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of values together.

        Examples:
            >>> Moments().merge(Moments.of([2.0])).mean
            2.0
        """
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        m2 = (
            self.std**2 * self.count
            + other.std**2 * other.count
            + delta**2 * self.count * other.count / n
        )
        return Moments(
            count=n,
            mean=self.mean + delta * other.count / n,
            std=math.sqrt(max(m2, 0.0) / n),
            min=min(self.min, other.min),
            max=max(self.max, other.max),
        )


@dataclass(frozen=True)
class DatasetStats:
    """Episode statistics of many rollout files, gathered file by file.

    An episode *ends* where `dones[t+1] = 1`; a *complete* episode starts and ends inside one
    file (see [`trajkit.episode_stats`][trajkit.episode_stats]): `returns` and `lengths`
    describe the complete episodes only.

    Attributes:
        files: The number of files.
        nbytes: Their total size in bytes.
        steps: The number of environment steps, the sum of T·B over the files.
        terminations: Episode ends that were terminations.
        truncations: Episode ends that were time-limit truncations.
        returns: The undiscounted returns of the complete episodes.
        lengths: Their lengths in steps.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=2)
        >>> stats = DatasetStats.of(r).merge(DatasetStats.of(r))
        >>> stats.files, stats.steps, stats.episodes == 2 * r.episode_stats().episodes
        (2, 32, True)
    """

    files: int = 0
    nbytes: int = 0
    steps: int = 0
    terminations: int = 0
    truncations: int = 0
    returns: Moments = field(default_factory=Moments)
    lengths: Moments = field(default_factory=Moments)

    @property
    def episodes(self) -> int:
        """The number of episode ends: terminations plus truncations.

        Examples:
            >>> DatasetStats(terminations=3, truncations=1).episodes
            4
        """
        return self.terminations + self.truncations

    @classmethod
    def of(cls, rollout: Rollout, nbytes: int = 0) -> DatasetStats:
        """The statistics of one rollout (one file of `nbytes` bytes).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> DatasetStats.of(example_rollout(num_steps=4, num_envs=3)).steps
            12
        """
        episodes = rollout.episode_stats()
        return cls(
            files=1,
            nbytes=nbytes,
            steps=rollout.num_steps * rollout.batch_size,
            terminations=episodes.terminations,
            truncations=episodes.truncations,
            returns=Moments.of(episodes.returns),
            lengths=Moments.of(episodes.lengths),
        )

    def merge(self, other: DatasetStats) -> DatasetStats:
        """The statistics of both sets of files together.

        Examples:
            >>> DatasetStats(files=1, steps=4).merge(DatasetStats(files=2, steps=6)).steps
            10
        """
        return DatasetStats(
            files=self.files + other.files,
            nbytes=self.nbytes + other.nbytes,
            steps=self.steps + other.steps,
            terminations=self.terminations + other.terminations,
            truncations=self.truncations + other.truncations,
            returns=self.returns.merge(other.returns),
            lengths=self.lengths.merge(other.lengths),
        )


# --------------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Found:
    """A file to check, with its size (to balance the chunks) when known."""

    path: str
    nbytes: int = 0


Item: TypeAlias = "Found | FileCheck"  # a file to work on, or a verdict reached while looking


def discover(paths: Iterable[str], suffix: str = SUFFIX) -> Iterator[Found | FileCheck]:
    """Expand folders into their `*.npz` files, lazily, in sorted order.

    Folders are walked one at a time (names sorted, hidden files and folders skipped); a file
    named explicitly is yielded whatever its suffix. A missing path, a folder without any
    such file, and a folder that cannot be read come out as a `FileCheck` with the problem.
    """
    for path in paths:
        if is_url(path):
            yield from _discover_url(path, suffix)
        else:
            yield from _discover_local(path, suffix)


def _discover_local(path: str, suffix: str) -> Iterator[Found | FileCheck]:
    if os.path.isdir(path):
        errors: list[OSError] = []
        found = 0
        for root, dirs, files in os.walk(path, onerror=errors.append):
            for err in errors:
                found += 1
                yield FileCheck(str(err.filename or path), (f"cannot read folder: {err.strerror}",))
            errors.clear()
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.endswith(suffix) and not name.startswith("."):
                    found += 1
                    full = os.path.join(root, name)
                    yield Found(full, file_size(full))
        for err in errors:  # the top folder itself could not be listed
            found += 1
            yield FileCheck(str(err.filename or path), (f"cannot read folder: {err.strerror}",))
        if not found:
            yield FileCheck(path, (f"no *{suffix} files in this folder",))
    elif os.path.lexists(path):
        yield Found(path, file_size(path))
    else:
        yield FileCheck(path, ("no such file or directory",))


def _discover_url(url: str, suffix: str) -> Iterator[Found | FileCheck]:
    try:
        fs, root = filesystem(url)
        if fs.isdir(root):
            listing = fs.find(root, detail=True)
        elif fs.exists(root):
            yield Found(url, int(fs.size(root) or 0))
            return
        else:
            yield FileCheck(url, ("no such file or directory",))
            return
    except ImportError as exc:
        yield FileCheck(url, (str(exc),))
        return
    except (OSError, ValueError) as exc:
        yield FileCheck(url, (f"cannot read folder: {exc}",))
        return
    found = False
    prefix = root.rstrip("/") + "/"
    relatives = {
        (name[len(prefix) :] if name.startswith(prefix) else name.rsplit("/", 1)[-1]): name
        for name in listing
    }
    for relative in sorted(relatives, key=walk_key):
        parts = relative.split("/")
        if parts[-1].endswith(suffix) and not any(p.startswith(".") for p in parts):
            found = True
            size = listing[relatives[relative]].get("size") or 0
            yield Found(join_url(url, relative), int(size))
    if not found:
        yield FileCheck(url, (f"no *{suffix} files in this folder",))


def walk_key(relative: str) -> tuple[tuple[int, str], ...]:
    """Sort key of a `/`-separated relative path in folder-walk order.

    A folder's files (sorted), then its subfolders (sorted), depth first: the order in which
    `discover` lists a local folder.

    Examples:
        >>> sorted(["b/x.npz", "z.npz", "a/y.npz", "a.npz"], key=walk_key)
        ['a.npz', 'z.npz', 'a/y.npz', 'b/x.npz']
    """
    *folders, name = relative.split("/")
    return (*((1, folder) for folder in folders), (0, name))


def list_files(path: str, suffix: str = SUFFIX) -> list[str]:
    """The `*.npz` files under the folder `path` (local or URL), sorted; none if it is empty.

    Raises:
        OSError: If the folder, or a folder inside it, cannot be read.
    """
    files: list[str] = []
    for item in discover([path], suffix):
        if isinstance(item, Found):
            files.append(item.path)
        elif not item.problems[0].startswith("no *"):
            raise OSError(f"{item.path}: {item.problems[0]}")
    return files


def count_files(paths: Sequence[str], suffix: str = SUFFIX) -> int | None:
    """How many results `discover(paths)` gives; `None` if a path is a URL (not listed twice)."""
    if any(is_url(p) for p in paths):
        return None
    return sum(1 for _ in discover(paths, suffix))


# ---------------------------------------------------------------------------- per-file work


def file_error(exc: RolloutFileError) -> str:
    """A refusal as one problem: `member NAME: reason`, or the reason."""
    return f"member {exc.member}: {exc.reason}" if exc.member is not None else exc.reason


def check_file(
    path: str,
    *,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> FileCheck:
    """Check one rollout file (a path or an fsspec URL); never raises for a bad file.

    Everything [`trajkit.load`][trajkit.load] checks, including every CRC-32, and, with
    `spec`, conformance to it; with `quick`, only the ZIP directory and the metadata (as
    [`trajkit.read_metadata`][trajkit.read_metadata]). A URL is read into a temporary local
    file first, or with `quick` only its ZIP directory and metadata, in place (either way, a
    file over `max_bytes` is refused before it is read). This is what `trajkit validate`
    runs for each file, in whichever process or Ray task.

    Args:
        path: A local path, or a URL such as `s3://bucket/run.npz` (needs `trajkit[cloud]`).
        spec: Also require conformance to this spec.
        quick: Check only the ZIP directory and the metadata.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        The `FileCheck`: its problems are empty when the file is valid.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.npz")
        ...     trajkit.save(example_rollout(num_steps=4), path)
        ...     check_file(path).ok, check_file(path, max_bytes=100).problems
        (True, ('the metadata declares ... bytes of array data (T=4, B=2), over the limit of
        100 bytes; pass a larger max_bytes to load it',))
    """
    problems: list[str] = []
    nbytes = 0
    try:
        if quick:
            meta, nbytes = metadata_and_size(path, max_bytes=max_bytes)
            if spec is not None:
                problems += spec.compare(
                    meta.spec, num_steps=meta.num_steps, num_envs=meta.batch_size
                )
        else:
            with local_copy(path, max_bytes) as local, naming(path):
                nbytes = file_size(local)
                rollout = load(local, mmap=mappable(path), verify=True, max_bytes=max_bytes)
                if spec is not None:
                    problems += spec.check(rollout)
                del rollout
    except RolloutFileError as exc:
        problems.append(file_error(exc))
    except Exception as exc:  # a bug must not stop the batch
        problems.append(f"internal error (please report it): {type(exc).__name__}: {exc}")
    return FileCheck(path, tuple(problems), nbytes)


def conform(rollout: Rollout, spec: RolloutSpec | None, path: str) -> Rollout:
    """Return `rollout`, or raise a `RolloutFileError` naming `path` if it breaks `spec`."""
    if spec is not None:
        problems = spec.check(rollout)
        if problems:
            raise RolloutFileError(
                f"does not conform to the spec: {'; '.join(problems)}", path=path
            )
    return rollout


def file_stats(
    path: str, *, spec: RolloutSpec | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> DatasetStats:
    """The `DatasetStats` of one file (loaded memory-mapped).

    Raises:
        RolloutFileError: If the file is refused, or does not conform to `spec`.
    """
    with local_copy(path, max_bytes) as local, naming(path):
        rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
        return DatasetStats.of(conform(rollout, spec, path), file_size(local))


def check_chunk(
    items: Sequence[Found | FileCheck],
    *,
    spec: RolloutSpec | None,
    quick: bool,
    max_bytes: int | None,
) -> list[FileCheck]:
    """`check_file` over a chunk; verdicts reached during discovery pass through."""
    return [
        item
        if isinstance(item, FileCheck)
        else check_file(item.path, spec=spec, quick=quick, max_bytes=max_bytes)
        for item in items
    ]


def stats_chunk(
    items: Sequence[Found | FileCheck], *, spec: RolloutSpec | None, max_bytes: int | None
) -> list[DatasetStats]:
    """The merged `DatasetStats` of a chunk, as a one-item list (for `run_ordered`)."""
    total = DatasetStats()
    for item in items:
        if isinstance(item, FileCheck):
            raise RolloutFileError(item.problems[0], path=item.path)
        total = total.merge(file_stats(item.path, spec=spec, max_bytes=max_bytes))
    return [total]


# ------------------------------------------------------------------------------ the engine


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
    items: Iterable[Found | FileCheck],
    max_files: int | None = None,
    max_bytes: float | None = None,
) -> Iterator[list[Found | FileCheck]]:
    """Group items into chunks of at most `max_files` files, closed early at `max_bytes`.

    The limits default to `CHUNK_FILES` and `CHUNK_BYTES`, read at each call.
    """
    max_files = CHUNK_FILES if max_files is None else max_files
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    chunk: list[Found | FileCheck] = []
    size = 0
    for item in items:
        chunk.append(item)
        size += item.nbytes
        if len(chunk) >= max_files or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


Work: TypeAlias = Callable[[Sequence["Found | FileCheck"]], list[R]]
Submit: TypeAlias = Callable[[Work[R], list["Found | FileCheck"]], Callable[[], list[R]]]


def run_ordered(
    work: Work[R],
    items: Iterable[Found | FileCheck],
    *,
    jobs: int,
    by_size: bool = True,
    submit: Submit[R] | None = None,
    window: int | None = None,
) -> Iterator[R]:
    """Run `work` over chunks of `items` and yield its results in input order.

    With `jobs == 1` (and no `submit`) everything runs in this process, and so does a stream
    that fits in one chunk. Otherwise chunks go to a process pool of `jobs` workers (or to
    `submit`, which returns a function that waits for the result), at most `window` chunks in
    flight, so that memory stays bounded whatever the number of files. A chunk holding a
    `memory://` URL runs in this process, the only one that sees that file system. With
    `by_size`, chunks also close at `CHUNK_BYTES` (for work whose cost grows with the file's
    size); without, they hold `CHUNK_FILES` files each (work that reads only the metadata).

    `work` must be picklable (a module-level function or a `functools.partial` of one).
    """
    groups = chunks(items, max_bytes=None if by_size else math.inf)
    if submit is not None:
        yield from _pipeline(work, groups, submit, window or _WINDOW_PER_JOB * max(jobs, 1))
        return
    head = [group for group in (next(groups, None), next(groups, None)) if group is not None]
    if jobs <= 1 or len(head) < 2:
        for group in (*head, *groups):
            yield from work(group)
        return
    pool = ProcessPoolExecutor(jobs, mp_context=_mp_context(), initializer=_ignore_interrupts)
    try:

        def to_pool(fn: Work[R], group: list[Found | FileCheck]) -> Callable[[], list[R]]:
            return pool.submit(fn, group).result

        yield from _pipeline(work, _chain(head, groups), to_pool, window or _WINDOW_PER_JOB * jobs)
    except BaseException:  # Ctrl-C, or the results no longer wanted: stop the work in flight
        for process in list((pool._processes or {}).values()):
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _ignore_interrupts() -> None:
    """Pool worker initializer: Ctrl-C is for the parent, which stops the workers itself.

    A terminal's Ctrl-C signals every process of the command; a worker that raised
    `KeyboardInterrupt` while waiting for work would print its traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _chain(
    head: list[list[Found | FileCheck]], rest: Iterator[list[Found | FileCheck]]
) -> Iterator[list[Found | FileCheck]]:
    yield from head
    yield from rest


def _pipeline(
    work: Work[R],
    groups: Iterable[list[Found | FileCheck]],
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


def _mp_context() -> multiprocessing.context.BaseContext:
    # forkserver (Python 3.14's default on Linux) or spawn, never plain fork: forking a
    # process that runs threads (a progress bar's monitor, Ray's driver) can deadlock.
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # The server imports trajkit once; each worker forked from it starts ready to work.
    # ("__main__" is the server's default preload, kept.)
    context.set_forkserver_preload(["__main__", __name__])
    return context


def validate_files(
    paths: Iterable[str],
    *,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> Iterator[FileCheck]:
    """Check rollout files and folders on every core; yield a `FileCheck` per file, in order.

    The Python side of `trajkit validate`: folders are searched for `*.npz` files (sorted,
    hidden ones skipped), lazily, and the files are checked by
    [`check_file`][trajkit.dataset.check_file] in `jobs` processes, chunk by chunk, with a
    bounded number of chunks in flight; the verdicts come back in the order of the paths,
    the same as with one process. Paths may be fsspec URLs (`trajkit[cloud]`).

    The workers are started with multiprocessing's `forkserver` method (`spawn` where there
    is none), which imports the main module in each worker: a script that calls this with
    `jobs > 1` must do so under `if __name__ == "__main__":`.

    Args:
        paths: Files and folders (local paths or URLs).
        spec: Also require conformance to this spec.
        quick: Check only the ZIP directory and the metadata.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: Worker processes; `None` for every core, 1 to check in this process.

    Returns:
        An iterator of verdicts, one per file found (and one per missing path or empty folder).

    Raises:
        ValueError: If `jobs` is not None or an integer >= 1.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.dataset import validate_files
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for name in ("a.npz", "b.npz"):
        ...         trajkit.save(example_rollout(), os.path.join(tmp, name))
        ...     checks = list(validate_files([tmp, os.path.join(tmp, "c.npz")], jobs=1))
        >>> [(os.path.basename(c.path), c.ok) for c in checks]
        [('a.npz', True), ('b.npz', True), ('c.npz', False)]
    """
    workers = checked_jobs(jobs) or cpu_count()
    work = partial(check_chunk, spec=spec, quick=quick, max_bytes=max_bytes)
    return run_ordered(work, discover(paths), jobs=workers, by_size=not quick)
