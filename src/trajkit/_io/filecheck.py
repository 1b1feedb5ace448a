"""Checking one rollout file: the check every engine runs, whose verdict is a `FileCheck`.

`check_file` is pure and picklable: it takes a path and options and returns a small
`FileCheck`, never raising for a bad file, so that any engine can run it (this process, a
process pool, Ray tasks; see `trajkit._io.engine`) and the verdicts are the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajkit._base.errors import RolloutFileError
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.items import FileCheck, Found
from trajkit._io.remote import file_size, local_copy, mappable, metadata_and_size, naming
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

__all__ = ["MAP_BYTES", "FileCheck", "check_chunk", "check_file", "file_error", "matching_spec"]

MAP_BYTES = 1 << 20
"""A file of at least this size is checked through a memory map; a smaller one is read.

Mapping saves copying a large file's bytes, but a small file reads faster (15 % for 25 kB
files: no map to make, and plain arrays rather than views of one), and a check keeps no
array to share with the page cache.
"""


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
                mmap = nbytes >= MAP_BYTES and mappable(path)
                rollout = load(local, mmap=mmap, verify=True, max_bytes=max_bytes)
                if spec is not None:
                    problems += spec.check(rollout)
                del rollout
    except RolloutFileError as exc:
        problems.append(file_error(exc))
    except Exception as exc:  # a bug must not stop the batch
        problems.append(f"internal error (please report it): {type(exc).__name__}: {exc}")
    return FileCheck(path, tuple(problems), nbytes)


def matching_spec(rollout: Rollout, spec: RolloutSpec | None, path: str) -> Rollout:
    """Return `rollout`, or raise a `RolloutFileError` naming `path` if it breaks `spec`."""
    if spec is not None:
        problems = spec.check(rollout)
        if problems:
            raise RolloutFileError(
                f"does not conform to the spec: {'; '.join(problems)}", path=path
            )
    return rollout


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
