"""The `.npy` members of a rollout file: writing their headers, reading them strictly.

A header is the magic string, a version (1.0 or 2.0), a length and one line of ASCII: a dict
literal with the keys `descr`, `fortran_order` and `shape`, spelled as NumPy writes it. NumPy
reads it (`numpy.lib.format`: `read_magic`, `read_array_header_1_0` and `_2_0` with
`max_header_size`); before that, the line is matched against the format's spelling (a
regular expression, no evaluation), so that only what the format allows reaches NumPy's
`ast.literal_eval`: no implicit concatenation, escapes, prefixes, other integer spellings,
nesting, or more dimensions than NumPy has, and memory stays a small multiple of the header.
"""

from __future__ import annotations

import functools
import io
import re
import warnings
from collections.abc import Callable

import numpy as np

from trajkit._base.types import AnyArray

__all__ = [
    "MAX_NPY_DIMS",
    "MAX_NPY_HEADER",
    "NPY_KEYS",
    "holds_objects",
    "npy_header",
    "parse_npy_dict",
    "read_npy_header",
]

MAX_NPY_HEADER = 1 << 16  # bytes of `.npy` header (magic, version, length and dict) we accept
MAX_NPY_DIMS = 64  # NumPy's own limit on the number of dimensions (NPY_MAXDIMS, NumPy 2)
NPY_KEYS = ("descr", "fortran_order", "shape")

# The header dict as the format spells it: string keys; a string (no escape, no prefix),
# True, False, an integer or a tuple of integers (decimal, no sign) as values; spaces around
# the tokens; a trailing comma; then spaces and the newline.
_STR = r"""(?:'[^'\\\n]*'|"[^"\\\n]*")"""
_INT = r"(?:0|[1-9][0-9]*)(?![0-9A-Za-z_])"
_TUPLE = rf"\((?: *{_INT} *,)*(?: *{_INT})? *\)"
_ITEM = rf" *{_STR} *: *(?:{_STR}|True|False|{_INT}|{_TUPLE}) *"
_DICT = re.compile(rf" *\{{(?:{_ITEM},)*(?:{_ITEM},?)? *\}} *\n")
_KEY = re.compile(rf"({_STR}) *:")
_DESCR = re.compile(rf"""(?:'descr'|"descr") *: *({_STR})""")


def npy_header(array: AnyArray) -> bytes:
    """The version 1.0 `.npy` header of a C-ordered array, as NumPy writes it.

    Examples:
        >>> header = npy_header(np.zeros((3, 2), np.float32))
        >>> len(header) % 64, header[10:].rstrip()
        (0, b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }")
    """
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header,
        {
            "descr": np.lib.format.dtype_to_descr(array.dtype),
            "fortran_order": False,
            "shape": array.shape,
        },
    )
    return header.getvalue()


def read_npy_header(
    read: Callable[[int], bytes | bytearray], size: int
) -> tuple[bytes, str, bool, tuple[int, ...]]:
    """Read a `.npy` header through `read(n)` from a member of `size` bytes, and parse it.

    Returns:
        The header's bytes (magic to newline), `descr`, `fortran_order` and `shape`.

    Raises:
        ValueError: For a bad magic string, an unsupported version, a header longer than
            65,536 bytes or than the member, a truncated header, or a malformed dict.

    Examples:
        >>> blob = io.BytesIO(npy_header(np.zeros(3, np.uint8)))
        >>> read_npy_header(blob.read, 131)[1:]
        ('|u1', False, (3,))
    """
    start = bytes(read(8))
    try:
        version = np.lib.format.read_magic(io.BytesIO(start))
    except ValueError:
        raise ValueError("not a .npy array (bad magic string)") from None
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f".npy version {version[0]}.{version[1]} is not supported (1.0, 2.0)")
    length_bytes = bytes(read(2 if version == (1, 0) else 4))
    length = int.from_bytes(length_bytes, "little")
    total = 8 + len(length_bytes) + length
    if total > min(size, MAX_NPY_HEADER):
        raise ValueError(f"the .npy header claims {length} bytes, longer than allowed")
    header = start + length_bytes + bytes(read(length))
    if len(header) != total:
        raise ValueError("truncated .npy header")
    try:
        descr, fortran, shape = parse_npy_dict(header[8 + len(length_bytes) :], version)
    except ValueError as exc:
        raise ValueError(f"malformed .npy header: {exc}") from None
    return header, descr, fortran, shape


