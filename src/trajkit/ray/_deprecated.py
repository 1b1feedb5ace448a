"""The deprecated `trajkit.ray.validate` and `validate_files`, given by `trajkit.ray.__getattr__`.

`trajkit.ray.__getattr__` warns (through `trajkit._base.deprecation`) with the replacement
that `REPLACEMENTS` names, then returns the function.
"""

from __future__ import annotations

from collections.abc import Iterator

from trajkit._io.filecheck import FileCheck
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.validate import validate_files as _validate_files
from trajkit._models.spec import RolloutSpec
from trajkit.ray._listing import Paths

__all__ = ["REPLACEMENTS", "validate", "validate_files"]

_REPLACEMENT = "trajkit.dataset.validate_files(paths, engine='ray', ...)"
REPLACEMENTS = {"validate": f"list({_REPLACEMENT})", "validate_files": _REPLACEMENT}
"""Each deprecated name, and what to use instead."""


def validate_files(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> Iterator[FileCheck]:
    """Deprecated: use `trajkit.dataset.validate_files(paths, engine="ray")`.

    [`trajkit.dataset.validate_files`][trajkit.dataset.validate_files] with `engine="ray"`
    and the same arguments: the verdicts are the same.

    Examples:
        >>> import trajkit.ray
        >>> for check in trajkit.ray.validate_files("runs/"):  # doctest: +SKIP
        ...     print(check.path, check.ok)
        runs/a.npz True
    """
    return _validate_files(
        paths,
        engine="ray",
        address=address,
        spec=spec,
        quick=quick,
        max_bytes=max_bytes,
        jobs=jobs,
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
    """Deprecated: use `list(trajkit.dataset.validate_files(paths, engine="ray"))`.

    The list of verdicts of [`trajkit.dataset.validate_files`][trajkit.dataset.validate_files]
    with `engine="ray"`.

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
