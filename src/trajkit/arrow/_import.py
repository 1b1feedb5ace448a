"""An Arrow table in trajkit's layout back into a rollout, every value checked on the way."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.infos import infos_to_json, sparse_infos_to_json, strict_json_loads
from trajkit._models.arrays import first_true, fmt_index
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, Rule, conform_into, lossless
from trajkit.arrow._buffers import from_numpy, to_numpy
from trajkit.arrow._export import new_episodes
from trajkit.arrow._layout import (
    check_columns,
    load_compute,
    load_pyarrow,
    read_layout,
    reset_column,
)

LAZY_BATCH_BYTES = 4 << 20
"""About how many bytes of a bytes column `read_parquet` decodes at a time."""

# `{` and `[` allowed in the `info` column besides its info objects: this many, plus one per
# 16 bytes (each text is decoded on its own, so the JSON budget of `load` does not apply).
NESTED_ALLOWANCE = 4096
BYTES_PER_NESTED = 16


def _stored(rule: Rule) -> np.dtype[Any]:
    """The dtype a field is stored as, from its declaration in the rule table."""
    return np.dtype(rule.file_dtype)


class LazyColumns:
    """Columns of a Parquet file left out of a table, read a batch at a time when wanted.

    They hold the rows `start` to `stop` of the file (those of one rollout).
    """

    def __init__(self, pa: Any, file: Any, types: dict[str, Any], start: int, stop: int):
        self.pa, self.file, self.types, self.start, self.stop = pa, file, types, start, stop

    def rows(self, rows: AnyArray) -> LazyColumns | None:
        """The columns at `rows` (ascending), or `None` where they are not consecutive."""
        if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1:
            start = self.start + int(rows[0])
            return LazyColumns(self.pa, self.file, self.types, start, start + len(rows))
        return None

    def chunks(self, name: str) -> Iterator[Any]:
        """The column's values, rows `start` to `stop`, a batch at a time."""
        metadata = self.file.metadata
        groups, first, position = [], None, 0
        for i in range(metadata.num_row_groups):
            size = metadata.row_group(i).num_rows
            if position + size > self.start and position < self.stop:
                groups.append(i)
                first = position if first is None else first
            position += size
        position = 0 if first is None else first
        rows = max(1, LAZY_BATCH_BYTES // max(1, self.types[name].byte_width))
        for batch in self.file.iter_batches(
            batch_size=rows, row_groups=groups, columns=[name], use_threads=False
        ):
            lo, hi = max(self.start, position), min(self.stop, position + batch.num_rows)
            if lo < hi:
                yield batch.column(0).slice(lo - position, hi - lo)
            position += batch.num_rows

    def column(self, name: str) -> Any:
        """The whole column (rows `start` to `stop`) in memory."""
        return self.pa.chunked_array(list(self.chunks(name)), self.types[name])

    def schema_field(self, name: str) -> Any:
        return self.pa.field(name, self.types[name])


def read_table(
    table: Any, max_rows: int | None, lazy: LazyColumns | None = None
) -> tuple[Rollout, AnyArray]:
    """The rollout of a one-rollout table, and its episode ids `[T, B]`.

    `lazy`: columns of the file not in the table (`None`: all are). `read_parquet` reads
    bytes columns so, into the rollout's arrays, a batch at a time.
    """
    pa = load_pyarrow()
    layout = read_layout(pa, table)
    check_columns(pa, table, layout, lazy.types if lazy is not None else {})
    rows = table.num_rows
    if max_rows is not None and rows > max_rows:
        raise ValueError(
            f"the table has {rows} rows, more than max_rows={max_rows}; pass a larger "
            "max_rows (or None) to read it"
        )
    if rows == 0:
        raise ValueError("the table has no rows; a rollout has at least one step per env")
    ids = index_column(table, "rollout")
    if int(ids.min()) != int(ids.max()):
        raise ValueError(
            f"the table holds {len(np.unique(ids))} rollouts; split it by its "
            "'rollout' column (read_parquet does) before from_arrow"
        )
    grid = _Grid.of(pa, table)
    grid.lazy = lazy
    flag = FIELD_RULES["truncated"]
    dones_rule = FIELD_RULES["dones"]
    starts = conform_into(dones_rule, _stored(dones_rule), grid.cells("is_first"), "is_first")
    terminated = conform_into(flag, _stored(flag), grid.cells("terminated"), "column 'terminated'")
    cut = conform_into(flag, _stored(flag), grid.cells("truncated"), "column 'truncated'")
    dones = np.concatenate([starts, _ends(starts, terminated, cut)[None]])
    episodes = grid.cells("episode_id")
    _check_episodes(episodes, dones)
    rews_rule = FIELD_RULES["rews"]
    rews = conform_into(rews_rule, _stored(rews_rule), grid.cells("reward"), "rews")
    truncated = final_values = None
    if layout["truncation"]:
        truncated = cut
        rule = FIELD_RULES["final_values"]
        final_values = conform_into(rule, _stored(rule), grid.cells("final_value"), "final_values")
    elif (cut == 1).any():
        t, b = first_true(cut == 1)
        raise ValueError(
            f"column 'truncated' is true at step {t}, env {b}, but the table's layout says "
            "the rollout has no truncations ('truncation': false)"
        )
    ends = dones[1:] == 1 if layout.get("final_obs") else None
    fields = {field: _field(grid, layout, field, ends) for field in ("obses", "states")}
    finals = None
    if ends is not None:
        finals = _field(grid, layout, "obses", ends, finals=True)
    outs = {item["key"]: _output(grid, item) for item in layout["model_outs"]}
    rollout = Rollout(
        states=fields["states"],
        obses=fields["obses"],
        rews=rews,
        dones=dones,
        infos=_infos(grid),
        model_outs=outs,
        truncated=truncated,
        final_values=final_values,
        final_obses=finals,
        copy=False,
    )
    return rollout, episodes


def _field(
    grid: _Grid, layout: dict[str, Any], field: str, ends: AnyArray | None, finals: bool = False
) -> Any:
    """`obses` or `states` from their columns, or with `finals` the final observations.

    With `ends` (the layout's `final_obs`), `next_obs...` holds the final observation at
    episode ends and `reset_obs...` the observation after them.
    """
    T, B = grid.T, grid.B
    entry = layout["fields"][field]
    rule = FIELD_RULES["final_obses" if finals else field]
    pairs = []
    for leaf in entry["leaves"]:
        path, dtype, shape = tuple(leaf["path"]), np.dtype(leaf["dtype"]), leaf["shape"]
        if leaf["column"] is None:
            rows = (int(ends.sum()),) if finals and ends is not None else (T + 1, B)
            pairs.append((path, np.zeros((*rows, *shape), dtype)))
            continue
        label = _tree.format_path("final_obses" if finals else field, path)
        name = f"{label} (column {(leaf['next'] if finals else leaf['column'])!r})"
        if field == "obses" and ends is not None:
            values, final = grid.with_finals(leaf, ends)
            values = final if finals else values
        else:
            values = grid.both(leaf)
        axes = "e" if finals else "tb"
        pairs.append(
            (path, exactly(conform_into(rule, dtype, values, name, axes=axes), values, name))
        )
    return _tree.unflatten_paths(pairs) if entry["nested"] else pairs[0][1]


def exactly(converted: AnyArray, values: AnyArray, name: str) -> AnyArray:
    """`converted`, refused where it rounded a float of `values` to a narrower float dtype.

    `lossless` lets a wider float round to a narrower one (a rollout's float64 into float32
    storage); a table's column is converted to the dtype its layout declares, and a layout
    that declares less precision than the values have would change them without a word.
    """
    if not (
        values.dtype.kind == "f"
        and converted.dtype.kind == "f"
        and converted.dtype.itemsize < values.dtype.itemsize
    ):
        return converted
    back = converted.astype(values.dtype)
    changed = (back != values) & ~(np.isnan(back) & np.isnan(values))
    if changed.any():
        pos = first_true(changed)
        raise ValueError(
            f"{name} holds {values[pos].item()!r} at {fmt_index(pos)}, which the layout's "
            f"dtype {converted.dtype} cannot hold exactly (it would become "
            f"{back[pos].item()!r}); the layout must declare a dtype that holds every value"
        )
    return converted


def _ends(starts: AnyArray, terminated: AnyArray, cut: AnyArray) -> AnyArray:
    """`dones[T]` from the flags of the last step, with the flags checked against `is_first`."""
    both = (terminated == 1) & (cut == 1)
    if both.any():
        t, b = first_true(both)
        raise ValueError(
            f"columns 'terminated' and 'truncated' are both true at step {t}, env {b}; an "
            "episode ends one way"
        )
    flagged = (terminated == 1) | (cut == 1)
    following = starts[1:] == 1
    if not np.array_equal(flagged[:-1], following):
        t, b = first_true(flagged[:-1] != following)
        if flagged[t, b]:
            which = "terminated" if terminated[t, b] == 1 else "truncated"
            raise ValueError(
                f"column {which!r} contradicts column 'is_first': it is true at step {t}, "
                f"env {b}, but 'is_first' is false at step {t + 1} (an episode that ended "
                "there makes the next step start one)"
            )
        raise ValueError(
            f"columns 'terminated' and 'truncated' contradict column 'is_first': both are "
            f"false at step {t}, env {b}, but 'is_first' is true at step {t + 1} (one of them "
            "says how the episode before ended)"
        )
    last: AnyArray = flagged[-1].astype(np.float32)
    return last


def _check_episodes(ids: AnyArray, dones: AnyArray) -> None:
    """One id per episode as `dones` cuts them (each env's first row starts one), all distinct."""
    new = new_episodes(dones, np.zeros(dones.shape[1], bool))
    T, B = new.shape
    number = np.cumsum(new.T.reshape(-1)).reshape(B, T).T - 1  # the episode of each (t, b)
    firsts = np.flatnonzero(new.T.reshape(-1))  # env-major positions of each episode's start
    first_ids = ids.T.reshape(-1)[firsts]
    expected = first_ids[number]
    if not np.array_equal(ids, expected):
        t, b = first_true(ids != expected)
        raise ValueError(
            f"column 'episode_id' changes within an episode at step {t}, env {b}: it holds "
            f"{int(ids[t, b])}, where the episode's first step holds {int(expected[t, b])} "
            "('is_first' is false there)"
        )
    unique, counts = np.unique(first_ids, return_counts=True)
    if (counts > 1).any():
        value = unique[int(np.argmax(counts > 1))]
        (a, b_), *_ = ((int(p) % T, int(p) // T) for p in firsts[first_ids == value])
        raise ValueError(
            f"column 'episode_id' gives {int(counts.max())} episodes the id {int(value)} "
            f"(the first starts at step {a}, env {b_}); each episode has its own"
        )


_LEGACY_RESET = (
    "the layout's 'final_obs': true puts a value there at every step, or, as earlier trajkit "
    "versions wrote it, exactly at episode ends"
)
_COMPACT_NEXT = "the compact layout stores the 'next_' bytes of a leaf on the last step only"
_FINALS = (
    "the compact layout stores the 'next_obs' bytes of a leaf at episode ends and on the last "
    "step, its 'reset_obs' bytes at episode ends on the last step"
)


def binary_values(column: Any, dtype: np.dtype[Any], shape: Sequence[int]) -> AnyArray:
    """A binary array's values (no nulls) as `[len, *shape]` of `dtype`, zero-copy.

    Fixed-size binary of the cell's size, or variable-size binary whose values are each
    exactly one cell long (refused otherwise, naming the first row that is not).
    """
    n = len(column)
    width = int(dtype.itemsize * np.prod(shape, dtype=np.int64))
    data = column.buffers()[-1]
    if str(column.type).startswith("fixed_size_binary"):
        start = column.offset * width
    else:
        kind = np.int64 if "large" in str(column.type) else np.int32
        offsets = np.frombuffer(
            column.buffers()[1], kind, count=n + 1, offset=column.offset * np.dtype(kind).itemsize
        )
        lengths = np.diff(offsets)
        if (lengths != width).any():
            row = int(np.argmax(lengths != width))
            raise _CellSizeError(row, int(lengths[row]), width)
        start = int(offsets[0])
    if data is None:
        return np.zeros((0, *shape), dtype)
    raw = np.frombuffer(data, np.uint8, count=n * width, offset=start)
    values: AnyArray = raw.view(dtype).reshape(n, *shape)
    return values


class _CellSizeError(ValueError):
    """A binary value of another length than the layout's cell (its row, length, width)."""

    def __init__(self, row: int, length: int, width: int) -> None:
        super().__init__(row, length, width)
        self.row, self.length, self.width = row, length, width


class _Grid:
    """The rows of a one-rollout table as a (step, env) grid, read column by column."""

    def __init__(self, pa: Any, table: Any, T: int, B: int, order: AnyArray | None) -> None:
        self.pa, self.table, self.T, self.B, self.order = pa, table, T, B, order
        self.lazy: LazyColumns | None = None

    def _chunks(self, name: str) -> Any:
        """The column `name` as it comes: its chunks, from the table or the file."""
        if self.lazy is not None and name in self.lazy.types:
            return self.lazy.chunks(name)
        return self.table.column(name).chunks

    @classmethod
    def of(cls, pa: Any, table: Any) -> _Grid:
        """Check that `step` and `env` index every (step, env) once; before any allocation."""
        rows = table.num_rows
        steps = index_column(table, "step")
        envs = index_column(table, "env")
        for name, values in (("step", steps), ("env", envs)):
            low = int(values.min())
            if low < 0:
                row = int(np.argmin(values))
                raise ValueError(f"column {name!r} holds {low} at row {row}; it counts from 0")
        T, B = int(steps.max()) + 1, int(envs.max()) + 1
        if rows != T * B:  # Python ints: no overflow, and nothing allocated yet
            raise ValueError(
                f"the rows are not a full grid of steps 0..{T - 1} by envs 0..{B - 1}: that "
                f"makes {T * B} rows, the table has {rows} (each (step, env) once)"
            )
        keys = steps.astype(np.int64) * B + envs.astype(np.int64)  # < rows: bounded above
        counts = np.bincount(keys, minlength=rows)
        if (counts != 1).any():
            key = int(np.argmax(counts > 1))
            t, b = divmod(key, B)
            raise ValueError(
                f"the rows are not a full grid of steps 0..{T - 1} by envs 0..{B - 1}: step "
                f"{t}, env {b} appears {int(counts[key])} times (each (step, env) once)"
            )
        order = None if (np.diff(keys) == 1).all() else np.argsort(keys)
        return cls(pa, table, T, B, order)

    def _where(self, i: int) -> str:
        t, b = divmod(i, self.B)
        row = i if self.order is None else int(self.order[i])
        return f"step {t}, env {b} (row {row})"

    def _column(self, name: str) -> Any:
        if self.lazy is not None and name in self.lazy.types:
            column = self.lazy.column(name).combine_chunks()
        else:
            column = self.table.column(name).combine_chunks()
        if self.order is not None:
            column = column.take(from_numpy(self.pa, self.order))
        return column

    def cells(
        self, name: str, shape: Sequence[int] = (), item: dict[str, Any] | None = None
    ) -> AnyArray:
        """A column as `[T, B, *shape]`: a value in every cell, no null anywhere.

        `item` (a leaf or output of the layout) says the dtype of a column of bytes.
        """
        return self._filled(name, shape, item, 0)[: self.T]

    def _filled(
        self, name: str, shape: Sequence[int], item: dict[str, Any] | None, extra: int
    ) -> AnyArray:
        """`cells`, as the first T rows of an array of `T + extra` (the rest left to fill)."""
        if item is not None and item.get("binary") and self.order is None:
            return self._binary_rows(name, item, extra)
        column = self._column(name)
        self._no_nulls(name, column)
        values = self._values(name, column, shape, None, item).reshape(self.T, self.B, *shape)
        if extra:
            return np.concatenate([values, np.empty((extra, *values.shape[1:]), values.dtype)])
        return np.ascontiguousarray(values)

    def _no_nulls(self, name: str, column: Any, first: int = 0) -> None:
        """Refuse a null in `column` (rows from `first` of the grid), naming the first."""
        if column.null_count:
            nulls = to_numpy(column.is_null())
            raise ValueError(
                f"column {name!r} is null at {self._where(first + int(np.argmax(nulls)))}; a "
                "rollout has a value at every step"
            )

    def _binary_rows(self, name: str, item: dict[str, Any], extra: int) -> AnyArray:
        """A column of bytes in row order, copied chunk by chunk into `[T + extra, B, ...]`."""
        dtype, shape = np.dtype(item["dtype"]), item["shape"]
        out = np.empty(((self.T + extra) * self.B, *shape), dtype)
        start = 0
        for chunk in self._chunks(name):
            if chunk.null_count:
                self._no_nulls(name, chunk, start)
            out[start : start + len(chunk)] = self._values(name, chunk, shape, None, item, start)
            start += len(chunk)
        return out.reshape(self.T + extra, self.B, *shape)

    def cells_at(
        self,
        name: str,
        shape: Sequence[int],
        where: AnyArray,
        what: str,
        item: dict[str, Any] | None = None,
        why: str = "the layout's 'final_obs': true puts a value there exactly at episode ends",
    ) -> AnyArray:
        """A column's values at the cells `where` (`[T, B]`), `[count, *shape]` in (t, b) order.

        The column holds a value in each of those cells (`what` they are), null in the others.
        """
        column = self._column(name)
        wanted = where.reshape(-1)
        nulls = to_numpy(column.is_null())
        if (nulls == wanted).any():
            i = int(np.argmax(nulls == wanted))
            said = "is null" if nulls[i] else "holds a value"
            want = f"an {what}" if wanted[i] else f"which is no {what}"
            raise ValueError(f"column {name!r} {said} at {self._where(i)}, {want} ({why})")
        picked = np.flatnonzero(wanted)
        values = self._values(name, column.filter(from_numpy(self.pa, wanted)), shape, picked, item)
        return np.ascontiguousarray(values.reshape(len(picked), *shape))

    def _values(
        self,
        name: str,
        column: Any,
        shape: Sequence[int],
        rows: AnyArray | None,
        item: dict[str, Any] | None = None,
        first: int = 0,
    ) -> AnyArray:
        """The flat values of a column without nulls at its top level.

        Its row i is the grid's cell `rows[i]` (or `first + i`, without `rows`), for messages.
        """
        pa = self.pa

        def at(i: int) -> str:
            return self._where(first + i if rows is None else int(rows[i]))

        if item is not None and item.get("binary"):
            try:
                return binary_values(column, np.dtype(item["dtype"]), shape)
            except _CellSizeError as exc:
                raise ValueError(
                    f"column {name!r} holds {exc.length} bytes at {at(exc.row)}, where the "
                    f"layout's cell ({item['dtype']} of shape {list(shape)}) has {exc.width}"
                ) from None

        if isinstance(column.type, pa.FixedShapeTensorType):
            column = column.storage
            shape_here: Sequence[int] = (int(np.prod(shape)),)
        else:
            shape_here = shape
        per_row = 1  # values of the current level in one row
        for level, size in enumerate(shape_here):
            if level and column.null_count:
                self._inner_null(name, column, per_row, at)
            if not pa.types.is_fixed_size_list(column.type):
                lengths = to_numpy(load_compute().list_value_length(column))
                if (lengths != size).any():
                    i = int(np.argmax(lengths != size))
                    raise ValueError(
                        f"column {name!r} holds a list of {int(lengths[i])} values at "
                        f"{at(i // per_row)}, where the layout's cell shape "
                        f"{list(shape)} needs {size} (level {level + 1})"
                    )
            column = column.flatten()
            per_row *= size
        if len(shape_here) and column.null_count:
            self._inner_null(name, column, per_row, at)
        return to_numpy(column)

    @staticmethod
    def _inner_null(name: str, column: Any, per_row: int, at: Callable[[int], str]) -> None:
        nulls = to_numpy(column.is_null())
        raise ValueError(
            f"column {name!r} holds a null value at "
            f"{at(int(np.argmax(nulls)) // per_row)}; a rollout has a value at every step"
        )

    def last_step(self) -> AnyArray:
        """`[T, B]`: true on the last step."""
        last = np.zeros((self.T, self.B), bool)
        last[-1] = True
        return last

    def both(self, item: dict[str, Any]) -> AnyArray:
        """A leaf or output's column and its `next_` column as `[T+1, B, ...]`, checked to agree.

        For bytes (compact layout), the `next_` column holds a value on the last step only.
        """
        shape = item["shape"]
        full = self._filled(item["column"], shape, item, 1)
        if item.get("binary"):
            full[-1] = self.cells_at(
                item["next"], shape, self.last_step(), "last step", item, _COMPACT_NEXT
            )
            return full
        after = self.cells(item["next"], shape, item)
        _check_next(item["next"], item["column"], after[:-1], full[1:-1], None)
        full[-1] = after[-1]
        return full

    def with_finals(self, leaf: dict[str, Any], ends: AnyArray) -> tuple[AnyArray, AnyArray]:
        """An observation leaf `[T+1, B, ...]` and its final observations `[E, ...]`.

        Under the layout's `final_obs`, `next_obs...` holds the final observation where a step
        ends its episode (`ends`, `[T, B]`) and `reset_obs...` the observation after it there:
        each agrees with the next row's `obs` where there is one.
        """
        shape = leaf["shape"]
        full = self._filled(leaf["column"], shape, leaf, 1)
        if leaf.get("binary"):
            return self._compact_finals(leaf, ends, full)
        after = self.cells(leaf["next"], shape, leaf)
        reset_name = reset_column(leaf["column"])
        if self._column(reset_name).null_count:  # as trajkit wrote it before: at ends only
            reset = self.cells_at(reset_name, shape, ends, "episode end", leaf, _LEGACY_RESET)
            full[-1] = after[-1]
            full[-1][ends[-1]] = reset[len(reset) - int(ends[-1].sum()) :]  # (t, b) order: last
            _check_next(reset_name, leaf["column"], reset, full[1:][ends], None, at=ends)
        else:
            reset = self.cells(reset_name, shape, leaf)
            full[-1] = reset[-1]
            _check_next(reset_name, leaf["column"], reset[:-1], full[1:-1], None)
        _check_next(leaf["next"], leaf["column"], after[:-1], full[1:-1], ends[:-1])
        _check_next(leaf["next"], reset_name, after[-1:], full[-1:], ends[-1:], t0=self.T - 1)
        return full, after[ends]

    def _compact_finals(
        self, leaf: dict[str, Any], ends: AnyArray, full: AnyArray
    ) -> tuple[AnyArray, AnyArray]:
        """`with_finals` of a leaf stored as bytes (compact layout).

        Its `next_obs...` holds values at episode ends and on the last step, its
        `reset_obs...` at episode ends on the last step.
        """
        shape, last = leaf["shape"], self.last_step()
        where = ends | last
        after = self.cells_at(leaf["next"], shape, where, "episode end or last step", leaf, _FINALS)
        at_ends = ends[where]  # which of them are ends, in (t, b) order
        full[-1] = after[-self.B :]
        ended = ends[-1]
        if ended.any():
            reset = self.cells_at(
                reset_column(leaf["column"]), shape, ends & last, "episode end on the last step",
                leaf, _FINALS,
            )  # fmt: skip
            full[-1][ended] = reset
        return full, after[at_ends]

    def texts(self, name: str) -> list[tuple[int, str]]:
        """A string column's values that are not null, with their grid positions."""
        column = self._column(name)
        if column.null_count == len(column):
            return []
        where = np.flatnonzero(~to_numpy(column.is_null()))
        try:
            texts: list[str] = column.filter(column.is_valid()).to_pylist()
        except UnicodeDecodeError as exc:
            raise ValueError(f"column {name!r} holds text that is not UTF-8: {exc}") from None
        return list(zip(where.tolist(), texts, strict=True))


def _check_next(
    name: str,
    column: str,
    after: AnyArray,
    following: AnyArray,
    skip: AnyArray | None,
    at: AnyArray | None = None,
    t0: int = 0,
) -> None:
    """`after` (column `name`) equals `following` (`column` a step later), but where `skip`.

    `at` (`[T, B]`) says which cells `after` and `following` hold, when only some.
    """
    same = after == following
    if after.dtype.kind == "f" or following.dtype.kind == "f":  # NaN is NaN here, as in `==`
        same |= np.isnan(after.astype(np.float64)) & np.isnan(following.astype(np.float64))
    lead = same.shape[: 1 if at is not None else 2]  # one cell per (t, b)
    if same.ndim > len(lead):
        same = same.reshape(*lead, -1).all(axis=-1) if same.size else np.ones(lead, bool)
    if skip is not None:
        same |= skip
    if same.all():
        return
    if at is None:
        t, b = (int(i) for i in np.argwhere(~same)[0])
        t += t0
    else:
        t, b = (int(i) for i in np.argwhere(at)[int(np.argmin(same))])
    raise ValueError(
        f"column {name!r} contradicts column {column!r}: it holds at step {t}, env {b} "
        f"another value than {column!r} at step {t + 1} (the values after a step are those "
        "of the next step"
        + (", but at an episode end ('final_obs': true in the layout)" if skip is not None else "")
        + ")"
    )


def index_column(table: Any, name: str) -> AnyArray:
    """An integer column with no nulls (`rollout`, `step`, `env`), as NumPy."""
    column = table.column(name)
    if column.null_count:
        nulls = to_numpy(column.is_null())
        raise ValueError(f"column {name!r} is null at row {int(np.argmax(nulls))}")
    values = to_numpy(column)
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        row = int(np.argmax(values))
        raise ValueError(f"column {name!r} holds {int(values[row])} at row {row}, out of range")
    return values


def _output(grid: _Grid, item: dict[str, Any]) -> AnyArray:
    """A model output `[T+1, B, ...]`; a per-step scalar's `[T+1]`, equal on every env."""
    name = f"model_outs[{item['key']!r}] (column {item['column']!r})"
    stored = grid.both(item)
    values = exactly(lossless(stored, np.dtype(item["dtype"]), name), stored, name)
    if not item.get("per_step"):
        return values
    first = values[:, :1]
    differs = values != first
    if values.dtype.kind == "f":  # NaN equals NaN here, as in `Rollout` equality
        differs &= ~(np.isnan(values) & np.isnan(first))
    if differs.any():
        t, b = (int(i) for i in np.argwhere(differs)[0])
        raise ValueError(
            f"column {item['column']!r} holds a per-step scalar ('per_step': true in the "
            f"layout), so one value per step, but env {b} differs from env 0 at step {t}"
        )
    per_step: AnyArray = values[:, 0].copy()
    return per_step


def _infos(grid: _Grid) -> list[list[dict[str, Any]]] | None:
    """The `info` column as infos, checked by the rule `trajkit.save` applies."""
    T, B = grid.T, grid.B
    given = grid.texts("info")
    if not given:
        return None
    data = "\x00".join(text for _, text in given).encode("utf-8", "surrogatepass")
    nested = data.count(b"{") + data.count(b"[") - len(given)
    limit = NESTED_ALLOWANCE + len(data) // BYTES_PER_NESTED
    if nested > limit:  # decoding would take memory far out of proportion to the column
        raise ValueError(
            f"column 'info' holds {nested} '{{' and '[' besides its {len(given)} info "
            f"objects, more than the {limit} trajkit's file format allows (as infos.json)"
        )
    rows: list[list[dict[str, Any]]] = [[{} for _ in range(B)] for _ in range(T)]
    for i, text in given:
        try:
            info = strict_json_loads(text.encode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError) as exc:
            why = "is nested too deeply" if isinstance(exc, RecursionError) else f"({exc})"
            raise ValueError(f"column 'info' at {grid._where(i)} is not valid JSON {why}") from None
        if not isinstance(info, dict):
            raise ValueError(
                f"column 'info' at {grid._where(i)} holds a JSON {type(info).__name__}; an "
                "info is a JSON object"
            )
        rows[i // B][i % B] = info
    _check_as_save(rows, T, B)
    return rows


def _check_as_save(rows: list[list[dict[str, Any]]], T: int, B: int) -> None:
    """Refuse infos that `trajkit.save` would refuse, by the encoding it would choose."""
    full = sum(1 for row in rows for item in row if item)
    if 2 * full <= T * B:
        sparse_infos_to_json(rows)
    else:
        infos_to_json(rows)
