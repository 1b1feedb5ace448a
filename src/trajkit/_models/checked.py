"""Checked arrays: a rollout's arrays, whose every write goes through the field's rule.

A `Rollout` stores each field array (each leaf of nested observations and states) and each
model output as a `CheckedArray`: an `ndarray` subclass that reads, slices and computes as a
plain array, and whose writes are checked by a `Guard` before anything is stored. Covered:
item and slice assignment (`r.rews[t, b] = x`, `r.obses[2:4] = x`), in-place arithmetic
(`r.rews -= bonus`, `r.rews[t] /= 2`), ufuncs with `out=` (`np.clip(r.rews, -1, 1,
out=r.rews)`, `np.add.at`), `fill`, `put` and NumPy's mutating functions (`np.copyto`,
`np.place`, `np.putmask`, `np.put`, `np.put_along_axis`, `np.fill_diagonal`). Views of a checked
array (`r.rews[t]`, `r.obses.T`, `reshape`) check their writes too; results of arithmetic
(`r.rews * 2`), copies and fancy-indexed selections are plain arrays.

What is not covered, on purpose: a plain view taken with `np.asarray(r.rews)` (that is the
way out for code that must write without checks), `.flat`, `ctypes` and compiled code writing
through the buffer. `Rollout.revalidate()` checks the rollout as it is after such writes.

A refused write raises `ValueError` with the constructor's message for the rollout the write
would have made, naming the field and position (`rews must be finite, got nan at (t=1,
b=0)`), and stores nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from trajkit._base.types import AnyArray, IntArray
from trajkit._models.arrays import as_numeric
from trajkit._models.rules import Rule, conform, conform_into, lossless

__all__ = ["CheckedArray", "FieldGuard", "Guard", "checked", "guard_field", "positions_in"]


class Guard(Protocol):
    """What checks and stores the writes into a `CheckedArray` and its views."""

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Check `value` for `target[index]` and store it there, or raise `ValueError`."""


class CheckedArray(np.ndarray[Any, np.dtype[Any]]):
    """An array whose writes are checked by its guard; it reads and computes as a plain array.

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
    """

    _guard: Guard | None

    def __array_finalize__(self, obj: Any) -> None:
        # Views of a checked array (their base is one) write through its guard; copies,
        # fancy-indexed selections and results of arithmetic are the caller's own arrays.
        self._guard = getattr(obj, "_guard", None) if isinstance(self.base, CheckedArray) else None

    def __setitem__(self, index: Any, value: Any) -> None:
        guard = self._guard
        if guard is None:
            np.ndarray.__setitem__(self, index, value)
        else:
            guard.write(self, index, value)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # Inputs are read as plain arrays, so results are plain; an output that is a checked
        # array is computed into a copy first, then written through its guard.
        plain = tuple(np.asarray(x) if isinstance(x, CheckedArray) else x for x in inputs)
        pending: list[tuple[CheckedArray, AnyArray]] = []
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_scratch(o, pending) for o in out)
        if method == "at" and isinstance(inputs[0], CheckedArray):
            plain = (_scratch(inputs[0], pending), *plain[1:])
        result = getattr(ufunc, method)(*plain, **kwargs)
        for target, values in pending:
            target[...] = values
        if out is not None:
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in _MUTATORS and args and isinstance(args[0], CheckedArray):
            pending: list[tuple[CheckedArray, AnyArray]] = []
            result = func(_scratch(args[0], pending), *args[1:], **kwargs)
            for target, values in pending:
                target[...] = values
            return result
        return super().__array_function__(func, types, args, kwargs)

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
        """`numpy.ndarray.put` (flat indices), checked as an assignment.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> r.dones.put([3], 1)
            >>> r.dones.put([3], 2)
            Traceback (most recent call last):
            ...
            ValueError: dones must hold only 0 and 1, got 2.0 at (t=1, b=1)
        """
        np.put(self, indices, values, mode=mode)

    def copy(self, order: Any = "C") -> AnyArray:  # type: ignore[override]
        """A plain copy (`numpy.ndarray.copy`): the caller's own array, unchecked.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> type(example_rollout().rews.copy()).__name__
            'ndarray'
        """
        return np.array(self, order=order, copy=True)

    def __repr__(self) -> str:
        return repr(np.asarray(self))

    def __reduce__(self) -> Any:  # pickles (and deep-copies) as a plain array
        return np.asarray(self).copy().__reduce__()


