"""Infos as strict UTF-8 JSON: exact round trips, refusals that name `infos[t][b][key]`.

Only values that load back equal to what was saved are accepted: `None`, `bool`, `int` (at
most 4,300 digits), finite `float`, `str` (valid Unicode), lists, and dicts with string keys,
nested at most 64 levels; NumPy scalars are stored as the matching Python value. Tuples (they
would load as lists), arrays, NaN, infinities, bytes and other objects are refused.

The writer and the reader share every rule: `infos_to_json` refuses what `infos_from_json`
would refuse, and the reader refuses what the writer would, so `save(load(f))` works for every
file that loads. Reading is bounded: the memory that decoding `infos.json` takes is counted on
its bytes before it is decoded (`jsonbudget`, the one memory rule for JSON, which the reader
and `save` apply), its nesting is checked on the bytes too (`check_infos_json`), and infos
that are all empty dicts are built without decoding.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "check_infos_json",
    "infos_from_json",
    "info_entries",
    "infos_to_json",
    "sparse_infos_from_json",
    "sparse_infos_to_json",
    "strict_json_loads",
]

MAX_DEPTH = 64
"""The deepest nesting of lists and dicts inside one info dict."""

MAX_INT_DIGITS = 4300
"""The most digits an integer in infos may have (Python's default `int_max_str_digits`)."""

_INT_BOUND = 10**MAX_INT_DIGITS  # an int has more than MAX_INT_DIGITS digits iff |int| >= this
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # how a surrogate gets into JSON text
_QUOTE = ord('"')
_NOT_STRUCTURAL = bytes(c for c in range(256) if c not in b'"[]{}')

InfoPath = tuple[Any, ...]  # (t, b, key or index, ...): formatted only for a message


def _where(path: InfoPath) -> str:
    t, b, *rest = path
    return f"infos[{t}][{b}]" + "".join(f"[{part!r}]" for part in rest)


def _refuse(where: InfoPath | str, why: str) -> ValueError:
    text = where if isinstance(where, str) else _where(where)
    return ValueError(f"{text} {why}; infos are saved as JSON and must load back equal")


_TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep"
_TOO_LONG = f"is an integer of more than {MAX_INT_DIGITS} digits, more than JSON readers accept"
_SURROGATE = "is a str that is not valid Unicode (lone surrogate)"


def _convert(value: Any, path: InfoPath) -> Any:
    """Return `value` as plain JSON data, or raise naming its path. Plain types go fast."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # strings are checked for lone surrogates and ints for length when encoded
    if kind is float:
        if not math.isfinite(value):
            raise _refuse(path, f"is {value}, which JSON cannot store (only finite numbers)")
        return value
    if len(path) - 2 >= MAX_DEPTH:
        raise _refuse(path, _TOO_DEEP)
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                key = _key(key, path)
            out[key] = _convert(item, (*path, key))
        return out
    if kind is list:
        return [_convert(item, (*path, i)) for i, item in enumerate(value)]
    return _convert_other(value, path)


def _key(key: Any, path: InfoPath) -> str:
    if isinstance(key, str):
        return str(key)
    raise _refuse(path, f"has the key {key!r} ({type(key).__name__}); JSON keys are strings")


def _convert_other(value: Any, path: InfoPath) -> Any:
    """Subclasses of the plain types, NumPy scalars, other mappings; refusals."""
    if isinstance(value, np.generic):
        if not isinstance(value, np.bool_ | np.integer | np.floating | np.str_):
            raise _refuse(path, f"is a numpy.{type(value).__name__}, which JSON cannot store")
        value = value.item()
        if type(value) not in (bool, int, float, str):  # e.g. longdouble stays a NumPy scalar
            raise _refuse(path, f"is a numpy.{type(value).__name__}, which JSON cannot store")
        return _convert(value, path)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _convert(int(value), path)
    if isinstance(value, float):
        return _convert(float(value), path)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return _convert(dict(value), path)
    if isinstance(value, list):
        return _convert(list(value), path)
    if isinstance(value, tuple):
        raise _refuse(path, "is a tuple, which would load as a list (use a list)")
    if isinstance(value, np.ndarray):
        raise _refuse(
            path,
            f"is a numpy array (shape {value.shape}, dtype {value.dtype}), which JSON cannot "
            "store (use .tolist(), or put per-step arrays in model_outs)",
        )
    raise _refuse(path, f"is a {type(value).__module__}.{type(value).__qualname__}")


def _first(rows: Sequence[Sequence[Any]], flagged: Callable[[Any], bool]) -> str | None:
    """Where the first value or key `flagged` is, depth-first: `infos[t][b]['key']...`.

    Run only once a cheaper check has found a possible problem, to name it. It descends at
    most `MAX_DEPTH` levels (the nesting is checked before).
    """

    def walk(value: Any, path: InfoPath) -> str | None:
        if flagged(value):
            return _where(path)
        if len(path) - 2 > MAX_DEPTH:
            return None
        keyed = type(value) is dict
        for key, item in _children(value):
            if keyed and flagged(key):
                return f"{_where(path)} key {key!r}"
            found = walk(item, (*path, key))
            if found:
                return found
        return None

    for t, row in enumerate(rows):
        for b, item in enumerate(row):
            found = walk(item, (t, b))
            if found:
                return found
    return None


def _children(value: Any) -> Iterable[tuple[str | int, Any]]:
    """A dict's `(key, value)` pairs, a list's `(index, item)` pairs; nothing for other values."""
    if type(value) is dict:
        return value.items()
    if type(value) is list:
        return enumerate(value)
    return ()


def _lone_surrogate(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _overlong(value: Any) -> bool:
    return isinstance(value, _Overlong) or (
        type(value) is int and not -_INT_BOUND < value < _INT_BOUND
    )


class _Overlong(int):
    """An integer literal too long for Python to parse here: stands in for it, to name it."""


def _parse_int_tolerantly(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return _Overlong(0)


def _nesting_depth(data: bytes | bytearray) -> int:
    """The deepest nesting of `{` and `[` outside strings in JSON text, at C and NumPy speed.

    Escaped backslashes, then escaped quotes, are dropped (left to right, as a JSON parser
    reads them); then every byte but quotes and brackets, and every two adjacent quotes (this
    keeps the parity of the quotes before each bracket); then a bracket is outside the strings
    when an even number of quotes precede it. No Python loop per byte.
    """
    if b"\\" in data:
        data = bytes(data).replace(b"\\\\", b"").replace(b'\\"', b"")
    compact = data.translate(None, _NOT_STRUCTURAL).replace(b'""', b"")
    marks = np.frombuffer(compact, np.uint8)
    if not marks.size:
        return 0
    if b'"' not in compact:  # brackets only
        return max(0, int(np.cumsum(1 - (marks & 4).astype(np.int32) // 2).max()))
    quote = marks == _QUOTE
    outside = (np.cumsum(quote) & 1) == 0  # an opening quote counts as inside
    steps = np.where(outside & ~quote, 1 - (marks & 4).astype(np.int32) // 2, 0)  # `[{` +1
    return max(0, int(np.cumsum(steps).max()))


def check_infos_json(data: bytes | bytearray, num_steps: int, batch_size: int) -> None:
    """The rule on the bytes of `infos.json` that the writer and the reader share.

    Lists and dicts are nested at most `MAX_DEPTH` levels inside an info dict. This is checked
    on the bytes, before anything is decoded (and only where there are that many `{` and `[`
    besides the T * B info objects and the T + 1 arrays around them). The memory that decoding
    takes is bounded by the JSON budget (`jsonbudget`), not here.

    Args:
        data: The UTF-8 JSON text.
        num_steps: T.
        batch_size: B.

    Raises:
        ValueError: If the text nests too deeply.

    Examples:
        >>> check_infos_json(b'[[{"a":[1,2]},{}]]', 1, 2)
        >>> check_infos_json(b'[[{"a":' + b"[" * 70 + b"]" * 70 + b"}]]", 1, 1)
        Traceback (most recent call last):
        ...
        ValueError: infos.json nests lists and dicts more than 64 levels deep
    """
    _check_depth(data, num_steps * batch_size + num_steps + 1, levels=2)


def _check_depth(data: bytes | bytearray, structural: int, levels: int) -> int:
    """Refuse info dicts (`levels` deep) nested more than `MAX_DEPTH` levels.

    Returns the count of `{` and `[` besides the `structural` ones.
    """
    nested = data.count(b"{") + data.count(b"[") - structural
    if nested >= MAX_DEPTH and _nesting_depth(data) > MAX_DEPTH + levels:
        raise ValueError(f"infos.json nests lists and dicts more than {MAX_DEPTH} levels deep")
    return nested


def infos_to_json(infos: Sequence[Sequence[Mapping[str, Any]]]) -> bytes:
    """Encode T rows of B info dicts as compact UTF-8 JSON, refusing what would not round-trip.

    Args:
        infos: `Rollout.infos`.

    Returns:
        The UTF-8 bytes of a JSON array of T arrays of B objects.

    Raises:
        ValueError: For the first value that JSON cannot store exactly, naming it as
            `infos[t][b]['key']...`, or infos nested more deeply than `check_infos_json` allows.

    Examples:
        >>> import numpy as np
        >>> infos_to_json([[{"lives": np.int64(3)}, {}]])
        b'[[{"lives":3},{}]]'
        >>> infos_to_json([[{"pos": np.zeros(2)}]])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: infos[0][0]['pos'] is a numpy array (shape (2,), dtype float64), ...
    """
    rows = [[_convert(item, (t, b)) for b, item in enumerate(row)] for t, row in enumerate(infos)]
    try:
        text = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # an int over this process's sys.set_int_max_str_digits() limit
        raise _refuse(_first(rows, _unprintable) or "infos", _TOO_LONG) from None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(_first(rows, _lone_surrogate) or "infos", _SURROGATE) from None
    if not _ints_bounded_by_python():  # json.dumps took ints of any length: check them
        overlong = _first(rows, _overlong)
        if overlong:
            raise _refuse(overlong, _TOO_LONG)
    check_infos_json(data, len(rows), len(rows[0]) if rows else 0)
    return data


def _ints_bounded_by_python() -> bool:
    """Whether this process's JSON module refuses ints of more than `MAX_INT_DIGITS` digits."""
    return 0 < sys.get_int_max_str_digits() <= MAX_INT_DIGITS


def _unprintable(value: Any) -> bool:
    if type(value) is not int:
        return False
    try:
        str(value)
    except ValueError:
        return True
    return False


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} overflows a float64")
    return value


