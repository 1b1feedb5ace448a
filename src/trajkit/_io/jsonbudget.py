"""A memory budget for decoding JSON members, counted on their bytes before they are decoded.

JSON decodes to many times its size in Python objects (a float is 24 bytes and a pointer, an
entry of a dict with its key around 200 bytes), and a deflated member can inflate a
thousandfold, so a file's size says nothing of what its `infos.json` costs. The reader counts,
as the bytes arrive and at C speed, the separators and brackets that make values and the bytes
that make strings, adds up an upper bound of the memory that decoding takes (the bytes, their
`str` copy and the objects), and refuses the member as soon as that bound passes the budget:
never after decoding, and holding no more than the bytes read so far.
"""

from __future__ import annotations

__all__ = [
    "COST_PER_BRACKET",
    "COST_PER_COLON",
    "COST_PER_COMMA",
    "JSON_BUDGET_SHARE",
    "MIN_JSON_BUDGET",
    "JsonCost",
    "json_budget",
]

COST_PER_COMMA = 96  # a value in a list: the object (an int or float), its pointer, growth
COST_PER_COLON = 320  # a dict entry: its key str, value, slot, and json's key memo slot
COST_PER_BRACKET = 256  # a list or dict, empty or small
_BYTE_COST_NARROW = 5  # ASCII, no \\u escape: the bytes, their str copy, strings, checks
_BYTE_COST_WIDE = 12  # else: a str copy and strings of up to 4 bytes a character
_BASE_COST = 4096  # the outer value, for a member of no separator

MIN_JSON_BUDGET = 64 << 20
"""The budget is never below this: 64 MiB."""

JSON_BUDGET_SHARE = 8
"""The budget is `max_bytes` divided by this (512 MiB for the default 4 GiB)."""


def json_budget(max_bytes: int | None) -> int | None:
    """The memory a JSON member may take decoded, for a reader's `max_bytes`; `None`: no limit.

    Examples:
        >>> json_budget(4 << 30) >> 20, json_budget(1 << 20) >> 20, json_budget(None)
        (512, 64, None)
    """
    if max_bytes is None:
        return None
    return max(max_bytes // JSON_BUDGET_SHARE, MIN_JSON_BUDGET)


class JsonCost:
    """An upper bound of the memory that decoding some JSON takes, fed its bytes in pieces.

    Examples:
        >>> cost = JsonCost()
        >>> cost.add(b'[[{"lives": 3}, {}]]')
        >>> cost.bound
        5636
        >>> cost.add("[é]".encode())  # not ASCII: the bytes count three times as much
        >>> cost.bound > 5636 + 5 * 5
        True
    """

    def __init__(self) -> None:
        self._separators = 0
        self._bytes = 0
        self._wide = False
        self._backslash = False  # the last piece ended with a backslash: `\u` may straddle

    def add(self, piece: bytes | bytearray | memoryview) -> None:
        """Count one more piece of the member's bytes, in order."""
        data = bytes(piece) if isinstance(piece, memoryview) else piece
        if not self._wide and (
            not data.isascii() or b"\\u" in data or (self._backslash and data.startswith(b"u"))
        ):
            self._wide = True
        self._backslash = data.endswith(b"\\")
        self._bytes += len(data)
        self._separators += (
            COST_PER_COMMA * data.count(b",")
            + COST_PER_COLON * data.count(b":")
            + COST_PER_BRACKET * (data.count(b"[") + data.count(b"{"))
        )

    @staticmethod
    def least(size: int) -> int:
        """The least bound of any `size` bytes: what a member of that size costs at best."""
        return _BASE_COST + _BYTE_COST_NARROW * size

    @property
    def bound(self) -> int:
        """The bound so far, in bytes."""
        per_byte = _BYTE_COST_WIDE if self._wide else _BYTE_COST_NARROW
        return _BASE_COST + self._separators + per_byte * self._bytes
