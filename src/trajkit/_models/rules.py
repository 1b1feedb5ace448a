"""The rule table: each field's and model output's dimensions, dtype and value rules.

Every door into trajkit (the constructor, whole-field and per-step assignment, `append`,
`load`, the Arrow/Parquet and Minari importers, `Dataset` and the Gymnasium recorder) checks
values through this module, so a rule is one line in `FIELD_RULES` or `OUTPUT_RULES` and
applies everywhere. Two entry points do the work:

- [`conform`][trajkit._models.rules.conform]: what the constructor stores for a value, converted
  to the rule's dtype (float32, int32, or the value's own real dtype) and checked;
- [`conform_into`][trajkit._models.rules.conform_into]: a value to be stored into an existing
  dtype (a storage row, a Gymnasium space's dtype, a column's recorded dtype), converted only
  where no value changes: no wrap, no overflow to inf, no float-to-int truncation.

Both refuse with a `ValueError` whose message starts with the name given (`rews`,
`model_outs[3]['critic'][1]`, `obses['image']`), then says the rule: `... must be finite`,
`... must hold only 0 and 1`, `... must be integer-valued`, `... must fit in uint8`,
`... beyond float32's range`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import (
    as_float32,
    as_int32,
    as_numeric,
    check_binary,
    check_finite,
    first_true,
    fmt_index,
)

__all__ = [
    "FIELD_RULES",
    "OUTPUT_RULES",
    "Rule",
    "conform",
    "conform_into",
    "lossless",
    "output_rule",
]

DType = Literal["float32", "real", "action"]

_F32 = np.dtype(np.float32)
_F32_MAX = float(np.finfo(np.float32).max)
_F32_EXACT = 1 << 24  # the largest integer magnitude float32 holds with every integer below
_F32_MAX_SQUARED = _F32_MAX * _F32_MAX  # a sum of squares below it: every value finite, in range


@dataclass(frozen=True)
class Rule:
    """The rules of one field or model output.

    Attributes:
        dims: Its dimensions, e.g. `"T+1 B ..."` (see `trajkit._models.dims`).
        dtype: What it is stored as: `"float32"`; `"real"` (any real dtype, kept as given);
            `"action"` (int32 for integer and Discrete actions, float32 for Box actions).
        finite: NaN and ±inf are refused.
        flag: Only 0 and 1 are accepted (bool too).
        nested: It may be a dict/tuple tree of arrays (Gymnasium `Dict` and `Tuple` spaces).
        optional: It may be `None`.
        min_ndim: The fewest dimensions of one array (or leaf) as given.
    """

    dims: str
    dtype: DType
    finite: bool = False
    flag: bool = False
    nested: bool = False
    optional: bool = False
    min_ndim: int = 1

    def passes(self, value: Any, dtype: np.dtype[Any]) -> bool:
        """The rule's fast test: whether `value` surely passes `conform_into(self, dtype, ...)`.

        A constant number of cheap operations; `False` means "run the full check", which
        names the problem (it may still pass). Covers the writes of a collection loop: a
        Python number, or a C-contiguous float64/float32 array, into float32 storage; an
        array of the storage's own dtype.

        Examples:
            >>> f32 = np.dtype(np.float32)
            >>> FIELD_RULES["rews"].passes(0.5, f32), FIELD_RULES["rews"].passes(1e300, f32)
            (True, False)
            >>> FIELD_RULES["dones"].passes(1, f32), FIELD_RULES["dones"].passes(2, f32)
            (True, False)
        """
        if type(value) is float or type(value) is int:
            if self.flag:
                return value == 0 or value == 1
            limit = _F32_MAX if type(value) is float else _F32_EXACT  # ints: stored exactly
            return dtype == _F32 and -limit <= value <= limit
        if type(value) is not np.ndarray or self.flag or not value.flags.c_contiguous:
            return False
        if value.dtype == dtype and (dtype.kind in "iub" or not self.finite):
            return True
        if dtype != _F32 or value.dtype.char not in "fd":
            return False
        flat = value.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow only means "look closer"
            return float(np.dot(flat, flat)) <= _F32_MAX_SQUARED  # (compared as a Python float)

    def describe(self) -> str:
        """The rule in words, as the Validation page lists it.

        Examples:
            >>> FIELD_RULES["dones"].describe()
            'T+1 B; stored as float32; only 0 and 1'
        """
        stored = {
            "float32": "stored as float32",
            "real": "any real dtype, kept",
            "action": "int32 (integer, Discrete) or float32 (Box)",
        }[self.dtype]
        parts = [self.dims, stored]
        if self.finite:
            parts.append("finite")
        if self.flag:
            parts.append("only 0 and 1")
        if self.nested:
            parts.append("may be nested")
        if self.optional:
            parts.append("optional")
        return "; ".join(parts)


FIELD_RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "states": Rule("T+1 B ...", "float32", finite=True, nested=True, min_ndim=2),
        "obses": Rule("T+1 B ...", "real", finite=True, nested=True),
        "rews": Rule("T B", "float32", finite=True),
        "dones": Rule("T+1 B", "float32", flag=True),
        "truncated": Rule("T B", "float32", flag=True, optional=True),
        "final_values": Rule("T B", "float32", finite=True, optional=True),
        "final_obses": Rule("E ...", "real", finite=True, nested=True, optional=True),
    }
)
"""The array fields of a `Rollout` and their rules (`infos` are T rows of B JSON mappings).

