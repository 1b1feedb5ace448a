"""`stats`: episode statistics of rollout files, computed in Ray tasks and merged in order."""

from __future__ import annotations

from functools import partial

from trajkit._io import raytasks
from trajkit._io.discovery import discover
from trajkit._io.engine import checked_jobs, run_ordered
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.stats import DatasetStats, stats_chunk
from trajkit._models.spec import RolloutSpec
from trajkit.ray._listing import Paths

__all__ = ["stats"]


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
    ray = raytasks.connect(address)
    work = partial(stats_chunk, spec=spec, max_bytes=max_bytes)
    total = DatasetStats()
    found = discover(paths)
    limits = raytasks.in_flight(ray, most)
    for part in run_ordered(work, found, **limits, submit=raytasks.submitter(ray)):
        total = total.merge(part)
    return total
