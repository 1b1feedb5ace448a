"""Checked arrays: a rollout's arrays, read-only to NumPy, whose supported writes are checked.

A `Rollout` stores each field array (each leaf of nested observations and states) and each
model output as a `CheckedArray`: a read-only `ndarray` subclass over storage that the
rollout keeps private. Reading, slicing and computing cost what they cost on any `ndarray`
subclass (no Python hook runs: results are plain arrays), and NumPy itself refuses every
write it is not told about, because the array is read-only. The writes a rollout supports
are overridden and checked by the array's `Guard` before anything is stored:

- item and slice assignment (`r.rews[t, b] = x`, `r.obses[2:4] = x`, fancy and boolean
  indices, `np.put_along_axis`), also through views (`r.rews[t][b] = x`, `r.obses.T[...]`);
- the in-place operators (`r.rews -= bonus`, `r.rews[t] /= 2`, `+=`, `*=`, `**=`, `//=`,
  `%=`, `@=`, `<<=`, `>>=`, `&=`, `|=`, `^=`), computed as NumPy computes them;
- `fill` and `put` (`np.put` too).

Refused loudly (by NumPy, as read-only, or by the array with a message saying what to write
instead): `out=` of ufuncs and of every other function (`np.clip(..., out=r.rews)`,
`np.dot`, `np.einsum`, ...), `np.copyto`, `np.place`, `np.putmask`, `np.fill_diagonal`,
`.flat`, `sort`, `partition`, `byteswap(inplace=True)`, `setfield`, `resize`, setting
`shape`, `strides`, `dtype`, `real` or `flat`, and writes through a view of another dtype.
Copies are plain, writable arrays: `copy()`, `astype`, `np.copy`, `copy.copy`, pickling,
results of arithmetic. Fancy-indexed selections (`r.rews[[0, 2]]`, `take`, `repeat`,
`flatten`) are new, writable `CheckedArray`s that belong to no rollout: their writes are
not checked, and they compute as plain arrays.

The ways out, for code that must write without checks (each is a write `Rollout.revalidate()`
and every writer check before anything is written):

- the storage behind a rollout's array, its `.base` (the base of a view is the rollout's
  array, whose `.base` is the storage);
- `flags.writeable = True` (or `setflags(write=True)`) on a rollout's array;
- `np.add.at` and the other `ufunc.at` methods, which NumPy lets write into read-only arrays;
- the arrays given to `Rollout(..., copy=False)`, which stay the caller's;
- memory shared outside NumPy's Python API: `ctypes`, `__array_interface__`, compiled code,
  CPU tensors of `trajkit.torch`, which share the rollout's memory;
- a leaf replaced in a nested field's dict (`r.obses["image"] = x`);
- ndarray's own setters called past the array (`np.ndarray.shape.__set__(r.rews, ...)`).

A refused write raises `ValueError` with the constructor's message for the rollout the write
would have made, naming the field and position (`rews must be finite, got nan at (t=1,
b=0)`), and stores nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from trajkit._base.types import AnyArray, IntArray

__all__ = [
    "CheckedArray",
    "Guard",
    "blockwise",
    "checked",
    "compute",
    "guard_of",
    "is_region",
    "plain_view",
    "positions_in",
    "proven_finite",
    "row_blocks",
]

_BLOCK_BYTES = 1 << 18  # an in-place op on a large array is checked block by block, in cache
_LARGE_BYTES = 1 << 20  # from this size, an in-place op makes no temporary copy of the array


class Guard:
    """What checks and stores the writes into a `CheckedArray` and its views.

    A guard holds the writable storage (`owner`) that the checked array views, and its
    name for messages. Subclasses say how a write is checked (`write`); an in-place
    operation is computed into a copy and written (`inplace`), unless a subclass does better.

    Args:
        owner: The writable storage: the checked array's `.base`, of its layout.
        name: The array's name in messages (`rews`, `obses['image']`).
    """

    __slots__ = ("name", "owner")

    def __init__(self, owner: AnyArray, name: str) -> None:
        self.owner = owner
        self.name = name

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Check `value` for `target[index]` and store it there, or raise `ValueError`."""
        raise NotImplementedError  # pragma: no cover - every guard says how

    def inplace(self, target: CheckedArray, ufunc: np.ufunc, operand: Any) -> None:
        """`target = ufunc(target, operand)` in place, checked as a write of the result."""
        self.write(target, ..., compute(ufunc, self.writable(target), operand))

    def writable(self, target: CheckedArray) -> AnyArray:
        """A plain, writable view of `target`'s memory (the storage, or a view of it)."""
        if target.base is self.owner:  # the guarded array itself
            return self.owner
        if target.dtype != self.owner.dtype:
            raise ValueError(
                f"{self.name} is {self.owner.dtype}: a view of it as {target.dtype} cannot be "
                f"written (the checks read values as {self.owner.dtype}); write {self.name}"
                "[index] = value instead"
            )
        view: AnyArray = target.view(np.ndarray)
        try:
            view.flags.writeable = True
        except ValueError:
            raise ValueError(
                f"{self.name} is read-only memory (a memory map opened read-only, or a "
                "read-only array given with copy=False): load or build the rollout with a "
                "copy to write into it"
            ) from None
        return view


