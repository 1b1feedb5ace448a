"""Per-field array coercion and value checks, raising `ValueError` with field-naming messages.

These are the rules' implementations; the rule table (`trajkit._models.rules`) says which
applies to which field, and every door calls them through it. Each check is a constant number
of vectorised NumPy operations; positions are only searched for once a check has failed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, Float32Array, Int32Array
from trajkit._core import fused
from trajkit._models.checked import CheckedArray, plain_view

__all__ = [
    "arrays_equal",
    "as_float32",
    "as_int32",
    "as_numeric",
    "at",
    "check_binary",
    "check_finite",
    "check_overflow",
    "first_true",
    "fmt_index",
    "into_int",
]

_KIND_NAMES = {
    "b": "bool",
    "i": "integer",
    "u": "unsigned integer",
    "f": "float",
    "c": "complex",
    "O": "object",
    "U": "string",
    "S": "bytes",
    "V": "void/structured",
    "M": "datetime",
    "m": "timedelta",
}


def kind_name(dtype: np.dtype[Any]) -> str:
    """A readable name for a dtype's kind (`float`, `integer`, `string`, ...)."""
    return _KIND_NAMES.get(dtype.kind, dtype.kind)


def first_true(mask: AnyArray) -> tuple[int, ...]:
    """The position of the first True of a boolean array, in time-major (C) order."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def fmt_index(index: tuple[Any, ...], names: str = "tb") -> str:
    """Format a position as `(t=3, b=1)`, naming as many axes as `names` has letters."""
    parts = [f"{names[i]}={int(v)}" if i < len(names) else str(int(v)) for i, v in enumerate(index)]
    return "(" + ", ".join(parts) + ")"


def at(pos: tuple[int, ...], axes: str = "tb") -> str:
    """` at (t=3, b=1)` for a message, or nothing for the position `()` of a 0-d array."""
    return f" at {fmt_index(pos, axes)}" if pos else ""


def as_numeric(
    value: Any, name: str, *, copy: bool, allow_bool: bool = True, min_ndim: int = 1
) -> AnyArray:
    """Convert `value` to a real-valued NumPy array, refusing anything that is not one.

    Refuses ragged nested lists, strings, objects, complex numbers and arrays with fewer than
    `min_ndim` dimensions (scalars in particular), each with a message naming `name`. A plain
    CPU PyTorch tensor is converted like an array; one that requires grad, lives on a GPU or
    has a dtype NumPy lacks is refused with a message saying what to pass instead.

    Args:
        value: An array, nested list or CPU tensor.
        name: The field name to put in messages.
        copy: Whether to copy when `value` is already an array of a suitable dtype.
        allow_bool: Whether a boolean array is acceptable.
        min_ndim: The fewest dimensions accepted.

    Returns:
        The array (a copy when `copy`).

    Raises:
        ValueError: If `value` is not such an array.
    """
    kinds = "biuf" if allow_bool else "iuf"
    if type(value) is np.ndarray and value.dtype.kind in kinds and value.ndim >= min_ndim:
        # The common case, with nothing to refuse.
        return value.copy() if copy else value
    if isinstance(value, CheckedArray):  # a rollout's array: its memory, writable where it is
        plain = plain_view(value)
        if plain.dtype.kind in kinds and plain.ndim >= min_ndim:
            return plain.copy() if copy else plain
        value = plain
    if isinstance(value, str | bytes):
        raise ValueError(f"{name} must be an array, got a {type(value).__name__} {value!r:.40}")
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(
            f"{name} is a masked array (numpy.ma), whose mask a rollout cannot keep: pass "
            "x.filled(fill_value) to choose what the masked entries hold, or x.data"
        )
    if _is_tensor(value):
        array = _from_tensor(value, name)
        return as_numeric(array, name, copy=copy, allow_bool=allow_bool, min_ndim=min_ndim)
    try:
        array = np.array(value, copy=True) if copy else np.asarray(value)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(
            f"{name} must be a rectangular numeric array (ragged nested lists are refused): {exc}"
        ) from None
    if array.dtype.kind not in kinds:
        hint = " (ragged nested lists become object arrays)" if array.dtype.kind == "O" else ""
        raise ValueError(
            f"{name} must hold real numbers, got dtype {array.dtype} "
            f"({kind_name(array.dtype)}){hint}"
        )
    if array.ndim < min_ndim:
        got = "a scalar" if array.ndim == 0 else f"{array.ndim} dimension(s)"
        raise ValueError(
            f"{name} must be an array with at least {min_ndim} dimension(s), "
            f"got {got} (shape {array.shape})"
        )
    return array


def _is_tensor(value: Any) -> bool:
    """Whether `value` is a PyTorch tensor, by duck typing (torch is never imported here)."""
    return type(value).__module__.startswith("torch") and hasattr(value, "requires_grad")


def _from_tensor(value: Any, name: str) -> AnyArray:
    """A CPU tensor's values as a NumPy array (sharing its memory), or a `ValueError`.

    NumPy converts a plain CPU tensor through its `__array__`; a tensor that requires grad, one
    on another device (a GPU) or one of a dtype NumPy lacks (bfloat16) makes torch raise its own
    error, which names no field: these are refused here with what to pass instead.
    """
    if value.requires_grad:
        raise ValueError(
            f"{name} is a torch tensor that requires grad: pass tensor.detach().cpu().numpy()"
        )
    device = getattr(value, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise ValueError(
            f"{name} is a torch tensor on device {device}, which NumPy cannot read: pass "
            "tensor.detach().cpu().numpy()"
        )
    try:
        return np.asarray(value)  # not np.array(copy=True): torch's __array__ takes no `copy`
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(
            f"{name} is a torch tensor that NumPy cannot convert ({exc}): pass a NumPy array, "
            "e.g. tensor.detach().float().cpu().numpy()"
        ) from None


_FUSED_BYTES = 1 << 20  # from this size, copy block by block and check each block in cache
_DOT_BYTES = 1 << 16  # from this size, one BLAS dot tells "finite" cheaper than `isfinite`
_BLOCK_BYTES = 1 << 18  # bytes per block: well inside the L2 cache


def as_float32(
    value: Any,
    name: str,
    *,
    copy: bool,
    min_ndim: int = 1,
    finite: bool = False,
    binary: bool = False,
    axes: str = "tb",
) -> Float32Array:
    """Like `as_numeric`, then cast to float32 (as obs-tower2 does for rewards, dones, states).

    The copy and the cast are one pass (float64 input is not copied and then cast). With
    `finite`, NaN and ±inf are refused as by `check_finite`; with `binary`, values other than
    0 and 1 as by `check_binary`. A large array is copied and checked in one pass by a
    compiled kernel when numba is installed (`trajkit._core.fused`); without it, a large
    `finite` array is checked block by block right after each block is copied, while it is in
    the cache.

    Raises:
        ValueError: As `as_numeric`; if a finite value is beyond float32's range (it would
            become inf); with `finite`, for NaN or ±inf; with `binary`, for other values than
            0 and 1. Messages name the first position.
    """
    array = as_numeric(value, name, copy=False, min_ndim=min_ndim)
    if not copy and array.dtype == np.float32:
        if finite:
            check_finite(array, name, axes)
        if binary:
            check_binary(array, name)
        return array
    if (finite or binary) and array.nbytes >= fused.MIN_BYTES:
        kernel = fused.cast_kernel(array, "finite" if finite else "binary")
        if kernel is not None:
            out, passed = fused.cast_with(kernel, array)
            if passed:
                return out
        # else NumPy's checks below find and name the first bad value
    return _converted(array, name, min_ndim=min_ndim, finite=finite, binary=binary, axes=axes)


def _converted(
    array: AnyArray, name: str, *, min_ndim: int, finite: bool, binary: bool, axes: str
) -> Float32Array:
    """`as_float32`'s conversion with NumPy: a new float32 array, checked as asked."""
    if binary:
        flags = _converted(array, name, min_ndim=min_ndim, finite=False, binary=False, axes=axes)
        check_binary(flags, name)
        return flags
    wide = _may_overflow(array)
    if array.nbytes < _FUSED_BYTES or array.ndim == 0 or not finite:
        if wide:
            with np.errstate(over="ignore"):  # overflow is detected, not warned
                converted: Float32Array = array.astype(np.float32)
            check_overflow(array, converted, name, axes)
        else:
            converted = array.astype(np.float32)
        if finite:
            check_finite(converted, name, axes)
        return converted
    out = np.empty(array.shape, np.float32)
    rows = max(1, _BLOCK_BYTES // max(1, out[0].nbytes))
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned
        for start in range(0, len(out), rows):
            block = out[start : start + rows]
            np.copyto(block, array[start : start + rows], casting="unsafe")
            if not _surely_finite(block) and not np.isfinite(block).all():
                done = start + len(block)  # names the first position, overflow first
                if wide:
                    check_overflow(array[:done], out[:done], name, axes)
                check_finite(out[:done], name, axes)
    return out


def _binary(flat: AnyArray) -> bool:
    """Whether every value of `flat` is 0 or 1, checked `_BLOCK_BYTES` of it at a time.

    Two boolean arrays as large as the array cost more than the comparisons: their fresh
    pages fault in (the dones of a rollout of 8.9 M steps, 36 MB: about 20 ms at once, 3 ms
    in blocks, whose two small boolean arrays stay in the cache).
    """
    size = max(1, _BLOCK_BYTES // flat.itemsize)
    zero, one = np.empty(size, np.bool_), np.empty(size, np.bool_)
    for start in range(0, len(flat), size):
        block = flat[start : start + size]
        ok, also = zero[: len(block)], one[: len(block)]
        np.equal(block, 0, out=ok)
        np.equal(block, 1, out=also)
        np.logical_or(ok, also, out=ok)
        if not np.logical_and.reduce(ok):
            return False
    return True


def _may_overflow(array: AnyArray) -> bool:
    """Whether some finite values of `array`'s dtype become ±inf as float32 (wider floats)."""
    return array.dtype.kind == "f" and array.dtype.itemsize > 4


def check_overflow(source: AnyArray, cast: AnyArray, name: str, axes: str = "tb") -> None:
    """Refuse finite values of `source` that became ±inf in `cast`, a narrower float array.

    Raises:
        ValueError: Naming the first such value, its position and the range of `cast`'s dtype.
    """
    overflow = np.isinf(cast)
    if np.logical_or.reduce(overflow, axis=None):  # `.any()` without its Python wrapper
        overflow &= np.isfinite(source)
        if overflow.any():
            pos = first_true(overflow)
            dtype = cast.dtype
            raise ValueError(
                f"{name} holds {source[pos].item()!r}{at(pos, axes)}, beyond {dtype}'s range "
                f"(+-{float(np.finfo(dtype).max):.4g}): stored as {dtype} it would become inf"
            )


def _surely_finite(array: AnyArray) -> bool:
    """Whether a float array surely holds no NaN or ±inf, by one BLAS dot product.

    The sum of squares of a C-contiguous float32 or float64 array is finite exactly when
    every element is, unless finite elements overflow it (beyond about 1.8e19 in float32);
    False means "check element by element" (also for other dtypes and layouts).
    """
    if array.dtype.char not in "fd" or not array.dtype.isnative or not array.flags.c_contiguous:
        return False
    flat = array.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow only means "look closer"
        return bool(np.isfinite(np.dot(flat, flat)))


def arrays_equal(a: AnyArray, b: AnyArray) -> bool:
    """Equal shapes, dtypes up to byte order, and values; NaN equals NaN in the same place.

    This is the equality of `Rollout` and `ModelOutputs`: a big-endian array equals its
    little-endian copy (a saved file holds little-endian data), and a NaN kept in an
    observation, a state or a custom output does not make a rollout unequal to itself.

    Examples:
        >>> x = np.array([1.0, np.nan], np.float32)
        >>> arrays_equal(x, x.astype(">f4")), arrays_equal(x, x.astype(np.float64))
        (True, False)
    """
    if a.dtype.newbyteorder("<") != b.dtype.newbyteorder("<") or a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def as_int32(
    value: Any, name: str, *, copy: bool, min_ndim: int = 1, axes: str = "tb"
) -> Int32Array:
    """Convert integer-valued input (ints, or floats with integral values) to int32.

    `axes` names the axes in the position of a message, as for `check_finite`.

    Raises:
        ValueError: If a value is not an integer or is outside the int32 range; the message
            names the first offending position.
    """
    array = as_numeric(value, name, copy=False, allow_bool=False, min_ndim=min_ndim)
    return into_int(array, np.dtype(np.int32), name, axes, copy=copy)


def into_int(
    array: AnyArray, dtype: np.dtype[Any], name: str, axes: str = "tb", *, copy: bool = True
) -> AnyArray:
    """`array` as the integer `dtype`: floats finite and integer-valued, every value in range.

    Raises:
        ValueError: Naming the first value that is not finite, not an integer, or out of
            `dtype`'s range (it would wrap).
    """
    if array.dtype.kind == "f":
        check_finite(array, name, axes)
        bad = array != np.round(array)
        if bad.any():
            pos = first_true(bad)
            raise ValueError(
                f"{name} must be integer-valued, got {array[pos].item()!r}{at(pos, axes)}"
            )
    info = np.iinfo(dtype)
    if array.size and array.dtype != dtype:
        low, high = array.min().item(), array.max().item()  # exact: no cast of the bounds
        if low < info.min or high > info.max:
            bad = (array < info.min) | (array > info.max)
            pos = first_true(bad)
            raise ValueError(
                f"{name} must fit in {dtype} [{info.min}, {info.max}], got "
                f"{array[pos].item()!r}{at(pos, axes)}"
            )
    return array.astype(dtype, copy=copy)  # the copy and the cast in one pass


def check_finite(array: AnyArray, name: str, axes: str = "tb") -> None:
    """Refuse NaN and ±inf, naming the first offending (t, b) in time-major order.

    Args:
        array: The array to check.
        name: The field name for the message.
        axes: One letter per axis to name in the position, e.g. `"tba"` for logits.

    Raises:
        ValueError: If any element is not finite.
    """
    if array.dtype.kind in "biu":
        return
    if array.nbytes >= fused.MIN_BYTES:  # one pass, without a boolean array as large
        fast = fused.passes(array, "finite")
        if fast or (fast is None and array.nbytes >= _DOT_BYTES and _surely_finite(array)):
            return
    finite = np.isfinite(array)
    if not np.logical_and.reduce(finite, axis=None):  # `.all()` without its Python wrapper
        pos = first_true(~finite)
        raise ValueError(f"{name} must be finite, got {array[pos].item()}{at(pos, axes)}")


def check_binary(array: AnyArray, name: str, axes: str = "tb") -> None:
    """Refuse values other than 0 and 1, naming the first offending (t, b).

    `axes` names the axes in the position of a message, as for `check_finite`.

    Raises:
        ValueError: If any element is not 0 or 1.
    """
    if array.dtype == np.bool_ or (
        array.nbytes >= fused.MIN_BYTES and fused.passes(array, "binary")
    ):
        return
    if array.nbytes >= _FUSED_BYTES and array.flags.c_contiguous and _binary(array.reshape(-1)):
        return
    ok = (array == 0) | (array == 1)
    if not np.logical_and.reduce(ok, axis=None):
        pos = first_true(~ok)
        raise ValueError(f"{name} must hold only 0 and 1, got {array[pos].item()}{at(pos, axes)}")
