"""Infos as strict UTF-8 JSON: exact round trips, refusals that name `infos[t][b][key]`.

Only values that load back equal to what was saved are accepted: `None`, `bool`, `int`, finite
`float`, `str`, lists, and dicts with string keys, nested; NumPy scalars are stored as the
matching Python value. Tuples (they would load as lists), arrays, NaN, infinities, bytes and
other objects are refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_DEPTH", "infos_from_json", "infos_to_json", "strict_json_loads"]

MAX_DEPTH = 64
"""The deepest nesting of lists and dicts inside one info dict."""


Path = tuple[Any, ...]  # (t, b, key or index, ...): formatted only for a message


def _where(path: Path) -> str:
    t, b, *rest = path
    return f"infos[{t}][{b}]" + "".join(f"[{part!r}]" for part in rest)


def _refuse(where: Path | str, why: str) -> ValueError:
    text = where if isinstance(where, str) else _where(where)
    return ValueError(f"{text} {why}; infos are saved as JSON and must load back equal")


def _convert(value: Any, path: Path) -> Any:
    """Return `value` as plain JSON data, or raise naming its path. Plain types go fast."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # strings are checked for lone surrogates when encoded
    if kind is float:
        if not math.isfinite(value):
            raise _refuse(path, f"is {value}, which JSON cannot store (only finite numbers)")
        return value
    if len(path) - 2 >= MAX_DEPTH:
        raise _refuse(path, f"is nested more than {MAX_DEPTH} levels deep")
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


def _key(key: Any, path: Path) -> str:
    if isinstance(key, str):
        return str(key)
    raise _refuse(path, f"has the key {key!r} ({type(key).__name__}); JSON keys are strings")


def _convert_other(value: Any, path: Path) -> Any:
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
        return int(value)
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


def _find_surrogate(value: Any, where: str) -> str | None:
    """Where the first string that is not valid Unicode is (run only after encoding failed)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_surrogate(key, f"{where} key {key!r}") or _find_surrogate(
                item, f"{where}[{key!r}]"
            )
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _find_surrogate(item, f"{where}[{i}]")
            if found:
                return found
    return None


def infos_to_json(infos: Sequence[Sequence[Mapping[str, Any]]]) -> bytes:
    """Encode T rows of B info dicts as compact UTF-8 JSON, refusing what would not round-trip.

    Args:
        infos: `Rollout.infos`.

    Returns:
        The UTF-8 bytes of a JSON array of T arrays of B objects.

    Raises:
        ValueError: For the first value that JSON cannot store exactly, naming it as
            `infos[t][b]['key']...`.

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
    text = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        where = _find_surrogate(rows, "infos") or "infos"
        raise _refuse(where, "is a str that is not valid Unicode (lone surrogate)") from None


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


def strict_json_loads(data: bytes) -> Any:
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


def infos_from_json(data: bytes, num_steps: int, batch_size: int) -> list[list[dict[str, Any]]]:
    """Decode `infos.json`, checking that it holds T rows of B objects.

    Args:
        data: The member's bytes.
        num_steps: T.
        batch_size: B.

    Returns:
        The infos.

    Raises:
        ValueError: If the bytes are not strict UTF-8 JSON or not T rows of B objects.

    Examples:
        >>> infos_from_json(b'[[{"lives":3},{}]]', 1, 2)
        [[{'lives': 3}, {}]]
        >>> infos_from_json(b'[[{}]]', 2, 1)
        Traceback (most recent call last):
        ...
        ValueError: infos.json holds 1 rows, expected T=2
    """
    try:
        rows = strict_json_loads(data)
    except RecursionError:
        raise ValueError("infos.json is nested too deeply") from None
    if not isinstance(rows, list):
        raise ValueError(f"infos.json must be a JSON array, got {type(rows).__name__}")
    if len(rows) != num_steps:
        raise ValueError(f"infos.json holds {len(rows)} rows, expected T={num_steps}")
    for t, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != batch_size:
            got = f"{len(row)} entries" if isinstance(row, list) else type(row).__name__
            raise ValueError(
                f"infos.json row {t} must be an array of B={batch_size} objects, got {got}"
            )
        for b, item in enumerate(row):
            if not isinstance(item, dict):
                raise ValueError(f"infos[{t}][{b}] in infos.json must be an object")
    return rows