def compute(ufunc: np.ufunc, array: AnyArray, operand: Any) -> AnyArray:
    """`ufunc(array, operand)` as the in-place operator computes it, into a new array."""
    out = np.empty_like(array)
    ufunc(array, operand, out=out, casting="same_kind")
    return out


def guard_of(array: CheckedArray) -> Guard | None:
    """The guard of a checked array or of its view (the base of a view is the guarded array)."""
    guard = array._guard
    if guard is None:
        base = array.base
        if type(base) is CheckedArray:
            guard = base._guard
    return guard


def _in_place(ufunc: np.ufunc, unchecked: Any) -> Any:
    """The in-place operator of `ufunc` (`+=` of `np.add`): checked where the array has a guard."""

    def operator(self: CheckedArray, operand: Any) -> Any:
        guard = guard_of(self)
        if guard is None:
            return unchecked(self, operand)
        guard.inplace(self, ufunc, operand)
        return self

    operator.__name__ = unchecked.__name__
    return operator


_SETTERS: dict[str, type[Exception]] = {
    "shape": AttributeError,
    "strides": AttributeError,
    "dtype": AttributeError,
    "flat": ValueError,  # (these two write values)
    "real": ValueError,
}
"""Attributes whose assignment would change a rollout's array without its checks, and the
error it raises (NumPy refuses `flat` and `real` of a read-only array too: the message here
says what to write instead)."""