`E` is the number of episode ends, the (t, b) with `dones[t+1] == 1`."""

OUTPUT_RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "critic": Rule("T+1 B", "float32", finite=True),
        "log_probs": Rule("T+1 B", "float32", finite=True),
        "actor": Rule("T+1 B A", "float32", finite=True),
        "actions": Rule("T+1 B ...", "action", finite=True),
        "*": Rule("T+1 B ...", "real"),
        "*scalar": Rule("T+1", "real"),
    }
)
"""The model outputs' rules. `*` applies to other keys; `*scalar` to other keys with one value
per step (no B), such as obs-tower2 GAIL's `prob_pi`, stored as `[T+1]`."""


def output_rule(key: str, ndim: int | None = None) -> Rule:
    """The rule of model output `key`; `ndim` (of the stacked array) tells `*scalar` apart.

    Examples:
        >>> output_rule("critic").dims, output_rule("prob_pi", ndim=1).dims
        ('T+1 B', 'T+1')
    """
    rule = OUTPUT_RULES.get(key)
    if rule is not None:
        return rule
    return OUTPUT_RULES["*scalar" if ndim == 1 else "*"]


def conform(
    rule: Rule,
    value: Any,
    name: str,
    *,
    copy: bool = True,
    axes: str = "tb",
    min_ndim: int | None = None,
    discrete: bool = False,
) -> AnyArray:
    """`value` as the constructor stores it under `rule` (one array or leaf), checked.

    Args:
        rule: The field's or output's rule.
        value: An array or nested list.
        name: The name that starts every message (`rews`, `obses['image']`, ...).
        copy: Whether to copy where no conversion is needed.
        axes: One letter per leading axis, to name a position (`(t=3, b=1)`).
        min_ndim: Overrides the rule's `min_ndim` (0 for one step's row of an output).
        discrete: For `actions`: float values are Discrete action indices (next to logits
            of one more dimension) and become int32.

    Returns:
        The array, of the rule's dtype.

    Raises:
        ValueError: Naming `name`, for a value the rule refuses.

    Examples:
        >>> conform(FIELD_RULES["dones"], [[1, 0], [0, 0]], "dones").dtype
        dtype('float32')
        >>> conform(FIELD_RULES["obses"], [[0.0, float("nan")]], "obses")
        Traceback (most recent call last):
        ...
        ValueError: obses must be finite, got nan at (t=0, b=1)
    """
    ndim = rule.min_ndim if min_ndim is None else min_ndim
    if rule.dtype == "float32":
        binary = rule.flag and getattr(value, "dtype", None) != np.bool_
        return as_float32(
            value, name, copy=copy, min_ndim=ndim, finite=rule.finite, binary=binary, axes=axes
        )
    if rule.dtype == "action":
        array = as_numeric(value, name, copy=False, min_ndim=ndim)
        if array.dtype.kind == "b":  # MultiBinary flags given as bool
            return array.astype(np.int32)
        if array.dtype.kind in "iu" or discrete:
            return as_int32(array, name, copy=copy, min_ndim=ndim, axes=axes)
        return as_float32(array, name, copy=copy, min_ndim=ndim, finite=True, axes=axes)
    array = as_numeric(value, name, copy=copy, min_ndim=ndim)
    if rule.finite:
        check_finite(array, name, axes)
    if rule.flag:
        check_binary(array, name)
    return array