def parse_npy_dict(
    text: bytes, version: tuple[int, int] = (1, 0)
) -> tuple[str, bool, tuple[int, ...]]:
    r"""Parse a `.npy` header dict as the format specifies it, strictly, with NumPy's reader.

    The text is one line of printable ASCII (no tab, no carriage return) ended by a newline:
    a dict literal with exactly the keys `descr` (a string), `fortran_order` (`True` or
    `False`) and `shape` (a tuple of integers >= 0), each once, in any order, with an
    optional trailing comma, and spaces around the tokens. Strings are single- or
    double-quoted with no escape, no prefix and no implicit concatenation (`'<' 'f4'`);
    integers are decimal, without sign, underscore or leading zero (not `0x4`, `0b10`, `16L`).
    Files of one structure repeat their headers: short ones (the usual, under 256 bytes) are
    remembered.

    Returns:
        `descr` as spelled in the header, `fortran_order` and `shape`.

    Raises:
        ValueError: Naming what is wrong.

    Examples:
        >>> parse_npy_dict(b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }  \n")
        ('<f4', False, (3, 2))
        >>> parse_npy_dict(b"{'descr': '<' 'f4', 'fortran_order': False, 'shape': (3,)}\n")
        Traceback (most recent call last):
        ...
        ValueError: not a dict literal as the format spells it (a string without escapes, True, False or a tuple of integers for each key)
    """  # noqa: E501
    if len(text) <= 256:
        return _parse_npy_cached(text, version)
    return _parse_npy_text(text, version)


def _check_line(text: bytes) -> None:
    """One line of printable ASCII, ended by a newline, of at most `MAX_NPY_DIMS` dimensions."""
    if not text.isascii():
        raise ValueError("the header is not ASCII")
    if not text.endswith(b"\n") or b"\n" in text[:-1]:
        raise ValueError("the header is not one line ended by a newline")
    for column, char in enumerate(text[:-1].decode("ascii")):
        if not " " <= char <= "~":
            raise ValueError(
                f"the header holds the control character {char!r} at column {column} (only "
                "printable ASCII and spaces: no tab, no carriage return)"
            )
    if text.count(b",") > MAX_NPY_DIMS + len(NPY_KEYS):
        raise ValueError(f"a tuple or list of more than {MAX_NPY_DIMS} items")


def _parse_npy_text(text: bytes, version: tuple[int, int]) -> tuple[str, bool, tuple[int, ...]]:
    _check_line(text)
    line = text.decode("ascii")
    if not _DICT.fullmatch(line):
        raise ValueError(
            "not a dict literal as the format spells it (a string without escapes, True, "
            "False or a tuple of integers for each key)"
        )
    keys = [key[1:-1] for key in _KEY.findall(line)]
    if sorted(keys) != sorted(NPY_KEYS):
        raise ValueError(
            f"the header must have the keys {', '.join(NPY_KEYS)} once each, got {', '.join(keys)}"
        )
    descr = _DESCR.search(line)
    if descr is None:  # pragma: no cover - the keys are checked above
        raise ValueError("the header has no descr")
    length = len(text).to_bytes(2 if version == (1, 0) else 4, "little")
    read = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    try:
        with warnings.catch_warnings():  # deprecated dtype aliases ('a4'): refused below
            warnings.simplefilter("ignore")
            shape, fortran, _ = read(io.BytesIO(length + text), max_header_size=MAX_NPY_HEADER)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(str(exc)[:200]) from None
    return descr[1][1:-1], bool(fortran), tuple(int(d) for d in shape)


_parse_npy_cached = functools.lru_cache(maxsize=256)(_parse_npy_text)


def holds_objects(descr: str) -> bool:
    """Whether a `.npy` descr may name an object (pickled) dtype; only to say so when refusing.

    Read from the text: handing NumPy an arbitrary descr can warn (deprecated aliases), and
    a warning filter may make that an exception.

    Examples:
        >>> holds_objects("|O"), holds_objects("<f4")
        (True, False)
    """
    return "O" in descr
