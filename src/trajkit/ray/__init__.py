"""Rollout files on a Ray cluster: checks and statistics as Ray tasks, Ray Data readers.

Needs `pip install "trajkit[ray]"`. Ray is imported here only, never by `import trajkit`;
without it these functions raise an `ImportError` that says `pip install 'trajkit[ray]'`.

trajkit supplies the per-file work and Ray schedules it: [`stats`][trajkit.ray.stats], and
[`trajkit.dataset.validate_files`][trajkit.dataset.validate_files] with `engine="ray"`, send
chunks of files to Ray tasks (one CPU each), a bounded number at a time, and gather the
results in the order of the paths; the verdicts are those of
[`trajkit.dataset.check_file`][trajkit.dataset.check_file], the same as `trajkit validate`
gives on one machine. (`validate` and `validate_files` here are deprecated aliases of that
function, outside `__all__`, which warn.) Three readers make a lazy `ray.data.Dataset`:
[`read_steps`][trajkit.ray.read_steps] with one row per transition (observations, actions,
rewards, episode ends, advantages and returns computed per rollout: ready for
`iter_torch_batches`), [`read_arrays`][trajkit.ray.read_arrays] with one row per file holding
its whole arrays, and [`read_rollouts`][trajkit.ray.read_rollouts] with one row per file
holding its layout and episode statistics.

Every worker must be able to read the paths: on one machine any path works; on a cluster,
use fsspec URLs (`s3://...`, `gs://...`, with `trajkit[cloud]` installed on every node) or
a file system mounted at the same place on every node.

Connecting: when Ray is not initialized yet, these functions call `ray.init(address=...)`
(`address=None` connects to `RAY_ADDRESS` or starts a local Ray); when it is, they use the
running Ray and ignore `address`.

Examples:
    On a cluster started with `ray start --head` (see the Datasets page of the docs):

    >>> from trajkit.dataset import validate_files
    >>> checks = validate_files(  # doctest: +SKIP
    ...     ["s3://bucket/runs/"], engine="ray", address="auto"
    ... )
    >>> sum(not c.ok for c in checks)  # doctest: +SKIP
    0
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trajkit._base.deprecation import deprecated
from trajkit._io.filecheck import FileCheck
from trajkit._io.validate import validate_files as _checks
from trajkit.ray._arrays import read_arrays
from trajkit.ray._listing import Paths
from trajkit.ray._rollouts import read_rollouts
from trajkit.ray._stats import stats
from trajkit.ray._steps import read_steps

__all__ = ["read_arrays", "read_rollouts", "read_steps", "stats"]


def _validate_files(paths: Paths, **options: Any) -> Iterator[FileCheck]:
    """The deprecated `trajkit.ray.validate_files`: `validate_files(paths, engine="ray", ...)`."""
    return _checks(paths, engine="ray", **options)


def _validate(paths: Paths, **options: Any) -> list[FileCheck]:
    """The deprecated `trajkit.ray.validate`: the list of `_validate_files`' verdicts."""
    return list(_validate_files(paths, **options))


_REPLACEMENT = "trajkit.dataset.validate_files(paths, engine='ray', ...)"
_DEPRECATED = {
    "validate": (_validate, f"list({_REPLACEMENT})"),
    "validate_files": (_validate_files, _REPLACEMENT),
}
"""The deprecated aliases (outside `__all__`): each function, and what to use instead."""


def __getattr__(name: str) -> Any:
    """A deprecated alias of `_DEPRECATED`, with a `DeprecationWarning` naming its replacement."""
    if name not in _DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    alias, replacement = _DEPRECATED[name]
    deprecated(f"trajkit.ray.{name}(paths, ...)", replacement)
    return alias
