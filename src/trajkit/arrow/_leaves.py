"""A leaf of a rollout's `obses` or `states`, or a model output, built a batch at a time.

A leaf is `[T+1, B, *shape]`: its column gives rows 0 to T*B - 1 (row `t * B + b`), its
`next_` column the bootstrap row T, and must agree with the rows one step later elsewhere.
Under the layout's `final_obs`, an observation leaf's `next_` column holds the final
observation at an episode end instead, and its `reset_` column the observation after the
step. In the compact layout a leaf with a shape is stored as bytes, and its `next_` and
`reset_` columns hold only what the next row does not (see `trajkit.arrow`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit.arrow._buffers import filter_rows, to_numpy
from trajkit.arrow._cells import (
    Where,
    bool_bytes,
    cells,
    contradiction,
    differ,
    no_nulls,
    positioned,
)
from trajkit.arrow._layout import reset_column
from trajkit.arrow._pages import PageColumn, Prefetched

Convert = Callable[[AnyArray], AnyArray]
"""Converts a leaf's values to its dtype, refusing what its rules refuse (naming positions)."""

_LEGACY_RESET = (
    "the layout's 'final_obs': true puts a value there at every step, or, as earlier trajkit "
    "versions wrote it, exactly at episode ends"
)
_COMPACT_NEXT = "the compact layout stores the 'next_' bytes of a leaf on the last step only"
_FINALS = (
    "the compact layout stores the 'next_obs' bytes of a leaf at episode ends and on the last "
    "step, its 'reset_obs' bytes at episode ends on the last step"
)


@dataclass
class Grid:
    """What a leaf needs of its rollout: its shape, episode ends and how to name a row.

    Attributes:
        pa: pyarrow.
        T: The rollout's steps.
        B: Its envs.
        ends: `[T * B]`: where a step ends its episode (`dones[t + 1]`).
        where: Names row `t * B + b` in messages.
        ended: The episode ends before the batch being read.
    """

    pa: Any
    T: int
    B: int
    ends: AnyArray
    where: Where
    ended: int = 0

    def rows(self, start: int) -> Where:
        """Names row i of a batch whose first row is `start`."""

        def at(i: int) -> str:
            return self.where(start + i)

        return at


@dataclass
class Checks:
    """How a leaf's values are converted and checked, and named in messages.

    Attributes:
        values: Its values (to its dtype, under its rules).
        name: Its name in messages (`obses['image'] (column 'obs.image')`).
        finals: Its final observations' (an observation leaf under `final_obs`), or `None`.
        named: Its field's whole rule, where `values` leaves a part of it to the rollout's
            constructor: run again only to name the column of a value the constructor
            refuses.
    """

    values: Convert
    name: str
    finals: Convert | None = None
    named: Convert | None = None


def make_leaf(grid: Grid, item: dict[str, Any], checks: Checks) -> Leaf:
    """The leaf of the layout's `item` (a leaf or a model output)."""
    if item["column"] is None:
        return Leaf(grid, item, checks)
    if item.get("binary"):
        return ByteLeaf(grid, item, checks)
    return NumberLeaf(grid, item, checks)


