"""Rollout files behind fsspec URLs (`s3://`, `gs://`, `file://`, `memory://`, ...).

fsspec is imported only when a path has a scheme (`trajkit[cloud]`). Checking or loading a
remote file reads it into a local temporary file first, after refusing a file larger than the
size limit, so that everything `trajkit.load` checks applies unchanged; errors name the URL,
never the temporary file. Reading only the metadata (`trajkit validate --quick`) reads the
ZIP directory and the metadata member in place, a few ranged reads whatever the file's size.
`file://` URLs are read in place.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import tempfile
from collections.abc import Iterator
from typing import Any

from trajkit._base.errors import RolloutFileError
from trajkit._io.files import DEFAULT_MAX_BYTES, load, read_metadata, read_metadata_from
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._models.rollout import Rollout

__all__ = [
    "PROCESS_LOCAL_SCHEMES",
    "copy_out",
    "file_size",
    "filesystem",
    "fsspec_module",
    "is_url",
    "join_url",
    "load_any",
    "local_copy",
    "mappable",
    "metadata_and_size",
    "naming",
    "runs_in_any_process",
]

PROCESS_LOCAL_SCHEMES = frozenset({"memory"})
"""URL schemes whose files exist in one process only: never handed to a worker process."""

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
_COPY_CHUNK = 1 << 20
_RANGE_BYTES = 1 << 16  # bytes per ranged read of a remote file's directory and metadata


def is_url(path: str) -> bool:
    """Whether `path` is a URL (`scheme://...`) rather than a local path.

    Examples:
        >>> is_url("s3://bucket/run.npz"), is_url("memory://x"), is_url("runs/a.npz")
        (True, True, False)
    """
    return _URL.match(path) is not None


def runs_in_any_process(path: str) -> bool:
    """Whether another process (a worker) can read `path`: not a `memory://` URL.

    Examples:
        >>> runs_in_any_process("memory://runs/a.npz"), runs_in_any_process("a.npz")
        (False, True)
    """
    match = _URL.match(path)
    return match is None or match["scheme"].lower() not in PROCESS_LOCAL_SCHEMES


def join_url(url: str, relative: str) -> str:
    """`relative` (with `/` separators) under the folder URL `url`.

    Examples:
        >>> join_url("s3://bucket/runs/", "day1/a.npz")
        's3://bucket/runs/day1/a.npz'
    """
    return f"{url.rstrip('/')}/{relative.lstrip('/')}"


def fsspec_module() -> Any:
    """Import fsspec, or fail with an error that names the extra to install."""
    try:
        return importlib.import_module("fsspec")
    except ImportError as exc:
        raise ImportError(
            "reading URLs needs fsspec; install it with: pip install 'trajkit[cloud]'"
        ) from exc


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of `url` and the path within it."""
    fs, path = fsspec_module().core.url_to_fs(url)
    return fs, str(path)


@contextlib.contextmanager
def local_copy(path: str, max_bytes: int | None) -> Iterator[str]:
    """A local path holding the file at `path`: `path` itself, or a temporary copy of a URL.

    A remote file larger than `max_bytes` is refused before anything is read, and the copy
    stops at `max_bytes` should the file grow while it is read. The copy is removed on exit.

    Raises:
        RolloutFileError: If the URL cannot be read, or its file is over the limit.
    """
    if not is_url(path):
        yield path
        return
    in_place = _in_place(path)  # file://: read in place
    fs, inner, size = _remote(path, sized=not in_place)
    if in_place:
        yield inner
        return
    # A size of None (a file system that cannot tell): the copy stops at max_bytes.
    if size is not None:
        _check_size(size, max_bytes, path)
    fd, temp = tempfile.mkstemp(prefix="trajkit-", suffix=".npz")
    try:
        with open(fd, "wb") as out:
            try:
                with fs.open(inner, "rb") as source:
                    _copy(source, out, path, max_bytes)
            except OSError as exc:
                raise RolloutFileError(f"cannot open: {_reason(exc)}", path=path) from exc
        yield temp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _remote(url: str, *, sized: bool = True) -> tuple[Any, str, int | None]:
    """The file system of `url`, the path within it, and (if `sized`) the file's size.

    The size is None where the file system cannot tell, or when not asked for.

    Raises:
        RolloutFileError: If the URL cannot be opened.
    """
    try:
        fs, inner = filesystem(url)
        reported = fs.size(inner) if sized else None
    except (OSError, ValueError) as exc:
        raise RolloutFileError(f"cannot open: {_reason(exc)}", path=url) from exc
    return fs, inner, None if reported is None else int(reported)