class CheckedArray(np.ndarray[Any, np.dtype[Any]]):
    """A rollout's array: read-only to NumPy; its supported writes are checked by its guard.

    It reads and computes as a plain array, at a bare subclass's cost (results are plain
    `ndarray`s). Item and slice assignment, the in-place operators, `fill` and `put` are
    checked against the field's rules, and those across fields, before anything is
    stored; NumPy refuses other writes (`out=`, `np.copyto`, `sort`, ...) as it refuses
    writes into any read-only array. See the Validation page for every path.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2)
        >>> isinstance(r.rews, CheckedArray), type(r.rews * 2).__name__
        (True, 'ndarray')
        >>> r.rews[1, 0] = np.nan
        Traceback (most recent call last):
        ...
        ValueError: rews must be finite, got nan at (t=1, b=0)
        >>> np.clip(r.rews, -1, 1, out=r.rews)
        Traceback (most recent call last):
        ...
        ValueError: output array is read-only
    """

    _guard: Guard | None = None

    def __array_wrap__(
        self, array: AnyArray, context: Any = None, return_scalar: bool = False
    ) -> Any:
        # Results of ufuncs on a checked array are plain arrays (or scalars): the caller's.
        return array[()] if return_scalar and array.ndim == 0 else array

    def __setitem__(self, index: Any, value: Any) -> None:
        guard = guard_of(self)
        if guard is None:
            np.ndarray.__setitem__(self, index, value)
        else:
            guard.write(self, index, value)

    if not TYPE_CHECKING:  # (typed as ndarray's own)
        __iadd__ = _in_place(np.add, np.ndarray.__iadd__)
        __isub__ = _in_place(np.subtract, np.ndarray.__isub__)
        __imul__ = _in_place(np.multiply, np.ndarray.__imul__)
        __itruediv__ = _in_place(np.true_divide, np.ndarray.__itruediv__)
        __ifloordiv__ = _in_place(np.floor_divide, np.ndarray.__ifloordiv__)
        __imod__ = _in_place(np.remainder, np.ndarray.__imod__)
        __ipow__ = _in_place(np.power, np.ndarray.__ipow__)
        __imatmul__ = _in_place(np.matmul, np.ndarray.__imatmul__)
        __ilshift__ = _in_place(np.left_shift, np.ndarray.__ilshift__)
        __irshift__ = _in_place(np.right_shift, np.ndarray.__irshift__)
        __iand__ = _in_place(np.bitwise_and, np.ndarray.__iand__)
        __ior__ = _in_place(np.bitwise_or, np.ndarray.__ior__)
        __ixor__ = _in_place(np.bitwise_xor, np.ndarray.__ixor__)

    def fill(self, value: Any) -> None:
        """Set every element to `value`, checked as an assignment.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=1)
            >>> r.rews.fill(0.5)
            >>> r.rews.tolist()
            [[0.5], [0.5]]
        """
        self[...] = value

    def put(self, indices: Any, values: Any, mode: Any = "raise") -> None:
        """`numpy.ndarray.put` (flat indices, values repeated), checked as an assignment.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> r.dones.put([3], 1)
            >>> r.dones.put([3], 2)
            Traceback (most recent call last):
            ...
            ValueError: dones must hold only 0 and 1, got 2.0 at (t=1, b=1)
        """
        if guard_of(self) is None:
            np.ndarray.put(self, indices, values, mode=mode)
            return
        values = np.asarray(values).reshape(-1)
        if not values.size:
            return  # (NumPy's `put` puts nothing)
        order = np.full(self.size, -1, np.intp)  # which value lands where, as `put` puts them
        np.put(order, indices, np.arange(np.size(indices)), mode=mode)
        where = np.flatnonzero(order >= 0)
        self[np.unravel_index(where, self.shape)] = values[order[where] % values.size]

    def copy(self, order: Any = "C") -> AnyArray:  # type: ignore[override]
        """A plain copy (`numpy.ndarray.copy`): the caller's own array, unchecked.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> type(example_rollout().rews.copy()).__name__
            'ndarray'
        """
        return np.array(self, order=order, copy=True)

    def astype(  # type: ignore[override]
        self,
        dtype: Any,
        order: Any = "K",
        casting: Any = "unsafe",
        subok: bool = True,
        copy: bool = True,
    ) -> AnyArray:
        """`numpy.ndarray.astype`, as a plain array: a copy is the caller's own, unchecked.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> type(example_rollout().rews.astype("float64")).__name__
            'ndarray'
        """
        plain: AnyArray = self.view(np.ndarray)
        return plain.astype(dtype, order=order, casting=casting, copy=copy)

    def __copy__(self) -> Any:  # (a plain array, not a `CheckedArray`)
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None, /) -> Any:
        return self.copy()

    def __reduce__(self) -> Any:  # pickles as a plain array
        return self.copy().__reduce__()

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __setattr__(self, name: str, value: Any) -> None:
        # (Views are free to change their own layout: NumPy's `view(dtype)` sets it.)
        guard = self._guard if name in _SETTERS else None
        if guard is not None:
            raise _SETTERS[name](
                f"{guard.name}.{name} cannot be set: a rollout's arrays keep their layout and "
                f"are written through their checks; write {guard.name}[...] = value, and use "
                "reshape() or view() for another layout"
            )
        super().__setattr__(name, value)

    def resize(self, *shape: Any, refcheck: bool = True) -> None:
        """`numpy.ndarray.resize`; a rollout's array refuses it (it keeps its shape).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout().rews.resize(8)
            Traceback (most recent call last):
            ...
            ValueError: rews cannot be resized: a rollout's arrays keep their shape; \
np.resize(array, shape) makes a resized copy
        """
        guard = guard_of(self)
        if guard is not None:
            raise ValueError(
                f"{guard.name} cannot be resized: a rollout's arrays keep their shape; "
                "np.resize(array, shape) makes a resized copy"
            )
        np.ndarray.resize(self, *shape, refcheck=refcheck)

    def __setstate__(self, state: Any) -> None:
        guard = guard_of(self)
        if guard is not None:
            raise ValueError(f"{guard.name} cannot be restored in place: it is a rollout's array")
        np.ndarray.__setstate__(self, state)