class Leaf:
    """A leaf; this base class, one without values per row (no column, zeros)."""

    def __init__(self, grid: Grid, item: dict[str, Any], checks: Checks) -> None:
        self.grid, self.item, self.checks = grid, item, checks
        self.dtype, self.shape = np.dtype(item["dtype"]), tuple(item["shape"])
        self.finals = None
        if checks.finals is not None:
            self.finals = _Finals(checks.finals, int(grid.ends.sum()), self.dtype, self.shape)
        self._values: AnyArray | None = None  # [(T+1) * B, *shape], made on the first batch
        self.written = 0  # its rows in `values()` so far
        self.last = _LastStep(grid.B, self.shape, self.dtype)  # the bootstrap row, as it comes

    def values(self) -> AnyArray:
        """`[(T+1) * B, *shape]`, made once the first cells are read (no declared size alone)."""
        if self._values is None:
            rows = (self.grid.T + 1) * self.grid.B
            self._values = np.empty((rows, *self.shape), self.dtype)
        return self._values

    def feed(self, columns: dict[str, Any], start: int, stop: int) -> None:
        """Rows `start` to `stop` of the leaf's columns (a batch, by column name)."""
        if self.item["column"] is None:
            return
        grid, name = self.grid, self.item["column"]
        column = columns[name]
        if isinstance(column, (PageColumn, Prefetched)):  # its bytes read from the file
            if self._values is None and isinstance(column, Prefetched):
                self._adopt(column)
            target = self.values()[start:stop]
            column.take(target, grid.rows(start))
            if self.dtype == np.bool_:
                bool_bytes(name, target, grid.rows(start))
            positioned(self.checks.values, target, start, grid.B)
            self.written = stop
            self.feed_after(columns, start, stop)
            return
        no_nulls(name, column, grid.rows(start))
        values = cells(grid.pa, name, column, self.item, grid.rows(start))
        target = self.values()[start:stop]
        if values.dtype == self.dtype:  # copied, then checked where it is aligned
            target[...] = values
            positioned(self.checks.values, target, start, grid.B)
        else:
            target[...] = positioned(self.checks.values, values, start, grid.B)
        self.written = stop
        self.feed_after(columns, start, stop)

    def _adopt(self, column: Prefetched) -> None:
        """Make the column's buffer the leaf's values where it is their size (read into place)."""
        rows = (self.grid.T + 1) * self.grid.B
        buffer = column.storage(rows)
        if buffer is not None:
            self._values = buffer.view(self.dtype).reshape(rows, *self.shape)

    def feed_after(self, columns: dict[str, Any], start: int, stop: int) -> None:
        """The `next_` (and `reset_`) columns of rows `start` to `stop`."""

    def finish(self) -> AnyArray:
        """`[T+1, B, *shape]`, its bootstrap row in."""
        T, B = self.grid.T, self.grid.B
        if self.item["column"] is None:
            return np.zeros((T + 1, B, *self.shape), self.dtype)
        values = self.values()
        values[T * B :] = positioned(self.checks.values, self.bootstrap(), T * B, B)
        self.written = len(values)
        return values.reshape(T + 1, B, *self.shape)

    def bootstrap(self) -> AnyArray:
        """The bootstrap row `[B, *shape]`: the `next_` values of the last step."""
        return self.last.values

    def final_values(self) -> AnyArray:
        """The final observations `[E, *shape]` (under the layout's `final_obs`)."""
        if self.finals is None or self.finals.values is None:
            return np.zeros((int(self.grid.ends.sum()), *self.shape), self.dtype)
        return self.finals.values

    def output(self) -> AnyArray:
        """A model output `[T+1, B, ...]`; a per-step scalar's `[T+1]`, equal on every env."""
        values = self.finish()
        if not self.item.get("per_step"):
            return values
        first = values[:, :1]
        differs = values != first
        if values.dtype.kind == "f":  # NaN equals NaN here, as in `Rollout` equality
            differs &= ~(np.isnan(values) & np.isnan(first))
        if differs.any():
            t, b = (int(i) for i in np.argwhere(differs)[0])
            raise ValueError(
                f"column {self.item['column']!r} holds a per-step scalar ('per_step': true in "
                f"the layout), so one value per step, but env {b} differs from env 0 at step {t}"
            )
        per_step: AnyArray = values[:, 0].copy()
        return per_step


class NumberLeaf(Leaf):
    """A leaf stored as numbers: its `next_` (and `reset_`) column has a value in every row."""

    def __init__(self, grid: Grid, item: dict[str, Any], checks: Checks) -> None:
        super().__init__(grid, item, checks)
        column = item["column"]
        self.after = _After(item["next"], column, self, at_ends=self.finals is not None)
        self.last = self.after.last
        self.reset: _Reset | None = None
        if self.finals is not None:
            name = reset_column(column)
            self.reset = _Reset(name, _After(name, column, self))

    def feed_after(self, columns: dict[str, Any], start: int, stop: int) -> None:
        grid, name = self.grid, self.item["next"]
        column = columns[name]
        no_nulls(name, column, grid.rows(start))
        values = cells(grid.pa, name, column, self.item, grid.rows(start))
        ends = grid.ends[start:stop]
        if self.finals is not None and ends.any():
            self.finals.put(grid.ended, values[ends])
        self.after.add(start, values, None if self.finals is None else ~ends)
        self.after.check(self.values(), stop)
        if self.reset is not None:
            self.reset.feed(self, columns, start, stop)

    def bootstrap(self) -> AnyArray:
        """The `next_` values of the last step; under `final_obs`, the `reset_` values.

        The `reset_` values where they are given (every env as trajkit writes it now; at
        episode ends as earlier versions did), which the `next_` values equal but at ends.
        """
        if self.reset is None:
            return self.last.values
        following = self.reset.after.last
        bad = differ(self.last.values, following.values)
        if bad is not None:
            bad &= following.got & ~self.grid.ends[-self.grid.B :]
            if bad.any():
                reset = reset_column(self.item["column"])
                raise contradiction(
                    self.item["next"], reset, self.grid.T - 1, int(np.argmax(bad)), True
                )
        return _merge(following, self.last)


