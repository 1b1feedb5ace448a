"""The memory budget for decoding JSON members, counted on their bytes before they are decoded.

JSON decodes to many times its size in Python objects, and a deflated member can inflate a
thousandfold, so a file's size says nothing of what its `infos.json` costs. `JsonCost` counts,
as the bytes arrive and at C speed, what makes objects (brackets, separators, quotes) and
which keys repeat (`json` shares one `str` per distinct key), and adds up what decoding takes
in CPython: the bytes, their `str` copy, every object and the slots that hold it. The reader
refuses a member as soon as that count passes the budget, never after decoding, and `save`
refuses a rollout whose infos the reader would refuse: this is the one memory rule for JSON.

The costs are CPython's object sizes (64-bit, pymalloc rounding), each the most that its token
can take, so the count bounds the peak; measured in a fresh process (tests/io/test_memory.py)
it is within 1.5 times the peak for infos as environments report them.
"""

from __future__ import annotations

import re

from trajkit._io.stream import IO_CHUNK

__all__ = [
    "JSON_BUDGET_SHARE",
    "MIN_JSON_BUDGET",
    "JsonCost",
    "json_budget",
]

# What each token of the text can cost once decoded, in bytes (CPython 3.11+, 64-bit):
_COST_PER_BRACE = 192  # `{`: a dict (64) and its table of up to 5 entries (128)
_COST_PER_BRACKET = 72  # `[`: a list (56, rounded) and its first slots
_COST_PER_COLON = 48  # `:`: a value (a float or an int, 32) and its share of a grown table
_COST_PER_COMMA = 48  # `,`: a value (32) and its list slot (16 with growth)
_COST_BEFORE_OBJECT = 16  # `:` or `,` before a string, container or literal: a slot alone
_NOT_NUMBERS = (b'"', b"{", b"[", b"t", b"f", b"n")  # strings and containers count themselves;
# `true`, `false` and `null` are shared objects
_COST_PER_QUOTE = 32  # `"`: half a `str` object's header (49 bytes, rounded to 64)
_COST_PER_KEY = 48  # a distinct key: its slot in the decoder's memo of keys
_BYTE_COST_NARROW = 3  # ASCII: the bytes, their `str` copy and the characters of strings
_BYTE_COST_WIDE = 9  # else (or a `\u` escape): a copy and strings of up to 4 bytes a character
_KEY_BYTE_COST = 1  # the bytes of repeated keys make no characters: one byte less each
_BASE_COST = 4096  # the outer value, for a member of no separator

# The most one byte adds to the bound: its characters, and the costliest token it can be.
_MOST_PER_BYTE = _BYTE_COST_WIDE + max(
    _COST_PER_BRACE,
    _COST_PER_BRACKET,
    _COST_PER_COLON + _COST_PER_KEY,
    _COST_PER_COMMA,
    _COST_PER_QUOTE,
)

# A key without escapes: an object member's name, counted to find the keys that repeat.
_BACKSLASH = ord("\\")
_KEY = re.compile(rb'"([^"\\]{0,256})":')

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


def _string_end(data: bytes | bytearray, escaped: bool) -> int:
    """Where a string that `data` starts inside ends, after its closing quote; -1: not here.

    `escaped`: the byte before `data` is a backslash that escapes its first byte.
    """
    at = data.find(b'"', 1 if escaped else 0)
    while at >= 0:
        run = 0  # the backslashes just before the quote
        while run < at and data[at - run - 1] == _BACKSLASH:
            run += 1
        if (run + (escaped and run == at)) % 2 == 0:
            return at + 1
        at = data.find(b'"', at + 1)
    return -1


def _separators(data: bytes | bytearray, separator: bytes, cost: int) -> int:
    """The cost of the separators in `data`: `cost` each, less before what is not a number."""
    before = sum(data.count(separator + opening) for opening in _NOT_NUMBERS)
    return cost * (data.count(separator) - before) + _COST_BEFORE_OBJECT * before


