"""Arrow data in trajkit's layout back into rollouts, every value checked on the way.

An import reads a table in two passes. The first (`_plan`) reads the small columns: which
rows make which rollout, its T and B, its flags. The second reads every other column a
batch of rows at a time, in (step, env) order (`Assembly.feed`): each batch's cells become
NumPy arrays straight from Arrow's buffers, are checked once, and are copied into the
rollout's arrays (one copy); a `next_` column is checked against the rows after it as they
come in. So nothing the size of a column is built besides the rollout: a Parquet file is read
a row group at a time (`iter_file`), one rollout after the other, and its rows never become
one table. Its first pass keeps only the runs of its `rollout` column (a range of rows per
rollout); each rollout's small columns are read when its turn comes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.infos import infos_to_json, sparse_infos_to_json, strict_json_loads
from trajkit._models.rollout import Rollout
from trajkit._models.rules import (
    FIELD_RULES,
    STEP_COLUMNS,
    TREE_FIELDS,
    conform_into,
    episode_ends,
    lossless,
)
from trajkit.arrow._ahead import Batches, file_batches
from trajkit.arrow._buffers import binaries, from_numpy, take_rows, to_numpy
from trajkit.arrow._cells import Where, exactly, no_nulls, positioned
from trajkit.arrow._export import EpisodeIds
from trajkit.arrow._layout import (
    LAYOUT_COLUMN,
    cell_bytes,
    check_columns,
    load_compute,
    load_pyarrow,
    read_layout,
)
from trajkit.arrow._leaves import Checks, Grid, Leaf, make_leaf
from trajkit.arrow._pages import (
    DamagedPageError,
    NullColumn,
    PageColumn,
    Prefetch,
    Prefetched,
    null_columns,
    number_columns,
    plain_columns,
    text_column,
)
from trajkit.arrow._plan import (
    PLAN_COLUMNS,
    SMALL_COLUMNS,
    Plan,
    check_episodes,
    index_column,
    number,
    plan_rollout,
    plan_rollouts,
    stored,
)

BATCH_BYTES = 8 << 20
"""About how many bytes of cells the second pass of an import reads at a time."""

PREFETCH_BYTES = 1 << 20
"""A rollout's plain columns are read ahead (`Prefetch`) from this many bytes: below, the
thread would cost about what it saves."""

_SMALL_BATCH_ROWS = 1 << 20

FIRST_ROWS = 1 << 16
"""The rows of a rollout's plan columns read from their pages first (`_Pages.take`)."""

# `{` and `[` allowed in the `info` column besides its info objects: this many, plus one per
# 16 bytes (each text is decoded on its own, so the JSON budget of `load` does not apply).
NESTED_ALLOWANCE = 4096
BYTES_PER_NESTED = 16


# ------------------------------------------------------------------------------ entry points


def read_table(table: Any, max_rows: int | None) -> Rollout:
    """The rollout of a one-rollout table (`from_arrow`)."""
    pa = load_pyarrow()
    layout = read_layout(pa, table)
    check_columns(pa, table.schema, layout)
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
    plan = plan_rollout(pa, table, layout, range(rows))
    if plan.order is not None:
        table = take_rows(pa, table, plan.order)
    assembly = Assembly(pa, layout, plan)
    _feed(assembly, table, layout)
    return assembly.finish()