class ByteLeaf(Leaf):
    """A leaf stored as bytes (compact): `next_`/`reset_` bytes only where no row has them.

    `next_...` holds values on the last step (and, under `final_obs`, at episode ends: the
    final observations), `reset_obs...` at episode ends on the last step.
    """

    def __init__(self, grid: Grid, item: dict[str, Any], checks: Checks) -> None:
        super().__init__(grid, item, checks)
        self.reset_last = _LastStep(grid.B, self.shape, self.dtype)

    def feed_after(self, columns: dict[str, Any], start: int, stop: int) -> None:
        grid, item = self.grid, self.item
        boundary = (grid.T - 1) * grid.B
        ends = grid.ends[start:stop]
        last = np.zeros(stop - start, bool)
        last[max(0, boundary - start) :] = True
        if self.finals is None:
            got = self._picked(columns, item["next"], (start, last), "last step", _COMPACT_NEXT)
            self.last.put(got[0] - boundary, got[1])
            return
        what = "episode end or last step"
        rows, values = self._picked(columns, item["next"], (start, ends | last), what, _FINALS)
        at_ends = ends[rows - start]
        if at_ends.any():
            self.finals.put(grid.ended, values[at_ends])
        self.last.put(rows[~at_ends] - boundary, values[~at_ends])
        reset, what = reset_column(item["column"]), "episode end on the last step"
        rows, values = self._picked(columns, reset, (start, ends & last), what, _FINALS)
        self.reset_last.put(rows - boundary, values)

    def _picked(
        self,
        columns: dict[str, Any],
        name: str,
        wanted: tuple[int, AnyArray],
        what: str,
        why: str,
    ) -> tuple[AnyArray, AnyArray]:
        """A column's values exactly at the rows `wanted` (`what` they are), null elsewhere.

        `wanted`: the batch's first row and where it wants values. Returns their rows too.
        """
        column, grid = columns[name], self.grid
        start, wanted_here = wanted
        if column.null_count == len(column) and not wanted_here.any():  # most batches
            return np.zeros(0, np.int64), np.zeros((0, *self.shape), self.dtype)
        nulls = to_numpy(column.is_null()) if column.null_count else np.zeros(len(column), bool)
        if (nulls == wanted_here).any():
            i = int(np.argmax(nulls == wanted_here))
            said = "is null" if nulls[i] else "holds a value"
            want = f"an {what}" if wanted_here[i] else f"which is no {what}"
            raise ValueError(f"column {name!r} {said} at {grid.where(start + i)}, {want} ({why})")
        picked = np.flatnonzero(wanted_here)

        def rows(i: int) -> str:
            return grid.where(start + int(picked[i]))

        kept = filter_rows(grid.pa, column, wanted_here)
        return start + picked, cells(grid.pa, name, kept, self.item, rows)

    def bootstrap(self) -> AnyArray:
        """The `next_` bytes of the last step; under `final_obs`, `reset_` bytes at its ends."""
        return _merge(self.reset_last, self.last)


def _merge(first: _LastStep, then: _LastStep) -> AnyArray:
    """The last step's values: `first`'s where it has them, `then`'s elsewhere."""
    dtype = np.result_type(first.values.dtype, then.values.dtype)
    merged = then.values.astype(dtype)
    merged[first.got] = first.values[first.got]
    return merged


