"""Finding rollout files: folders (local or fsspec URLs) expanded into their files, lazily.

`discover` is the one listing of rollout files: `trajkit validate` and
[`validate_files`][trajkit.dataset.validate_files] check what it finds, and a
[`Dataset`][trajkit.dataset.Dataset] lists its files with it. Files come in folder-walk
order: a folder's files, then its subfolders, names compared with their numbers as numbers
(`walk_key`), so that `rollout-1000000.npz` follows `rollout-999999.npz`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from trajkit._io.defaults import SUFFIX
from trajkit._io.items import FileCheck, Found
from trajkit._io.remote import file_size, filesystem, is_url, join_url

__all__ = ["SUFFIX", "Found", "NaturalKey", "count_files", "discover", "natural_key", "walk_key"]

_DIGITS: Final = re.compile(r"(\d+)")


def discover(
    paths: str | Iterable[str], suffix: str = SUFFIX, *, empty_ok: bool = False
) -> Iterator[Found | FileCheck]:
    """Expand folders into their `*.npz` files, lazily, in folder-walk order (`walk_key`).

    Folders are walked one at a time (hidden files and folders skipped); a file named
    explicitly is yielded whatever its suffix. A missing path, a folder that cannot be read
    and (unless `empty_ok`) a folder without any such file come out as a `FileCheck` with
    the problem, in their place: a verdict reached while looking.

    Args:
        paths: Files and folders (local paths or fsspec URLs); one string is one path.
        suffix: The suffix of the files to find in folders.
        empty_ok: Yield nothing for a folder without any such file (a dataset with no
            files yet), rather than a `FileCheck` saying so.

    Returns:
        An iterator of `Found` files (with their sizes) and `FileCheck` verdicts.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for name in ("r10.npz", "r9.npz", "notes.txt"):
        ...         open(os.path.join(tmp, name), "wb").close()
        ...     found = [os.path.basename(f.path) for f in discover(tmp)]
        ...     empty = os.path.join(tmp, "empty")
        ...     os.mkdir(empty)
        ...     verdicts = list(discover(empty)), list(discover(empty, empty_ok=True))
        >>> found
        ['r9.npz', 'r10.npz']
        >>> verdicts[0][0].problems, verdicts[1]
        (('no *.npz files in this folder',), [])
    """
    for path in [paths] if isinstance(paths, str) else paths:
        if is_url(path):
            yield from _discover_url(path, suffix, empty_ok)
        else:
            yield from _discover_local(path, suffix, empty_ok)


def _empty(path: str, suffix: str) -> FileCheck:
    return FileCheck(path, (f"no *{suffix} files in this folder",))


def _discover_local(path: str, suffix: str, empty_ok: bool) -> Iterator[Found | FileCheck]:
    if os.path.isdir(path):
        errors: list[OSError] = []
        found = 0
        for root, dirs, files in os.walk(path, onerror=errors.append):
            for err in errors:
                found += 1
                yield FileCheck(str(err.filename or path), (f"cannot read folder: {err.strerror}",))
            errors.clear()
            dirs[:] = sorted((d for d in dirs if not d.startswith(".")), key=natural_key)
            for name in sorted(files, key=natural_key):
                if name.endswith(suffix) and not name.startswith("."):
                    found += 1
                    full = os.path.join(root, name)
                    yield Found(full, file_size(full))
        for err in errors:  # the top folder itself could not be listed
            found += 1
            yield FileCheck(str(err.filename or path), (f"cannot read folder: {err.strerror}",))
        if not found and not empty_ok:
            yield _empty(path, suffix)
    elif os.path.lexists(path):
        yield Found(path, file_size(path))
    else:
        yield FileCheck(path, ("no such file or directory",))


def _discover_url(url: str, suffix: str, empty_ok: bool) -> Iterator[Found | FileCheck]:
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
    if not found and not empty_ok:
        yield _empty(url, suffix)


NaturalKey = tuple[tuple[str | int, ...], str]


def natural_key(name: str) -> NaturalKey:
    """Sort key of a name with its digit runs compared as numbers (`a9` before `a10`).

    Examples:
        >>> sorted(["r10.npz", "r9.npz", "r009.npz"], key=natural_key)
        ['r009.npz', 'r9.npz', 'r10.npz']
    """
    parts = _DIGITS.split(name)
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), name


def walk_key(relative: str) -> tuple[tuple[int, NaturalKey], ...]:
    """Sort key of a `/`-separated relative path in folder-walk order.

    A folder's files, then its subfolders, depth first, names compared by `natural_key`:
    the order in which `discover` lists a folder.

    Examples:
        >>> sorted(["b/x.npz", "z.npz", "a/y.npz", "a10.npz", "a9.npz"], key=walk_key)
        ['a9.npz', 'a10.npz', 'z.npz', 'a/y.npz', 'b/x.npz']
    """
    *folders, name = relative.split("/")
    return (*((1, natural_key(folder)) for folder in folders), (0, natural_key(name)))


def count_files(paths: Sequence[str], suffix: str = SUFFIX) -> int | None:
    """How many results `discover(paths)` gives; `None` if a path is a URL (not listed twice).

    Examples:
        >>> count_files(["a.npz", "b.npz"]), count_files(["s3://bucket/runs"])
        (2, None)
    """
    if any(is_url(p) for p in paths):
        return None
    return sum(1 for _ in discover(paths, suffix))
