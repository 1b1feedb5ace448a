"""The `.npy` members of a rollout file: writing their headers, reading them strictly.

A header is the magic string, a version (1.0 or 2.0), a length and one line of ASCII: a dict
literal with the keys `descr`, `fortran_order` and `shape`, spelled as NumPy writes it. The
reader here is a small parser of exactly that spelling (see `parse_npy_dict`); nothing is
evaluated, and memory stays a small multiple of the header's length.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable, Iterator

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
NPY_MAGIC = b"\x93NUMPY"
NPY_KEYS = ("descr", "fortran_order", "shape")

# The tokens of a header as NumPy writes it; anything else is refused where it starts.
_TOKEN = re.compile(
    r"""(?P<space>\ +)
    |(?P<str>'[^'\\]*'|"[^"\\]*")
    |(?P<bytes>[bB](?:'[^'\\]*'|"[^"\\]*"))
    |(?P<escaped>[bB]?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))
    |(?P<int>0(?![0-9A-Za-z_])|[1-9][0-9]*(?![0-9A-Za-z_]))
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>[{}()\[\]:,\-])""",
    re.VERBOSE,
)

_Scalar = str | bytes | int | bool
_Value = _Scalar | tuple[_Scalar, ...] | list[_Scalar]


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
    start = read(8)
    if len(start) < 8 or start[:6] != NPY_MAGIC:
        raise ValueError("not a .npy array (bad magic string)")
    version = (start[6], start[7])
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f".npy version {version[0]}.{version[1]} is not supported (1.0, 2.0)")
    length_bytes = read(2 if version == (1, 0) else 4)
    length = int.from_bytes(length_bytes, "little")
    total = 8 + len(length_bytes) + length
    if total > min(size, MAX_NPY_HEADER):
        raise ValueError(f"the .npy header claims {length} bytes, longer than allowed")
    header = bytes(start + length_bytes + read(length))
    if len(header) != total:
        raise ValueError("truncated .npy header")
    try:
        descr, fortran, shape = parse_npy_dict(header[8 + len(length_bytes) :])
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"malformed .npy header: {exc}") from exc
    return header, descr, fortran, shape


def parse_npy_dict(text: bytes) -> tuple[str, bool, tuple[int, ...]]:
    r"""Parse a `.npy` header dict as the format specifies it, strictly; nothing is evaluated.

    The text is one line of printable ASCII (no tab, no carriage return) ended by a newline:
    a dict literal with exactly the keys `descr` (a string), `fortran_order` (`True` or
    `False`) and `shape` (a tuple of integers >= 0), each once, in any order, with an
    optional trailing comma, and spaces around the tokens. Strings are single- or
    double-quoted with no escape, no prefix and no implicit concatenation (`'<' 'f4'`);
    integers are decimal, without sign, underscore or leading zero (not `0x4`, `0b10`, `16L`).
    Files of one structure repeat their headers: short ones (the usual, under 256 bytes) are
    remembered.

    Raises:
        ValueError: Naming what is wrong and where (the column in the dict text).

    Examples:
        >>> parse_npy_dict(b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }  \n")
        ('<f4', False, (3, 2))
        >>> parse_npy_dict(b"{'descr': '<' 'f4', 'fortran_order': False, 'shape': (3,)}\n")
        Traceback (most recent call last):
        ...
        ValueError: adjacent string literals at column 14 (implicit concatenation is not allowed)
    """
    return _parse_npy_cached(text) if len(text) <= 256 else _parse_npy_text(text)


def _parse_npy_text(text: bytes) -> tuple[str, bool, tuple[int, ...]]:
    if not text.isascii():
        raise ValueError("the header is not ASCII")
    if not text.endswith(b"\n") or b"\n" in text[:-1]:
        raise ValueError("the header is not one line ended by a newline")
    line = text[:-1].decode("ascii")
    for column, char in enumerate(line):
        if not " " <= char <= "~":
            raise ValueError(
                f"the header holds the control character {char!r} at column {column} (only "
                "printable ASCII and spaces: no tab, no carriage return)"
            )
    fields = _Parser(line).dict()
    keys = [key for key, _ in fields]
    if len(keys) != len(set(keys)) or sorted(map(str, keys)) != sorted(NPY_KEYS):
        raise ValueError(
            f"the header must have the keys {', '.join(NPY_KEYS)} once each, got "
            f"{', '.join(map(repr, keys))}"
        )
    values = dict(fields)
    descr, fortran, shape = (values[key] for key in NPY_KEYS)
    if type(descr) is not str:
        raise ValueError("descr must be a string")
    if type(fortran) is not bool:
        raise ValueError("fortran_order must be True or False")
    if not (type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape)):
        raise ValueError("shape must be a tuple of integers >= 0")
    return descr, fortran, tuple(int(d) for d in shape)


_parse_npy_cached = functools.lru_cache(maxsize=256)(_parse_npy_text)


class _Parser:
    """A recursive-descent parser of the dict literal; one token of lookahead, no token list.

    Only the dict holds other values, and only tuples and lists of scalars (no nesting), so
    neither the stack nor memory grows with the text beyond its values (at most
    `MAX_NPY_DIMS` items in a tuple or list).
    """

    def __init__(self, line: str) -> None:
        self._line = line
        self._tokens = self._scan()
        self._kind, self._text, self._column = next(self._tokens)

    def _scan(self) -> Iterator[tuple[str, str, int]]:
        line, pos, previous = self._line, 0, ""
        while pos < len(line):
            match = _TOKEN.match(line, pos)
            if match is None:
                raise ValueError(f"unexpected {line[pos : pos + 12]!r} at column {pos}")
            kind = match.lastgroup or ""
            if kind == "escaped":
                raise ValueError(
                    f"a string with a backslash escape at column {pos} (strings are written "
                    "out, as NumPy writes them)"
                )
            if kind != "space":
                if kind in ("str", "bytes") and previous in ("str", "bytes"):
                    raise ValueError(
                        f"adjacent string literals at column {pos} (implicit concatenation "
                        "is not allowed)"
                    )
                previous = kind
                yield kind, match.group(), pos
            pos = match.end()
        yield "end", "", pos

    def _advance(self) -> tuple[str, str, int]:
        token = self._kind, self._text, self._column
        if self._kind != "end":  # the end stays the end: the scan is over
            self._kind, self._text, self._column = next(self._tokens)
        return token

    def _expect(self, *texts: str) -> str:
        if self._kind != "op" or self._text not in texts:
            found = "the end of the line" if self._kind == "end" else repr(self._text)
            wanted = " or ".join(repr(t) for t in texts)
            raise ValueError(f"expected {wanted} at column {self._column}, found {found}")
        return self._advance()[1]

    def dict(self) -> list[tuple[_Value, _Value]]:
        if (self._kind, self._text) != ("op", "{"):
            raise ValueError("the header is not a dict literal")
        self._advance()
        items: list[tuple[_Value, _Value]] = []
        while not (self._kind == "op" and self._text == "}"):
            key = self._scalar()
            self._expect(":")
            items.append((key, self._value()))
            if self._expect(",", "}") == "}":
                break
        else:
            self._advance()
        if self._kind != "end":
            raise ValueError(f"unexpected {self._text!r} at column {self._column} after the dict")
        return items

    def _value(self) -> _Value:
        if self._kind == "op" and self._text in ("(", "["):
            close = ")" if self._advance()[1] == "(" else "]"
            items: list[_Scalar] = []
            comma = False
            while not (self._kind == "op" and self._text == close):
                if len(items) == MAX_NPY_DIMS:
                    raise ValueError(f"a tuple or list of more than {MAX_NPY_DIMS} items")
                items.append(self._scalar())
                comma = self._expect(",", close) == ","
                if not comma:
                    break
            else:
                self._advance()
            if close == "]":
                return items
            if len(items) == 1 and not comma:  # `(16)` is the integer 16, not a tuple
                return items[0]
            return tuple(items)
        return self._scalar()

    def _scalar(self) -> _Scalar:
        kind, text, column = self._advance()
        if kind == "str":
            return text[1:-1]
        if kind == "bytes":
            return text[2:-1].encode("ascii")
        if kind == "int":
            return int(text)
        if kind == "name" and text in ("True", "False"):
            return text == "True"
        if (kind, text) == ("op", "-") and self._kind == "int":
            return -int(self._advance()[1])
        found = "the end of the line" if kind == "end" else repr(text)
        raise ValueError(f"unexpected {found} at column {column}")


def holds_objects(descr: str) -> bool:
    """Whether a `.npy` descr may name an object (pickled) dtype; only to say so when refusing.

    Read from the text: handing NumPy an arbitrary descr can warn (deprecated aliases), and
    a warning filter may make that an exception.

    Examples:
        >>> holds_objects("|O"), holds_objects("<f4")
        (True, False)
    """
    return "O" in descr