class JsonCost:
    """A bound of the memory that decoding some JSON takes, fed its bytes in pieces, in order.

    Examples:
        >>> cost = JsonCost()
        >>> cost.add(b'[{"lives": 3, "score": 1.5}, {"lives": 2, "score": 0.5}]')
        >>> cost.bound
        5270
        >>> cost.add("[é]".encode())  # not ASCII: every byte counts three times as much
        >>> cost.bound
        5714
    """

    def __init__(self) -> None:
        self._upper = _BASE_COST  # the bound before repeated keys are found
        self._bytes = 0
        self._wide = False
        self._backslash = False  # the last piece ended with a backslash: `\u` may straddle
        self._pending: list[bytes | bytearray] = []  # pieces whose keys are not counted yet
        self._keys: set[bytes] = set()
        self._repeated = 0  # what the keys found to repeat take less than `_upper` counts
        self._in_string = False  # the pieces counted so far end inside a string
        self._escaped = False  # ... and with a backslash that escapes the next byte

    def add(self, piece: bytes | bytearray | memoryview) -> None:
        """Count one more piece of the member's bytes (kept until its keys are counted)."""
        data = bytes(piece) if isinstance(piece, memoryview) else piece
        if not self._wide and (
            not data.isascii() or b"\\u" in data or (self._backslash and data.startswith(b"u"))
        ):
            self._wide = True
            self._upper += (_BYTE_COST_WIDE - _BYTE_COST_NARROW) * self._bytes
        self._backslash = data.endswith(b"\\")
        self._bytes += len(data)
        self._upper += (
            (_BYTE_COST_WIDE if self._wide else _BYTE_COST_NARROW) * len(data)
            + _COST_PER_BRACE * data.count(b"{")
            + _COST_PER_BRACKET * data.count(b"[")
            + _separators(data, b":", _COST_PER_COLON)
            + _separators(data, b",", _COST_PER_COMMA)
            + _COST_PER_QUOTE * data.count(b'"')
            + _COST_PER_KEY * data.count(b":")
        )
        self._pending.append(data)

    def over(self, budget: int) -> bool:
        """Whether the bound passes `budget`; keys are looked for only where it may.

        Examples:
            >>> cost = JsonCost.of(b'[{"lives": 3}, {"lives": 2}]')
            >>> cost.over(4900), cost.over(4800), cost.bound  # "lives" is decoded once
            (False, True, 4887)
        """
        return self._upper > budget and self.bound > budget

    @property
    def bound(self) -> int:
        """The bound so far, in bytes."""
        for data in self._pending:
            self._count_keys(data)
        self._pending.clear()
        return self._upper - self._repeated

    def _count_keys(self, data: bytes | bytearray) -> None:
        """Find the keys that repeat (`json` decodes them once), outside strings."""
        start = _string_end(data, self._escaped) if self._in_string else 0
        rest = data[1:] if self._escaped else data  # its first byte is escaped
        plain = rest.replace(b"\\\\", b"").replace(b'\\"', b"")  # no escaped quote left
        if plain.count(b'"') & 1:
            self._in_string = not self._in_string
        self._escaped = self._in_string and plain.endswith(b"\\")
        if start < 0:
            return
        keys = _KEY.findall(data, start)
        new = set(keys).difference(self._keys)
        self._keys.update(new)
        repeats = len(keys) - len(new)
        self._repeated += (_COST_PER_KEY + 2 * _COST_PER_QUOTE) * repeats + _KEY_BYTE_COST * (
            sum(map(len, keys)) - sum(map(len, new))
        )

    @classmethod
    def of(cls, data: bytes | bytearray) -> JsonCost:
        """The cost of a whole member, counted in the pieces that the reader reads.

        Examples:
            >>> JsonCost.of(b'{"entries":[]}').bound
            4530
        """
        cost = cls()
        for start in range(0, len(data), IO_CHUNK):
            cost.add(data[start : start + IO_CHUNK])
        return cost

    @staticmethod
    def most(size: int) -> int:
        """The greatest bound of any `size` bytes: no member of that size can cost more.

        A reader need not count a member whose size alone keeps it within the budget.

        Examples:
            >>> JsonCost.of(b"{" * 1000).bound <= JsonCost.most(1000)
            True
        """
        return _BASE_COST + _MOST_PER_BYTE * size

    @staticmethod
    def least(size: int) -> int:
        """The least bound of any `size` bytes: what a member of that size costs at best.

        Examples:
            >>> JsonCost.least(1 << 20) <= JsonCost.of(b"[" + b"0," * (1 << 19) + b"]").bound
            True
        """
        return _BASE_COST + (_BYTE_COST_NARROW - _KEY_BYTE_COST) * size