class _LastStep:
    """A column's values on the last step, `[B, *shape]`, put as they come (and which came).

    Of the leaf's dtype until the first values come; then of theirs.
    """

    def __init__(self, B: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.got: AnyArray = np.zeros(B, bool)
        self.values: AnyArray = np.zeros((B, *shape), dtype)
        self._typed = False

    def put(self, envs: AnyArray | slice, values: AnyArray) -> None:
        if not len(values):
            return
        if not self._typed:
            self.values, self._typed = self.values.astype(values.dtype), True
        self.values[envs] = values
        self.got[envs] = True


class _After:
    """A `next_` or `reset_` column, checked against the leaf's rows one step later.

    Its values wait until the rows they must equal are in; those of the last step are kept
    (`last`): they are the bootstrap row, which no row after gives. Waiting values are views
    of the batch they came in.
    """

    def __init__(self, name: str, column: str, leaf: Leaf, at_ends: bool = False) -> None:
        self.name, self.column, self.leaf, self.at_ends = name, column, leaf, at_ends
        # (first row, values, which to compare or None: all), or (rows, values, None)
        self.waiting: list[tuple[int | AnyArray, AnyArray, AnyArray | None]] = []
        self.last = _LastStep(leaf.grid.B, leaf.shape, leaf.dtype)

    def add(self, start: int, values: AnyArray, compared: AnyArray | None) -> None:
        """Values of rows `start...`; only those where `compared` are checked."""
        boundary = (self.leaf.grid.T - 1) * self.leaf.grid.B
        before = max(0, min(len(values), boundary - start))
        if before < len(values):
            first = start + before - boundary
            self.last.put(slice(first, first + len(values) - before), values[before:])
        if before:
            mask = None if compared is None else compared[:before]
            self.waiting.append((start, values[:before], mask))

    def add_rows(self, rows: AnyArray, values: AnyArray) -> None:
        """Values of the rows `rows` (ascending), each checked."""
        boundary = (self.leaf.grid.T - 1) * self.leaf.grid.B
        on_last = rows >= boundary
        self.last.put(rows[on_last] - boundary, values[on_last])
        if not on_last.all():
            self.waiting.append((rows[~on_last], values[~on_last], None))

    def check(self, leaf_values: AnyArray, filled: int) -> None:
        """Compare the waiting values whose rows one step later are in (below `filled`)."""
        B = self.leaf.grid.B
        still: list[tuple[int | AnyArray, AnyArray, AnyArray | None]] = []
        for rows, values, compared in self.waiting:
            if isinstance(rows, int):
                ready = max(0, min(len(values), filled - B - rows))
                if ready:
                    mask = None if compared is None else compared[:ready]
                    self._compare(
                        rows, values[:ready], leaf_values[rows + B : rows + B + ready], mask
                    )
                if ready < len(values):
                    rest = None if compared is None else compared[ready:]
                    still.append((rows + ready, values[ready:], rest))
                continue
            done = rows + B < filled
            if done.any():
                self._compare(rows[done], values[done], leaf_values[rows[done] + B], None)
            if not done.all():
                still.append((rows[~done], values[~done], None))
        self.waiting = still

    def _compare(
        self, rows: int | AnyArray, values: AnyArray, following: AnyArray, compared: AnyArray | None
    ) -> None:
        bad = differ(values, following)
        if bad is not None and compared is not None:
            bad &= compared
        if bad is None or not bad.any():
            return
        i = int(np.argmax(bad))
        row = rows + i if isinstance(rows, int) else int(rows[i])
        t, b = divmod(row, self.leaf.grid.B)
        raise contradiction(self.name, self.column, t, b, self.at_ends)


class _Reset:
    """`reset_obs...` of a leaf stored as numbers (the layout's `final_obs`).

    A value at every step, equal to the next row's observation (the bootstrap row's on the
    last step); or, as earlier trajkit versions wrote it, values exactly at episode ends and
    nulls elsewhere. A file has one or the other: the first null says which, and the first
    row (in row order) that the earlier layout would refuse is refused as it would be.
    """

    def __init__(self, name: str, after: _After) -> None:
        self.name, self.after = name, after
        self.valued_other: int | None = None  # the first row with a value at no episode end
        self.legacy = False  # a null seen: values exactly at episode ends

    def feed(self, leaf: Leaf, columns: dict[str, Any], start: int, stop: int) -> None:
        grid = leaf.grid
        column, ends = columns[self.name], grid.ends[start:stop]
        nulls = to_numpy(column.is_null()) if column.null_count else None
        if nulls is not None or self.legacy:
            self._legacy(grid, start, ends, nulls)
        elif self.valued_other is None and not ends.all():
            self.valued_other = start + int(np.argmin(ends))
        if nulls is None:
            values = cells(grid.pa, self.name, column, leaf.item, grid.rows(start))
            self.after.add(start, values, None)
        else:
            picked = np.flatnonzero(~nulls)

            def rows(i: int) -> str:
                return grid.where(start + int(picked[i]))

            valid = filter_rows(grid.pa, column, ~nulls)
            self.after.add_rows(start + picked, cells(grid.pa, self.name, valid, leaf.item, rows))
        self.after.check(leaf.values(), stop)

    def _legacy(self, grid: Grid, start: int, ends: AnyArray, nulls: AnyArray | None) -> None:
        """Values exactly at episode ends: refuse the first row where that is not so."""
        if not self.legacy:
            self.legacy = True
            if self.valued_other is not None:
                self._refuse(grid, self.valued_other, False)
        present = np.ones(len(ends), bool) if nulls is None else ~nulls
        wrong = present != ends
        if wrong.any():
            i = int(np.argmax(wrong))
            self._refuse(grid, start + i, bool(ends[i]))

    def _refuse(self, grid: Grid, row: int, at_end: bool) -> None:
        said = "is null" if at_end else "holds a value"
        want = "an episode end" if at_end else "which is no episode end"
        raise ValueError(
            f"column {self.name!r} {said} at {grid.where(row)}, {want} ({_LEGACY_RESET})"
        )


class _Finals:
    """A leaf's final observations `[E, *shape]`, in (t, b) order, put as they come."""

    def __init__(self, check: Convert, count: int, dtype: np.dtype[Any], shape: tuple[int, ...]):
        self.check, self.count, self.dtype, self.shape = check, count, dtype, shape
        self.values: AnyArray | None = None

    def put(self, first: int, values: AnyArray) -> None:
        """The final observations `first...` (the episode ends before them: `first`)."""
        if self.values is None:
            self.values = np.empty((self.count, *self.shape), self.dtype)
        self.values[first : first + len(values)] = positioned(self.check, values, first, 1)