def checked(array: AnyArray, guard: Guard) -> CheckedArray:
    """A read-only checked view of `array` (the guard's writable storage) through `guard`.

    Examples:
        >>> import numpy as np
        >>> class Positive(Guard):
        ...     def write(self, target, index, value):
        ...         if np.any(np.asarray(value) <= 0):
        ...             raise ValueError("must be positive")
        ...         self.writable(target)[index] = value
        >>> storage = np.ones(3)
        >>> x = checked(storage, Positive(storage, "x"))
        >>> x[0] = 2.0
        >>> x[1:] -= 5
        Traceback (most recent call last):
        ...
        ValueError: must be positive
        >>> x.tolist(), x.flags.writeable
        ([2.0, 1.0, 1.0], False)
    """
    view = array.view(CheckedArray)
    view.__dict__["_guard"] = guard
    view.setflags(write=False)
    return view


def plain_view(array: AnyArray) -> AnyArray:
    """A plain view of `array`, writable where its memory is: a rollout's array unwrapped.

    For trajkit's own use where it hands a rollout's memory on (a new rollout built with
    `copy=False`, CPU tensors): a `CheckedArray` becomes a plain view of the same memory,
    writable unless the storage is read-only; other arrays are returned as they are.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout()
        >>> view = plain_view(r.rews)
        >>> type(view).__name__, view.flags.writeable, np.shares_memory(view, r.rews)
        ('ndarray', True, True)
    """
    if not isinstance(array, CheckedArray):
        return array
    view: AnyArray = array.view(np.ndarray)
    with contextlib.suppress(ValueError):  # read-only memory: a read-only view
        view.flags.writeable = True
    return view


def positions_in(owner: AnyArray, target: AnyArray, index: Any) -> IntArray | None:
    """The flat (C-order) positions in `owner` of the elements `target[index]` writes.

    `target` is `owner` or a view of its memory, of any layout (C or Fortran order, slices,
    transposes, negative strides). Returns `None` where the positions cannot be told from
    the memory layout (memory that is not `owner`'s, strides that are not whole elements);
    callers then name no position.

    Examples:
        >>> import numpy as np
        >>> owner = np.zeros((3, 4))
        >>> positions_in(owner, owner[1:], (1, slice(0, 2))).tolist()
        [8, 9]
        >>> fortran = np.asfortranarray(owner)
        >>> positions_in(fortran, fortran.T, (1, 2)).tolist()
        9
    """
    if owner.size == 0 or target.size == 0 or target.itemsize != owner.itemsize:
        return None
    size = owner.itemsize
    own = _element_strides(owner.strides, size)
    steps = _element_strides(target.strides, size)
    delta = target.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    if own is None or steps is None or delta % size:
        return None
    own_low, own_high = _span(owner.shape, own)
    low, high = _span(target.shape, steps)
    first = delta // size - own_low  # the target's first element, in the buffer below
    if first + low < 0 or first + high > own_high - own_low:
        return None
    buffer = np.empty(own_high - own_low + 1, np.intp)  # owner's memory, element by element
    width = buffer.itemsize
    ids = np.lib.stride_tricks.as_strided(
        buffer[-own_low:], shape=owner.shape, strides=[s * width for s in own]
    )
    ids[...] = np.arange(owner.size, dtype=np.intp).reshape(owner.shape)
    view = np.lib.stride_tricks.as_strided(
        buffer[first:], shape=target.shape, strides=[s * width for s in steps]
    )
    return np.asarray(view[index], dtype=np.intp)


def _element_strides(strides: tuple[int, ...], size: int) -> list[int] | None:
    """Byte strides in elements, or `None` where one is not a whole number of elements."""
    return None if any(s % size for s in strides) else [s // size for s in strides]


def _span(shape: tuple[int, ...], steps: list[int]) -> tuple[int, int]:
    """The lowest and highest element offsets an array of `shape` and `steps` reaches."""
    low = sum((n - 1) * s for n, s in zip(shape, steps, strict=True) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, steps, strict=True) if s > 0)
    return low, high


