"""The recorder's log of whole vector steps, and which of its entries are rows and transitions.

`RolloutRecorder` writes every vector step into a `Log` as it comes (a plain row write per
field, whatever the envs are doing) and sorts out each env's timeline once per rollout, over
whole arrays: `rows_and_steps` tells rows and real transitions from the logged ending flags,
`positions` finds each env's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray, Int64Array

__all__ = ["Log", "positions", "rows_and_steps"]


class Log:
    """Growable time-major logs `[capacity, B, ...]` of whole vector steps, one per field.

    Each call of `append` writes one batch per field at the next index: a plain row write,
    whatever the envs are doing. Which entries belong to which env's timeline is logged too
    (as masks), and sorted out once per rollout, by `RolloutRecorder._build`. The live
    entries are `start:end` of every array: `drop` only moves `start`, and they move to the
    front (or into larger arrays) only when an append finds the arrays full.
    """

    def __init__(self, dtypes: Mapping[str, type[Any]]) -> None:
        self.arrays: dict[str, AnyArray] = {}
        self.start = 0
        self.end = 0
        self._capacity = 64
        self._dtypes = dtypes  # fields stored in a fixed dtype (others: the first value's)
        self._names: Sequence[str] = ()  # the fields of the last append, in order
        self._targets: list[AnyArray] = []  # their arrays

    @property
    def size(self) -> int:
        """The number of live entries."""
        return self.end - self.start

    def fields(self) -> dict[str, AnyArray]:
        """The live entries of every field, `[size, B, ...]` (views)."""
        return {name: array[self.start : self.end] for name, array in self.arrays.items()}

    def append(self, names: Sequence[str], values: Sequence[AnyArray]) -> None:
        """Write `values[i]` as the next entry of field `names[i]`, for every i.

        The usual call passes the very `names` list of the call before (checked by identity,
        the cheapest check there is), and only writes rows.
        """
        k = self.end
        if names is self._names and k < self._capacity:
            for target, value in zip(self._targets, values, strict=True):
                target[k] = value  # the usual append: same fields, room left
            self.end = k + 1
            return
        if k == self._capacity:
            self._make_room()
            k = self.end
        for name, value in zip(names, values, strict=True):
            array = self.arrays.get(name)
            if array is None:
                dtype = self._dtypes.get(name, value.dtype)
                array = self.arrays[name] = np.zeros((self._capacity, *value.shape), dtype)
            array[k] = value
        self.end = k + 1
        self._names = names
        self._targets = [self.arrays[name] for name in names]

    def column(self, name: str, shape: tuple[int, ...]) -> AnyArray:
        """The array of field `name` (of a fixed dtype), made `[capacity, *shape]` if need be.

        For fields that are not appended entry by entry but filled in later, over many entries
        at once: they grow and move with the others.
        """
        array = self.arrays.get(name)
        if array is None:
            array = self.arrays[name] = np.zeros((self._capacity, *shape), self._dtypes[name])
        return array

    def _make_room(self) -> None:
        """Move the live entries to the front, into arrays twice as large if they fill half."""
        live = self.size
        if 2 * live > self._capacity:
            self._capacity *= 2
        for name, array in self.arrays.items():
            if array.shape[0] != self._capacity:
                moved = np.zeros((self._capacity, *array.shape[1:]), array.dtype)
                moved[:live] = array[self.start : self.end]
                self.arrays[name] = moved
            else:
                array[:live] = array[self.start : self.end]  # NumPy handles the overlap
        self.start, self.end = 0, live

    def drop(self, count: int) -> None:
        """Forget the first `count` live entries."""
        self.start += count


def positions(mask: BoolArray, count: int) -> Int64Array:
    """For each env (column of `mask`), the indices of its first `count` True entries.

    Every column must hold at least `count` of them. `[count, B]`.
    """
    envs, entries = mask.T.nonzero()  # env by env, entries in order within each
    firsts = envs.searchsorted(np.arange(mask.shape[1]))  # where each env's list starts
    positions: Int64Array = entries[firsts + np.arange(count)[:, None]]
    return positions


def rows_and_steps(
    ended: BoolArray, pending: BoolArray, next_step: bool
) -> tuple[BoolArray, BoolArray]:
    """Which logged entries show rows (`new`) and which are real transitions (`real`), `[K, B]`.

    Worked out from the entries' ending flags (`ended`, `[K, B]`) and `pending`, the `new` of
    the entry before them, by the recurrence the vector env follows, here over whole arrays:

    * `real[k] = new[k - 1]`: a step is a real transition where the env had a row to act from
      (`real[0] = pending`);
    * under NEXT_STEP, `new[k] = not (ended[k] and real[k])`: an env whose real transition
      ended an episode shows its final observation, which is no row, and its next step is the
      phantom reset; under the other modes every entry shows a row of every env.

    So in a run of consecutive endings (in one column), rows alternate, starting with the
    opposite of the entry before the run: a row (the entry is not an ending) or `pending`.
    """
    if not next_step:
        new = np.ones_like(ended)
    else:
        entry = np.arange(len(ended))[:, None]
        last_clear = np.maximum.accumulate(np.where(ended, -1, entry), axis=0)  # -1: none yet
        before = (last_clear >= 0) | pending  # `new` of the entry before the run
        new = ~ended | (before ^ ((entry - last_clear) & 1).astype(bool))
    real = np.concatenate([pending[None], new[:-1]])
    return new, real
