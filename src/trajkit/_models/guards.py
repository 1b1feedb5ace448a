"""The guard of a rollout's field: a write passes every rule that reads the field, or none.

A write is converted into the stored dtype only where no value changes and checked as the
field's rule says (`trajkit._models.rules.conform_into`); then the rules across fields that
read the field (`rules_reading`, from the rule table) check the rollout as the write leaves
it, and a refusal puts the written elements back: nothing is stored. An in-place operation
on a large array is checked block by block before NumPy computes it in place, so no
temporary copy of the whole array is made.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import as_numeric
from trajkit._models.checked import (
    CheckedArray,
    Guard,
    blockwise,
    checked,
    compute,
    is_region,
    positions_in,
    proven_finite,
    row_blocks,
)
from trajkit._models.rules import (
    CrossRule,
    FieldValues,
    Rule,
    conform,
    conform_into,
    lossless,
    rules_reading,
)

__all__ = [
    "FieldGuard",
    "Link",
    "Values",
    "applicable_rules",
    "check_written",
    "guard_field",
    "store_checked",
]


class Link:
    """A weak link from a rollout's guards to the rollout, to read the values of its fields.

    Args:
        owner: The rollout.
        values: Its values by name, as the rules across fields read them.
    """

    __slots__ = ("_ref", "_values")

    def __init__(self, owner: Any, values: Callable[[Any], FieldValues]) -> None:
        self._ref = weakref.ref(owner)
        self._values = values

    def values(self) -> FieldValues | None:
        """The owner's values now, or `None` once it is gone."""
        owner = self._ref()
        return None if owner is None else self._values(owner)


Values = Callable[[], FieldValues | None]
"""Where the values a rule across fields reads come from, for a guard (`Link.values`)."""


def applicable_rules(
    name: str, source: Values | None
) -> tuple[tuple[CrossRule, ...], FieldValues | None]:
    """The rules across fields that a write into `name` must pass now, and the values they read."""
    rules = rules_reading(name)
    values = None if not rules or source is None else source()
    if values is None:
        return (), None
    return tuple(rule for rule in rules if rule.applies(values)), values


def store_checked(
    handle: AnyArray,
    index: Any,
    array: Any,
    rules: tuple[CrossRule, ...],
    values: FieldValues | None,
    name: str = "",
    axes: str = "",
) -> None:
    """`handle[index] = array`, where the rules across fields allow it.

    A rule that holds value by value is checked on `array` alone (`name` and `axes` name its
    positions); the others check the values as the write leaves them, and if one refuses,
    the written elements are put back.
    """
    if values is not None:
        rules = check_written(rules, values, array, name, axes)
    if not rules or values is None:
        handle[index] = array
        return
    old = np.array(handle[index])
    handle[index] = array
    try:
        for rule in rules:
            rule.check(values)
    except ValueError:
        handle[index] = old
        raise


def check_written(
    rules: tuple[CrossRule, ...], values: FieldValues, written: Any, name: str, axes: str
) -> tuple[CrossRule, ...]:
    """Check `written` by the rules that hold value by value; return the other rules."""
    rest = []
    for rule in rules:
        if rule.check_written is None:
            rest.append(rule)
        else:
            rule.check_written(values, np.asarray(written), name, axes)
    return tuple(rest)


class FieldGuard(Guard):
    """The guard of one field array (or leaf): every write passes the rules that read it.

    A refused write raises the constructor's message for the rollout the write would have
    made, so it names the first bad position as `(t=1, b=0)`.

    Args:
        owner: The stored array (C-contiguous when the constructor copied it).
        rule: The field's rule.
        name: The field's (or leaf's) name, e.g. `rews` or `obses['image']`.
        axes: One letter per named leading axis (`"tb"`).
        field: The field's name, when `name` is a leaf's (`obses`).

    Examples:
        >>> import numpy as np
        >>> from trajkit._models.rules import FIELD_RULES
        >>> dones = guard_field(np.zeros((3, 2), np.float32), FIELD_RULES["dones"], "dones", "tb")
        >>> dones[1] = [1, 0]
        >>> dones[2, 1] = 2
        Traceback (most recent call last):
        ...
        ValueError: dones must hold only 0 and 1, got 2.0 at (t=2, b=1)
    """

    __slots__ = ("axes", "field", "link", "rule")

    def __init__(
        self, owner: AnyArray, rule: Rule, name: str, axes: str, field: str | None = None
    ) -> None:
        self.owner, self.name = owner, name  # (`Guard.__init__`, without its call)
        self.rule = rule
        self.axes = axes
        self.field = field or name
        self.link: Link | None = None  # set by the rollout that stores the array

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Check `value` for `target[index]` by the rules, then store it (nothing if refused)."""
        handle = self.writable(target)
        if is_region(handle, index, value):
            return  # `r.rews[t] -= x` assigns the row its checked write already changed
        if isinstance(value, CheckedArray):
            value = value.view(np.ndarray)
        if self.rule.passes(value, handle.dtype):
            array = value
        else:
            try:
                array = conform_into(self.rule, handle.dtype, value, self.name, axes="")
            except ValueError:
                raise self.refusal(target, index, value) from None
        store_checked(handle, index, array, *applicable_rules(self.field, self._values()))

    def inplace(self, target: CheckedArray, ufunc: np.ufunc, operand: Any) -> None:
        """`target = ufunc(target, operand)` in place; a large array is checked block by block."""
        handle = self.writable(target)
        rules, _ = applicable_rules(self.field, self._values())
        if not rules and not self.rule.constrains(handle.dtype):  # nothing it could refuse
            ufunc(handle, operand, out=handle, casting="same_kind")
            return
        if not rules and (
            (self.rule.finite and not self.rule.flag and proven_finite(ufunc, handle, operand))
            or (blockwise(ufunc, handle, operand) and self._blocks_pass(ufunc, handle, operand))
        ):  # NumPy computes it in place: no copy of the array
            ufunc(handle, operand, out=handle, casting="same_kind")
            return
        self.write(target, ..., compute(ufunc, handle, operand))

    def _blocks_pass(self, ufunc: np.ufunc, handle: AnyArray, operand: Any) -> bool:
        """Whether every block of the result passes the rule's fast test (in cache)."""
        with np.errstate(all="ignore"):  # (NumPy's warnings come from the operation itself)
            return all(self.rule.passes(b, b.dtype) for b in row_blocks(ufunc, handle, operand))

    def _values(self) -> Values | None:
        return None if self.link is None else self.link.values

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


def guard_field(
    array: AnyArray, rule: Rule, name: str, axes: str, field: str | None = None
) -> CheckedArray:
    """`array` as a stored field (or leaf): a read-only checked view whose writes pass `rule`."""
    return checked(array, FieldGuard(array, rule, name, axes, field))