def lossless(value: Any, dtype: np.dtype[Any], name: str, *, axes: str = "tb") -> AnyArray:
    """`value` as an array of `dtype`, refused where the conversion would change a value.

    Refused: values beyond the range of an integer `dtype` (they would wrap), floats that
    are not integer-valued or not finite into an integer `dtype` (they would be truncated),
    finite values beyond a float `dtype`'s range (they would become inf), and values other
    than 0 and 1 into bool, integers that a float `dtype` cannot hold exactly. Smaller floats
    into wider ones, and integers into floats that hold them, pass; a wider float into a
    narrower one is rounded to its precision (that is not a change of value; overflow is).

    Examples:
        >>> lossless([3, 250], np.dtype(np.uint8), "obses").tolist()
        [3, 250]
        >>> lossless([3, 300], np.dtype(np.uint8), "obses")
        Traceback (most recent call last):
        ...
        ValueError: obses must fit in uint8 [0, 255], got 300 at (t=1)
        >>> lossless([1.9], np.dtype(np.int64), "actions")
        Traceback (most recent call last):
        ...
        ValueError: actions must be integer-valued, got 1.9 at (t=0)
    """
    dtype = np.dtype(dtype)
    array = as_numeric(value, name, copy=False, min_ndim=0)
    if array.dtype == dtype:
        return array
    kind = dtype.kind
    if kind == "b":
        check_binary(array, name, axes)
        return array.astype(dtype)
    if kind == "f":
        return _into_float(array, dtype, name, axes)
    if kind in "iu":
        return _into_int(array, dtype, name, axes)
    raise ValueError(f"{name} cannot be stored as {dtype}: not a real numeric dtype")


def _into_float(array: AnyArray, dtype: np.dtype[Any], name: str, axes: str) -> AnyArray:
    """`lossless` into a float dtype: no finite value becomes inf, no integer is rounded."""
    if array.dtype.kind == "f" and array.dtype.itemsize > dtype.itemsize:
        with np.errstate(over="ignore"):
            cast = array.astype(dtype)
        over = np.isinf(cast) & np.isfinite(array)
        if over.any():
            pos = first_true(over) if over.ndim else ()
            raise ValueError(
                f"{name} holds {array[pos].item()!r}{_at(pos, axes)}, beyond {dtype}'s "
                f"range (+-{float(np.finfo(dtype).max):.4g}): stored as {dtype} it would "
                "become inf"
            )
        return cast
    cast = array.astype(dtype)
    if array.dtype.kind in "iu" and array.dtype.itemsize * 8 > np.finfo(dtype).nmant + 1:
        with np.errstate(invalid="ignore", over="ignore"):  # (a wrong round trip is refused)
            inexact = cast.astype(array.dtype) != array
        if inexact.any():
            pos = first_true(inexact) if inexact.ndim else ()
            raise ValueError(
                f"{name} must be exactly representable in {dtype}, got "
                f"{array[pos].item()!r}{_at(pos, axes)} (it would be rounded)"
            )
    return cast


def _into_int(array: AnyArray, dtype: np.dtype[Any], name: str, axes: str) -> AnyArray:
    """`lossless` into an integer dtype: floats finite and integer-valued, all in range."""
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array)
        if bad.any():
            pos = first_true(bad) if bad.ndim else ()
            raise ValueError(f"{name} must be finite, got {array[pos].item()}{_at(pos, axes)}")
        bad = array != np.round(array)
        if bad.any():
            pos = first_true(bad) if bad.ndim else ()
            raise ValueError(
                f"{name} must be integer-valued, got {array[pos].item()!r}{_at(pos, axes)}"
            )
    info = np.iinfo(dtype)
    if array.size:
        bad = (array < info.min) | (array > info.max)
        if bad.any():
            pos = first_true(bad) if bad.ndim else ()
            raise ValueError(
                f"{name} must fit in {dtype} [{info.min}, {info.max}], got "
                f"{array[pos].item()!r}{_at(pos, axes)}"
            )
    return array.astype(dtype)


def conform_into(
    rule: Rule, dtype: np.dtype[Any], value: Any, name: str, *, axes: str = "tb"
) -> AnyArray:
    """`value` to be stored into an existing array of `dtype`, under `rule`'s value checks.

    The value is converted only where no value changes (see `lossless`), then checked as
    `rule` says (finite, 0/1). Use it wherever a door writes into storage that already has
    a dtype: a model output's row, a Gymnasium space's dtype, an imported column.

    Examples:
        >>> conform_into(OUTPUT_RULES["critic"], np.dtype(np.float32), [1e300], "critic")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: critic holds 1e+300 at (t=0), beyond float32's range ...
    """
    array = as_numeric(value, name, copy=False, min_ndim=0)
    if rule.finite:
        if array.ndim:
            check_finite(array, name, axes)
        else:
            _check_finite_scalar(array, name)
    converted = lossless(array, dtype, name, axes=axes)
    if rule.flag:
        if converted.ndim:
            check_binary(converted, name, axes)
        else:
            _check_flag_scalar(converted, name)
    return converted


def _at(pos: tuple[int, ...], axes: str) -> str:
    return f" at {fmt_index(pos, axes)}" if pos else ""


def _check_finite_scalar(array: AnyArray, name: str) -> None:
    if array.dtype.kind == "f" and not np.isfinite(array):
        raise ValueError(f"{name} must be finite, got {array.item()}")


def _check_flag_scalar(array: AnyArray, name: str) -> None:
    if array.item() not in (0, 1):
        raise ValueError(f"{name} must hold only 0 and 1, got {array.item()}")