def _in_place(url: str) -> bool:
    """Whether `local_copy` reads `url` in place (a `file://` URL) rather than copying it."""
    return url.lower().startswith("file://")


def _copy(source: Any, out: Any, path: str, max_bytes: int | None) -> None:
    copied = 0
    while chunk := source.read(_COPY_CHUNK):
        copied += len(chunk)
        if max_bytes is not None and copied > max_bytes:
            raise RolloutFileError(
                f"the file grew past the limit of {max_bytes} bytes while it was read",
                path=path,
            )
        out.write(chunk)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """Make the refusals raised inside the block name `path` (not a temporary copy of it)."""
    try:
        yield
    except RolloutFileError as exc:
        if exc.path == path:
            raise
        raise RolloutFileError(exc.reason, path=path, member=exc.member) from exc


def mappable(path: str) -> bool:
    """Whether `local_copy(path)` is the file itself, which can be memory-mapped.

    True for a local path or a `file://` URL; false for a URL that is read into a copy.

    Examples:
        >>> mappable("runs/a.npz"), mappable("file:///runs/a.npz"), mappable("s3://b/a.npz")
        (True, True, False)
    """
    return not is_url(path) or _in_place(path)


def load_any(
    path: str,
    *,
    mmap: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    verify: bool | None = None,
) -> Rollout:
    """`trajkit.load` for a local path or a URL (a remote file is read, never mapped)."""
    with local_copy(path, max_bytes) as local, naming(path):
        return load(local, mmap=mmap and mappable(path), max_bytes=max_bytes, verify=verify)


def metadata_and_size(
    path: str, *, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> tuple[RolloutFileMetadata, int]:
    """`trajkit.read_metadata` for a local path or a URL, and the file's size in bytes.

    A remote file is not copied: its ZIP directory and metadata member are read in place, in
    ranged reads of 64 KiB. As when it is copied, a file over `max_bytes` is refused before
    anything is read.

    Raises:
        RolloutFileError: If the file cannot be read, or is refused; naming `path`.
    """
    if not mappable(path):
        fs, inner, size = _remote(path)
        if size is not None:  # else a file system that cannot tell: a bounded copy below
            _check_size(size, max_bytes, path)
            try:
                raw = fs.open(inner, "rb", block_size=_RANGE_BYTES)
            except (OSError, ValueError) as exc:
                raise RolloutFileError(f"cannot open: {_reason(exc)}", path=path) from exc
            try:
                file = io.BufferedReader(raw, buffer_size=_RANGE_BYTES)
            except BaseException:
                raw.close()
                raise
            with naming(path):
                return read_metadata_from(file, size, name=path, max_bytes=max_bytes), size
    # A local path or file:// (read in place), or a size unknown (a copy bounded by max_bytes).
    with local_copy(path, max_bytes) as local, naming(path):
        return read_metadata(local, max_bytes=max_bytes), file_size(local)


def file_size(path: str) -> int:
    """The size of the local file `path` in bytes; 0 if it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _check_size(size: int, max_bytes: int | None, path: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise RolloutFileError(
            f"the file is {size} bytes, over the limit of {max_bytes} bytes; pass a larger "
            "max_bytes to read it",
            path=path,
        )


def copy_out(source: str, target: str) -> None:
    """Upload the local file `source` to the URL `target`."""
    fs, inner = filesystem(target)
    fs.put_file(source, inner)