def is_region(handle: AnyArray, index: Any, value: Any) -> bool:
    """Whether `value` is the very memory `handle[index]` is: a write of a region into itself.

    `r.rews[t] -= x` computes in place, then assigns the row to itself; nothing is left to
    check or copy.
    """
    if type(value) is not CheckedArray:
        return False
    region = handle[index]
    return (
        isinstance(region, np.ndarray)
        and region.shape == value.shape
        and region.strides == value.strides
        and region.dtype == value.dtype
        and _address(region) == _address(value)
    )


def _address(array: AnyArray) -> int:
    address: int = array.__array_interface__["data"][0]
    return address


def blockwise(ufunc: np.ufunc, array: AnyArray, operand: Any) -> bool:
    """Whether `ufunc(array, operand)` in place may be checked block by block over rows.

    Yes for a large array and an elementwise binary ufunc whose operand is a number or an
    array that broadcasts to `array` without sharing its memory (else NumPy's own in-place
    semantics need the whole result first).
    """
    if array.nbytes < _LARGE_BYTES or array.ndim == 0 or ufunc.signature is not None:
        return False
    if isinstance(operand, int | float | bool | np.generic):
        return True
    return (
        isinstance(operand, np.ndarray)
        and operand.ndim <= array.ndim
        and np.broadcast_shapes(operand.shape, array.shape) == array.shape
        and not np.may_share_memory(operand, array)
    )


_BOUNDED: dict[np.ufunc, str] = {
    np.add: "sum",
    np.subtract: "sum",
    np.multiply: "product",
    np.true_divide: "quotient",
}
_CHUNK = 1 << 20  # elements per partial sum of squares: few enough that float32 adds them well


def _magnitude(array: AnyArray) -> float:
    """An upper bound of `max(abs(array))` within 4 %, from sums of squares (`inf` if none).

    One read of the array at BLAS speed (a dot product per chunk of it, summed in float64),
    without a temporary array; `inf` for an array this cannot bound (not a C-contiguous
    float array, or one whose squares overflow).
    """
    if array.dtype.kind != "f" or not array.flags.c_contiguous:
        return math.inf
    flat = array.reshape(-1)
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, flat.size, _CHUNK):
            chunk = flat[start : start + _CHUNK]
            total += float(np.dot(chunk, chunk))
    return 1.04 * math.sqrt(total) if math.isfinite(total) else math.inf


def proven_finite(ufunc: np.ufunc, array: AnyArray, operand: Any) -> bool:
    """Whether `ufunc(array, operand)` is surely finite, by bounds, `array` being finite.

    Sums, differences, products and quotients of finite numbers are finite unless they
    overflow; bounds of the magnitudes (`_magnitude`) rule that out, far from the dtype's
    range, at the cost of a read of each array, so that a large in-place operation needs no
    checking pass of its own. `False` means "not proven": check the results.
    """
    kind = _BOUNDED.get(ufunc)
    if kind is None or array.dtype.kind != "f" or array.nbytes < _LARGE_BYTES:
        return False
    if isinstance(operand, int | float | np.generic) or np.ndim(operand) == 0:
        other = abs(float(operand))
        least = other
    elif isinstance(operand, np.ndarray) and kind != "quotient" and operand.dtype.kind == "f":
        other = _magnitude(operand)
        least = math.nan
    else:
        return False
    if not math.isfinite(other) or (kind == "quotient" and not least):
        return False
    mine = _magnitude(array)
    bound = {"sum": mine + other, "product": mine * other, "quotient": mine / (least or 1.0)}
    return bound[kind] <= float(np.finfo(array.dtype).max) / 4


def row_blocks(ufunc: np.ufunc, array: AnyArray, operand: Any) -> Iterator[AnyArray]:
    """The result of `ufunc(array, operand)` block by block of rows, each in one buffer."""
    rows = max(1, _BLOCK_BYTES // max(1, array[0].nbytes))
    buffer = np.empty((min(rows, len(array)), *array.shape[1:]), array.dtype)
    split = (
        isinstance(operand, np.ndarray)
        and operand.ndim == array.ndim
        and operand.shape[0] == len(array) != 1
    )
    for start in range(0, len(array), rows):
        block = array[start : start + rows]
        out = buffer[: len(block)]
        part = operand[start : start + rows] if split else operand
        ufunc(block, part, out=out, casting="same_kind")
        yield out