def iter_file(
    pa: Any,
    file: Any,
    reopen: Callable[[Any], Any],
    max_rows: int | None,
    fd: int | None = None,
) -> Iterator[Rollout]:
    """The rollouts of a Parquet file (`iter_parquet`), one at a time, in `rollout` id order.

    `reopen(metadata)`: another reader of the same open file, for a thread of its own. `fd`:
    the file's descriptor, for its plain columns' pages read into place (`_pages`).
    """
    declared = file.metadata.num_rows
    if max_rows is not None and declared > max_rows:
        raise ValueError(
            f"the file declares {declared} rows, more than max_rows={max_rows}; "
            "pass a larger max_rows (or None) to read it"
        )
    schema = file.schema_arrow
    index = _Index(pa, file, max_rows, fd)
    layout = read_layout(pa, index.layouts)
    check_columns(pa, schema, layout)
    if index.problem is not None:
        raise index.problem
    if declared == 0:
        raise ValueError("the table has no rows; a rollout has at least one step per env")
    names = [name for name in schema.names if name not in (*SMALL_COLUMNS, LAYOUT_COLUMN)]
    if index.runs is None:  # rollouts out of order, or one's rows apart: read whole
        yield from _whole(pa, file, layout, names)
        return
    small: _Cut | _Pages
    plan = {} if fd is None else number_columns(file, PLAN_COLUMNS, fd)
    if len(plan) == len(PLAN_COLUMNS):  # each read from its pages
        small = _Pages(pa, [schema.field(name) for name in PLAN_COLUMNS], plan)
    else:
        small = _Cut(file_batches(reopen(file.metadata), list(PLAN_COLUMNS), _SMALL_BATCH_ROWS))
    direct = {} if fd is None else plain_columns(file, names, _widths(layout), fd)
    others = [name for name in names if name not in direct]
    numbers = {} if fd is None else number_columns(file, others, fd)
    nulls = {} if fd is None else null_columns(file, set(others) - set(numbers), fd)
    pages = _Pages(pa, [schema.field(name) for name in others], numbers, nulls)
    rest = [name for name in others if name not in numbers and name not in nulls]
    merging = pages.part if numbers or nulls else None  # (read by the threads that decode)
    with Batches(file, reopen, rest, _batch_rows(layout, direct), merging) as batches:
        rollouts = _Rollouts(pa, schema, layout, small, _Cut(batches), direct)
        for k, rows in enumerate(index.runs):
            yield rollouts.read(k, rows)  # nothing of it stays here once the caller lets go
        rollouts.rest.end()
        for column in direct.values():
            column.end()
        if isinstance(small, _Pages):
            small.end()


def _widths(layout: dict[str, Any]) -> dict[str, int]:
    """The compact leaves' columns (bytes, a cell a row) and their cells' sizes."""
    return {
        item["column"]: cell_bytes(item)
        for item in _items(layout)
        if item.get("binary") and item["column"] is not None
    }


