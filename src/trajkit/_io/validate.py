"""The one way to check many rollout files: `validate_files`, with a local or a Ray engine.

Public as [`trajkit.dataset.validate_files`][trajkit.dataset.validate_files]; `trajkit
validate`, [`Dataset.validate`][trajkit.dataset.Dataset.validate] and the deprecated
`trajkit.ray.validate`/`trajkit.ray.validate_files` all run it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import Literal

from trajkit._io.discovery import discover
from trajkit._io.engine import checked_jobs, cpu_count, run_ordered
from trajkit._io.filecheck import FileCheck, check_chunk
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._models.spec import RolloutSpec

__all__ = ["validate_files"]


def validate_files(
    paths: str | Iterable[str],
    *,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
    engine: Literal["local", "ray"] = "local",
    address: str | None = None,
) -> Iterator[FileCheck]:
    """Check rollout files and folders; yield a `FileCheck` per file, in order, as they come.

    The Python side of `trajkit validate`: folders are searched for `*.npz` files (sorted,
    numbers as numbers, hidden ones skipped), lazily, and each file is checked by
    [`check_file`][trajkit.dataset.check_file] (everything `trajkit.load` checks, every
    CRC-32, and with `spec` conformance to it), chunk by chunk with a bounded number of
    chunks in flight. The verdicts come back in the order of the paths, the same whatever
    the engine and `jobs`. Paths may be fsspec URLs (`trajkit[cloud]`).

    Engines:

    * `"local"`: `jobs` processes on this machine (every core by default): this one and
      `jobs - 1` workers. A few dozen small files are checked in this process whatever
      `jobs` says, since starting workers would cost more than it saves. The workers are
      forked from this process where that is safe (Linux and other POSIX systems but macOS,
      with no other Python thread running); elsewhere they come from multiprocessing's
      `forkserver` (`spawn` where there is none), which imports the main module in each
      worker: a script that may run there and checks many files with `jobs > 1` must do so
      under `if __name__ == "__main__":`.
    * `"ray"` (`trajkit[ray]`): chunks go to one-CPU Ray tasks, at most four chunks per CPU
      of the cluster in flight, or `jobs` tasks. Ray is connected to (`ray.init(address=)`)
      when this is called, unless it runs already; every worker must be able to read the
      paths (URLs, or a file system mounted everywhere).

    Args:
        paths: Files and folders (local paths or URLs); one string is one path.
        spec: Also require conformance to this spec.
        quick: Check only the ZIP directory and the metadata.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: Local: processes, this one included, `None` for every core, 1 to check in
            this process only.
            Ray: the most tasks at once, `None` for four chunks in flight per cluster CPU.
        engine: `"local"` or `"ray"`.
        address: With `engine="ray"`, the cluster to connect to if Ray is not initialized
            yet (`"auto"`, `"HOST:6379"`); `None` for `RAY_ADDRESS` or a local Ray.

    Returns:
        An iterator of verdicts, one per file found (and one per missing path or empty folder).

    Raises:
        ValueError: If `jobs` is not None or an integer >= 1, `engine` is unknown, or an
            `address` is given without `engine="ray"`.
        ImportError: With `engine="ray"`, if Ray is not installed.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.dataset import validate_files
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for name in ("a.npz", "b.npz"):
        ...         trajkit.save(example_rollout(), os.path.join(tmp, name))
        ...     checks = list(validate_files([tmp, os.path.join(tmp, "c.npz")], jobs=2))
        >>> [(os.path.basename(c.path), c.ok) for c in checks]
        [('a.npz', True), ('b.npz', True), ('c.npz', False)]
        >>> validate_files("runs/", engine="spark")
        Traceback (most recent call last):
        ...
        ValueError: engine must be 'local' or 'ray', got 'spark'
    """
    most = checked_jobs(jobs)
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}")
    if address is not None and engine != "ray":
        raise ValueError(f"address= needs engine='ray' (got engine={engine!r})")
    work = partial(check_chunk, spec=spec, quick=quick, max_bytes=max_bytes)
    found = discover(paths)
    if engine == "local":
        return run_ordered(work, found, jobs=most or cpu_count(), by_size=not quick)
    from trajkit._io import raytasks  # Ray, and logging, only for this engine

    ray = raytasks.connect(address)
    return run_ordered(
        work,
        found,
        **raytasks.in_flight(ray, most),
        by_size=not quick,
        submit=raytasks.submitter(ray),
    )
