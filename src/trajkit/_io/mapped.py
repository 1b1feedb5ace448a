"""Which files arrays are memory-mapped from: the inputs of a writer handed rollouts, not paths.

`trajkit.load(path, mmap=True)` gives arrays that are views of a memory map of the file.
A writer given such rollouts (`trajkit.arrow.write_parquet`) must not write over that file:
it would replace the data it is reading. NumPy does not keep the file's name on those views,
so the files are found the way the kernel lists them: on Linux, `/proc/self/maps` gives the
file behind each mapped address range. Elsewhere nothing is found (the output is still
written atomically, so the maps stay valid: see `trajkit._io.atomic`).
"""

from __future__ import annotations

import bisect
import mmap
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["mapped_files"]

_MAPS = "/proc/self/maps"


def mapped_files(arrays: Iterable[Any]) -> list[str]:
    """The files that the memory-mapped ones among `arrays` are views of, without repeats.

    Arrays that are not backed by a memory map (directly or through their `base` chain) are
    skipped without a look at the maps, so that the cost is nil for arrays in memory. The
    names are those the kernel gives (symlinks resolved; a deleted file is left out).

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "data.bin")
        ...     np.arange(4096, dtype=np.uint8).tofile(path)
        ...     view = np.memmap(path, dtype=np.uint8, mode="r")[10:]
        ...     found = mapped_files([view, np.zeros(3)])
        ...     found == [os.path.realpath(path)] or found == []  # [] where there is no /proc
        True
    """
    addresses = [address for array in arrays if (address := _mapped_address(array)) is not None]
    if not addresses:
        return []
    ranges = _file_ranges()
    starts = [start for start, _, _ in ranges]
    found: dict[str, None] = {}
    for address in addresses:
        at = bisect.bisect_right(starts, address) - 1
        if at >= 0 and address < ranges[at][1]:
            found[ranges[at][2]] = None
    return list(found)


def _mapped_address(array: Any) -> int | None:
    """The address of `array`'s first byte, if it is a non-empty view of an `mmap.mmap`."""
    if not isinstance(array, np.ndarray) or array.size == 0:
        return None
    base: Any = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return int(array.__array_interface__["data"][0])
        base = getattr(base, "base", None)
    return None


def _file_ranges() -> list[tuple[int, int, str]]:
    """`(start, end, path)` of every file-backed mapping of this process, sorted by start."""
    ranges: list[tuple[int, int, str]] = []
    try:
        with open(_MAPS, encoding="utf-8", errors="surrogateescape") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue  # anonymous memory, the heap, the stack, [vdso], ...
                path = fields[5]
                if path.endswith(" (deleted)"):
                    continue  # a file that no longer has a name cannot be an output
                low, _, high = fields[0].partition("-")
                ranges.append((int(low, 16), int(high, 16), path))
    except (OSError, ValueError):  # no /proc (macOS, Windows), or a line we cannot read
        return []
    ranges.sort()
    return ranges
