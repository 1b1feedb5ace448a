"""Rollout files on a Ray cluster: checks and statistics as Ray tasks, a Ray Data reader.

Needs `pip install "trajkit[ray]"`. Ray is imported here only, never by `import trajkit`;
without it these functions raise an `ImportError` that says `pip install 'trajkit[ray]'`.

trajkit supplies the per-file work and Ray schedules it: [`validate`][trajkit.ray.validate]
and [`stats`][trajkit.ray.stats] send chunks of files to Ray tasks (one CPU each), a bounded
number at a time, and gather the results in the order of the paths; the verdicts are those of
[`trajkit.dataset.check_file`][trajkit.dataset.check_file], the same as `trajkit validate`
gives on one machine. [`read_rollouts`][trajkit.ray.read_rollouts] makes a
`ray.data.Dataset` with one row per file.

Every worker must be able to read the paths: on one machine any path works; on a cluster,
use fsspec URLs (`s3://...`, `gs://...`, with `trajkit[cloud]` installed on every node) or
a file system mounted at the same place on every node.

Connecting: when Ray is not initialized yet, these functions call `ray.init(address=...)`
(`address=None` connects to `RAY_ADDRESS` or starts a local Ray); when it is, they use the
running Ray and ignore `address`.

Examples:
    On a cluster started with `ray start --head` (see the Datasets page of the docs):

    >>> import trajkit.ray
    >>> checks = trajkit.ray.validate(["s3://bucket/runs/"], address="auto")  # doctest: +SKIP
    >>> sum(not c.ok for c in checks)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict

from trajkit._base.errors import RolloutFileError
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import local_copy, mappable, naming
from trajkit._io.scan import (
    DatasetStats,
    FileCheck,
    Found,
    check_chunk,
    checked_jobs,
    conform,
    discover,
    run_ordered,
    stats_chunk,
)
from trajkit._models.spec import RolloutSpec

if TYPE_CHECKING:
    import ray

__all__ = ["read_rollouts", "stats", "validate", "validate_files"]

Paths = str | Sequence[str]


def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ImportError(
            "trajkit.ray needs Ray; install it with: pip install 'trajkit[ray]'"
        ) from exc


def _connect(address: str | None) -> Any:
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING)
    return ray


def _as_list(paths: Paths) -> list[str]:
    return [paths] if isinstance(paths, str) else list(paths)


def _run_chunk(work: Any, group: list[Found | FileCheck]) -> Any:
    """The Ray task: one chunk of files through `work`."""
    return work(group)


def _submitter(ray: Any) -> Any:
    task = ray.remote(num_cpus=1)(_run_chunk)

    def submit(work: Any, group: list[Found | FileCheck]) -> Any:
        return partial(_result, ray, task.remote(work, group))

    return submit


def _result(ray: Any, ref: Any) -> Any:
    """Wait for a task; a refused file raises its own `RolloutFileError`, not Ray's wrapper."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, RolloutFileError):
            raise cause from None
        raise


def _cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


class _InFlight(TypedDict):
    jobs: int
    window: int | None


def _in_flight(ray: Any, most: int | None) -> _InFlight:
    """`run_ordered`'s limits: at most `most` tasks at once, or four chunks per cluster CPU."""
    return {"jobs": most or _cpus(ray), "window": most}