def strict_json_loads(data: bytes | bytearray) -> Any:
    """Parse UTF-8 JSON strictly: no NaN or infinities, no duplicate keys, no BOM.

    Args:
        data: UTF-8 bytes.

    Returns:
        The parsed value.

    Raises:
        ValueError: On any departure (including `UnicodeDecodeError` and `JSONDecodeError`).
        RecursionError: On absurdly deep nesting.

    Examples:
        >>> strict_json_loads(b'{"a": 1}')
        {'a': 1}
        >>> strict_json_loads(b'{"a": NaN}')
        Traceback (most recent call last):
        ...
        ValueError: NaN is not valid JSON
    """
    return json.loads(
        data.decode("utf-8"),
        object_pairs_hook=_unique_object,
        parse_constant=_no_constant,
        parse_float=_finite_float,
    )


def _all_empty(num_steps: int, batch_size: int) -> bytes:
    """The bytes `infos_to_json` writes for T rows of B empty dicts."""
    row = b"[" + b",".join([b"{}"] * batch_size) + b"]"
    return b"[" + b",".join([row] * num_steps) + b"]"


@overload
def infos_from_json(
    data: bytes | bytearray, num_steps: int, batch_size: int
) -> list[list[dict[str, Any]]]: ...
@overload
def infos_from_json(
    data: bytes | bytearray, num_steps: int, batch_size: int, *, none_if_empty: bool
) -> list[list[dict[str, Any]]] | None: ...
def infos_from_json(
    data: bytes | bytearray, num_steps: int, batch_size: int, *, none_if_empty: bool = False
) -> list[list[dict[str, Any]]] | None:
    """Decode `infos.json`, checking that it holds T rows of B objects the writer would accept.

    The bytes are checked (`check_infos_json`) before they are decoded; infos that are all
    empty dicts are built directly.

    Args:
        data: The member's bytes.
        num_steps: T.
        batch_size: B.
        none_if_empty: Return `None` instead of T rows of B empty dicts when every info is
            empty (`Rollout(infos=None)` then makes them only if they are read).

    Returns:
        The infos.

    Raises:
        ValueError: If the bytes are not strict UTF-8 JSON, not T rows of B objects, or hold
            anything `infos_to_json` refuses (the message names it as `infos[t][b]...`).

    Examples:
        >>> infos_from_json(b'[[{"lives":3},{}]]', 1, 2)
        [[{'lives': 3}, {}]]
        >>> infos_from_json(b'[[{}]]', 2, 1)
        Traceback (most recent call last):
        ...
        ValueError: infos.json holds 1 rows, expected T=2
    """
    nested = _check_depth(data, num_steps * batch_size + num_steps + 1, levels=2)
    empty_size = 3 * num_steps * batch_size + 2 * num_steps + 1 if num_steps else 2
    if len(data) == empty_size and data == _all_empty(num_steps, batch_size):
        if none_if_empty:
            return None
        return [[{} for _ in range(batch_size)] for _ in range(num_steps)]
    flat = nested <= 0  # no list or dict inside the info dicts
    rows: list[list[dict[str, Any]]] = _decode(data, flat)
    _check_rows(rows, num_steps, batch_size)
    if flat and data.count(b":") != sum(map(len, itertools.chain.from_iterable(rows))):
        strict_json_loads(data)  # raises for a duplicate key (else colons inside strings)
    _check_decoded(data, rows)
    return rows