def _scratch(target: Any, pending: list[tuple[CheckedArray, AnyArray]]) -> Any:
    """A plain copy of a checked `target` to compute into, noted to be written back."""
    if not isinstance(target, CheckedArray):
        return target
    if target._guard is None:
        return np.asarray(target)
    copy = np.array(target)
    pending.append((target, copy))
    return copy


_MUTATORS = frozenset(
    {np.copyto, np.place, np.putmask, np.put, np.put_along_axis, np.fill_diagonal}
)


def checked(array: AnyArray, guard: Guard) -> CheckedArray:
    """A checked view of `array` whose writes go through `guard`.

    Examples:
        >>> import numpy as np
        >>> class Positive:
        ...     def write(self, target, index, value):
        ...         if np.any(np.asarray(value) <= 0):
        ...             raise ValueError("must be positive")
        ...         np.ndarray.__setitem__(target, index, value)
        >>> x = checked(np.ones(3), Positive())
        >>> x[0] = 2.0
        >>> x[1:] -= 5
        Traceback (most recent call last):
        ...
        ValueError: must be positive
        >>> np.asarray(x).tolist()
        [2.0, 1.0, 1.0]
    """
    view = array.view(CheckedArray)
    view._guard = guard
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


class FieldGuard:
    """The guard of one field array (or leaf): every write passes the field's rule.

    A write is converted into the stored dtype only where no value changes and checked as
    the rule says (`trajkit._models.rules.conform_into`). A refused write raises the
    constructor's message for the array the write would have made, so it names the first
    bad position as `(t=1, b=0)`.

    Args:
        owner: The stored array (C-contiguous when the constructor copied it).
        rule: The field's rule.
        name: The field's (or leaf's) name, e.g. `rews` or `obses['image']`.
        axes: One letter per named leading axis (`"tb"`).

    Examples:
        >>> import numpy as np
        >>> from trajkit._models.rules import FIELD_RULES
        >>> dones = np.zeros((3, 2), np.float32)
        >>> guarded = checked(dones, FieldGuard(dones, FIELD_RULES["dones"], "dones", "tb"))
        >>> guarded[1] = [1, 0]
        >>> guarded[2, 1] = 2
        Traceback (most recent call last):
        ...
        ValueError: dones must hold only 0 and 1, got 2.0 at (t=2, b=1)
    """

    __slots__ = ("axes", "name", "owner", "rule")

    def __init__(self, owner: AnyArray, rule: Rule, name: str, axes: str) -> None:
        self.owner = owner
        self.rule = rule
        self.name = name
        self.axes = axes

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Check `value` for `target[index]` by the rule, then store it (nothing if refused)."""
        if self.rule.passes(value, target.dtype):
            np.ndarray.__setitem__(target, index, value)
            return
        try:
            array = conform_into(self.rule, target.dtype, value, self.name, axes="")
        except ValueError:
            raise self.refusal(target, index, value) from None
        np.ndarray.__setitem__(target, index, array)

    def refusal(self, target: AnyArray, index: Any, value: Any) -> ValueError:
        """The constructor's error for the array that writing `value` would make."""
        try:
            array = as_numeric(value, self.name, copy=False, min_ndim=0)
        except ValueError as exc:
            return exc
        ids = positions_in(self.owner, target, index)
        if ids is not None and ids.size:
            try:
                values = np.broadcast_to(array, ids.shape)
            except ValueError:
                values = None
            if values is not None:
                owner = self.owner
                scratch = owner.astype(np.result_type(owner.dtype, array.dtype), order="C")
                scratch.reshape(-1)[ids.reshape(-1)] = values.reshape(-1)
                try:
                    conform(self.rule, scratch, self.name, copy=False, axes=self.axes)
                    lossless(scratch, owner.dtype, self.name, axes=self.axes)
                except ValueError as exc:
                    return exc
        try:
            conform_into(self.rule, target.dtype, array, self.name, axes="")
        except ValueError as exc:
            return exc
        return ValueError(f"{self.name} cannot hold {value!r}")  # pragma: no cover


def guard_field(array: AnyArray, rule: Rule, name: str, axes: str) -> CheckedArray:
    """`array` as a stored field: a checked array whose writes pass `rule`."""
    return checked(array, FieldGuard(array, rule, name, axes))