def validate_files(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> Iterator[FileCheck]:
    """Check rollout files and folders as Ray tasks; yield the verdicts as they come, in order.

    The streaming form of [`validate`][trajkit.ray.validate] (what `trajkit validate
    --engine ray` runs): folders are listed lazily on the driver, files go to Ray tasks in
    chunks, at most four chunks per CPU of the cluster in flight (or `jobs` tasks).

    Args:
        paths: Files and folders (local paths or fsspec URLs).
        address: The Ray cluster to connect to if Ray is not initialized yet.
        spec: Also require conformance to this spec.
        quick: Check only the ZIP directory and the metadata.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: At most this many Ray tasks at once (`trajkit validate --engine ray --jobs N`),
            to leave the rest of a shared cluster alone; `None` for four chunks in flight
            per CPU of the cluster. The verdicts are the same either way.

    Raises:
        ValueError: If `jobs` is not None or an integer >= 1.

    Returns:
        An iterator of `FileCheck`, one per file, in the order of the paths.

    Examples:
        >>> import trajkit.ray
        >>> for check in trajkit.ray.validate_files("runs/"):  # doctest: +SKIP
        ...     print(check.path, check.ok)
        runs/a.npz True
    """
    most = checked_jobs(jobs)
    ray = _connect(address)
    work = partial(check_chunk, spec=spec, quick=quick, max_bytes=max_bytes)
    return run_ordered(
        work,
        discover(_as_list(paths)),
        **_in_flight(ray, most),
        by_size=not quick,
        submit=_submitter(ray),
    )


def validate(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> list[FileCheck]:
    """Check rollout files and folders as Ray tasks.

    Args:
        paths: Files and folders (local paths or fsspec URLs).
        address: The Ray cluster to connect to if Ray is not initialized yet (`"auto"`, or
            `"HOST:6379"`); `None` for `RAY_ADDRESS` or a local Ray.
        spec: Also require conformance to this spec.
        quick: Check only the ZIP directory and the metadata.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: At most this many Ray tasks at once; `None` for four chunks in flight per CPU
            of the cluster.

    Returns:
        One [`FileCheck`][trajkit.dataset.FileCheck] per file, in the order of the paths
        (and one per missing path or empty folder).

    Examples:
        >>> import trajkit.ray
        >>> checks = trajkit.ray.validate(["runs/"], address="auto")  # doctest: +SKIP
        >>> [c.path for c in checks if not c.ok]  # doctest: +SKIP
        []
    """
    return list(
        validate_files(
            paths, address=address, spec=spec, quick=quick, max_bytes=max_bytes, jobs=jobs
        )
    )


def stats(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> DatasetStats:
    """Episode statistics of rollout files and folders, computed in Ray tasks.

    Each task loads its files (memory-mapped where they are local) and returns their merged
    statistics; the driver merges the chunks in order, so the result does not depend on how
    many CPUs the cluster has (or on `jobs`).

    Args:
        paths: Files and folders (local paths or fsspec URLs).
        address: The Ray cluster to connect to if Ray is not initialized yet.
        spec: Also require conformance to this spec.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: At most this many Ray tasks at once; `None` for four chunks in flight per CPU
            of the cluster.

    Returns:
        The [`DatasetStats`][trajkit.dataset.DatasetStats] of all the files.

    Raises:
        RolloutFileError: If a path is missing, a file is refused or does not conform to
            `spec`.

    Examples:
        >>> import trajkit.ray
        >>> trajkit.ray.stats("runs/").returns.mean  # doctest: +SKIP
        187.5
    """
    most = checked_jobs(jobs)
    ray = _connect(address)
    work = partial(stats_chunk, spec=spec, max_bytes=max_bytes)
    total = DatasetStats()
    found = discover(_as_list(paths))
    for part in run_ordered(work, found, **_in_flight(ray, most), submit=_submitter(ray)):
        total = total.merge(part)
    return total


def _row(row: dict[str, Any], *, spec: RolloutSpec | None, max_bytes: int | None) -> dict[str, Any]:
    """One file as a row of `read_rollouts`: its layout and episode statistics."""
    path = str(row["path"])
    with local_copy(path, max_bytes) as local, naming(path):
        rollout = conform(load(local, mmap=mappable(path), max_bytes=max_bytes), spec, path)
        file = DatasetStats.of(rollout)
        episodes = rollout.episode_stats()
        return {
            "path": path,
            "num_steps": rollout.num_steps,
            "batch_size": rollout.batch_size,
            "spec": RolloutSpec.from_rollout(rollout).model_dump_json(),
            "steps": file.steps,
            "terminations": file.terminations,
            "truncations": file.truncations,
            "returns": episodes.returns.tolist(),
            "lengths": episodes.lengths.tolist(),
        }


def read_rollouts(
    paths: Paths, *, spec: RolloutSpec | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per rollout file: its layout and its episodes.

    The files are listed on the driver (folders searched for `*.npz`, sorted) and each is
    loaded and checked in a Ray Data task, memory-mapped where it is local. A row holds
    `path`, `num_steps` (T), `batch_size` (B), `spec` (the file's
    [`RolloutSpec`][trajkit.RolloutSpec] as JSON), `steps` (T·B), `terminations`,
    `truncations`, and `returns` and `lengths` of the complete episodes (lists). To work
    on the arrays themselves, map over the rows and load each file with
    [`trajkit.load`][trajkit.load]`(row["path"], mmap=True)`. A refused file (or one that
    breaks `spec`) fails the dataset's execution with its `RolloutFileError`.

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        spec: Also require conformance to this spec.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset` (nothing is read until it is consumed).

    Raises:
        RolloutFileError: If a path is missing or a folder holds no `*.npz` file.

    Examples:
        >>> import trajkit.ray
        >>> ds = trajkit.ray.read_rollouts("runs/")  # doctest: +SKIP
        >>> ds.sum("steps"), ds.columns()[:3]  # doctest: +SKIP
        (40960, ['path', 'num_steps', 'batch_size'])
    """
    files: list[str] = []
    for item in discover(_as_list(paths)):
        if isinstance(item, FileCheck):
            raise RolloutFileError(item.problems[0], path=item.path)
        files.append(item.path)
    ray = _ray()
    dataset = ray.data.from_items(
        [{"path": path} for path in files], override_num_blocks=max(1, min(len(files), 200))
    )
    return dataset.map(_row, fn_kwargs={"spec": spec, "max_bytes": max_bytes})  # type: ignore[no-any-return]