def _items(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """The layout's leaves of every tree field, then its model outputs."""
    leaves = [leaf for f in TREE_FIELDS for leaf in layout["fields"][f]["leaves"]]
    return [*leaves, *layout["model_outs"]]


class _Rollouts:
    """The second pass over a file in `write_parquet`'s order: one rollout after the other.

    `small`: the small columns' rows; `rest`: the other columns', both from the file's start.
    """

    def __init__(
        self,
        pa: Any,
        schema: Any,
        layout: dict[str, Any],
        small: _Cut | _Pages,
        rest: _Cut,
        direct: dict[str, PageColumn],
    ) -> None:
        self.pa, self.layout, self.small, self.rest = pa, layout, small, rest
        self.fields = pa.schema([schema.field(name) for name in PLAN_COLUMNS])
        skipped = (*SMALL_COLUMNS, LAYOUT_COLUMN, *direct)
        others = [name for name in schema.names if name not in skipped]
        self.others = pa.schema([schema.field(name) for name in others])
        self.direct = direct  # columns whose pages are read into place
        self.row_bytes = sum(column.width for column in direct.values())
        self.step = BATCH_BYTES // max(1, self.row_bytes)
        self.numbering = EpisodeIds()

    def read(self, k: int, rows: range) -> Rollout:
        """Rollout `k` (of the file's rows `rows`), the next in the file.

        Its plain columns' pages are read by a thread (`Prefetch`) while its plan is made,
        where they hold `PREFETCH_BYTES` or more and its first rows give its envs; else (a
        small rollout, or a first step longer than the first batch) as it is built.
        """
        pa, layout = self.pa, self.layout
        small = self.small.take(len(rows))
        first = next(small)  # (a rollout has a row at least)
        spare = _envs(first) if len(rows) * self.row_bytes >= PREFETCH_BYTES else 0
        ahead = spare > 0  # (unknown envs: its arrays could not be read into, only copied)
        with Prefetch(self.direct if ahead else {}, len(rows), spare, self.step) as prefetch:
            direct = prefetch.columns if ahead else self.direct
            part = pa.Table.from_batches([first, *small], schema=self.fields)
            plan = plan_rollout(pa, part, layout, rows)
            del part, first  # (its rows' small columns: a tenth of a vector rollout)
            plan.ids = self.numbering.next(plan.dones)
            if plan.order is None:
                prefetch.name_rows(plan.where)
                assembly = Assembly(pa, layout, plan, k, direct)
                for batch in self.rest.take(len(rows)):
                    assembly.feed(batch, assembly.filled)
            else:  # its rows in another order: taken in order, a rollout's worth
                prefetch.name_rows(lambda i: f"row {rows.start + i} of the file")
                assembly = Assembly(pa, layout, plan, k)
                taken = pa.Table.from_batches(list(self.rest.take(len(rows))), schema=self.others)
                for name, column in direct.items():
                    taken = taken.append_column(name, _as_arrow(pa, column, rows))
                _feed(assembly, take_rows(pa, taken, plan.order), layout)
            return assembly.finish()


def _envs(first: Any) -> int:
    """A guess of a rollout's envs from its first rows: the rows of its first step.

    0 where those rows do not show them. The plan checks the guess: `Prefetch` reads the
    plain columns into arrays of a leaf's size for this many envs, and copies them if wrong.
    """
    column = first.column("step")
    if column.null_count or not len(column):
        return 0
    steps = to_numpy(column)
    later = steps != steps[0]
    return int(np.argmax(later)) if later.any() else 0


def _as_arrow(pa: Any, column: PageColumn | Prefetched, rows: range) -> Any:
    """A plain column's next `rows` (the file's rows), as the Arrow array pyarrow would give."""
    cells = column.cells(len(rows))
    column.take(cells, lambda i: f"row {rows.start + i} of the file")
    data = pa.py_buffer(cells)
    return pa.Array.from_buffers(pa.binary(column.width), len(rows), [None, data])


class _Index:
    """The first pass over a file: its `rollout` column as runs of rows, and its layouts.

    Its rows are counted as they are read: a file is refused as soon as it has given more
    than `max_rows`, whatever its footer declares. Only the runs of the `rollout` column are
    kept (a `range` of rows per rollout), and the distinct values of the layout column.

    Attributes:
        runs: Each rollout's rows, where every rollout's rows are consecutive and the ids
            ascend (as `write_parquet` writes them), else `None`.
        layouts: A table of the schema's metadata and the distinct layouts, for `read_layout`.
        problem: What is wrong with the `rollout` column (nulls, values out of range), raised
            once the columns are checked.
    """

    def __init__(self, pa: Any, file: Any, max_rows: int | None, fd: int | None = None) -> None:
        schema = file.schema_arrow
        names = [name for name in ("rollout", LAYOUT_COLUMN) if name in schema.names]
        self.runs: list[range] | None = [] if "rollout" in names else None
        self.problem: ValueError | None = None
        self._last: int | None = None
        # `rollout` and the layouts read from their pages where they can be, else by pyarrow
        paged = {} if fd is None else number_columns(file, ["rollout"], fd)
        text = (
            None
            if fd is None or LAYOUT_COLUMN not in names
            else text_column(file, LAYOUT_COLUMN, fd)
        )
        decoded = [
            name for name in names if name not in paged and (text is None or name != LAYOUT_COLUMN)
        ]
        pages = _Pages(pa, [schema.field("rollout")], paged) if paged else None
        texts, start = [], 0
        for batch in _counted(file, decoded, max_rows) if names else ():
            if text is not None:
                distinct = sorted(set(text.texts(batch.num_rows)))
                values = binaries(pa, len(distinct), list(enumerate(distinct)), pa.binary())
                texts.append(values.cast(schema.field(LAYOUT_COLUMN).type))  # (UTF-8 checked)
            elif LAYOUT_COLUMN in names:
                texts.append(load_compute().unique(batch.column(LAYOUT_COLUMN).drop_null()))
            rows = batch.num_rows
            if pages is not None and self.problem is None:  # (none read past a problem)
                batch = self._paged(pages, rows)
            self._runs(pa, batch, start)
            start += rows
        fields = [schema.field(LAYOUT_COLUMN)] if LAYOUT_COLUMN in names else []
        columns = [pa.chunked_array(texts, fields[0].type)] if fields else []
        self.layouts = pa.Table.from_arrays(
            columns, schema=pa.schema(fields, metadata=schema.metadata)
        )

    def _paged(self, pages: _Pages, rows: int) -> Any:
        """The next `rows` rows of `rollout`, read from its pages (a record batch).

        A damaged page is refused at once, as pyarrow refuses one; a null is kept as the
        problem, refused once the columns are checked.
        """
        try:
            return pages.batch(rows)
        except DamagedPageError:
            raise
        except ValueError as exc:
            self.problem = exc
            return None

    def _runs(self, pa: Any, batch: Any, start: int) -> None:
        """Extend the runs by a batch of the `rollout` column (its first row: `start`)."""
        runs = self.runs
        if runs is None or self.problem is not None:
            return
        if not pa.types.is_integer(batch.column("rollout").type):
            self.runs = None  # refused by `check_columns`
            return
        try:
            ids = index_column(batch, "rollout", start)
        except ValueError as exc:
            self.problem = exc
            return
        if not len(ids):
            return
        bounds = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
        for a, b in itertools.pairwise(bounds):
            value = int(ids[a])
            if value == self._last:
                runs[-1] = range(runs[-1].start, start + b)
            elif self._last is None or value > self._last:
                runs.append(range(start + a, start + b))
                self._last = value
            else:
                self.runs = None  # rollouts out of order (a tool sorted the rows)
                return


class _Cut:
    """The rows of a stream of record batches, taken a given number at a time."""

    def __init__(self, batches: Iterable[Any]) -> None:
        self.batches = iter(batches)
        self.rest: Any = None

    def take(self, rows: int) -> Iterator[Any]:
        """The next `rows` rows, as batches (consume them all before the next `take`)."""
        while rows:
            batch = self.rest if self.rest is not None else next(self.batches, None)
            self.rest = None
            if batch is None:
                raise ValueError("the file's columns hold fewer rows than its index columns")
            if batch.num_rows > rows:
                batch, self.rest = batch.slice(0, rows), batch.slice(rows)
            rows -= batch.num_rows
            yield batch

    def end(self) -> None:
        """Refuse rows left over once every rollout has taken its own."""
        left = [self.rest] if self.rest is not None else []
        if any(batch.num_rows for batch in itertools.chain(left, self.batches)):
            raise ValueError("the file's columns hold more rows than its index columns")


class _Pages:
    """Columns of a file read from their pages, in batches as pyarrow would give them.

    Numbers (`number_columns`) are read into NumPy arrays, handed on as Arrow arrays of
    them (zero-copy; booleans packed into bits); columns of nulls (`null_columns`) have
    their levels checked and become arrays of nulls. pyarrow decodes such columns at about
    a tenth of that speed. The rows of the file are taken in order (`batch`), and a null
    in a column of numbers is named by its row of the file.
    """

    def __init__(
        self,
        pa: Any,
        fields: list[Any],
        numbers: dict[str, PageColumn],
        nulls: dict[str, NullColumn] | None = None,
    ) -> None:
        self.pa, self.fields, self.numbers, self.nulls = pa, fields, numbers, nulls or {}
        self.schema = pa.schema(fields)
        self.start = 0  # the file's row of the next row

    def batch(self, rows: int, given: Any = None, into: dict[str, AnyArray] | None = None) -> Any:
        """The next `rows` rows, as a record batch; other columns from `given` (a batch).

        A column of numbers is read into `into[name]` where given (`rows` values), else into
        an array of its own.
        """
        start, arrays = self.start, []
        for field in self.fields:
            name = field.name
            if name in self.numbers:
                values = (
                    np.empty(rows, field.type.to_pandas_dtype()) if into is None else into[name]
                )
                self.numbers[name].take(values, lambda i: f"row {start + i} of the file")
                arrays.append(from_numpy(self.pa, values))
            elif name in self.nulls:
                self.nulls[name].skip(rows)
                arrays.append(self.pa.nulls(rows, field.type))
            else:
                arrays.append(given.column(name))
        self.start += rows
        return self.pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def take(self, rows: int) -> Iterator[Any]:
        """The next `rows` rows, as `_Cut.take` gives them: a first batch, then the rest.

        The first holds `FIRST_ROWS` rows at most: enough to tell a rollout's envs (`_envs`)
        and start reading its leaves (`Prefetch`) before the rest of its plan is read. Each
        column of numbers is read into one array, the two batches' slices of it, so that
        the column of their table is one array again without a copy (`to_numpy`).
        """
        first = min(rows, FIRST_ROWS)
        whole = {
            field.name: np.empty(rows, field.type.to_pandas_dtype())
            for field in self.fields
            if field.name in self.numbers
        }
        yield self.batch(first, into={name: values[:first] for name, values in whole.items()})
        if rows > first:
            rest = {name: values[first:] for name, values in whole.items()}
            yield self.batch(rows - first, into=rest)

    def __call__(self, row: int, batch: Any) -> Any:
        """`batch` (the other columns of the file's rows from `row` on) with these columns."""
        self.start = row
        return self.batch(batch.num_rows, batch)

    def part(self, k: int, n: int) -> _Pages:
        """These columns' row groups k, k + n, ..., for thread k of n (`Batches`)."""
        numbers = {name: column.part(k, n) for name, column in self.numbers.items()}
        nulls = {name: column.part(k, n) for name, column in self.nulls.items()}
        return _Pages(self.pa, self.fields, numbers, nulls)

    def end(self) -> None:
        """Refuse pages or row groups left once every row was taken."""
        for column in [*self.numbers.values(), *self.nulls.values()]:
            column.end()


def _whole(pa: Any, file: Any, layout: dict[str, Any], names: list[str]) -> Iterator[Rollout]:
    """A file whose rollouts are out of order, or one's rows apart: read whole, then taken."""
    schema = file.schema_arrow
    plans = plan_rollouts(pa, _read_small(pa, file), layout)
    number(plans)
    table = pa.Table.from_batches(
        list(file_batches(file, names, _batch_rows(layout))),
        schema=pa.schema([schema.field(name) for name in names]),
    )
    for i, plan in enumerate(plans):
        yield _taken(pa, table, layout, plan, i)  # nothing of it stays here once yielded


def _taken(pa: Any, table: Any, layout: dict[str, Any], plan: Plan, number: int) -> Rollout:
    """Rollout `number` of a table of the whole file, its rows taken in order."""
    rows = np.asarray(plan.rows)
    assembly = Assembly(pa, layout, plan, number)
    taken = rows if plan.order is None else rows[plan.order]
    _feed(assembly, take_rows(pa, table, taken), layout)
    return assembly.finish()


def _feed(assembly: Assembly, table: Any, layout: dict[str, Any]) -> None:
    """Feed a table of a rollout's rows, in (step, env) order, a batch at a time."""
    for start, batch in _slices(table, _batch_rows(layout)):
        assembly.feed(batch, start)


def _counted(file: Any, names: list[str], max_rows: int | None) -> Iterator[Any]:
    """The file's columns `names` in batches, its rows counted against `max_rows` as they come.

    A file is refused as soon as it has given more, whatever its footer declares; and if it
    holds another number of rows than its footer declares.
    """
    declared, count = file.metadata.num_rows, 0
    for batch in file_batches(file, names, _SMALL_BATCH_ROWS):
        count += batch.num_rows
        if max_rows is not None and count > max_rows:
            raise ValueError(
                f"the file holds more than max_rows={max_rows} rows (its footer "
                f"declares {declared}); pass a larger max_rows (or None) to read it"
            )
        yield batch
    if count != declared:
        raise ValueError(f"the file declares {declared} rows but holds {count}")


def _read_small(pa: Any, file: Any) -> Any:
    """The file's small columns (`SMALL_COLUMNS`), whole (its rows were counted before)."""
    schema = file.schema_arrow
    fields = pa.schema([schema.field(name) for name in SMALL_COLUMNS])
    batches = file_batches(file, list(SMALL_COLUMNS), _SMALL_BATCH_ROWS)
    return pa.Table.from_batches(list(batches), schema=fields)


def _slices(table: Any, rows: int) -> Iterator[tuple[int, Any]]:
    """The table's record batches of at most `rows` rows, each with its first row."""
    start = 0
    for batch in table.to_batches(max_chunksize=rows):
        yield start, batch
        start += batch.num_rows


def _batch_rows(layout: dict[str, Any], direct: Collection[str] = ()) -> int:
    """Rows a batch of the second pass holds: about `BATCH_BYTES` of cells.

    The cells of the `direct` columns, read from the file into place, take no room in a
    batch: a batch of a file whose leaves are all read so holds more rows, and its checks
    make fewer, larger passes.
    """
    row = 64 + sum(2 * cell_bytes(item) for item in _items(layout) if item["column"] not in direct)
    return max(1, BATCH_BYTES // row)


# -------------------------------------------------------------------------------- assembly


class Assembly:
    """One rollout, built from batches of its rows in (step, env) order.

    Its `episode_id` column must be numbered as `write_parquet` numbers the rollouts of a
    file (`plan.ids`; `number` is its place among them); a table of its own (no `plan.ids`)
    need only give one id per episode.
    """

    def __init__(
        self,
        pa: Any,
        layout: dict[str, Any],
        plan: Plan,
        number: int = 0,
        direct: dict[str, PageColumn] | dict[str, Prefetched] | None = None,
    ) -> None:
        self.layout, self.plan, self.number = layout, plan, number
        self.direct = direct or {}  # columns whose next rows are read into place
        T, B = plan.T, plan.B
        self.grid = Grid(pa, T, B, episode_ends(plan.dones).reshape(-1), plan.where)
        self.filled = 0  # rows fed so far
        fields = ("rews", "final_values") if layout["truncation"] else ("rews",)
        self.scalars = [_Scalar(field, T * B) for field in fields]
        self.ids: AnyArray | None = None  # a table's own episode ids, checked at the end
        # Episode ids: rows before `settled` are checked against the numbering, the others
        # against the ids of the row a step before (`tail`: the B rows before the next batch).
        self.settled = B * plan.ids.settled() if plan.ids is not None else 0
        self.tail: AnyArray = np.empty(0, np.int64)
        finals = bool(layout.get("final_obs"))
        self.leaves = {
            field: [
                make_leaf(self.grid, leaf, _field_checks(field, leaf, finals and field == "obses"))
                for leaf in entry["leaves"]
            ]
            for field, entry in layout["fields"].items()
        }
        self.outs = [
            make_leaf(self.grid, item, _output_checks(item)) for item in layout["model_outs"]
        ]
        self.texts: list[tuple[int, str]] = []

    def feed(self, batch: Any, start: int) -> None:
        """The rows `start` to `start + batch.num_rows` (a record batch of the columns)."""
        try:
            self._feed(batch, start)
        except ValueError:
            self._name_column()
            raise

    def _feed(self, batch: Any, start: int) -> None:
        stop = start + batch.num_rows
        if stop == start:
            return
        columns: dict[str, Any] = dict(zip(batch.schema.names, batch.columns, strict=True))
        columns.update(self.direct)
        self._episode_ids(columns["episode_id"], start)
        for scalar in self.scalars:
            scalar.feed(columns[scalar.column], start, self.grid)
        for leaf in [*self.leaves["obses"], *self.leaves["states"], *self.outs]:
            leaf.feed(columns, start, stop)
        self.texts += _texts(columns["info"], start)
        self.filled = stop
        self.grid.ended += int(self.grid.ends[start:stop].sum())

    def _episode_ids(self, column: Any, start: int) -> None:
        no_nulls("episode_id", column, self.grid.rows(start))
        got = to_numpy(column)
        numbering = self.plan.ids
        if numbering is None:  # kept, to check at the end
            if self.ids is None:
                self.ids = np.empty(self.plan.T * self.plan.B, got.dtype)
            self.ids[start : start + len(got)] = got
            return
        B, count = self.plan.B, len(got)
        if start < self.settled:
            expected = numbering.rows(start, start + count)
            same = np.array_equal(got, expected)
        else:  # each id is the one a step before, plus 1 where an episode starts
            head = min(B, count)
            new = self.grid.ends[start - B : start + count - B]  # (`dones[t] == 1`, flat)
            before = np.add(self.tail[:head], new[:head], dtype=np.int64)
            after = np.add(got[: count - head], new[head:], dtype=np.int64)
            same = np.array_equal(got[:head], before) and np.array_equal(got[head:], after)
            if not same:
                expected = np.concatenate([before, after])
        self.tail = got[-B:].copy() if count >= B else np.concatenate([self.tail, got])[-B:]
        if not same:
            i = int(np.argmax(got != expected))
            t, b = divmod(start + i, self.plan.B)
            raise ValueError(
                f"column 'episode_id' of rollout {self.number} holds {int(got[i])} at step "
                f"{t}, env {b}, where write_parquet numbers that episode {int(expected[i])} "
                "(ids run across the file's rollouts; an episode going on into the next "
                "rollout keeps its id)"
            )

    def finish(self) -> Rollout:
        """The rollout, once every row is in; its last checks run here."""
        try:
            return self._finish()
        except ValueError:
            self._name_column()
            raise

    def _finish(self) -> Rollout:
        plan, T, B = self.plan, self.plan.T, self.plan.B
        if self.filled != T * B:
            raise ValueError("the file's columns hold fewer rows than its index columns")
        if self.ids is not None:
            check_episodes(self.ids.reshape(T, B), plan.dones)
        fields = {field: self._tree(field, Leaf.finish) for field in TREE_FIELDS}
        finals = self._tree("obses", Leaf.final_values) if self.layout.get("final_obs") else None
        scalars = {s.field: s.values.reshape(T, B) for s in self.scalars}
        return Rollout(
            states=fields["states"],
            obses=fields["obses"],
            rews=scalars["rews"],
            dones=plan.dones,
            infos=_infos(self.texts, T, B, plan.where),
            model_outs={leaf.item["key"]: leaf.output() for leaf in self.outs},
            truncated=plan.truncated,
            final_values=scalars.get("final_values"),
            final_obses=finals,
            copy=False,
        )

    def _name_column(self) -> None:
        """Raise the first value a leaf's field refuses among the rows read, by its column.

        A leaf's values are checked once by its field's whole rule, by the rollout's
        constructor (`Checks.named`). Where a check fails (that one, or another on the way),
        the rows read so far are looked at again here, so that the message names the column
        and row, and that a value refused earlier in the file is the one reported, as if
        every batch had been checked as it came.
        """
        B = self.plan.B
        for leaf in [*self.leaves["obses"], *self.leaves["states"]]:
            if leaf.written and leaf.checks.named is not None:
                positioned(leaf.checks.named, leaf.values()[: leaf.written], 0, B)

    def _tree(self, field: str, part: Callable[[Leaf], AnyArray]) -> Any:
        """A field's leaves (`part` of each) as the layout nests them."""
        pairs = [(tuple(leaf.item["path"]), part(leaf)) for leaf in self.leaves[field]]
        return (
            _tree.unflatten_paths(pairs) if self.layout["fields"][field]["nested"] else pairs[0][1]
        )


def _field_checks(field: str, leaf: dict[str, Any], finals: bool) -> Checks:
    """How a leaf's values (and under `finals` its final observations') are checked."""
    dtype = np.dtype(leaf["dtype"])
    path = leaf["path"]
    name = f"{_tree.format_path(field, path)} (column {leaf['column']!r})"
    rule = FIELD_RULES[field]
    converted = replace(rule, finite=False)  # (the rollout's constructor checks finiteness)

    def values(v: AnyArray) -> AnyArray:
        return exactly(conform_into(converted, dtype, v, name), v, name)

    def named(v: AnyArray) -> AnyArray:
        return conform_into(rule, dtype, v, name)

    if not finals:
        return Checks(values, name, named=named)
    finals_rule = FIELD_RULES["final_obses"]
    finals_name = f"{_tree.format_path('final_obses', path)} (column {leaf['next']!r})"

    def final_values(v: AnyArray) -> AnyArray:
        converted = conform_into(finals_rule, dtype, v, finals_name, axes="e")
        return exactly(converted, v, finals_name)

    return Checks(values, name, final_values, named)


def _output_checks(item: dict[str, Any]) -> Checks:
    """How a model output's values are checked: converted exactly to its dtype."""
    dtype = np.dtype(item["dtype"])
    name = f"model_outs[{item['key']!r}] (column {item['column']!r})"

    def values(v: AnyArray) -> AnyArray:
        return exactly(lossless(v, dtype, name), v, name)

    return Checks(values, name)


class _Scalar:
    """`reward` or `final_value`: one value per step and env, under its field's rule."""

    def __init__(self, field: str, cells: int) -> None:
        self.column, self.rule, self.field = STEP_COLUMNS[field], FIELD_RULES[field], field
        self.values: AnyArray = np.empty(cells, stored(self.rule))

    def feed(self, column: Any, start: int, grid: Grid) -> None:
        no_nulls(self.column, column, grid.rows(start))
        values = to_numpy(column)
        dtype, rule, field = self.values.dtype, self.rule, self.field
        self.values[start : start + len(values)] = positioned(
            lambda v: conform_into(rule, dtype, v, field), values, start, grid.B
        )


# ----------------------------------------------------------------------------------- infos


def _texts(column: Any, start: int) -> list[tuple[int, str]]:
    """A string column's values that are not null, with their rows."""
    if column.null_count == len(column):
        return []
    where = np.flatnonzero(~to_numpy(column.is_null())) + start
    try:
        texts: list[str] = column.filter(column.is_valid()).to_pylist()
    except UnicodeDecodeError as exc:
        raise ValueError(f"column 'info' holds text that is not UTF-8: {exc}") from None
    return list(zip(where.tolist(), texts, strict=True))


def _infos(
    given: list[tuple[int, str]], T: int, B: int, where: Where
) -> list[list[dict[str, Any]]] | None:
    """The `info` column as infos, checked by the rule `trajkit.save` applies."""
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
            raise ValueError(f"column 'info' at {where(i)} is not valid JSON {why}") from None
        if not isinstance(info, dict):
            raise ValueError(
                f"column 'info' at {where(i)} holds a JSON {type(info).__name__}; an "
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