def _decode(data: bytes | bytearray, flat: bool) -> Any:
    """The JSON value of `data`: by the C parser where the infos hold no list or dict."""
    try:
        if flat:  # dicts built by the C parser; duplicate keys are found by counting after
            return json.loads(
                data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float
            )
        return strict_json_loads(data)
    except RecursionError:
        raise ValueError("infos.json is nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):  # Python's int_max_str_digits
            raise
        rows = json.loads(data.decode("utf-8"), parse_int=_parse_int_tolerantly)
        raise _refuse(_first(_rows(rows), _overlong) or "infos", _TOO_LONG) from None


def _check_rows(rows: Any, num_steps: int, batch_size: int) -> None:
    """`rows` is T rows (lists) of B objects (dicts)."""
    if not isinstance(rows, list):
        raise ValueError(f"infos.json must be a JSON array, got {type(rows).__name__}")
    if len(rows) != num_steps:
        raise ValueError(f"infos.json holds {len(rows)} rows, expected T={num_steps}")
    for t, row in enumerate(rows):
        if type(row) is list and len(row) == batch_size and set(map(type, row)) <= {dict}:
            continue  # the common case, checked at C speed
        if not isinstance(row, list) or len(row) != batch_size:
            got = f"{len(row)} entries" if isinstance(row, list) else type(row).__name__
            raise ValueError(
                f"infos.json row {t} must be an array of B={batch_size} objects, got {got}"
            )
        for b, item in enumerate(row):
            if not isinstance(item, dict):
                raise ValueError(f"infos[{t}][{b}] in infos.json must be an object")


def _rows(value: Any) -> list[list[Any]]:
    """`value` as rows to search, whatever its shape (it failed to decode as infos)."""
    if isinstance(value, list) and all(isinstance(row, list) for row in value):
        return value
    return [[value]]


def _check_decoded(data: bytes | bytearray, rows: list[list[dict[str, Any]]]) -> None:
    """Refuse what `infos_to_json` refuses and the JSON parser let through, naming it."""
    if b"\\u" in data and _SURROGATE_ESCAPE.search(data):  # a surrogate: is it in a pair?
        where = _first(rows, _lone_surrogate)
        if where:
            raise _refuse(where, _SURROGATE)
    if not _ints_bounded_by_python():  # the parser took ints of any length
        where = _first(rows, _overlong)
        if where:
            raise _refuse(where, _TOO_LONG)


# ------------------------------------------------------------------ sparse infos (version 3)

_MIN_ENTRY_BYTES = 12  # `[0,0,{"":0}],`: the shortest entry of a non-empty info


def info_entries(infos: Sequence[Sequence[Mapping[str, Any]]]) -> list[list[Any]]:
    """`[t, b, info]` for every non-empty info, converted as `save` stores it.

    NumPy scalars become Python values; what JSON cannot store exactly is refused with a
    `ValueError` naming it as `infos[t][b]['key']...`.

    Examples:
        >>> import numpy as np
        >>> info_entries([[{}, {"lives": np.int64(2)}]])
        [[0, 1, {'lives': 2}]]
    """
    return [
        [t, b, _convert(item, (t, b))]
        for t, row in enumerate(infos)
        for b, item in enumerate(row)
        if item
    ]


def sparse_infos_to_json(infos: Sequence[Sequence[Mapping[str, Any]]] | None) -> bytes:
    """Encode infos in format version 3: only the non-empty ones, as `[t, b, info]` entries.

    `{"entries": [[t, b, {...}], ...]}`, in (t, b) order. The cost follows what the infos
    hold, not T * B: rollouts without infos write `{"entries":[]}`.

    Args:
        infos: `Rollout.infos`, or `None` for no infos.

    Returns:
        The UTF-8 bytes.

    Raises:
        ValueError: For what `infos_to_json` refuses, with the same messages.

    Examples:
        >>> sparse_infos_to_json([[{}, {"lives": 2}], [{}, {}]])
        b'{"entries":[[0,1,{"lives":2}]]}'
        >>> sparse_infos_to_json(None)
        b'{"entries":[]}'
    """
    if infos is None:
        return b'{"entries":[]}'
    entries = info_entries(infos)
    try:
        text = json.dumps(
            {"entries": entries}, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
        data = text.encode("utf-8")
    except ValueError:  # an overlong int or a lone surrogate: let the dense encoder name it
        infos_to_json(infos)
        raise  # pragma: no cover - infos_to_json refuses the same values
    if not _ints_bounded_by_python():
        infos_to_json(infos)  # names an int of more than MAX_INT_DIGITS digits
    _sparse_depth(data, len(entries))  # the rule the reader applies, on the bytes
    return data


def _sparse_depth(data: bytes | bytearray, entries: int) -> int:
    """The nesting rule of the sparse form, for a given number of entries."""
    return _check_depth(data, 2 + 2 * entries, levels=3)


def sparse_infos_from_json(
    data: bytes | bytearray, num_steps: int, batch_size: int
) -> list[list[dict[str, Any]]] | None:
    """Decode a version 3 `infos.json`, refusing anything `sparse_infos_to_json` would not write.

    Entries are `[t, b, info]` with integers `0 <= t < T`, `0 <= b < B`, a non-empty object, in
    strictly increasing (t, b) order. The nesting rule of `check_infos_json` holds for the
    entries there are; before decoding it is checked counting at most one entry per 12 bytes.

    Args:
        data: The member's bytes.
        num_steps: T.
        batch_size: B.

    Returns:
        `None` when there are no entries (no infos), else T rows of B dicts.

    Raises:
        ValueError: Naming what is wrong.

    Examples:
        >>> sparse_infos_from_json(b'{"entries":[[1,0,{"a":1}]]}', 2, 2)
        [[{}, {}], [{'a': 1}, {}]]
        >>> sparse_infos_from_json(b'{"entries":[]}', 2, 2) is None
        True
        >>> sparse_infos_from_json(b'{"entries":[[2,0,{"a":1}]]}', 2, 2)
        Traceback (most recent call last):
        ...
        ValueError: infos.json entry 0 is for step 2 of env 0, outside T=2, B=2
    """
    # Before decoding, at most one entry per 12 bytes; after, the writer's exact rule.
    _sparse_depth(data, min(num_steps * batch_size, len(data) // _MIN_ENTRY_BYTES))
    try:
        value = strict_json_loads(data)
    except RecursionError:
        raise ValueError("infos.json is nested too deeply") from None
    if (
        not isinstance(value, dict)
        or list(value) != ["entries"]
        or not isinstance(value["entries"], list)
    ):
        raise ValueError('infos.json must be an object {"entries": [[t, b, info], ...]}')
    entries = value["entries"]
    _sparse_depth(data, len(entries))  # what save would refuse, load refuses
    if not entries:
        return None
    rows: list[list[dict[str, Any]]] = [[{} for _ in range(batch_size)] for _ in range(num_steps)]
    last = (-1, -1)
    for i, entry in enumerate(entries):
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and all(type(x) is int for x in entry[:2])
            and isinstance(entry[2], dict)
        ):
            raise ValueError(f"infos.json entry {i} must be [t, b, info] (two integers, an object)")
        t, b, info = entry
        if not (0 <= t < num_steps and 0 <= b < batch_size):
            raise ValueError(
                f"infos.json entry {i} is for step {t} of env {b}, outside T={num_steps}, "
                f"B={batch_size}"
            )
        if (t, b) <= last:
            raise ValueError(
                f"infos.json entry {i} (step {t}, env {b}) is out of order or repeated: "
                "entries are in strictly increasing (t, b) order"
            )
        if not info:
            raise ValueError(f"infos.json entry {i} holds an empty info (empty ones are left out)")
        last = (t, b)
        rows[t][b] = info
    _check_decoded(data, rows)
    return rows
