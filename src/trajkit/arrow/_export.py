"""A rollout as an Arrow table: one row per transition, in the layout `trajkit.arrow` documents."""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.infos import info_entries, sparse_infos_to_json
from trajkit._models.rollout import Rollout, given_infos
from trajkit._models.rules import FIELD_RULES, STEP_COLUMNS, TREE_FIELDS, episode_ends
from trajkit.arrow._buffers import from_numpy, strings, validity
from trajkit.arrow._layout import (
    AUTO_COMPACT_BYTES,
    FORMAT,
    LAYOUT_COLUMN,
    LAYOUT_VERSION,
    META_KEY,
    LayoutChoice,
    Style,
    TensorType,
    load_pyarrow,
    reset_column,
)

_FIELDS: dict[str, tuple[str, str]] = {
    name: (STEP_COLUMNS[name], "next_" + STEP_COLUMNS[name]) for name in TREE_FIELDS
}
"""The columns of each tree field's leaves: `obs...` and `next_obs...`."""
COUNT_IN_32 = int(np.iinfo(np.int32).max)
"""The most steps whose new episode ids `RolloutIds.steps` counts in 32 bits (faster)."""

_STORED = {name: np.dtype(FIELD_RULES[name].file_dtype) for name in ("rews", "final_values")}
"""The column dtypes of the per-step values, as the rule table declares them."""

ROW_GROUP_BYTES = 64 << 20
"""About how many bytes of leaf values `write_parquet` puts in one row group (whole steps,
at least one): the unit it builds, writes and frees before the next."""


def _leaf_column(
    pa: Any, array: AnyArray, tensor_type: TensorType, nulls: AnyArray | None = None
) -> Any:
    """A `[T, B, ...]` array as one column of T*B values, null where `nulls` (`[T, B]`) is.

    Trailing dimensions become nested fixed-size lists (or an `arrow.fixed_shape_tensor`).
    """
    cell = array.shape[2:]
    values = np.ascontiguousarray(array).reshape(-1)
    if nulls is None:
        mask = None
        flat = from_numpy(pa, values)
    else:
        mask = from_numpy(pa, nulls)
        flat = from_numpy(pa, values, None if cell else ~nulls)
    if not cell:
        return flat
    if tensor_type == "extension":
        tensor = pa.fixed_shape_tensor(pa.from_numpy_dtype(array.dtype), list(cell))
        storage = pa.FixedSizeListArray.from_arrays(flat, int(np.prod(cell)), mask=mask)
        return pa.ExtensionArray.from_storage(tensor, storage)
    for level, size in enumerate(reversed(cell)):
        outer = level == len(cell) - 1
        flat = pa.FixedSizeListArray.from_arrays(flat, size, mask=mask if outer else None)
    return flat


def _binary_column(pa: Any, array: AnyArray, nulls: AnyArray | None = None) -> Any:
    """A `[T, B, ...]` array as T*B binary values (each cell's bytes), null where `nulls` is.

    The values are the cells' bytes in C order and the array's byte order, as the layout's
    dtype says: `numpy.frombuffer(value, dtype).reshape(shape)` gives a cell back. Without
    nulls, `fixed_size_binary` and zero-copy; with nulls (the `next_` columns of the compact
    layout), `large_binary` holding only the values there are: a fixed-size null takes its
    full width in every reader's memory.
    """
    rows = array.shape[0] * array.shape[1]
    width = array.dtype.itemsize * int(np.prod(array.shape[2:], dtype=np.int64))
    if nulls is None:
        data = pa.py_buffer(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows, [None, data])
    valid = ~nulls.reshape(-1)
    values = np.ascontiguousarray(array.reshape(rows, -1)[valid])
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(valid * width, out=offsets[1:])
    buffers = [validity(pa, valid), pa.py_buffer(offsets), pa.py_buffer(values.view(np.uint8))]
    return pa.Array.from_buffers(pa.large_binary(), rows, buffers)


def is_binary(style: Style, dtype: np.dtype[Any], shape: tuple[int, ...]) -> bool:
    """Whether a leaf of this cell is stored as bytes: in the compact layout, if it has a shape.

    Lists cost Parquet a repetition and a definition level per value, whatever the size.
    """
    return style == "compact" and bool(shape)


def cell_size(dtype: np.dtype[Any], shape: tuple[int, ...]) -> int:
    return int(dtype.itemsize * np.prod(shape, dtype=np.int64))


def resolve_style(rollout: Rollout, choice: LayoutChoice) -> Style:
    """The style `choice` gives `rollout`: `"auto"` is compact iff a leaf is large."""
    if choice not in ("auto", "readable", "compact"):
        raise ValueError(f"layout must be 'auto', 'readable' or 'compact', got {choice!r}")
    if choice != "auto":
        return choice
    arrays = [leaf for f in _FIELDS for _, leaf in _tree.flatten(getattr(rollout, f))]
    arrays += list(rollout.model_outs.arrays.values())
    large = any(
        a.ndim > 2 and cell_size(a.dtype, a.shape[2:]) >= AUTO_COMPACT_BYTES for a in arrays
    )
    return "compact" if large else "readable"


def _column_name(prefix: str, path: _tree.Path) -> str:
    return ".".join([prefix, *map(str, path)])


def _output_columns(key: str) -> tuple[str, str]:
    if key == "actions":
        return STEP_COLUMNS[key], "next_" + STEP_COLUMNS[key]
    return f"out.{key}", f"next_out.{key}"


def new_episodes(dones: AnyArray, carried: AnyArray) -> AnyArray:
    """`[T, B]`: where a new episode id starts (an episode start, or t = 0 unless carried)."""
    new: AnyArray = dones[:-1] == 1
    new[0] = ~carried
    return new


def episode_ids(rollouts: Sequence[Rollout]) -> list[AnyArray]:
    """Each rollout's `[T, B]` episode ids, numbered across the sequence (see `EpisodeIds`)."""
    numbering = EpisodeIds()
    return [numbering.next(r.dones).steps(0, r.num_steps) for r in rollouts]


class EpisodeIds:
    """Episode ids numbered across rollouts given one after the other.

    Within a rollout, new ids go env by env (env b's episodes after env b-1's). An env's
    first row keeps the id of its episode in the previous rollout when that rollout has the
    same number of envs, did not end the episode there (`dones[T]` is 0) and this one does
    not start one (`dones[0]` is 0): consecutive rollouts of one recorder.
    """

    def __init__(self) -> None:
        self.next_id = 0
        self.running: AnyArray | None = None  # per env, the id going on, or -1

    def next(self, dones: AnyArray) -> RolloutIds:
        """The episode ids of the rollout with these `dones`, the one after the previous ones."""
        B, running = dones.shape[1], self.running
        carried = np.zeros(B, bool)
        previous = np.zeros(B, np.int64)
        if running is not None and len(running) == B:
            carried = (running >= 0) & (dones[0] != 1)
            previous = running
        ids = RolloutIds(dones, self.next_id, carried, previous)
        self.next_id += int(ids.totals.sum())
        self.running = np.where(dones[-1] == 1, -1, ids.last())
        return ids


class RolloutIds:
    """One rollout's episode ids, given a block of steps at a time (no `[T, B]` array needed).

    Env b's id at step t is `base[b] + c`, where c counts the new ids of env b up to step t,
    or its carried id (`previous[b]`) before its first new one.
    """

    def __init__(
        self, dones: AnyArray, first_id: int, carried: AnyArray, previous: AnyArray
    ) -> None:
        self.dones, self.carried, self.previous = dones, carried, previous.astype(np.int64)
        T = dones.shape[0] - 1
        self.totals: AnyArray = np.count_nonzero(dones[1:T] == 1, axis=0) + ~carried
        before = np.cumsum(self.totals) - self.totals  # new ids of the envs before each
        self.base: AnyArray = first_id + before.astype(np.int64) - 1
        self._at = (0, np.zeros(len(carried), np.int64))  # (step t, new ids before t)
        self._before_last = self._at

    def _new(self, t0: int, t1: int) -> AnyArray:
        """`[t1 - t0, B]`: where a new id starts (an episode start, or t = 0 unless carried)."""
        new: AnyArray = self.dones[t0:t1] == 1
        if t0 == 0 and t1 > 0:
            new[0] = ~self.carried
        return new

    def steps(self, t0: int, t1: int) -> AnyArray:
        """The `[t1 - t0, B]` ids of steps t0 to t1 (fastest when asked for in order)."""
        if t0 == self._at[0]:
            counted = self._at[1]
        elif t0 == self._before_last[0]:
            counted = self._before_last[1]
        else:
            counted = np.count_nonzero(self._new(0, t0), axis=0).astype(np.int64)
        # New ids counted in 32 bits within the steps asked for (a third of the time in 64),
        # then added to the counts before them, in 64.
        within = np.int32 if t1 - t0 <= COUNT_IN_32 else np.int64
        within_counts: AnyArray = np.cumsum(self._new(t0, t1), axis=0, dtype=within)
        counts: AnyArray = within_counts + counted
        if t1 > t0:
            self._before_last = (t1 - 1, counts[-2].copy() if t1 - t0 > 1 else counted)
            self._at = (t1, counts[-1].copy())
        if (self.carried & (counted == 0)).any():  # a carried id may still run here
            ids: AnyArray = np.where(counts > 0, self.base + counts, self.previous)
            return ids
        counts += self.base  # (every env has had a new id: no carried one left)
        return counts

    def settled(self) -> int:
        """The first step from which an env's id is its id a step before, plus 1 at a new one.

        That holds after step 0, except at a carried env's first new id (`base[b] + 1`, not
        its carried id plus 1): from the step after the last of those on.
        """
        T = self.dones.shape[0] - 1
        starts = self.dones[1:T, self.carried] == 1  # (a copy of the carried envs' columns)
        started = starts.any(axis=0)
        if not started.any():
            return 1
        return int(np.argmax(starts, axis=0)[started].max()) + 2

    def rows(self, r0: int, r1: int) -> AnyArray:
        """The ids of rows r0 to r1 (row `t * B + b`), flat."""
        B = self.dones.shape[1]
        t0, t1 = r0 // B, -(-r1 // B)
        return self.steps(t0, t1).reshape(-1)[r0 - t0 * B : r1 - t0 * B]

    def last(self) -> AnyArray:
        """The ids of the last step (`[B]`)."""
        return np.where(self.totals > 0, self.base + self.totals, self.previous)


def rollout_table(
    rollout: Rollout,
    index: int,
    ids: RolloutIds | None,
    tensor_type: TensorType,
    style: Style = "readable",
) -> Any:
    """The table of `to_arrow`, its `rollout` column `index`, its episode ids `ids` (or its own)."""
    pa = load_pyarrow()
    tables = list(rollout_tables(rollout, index, ids, tensor_type, style, None))
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def rollout_tables(
    rollout: Rollout,
    index: int,
    ids: RolloutIds | None,
    tensor_type: TensorType,
    style: Style,
    group_bytes: int | None,
) -> Iterator[Any]:
    """The table of `to_arrow` in pieces of whole steps, about `group_bytes` each (or one).

    Each piece is built from views of the rollout's arrays where it can be (binary leaves
    are zero-copy), so that the memory a piece takes is about its own size.
    """
    pa = load_pyarrow()
    _check_exportable(rollout, tensor_type)
    if ids is None:
        ids = EpisodeIds().next(rollout.dones)
    layout = _layout(rollout, style)
    layout_text = json.dumps(layout)
    metadata = {META_KEY: layout_text.encode()}
    T, B = rollout.num_steps, rollout.batch_size
    steps = T
    if group_bytes is not None:
        steps = max(1, min(T, group_bytes // max(1, B * _row_bytes(rollout))))
    context = _Context(rollout, layout, tensor_type, style)
    texts = info_texts(rollout)
    for t0 in range(0, T, steps):
        t1 = min(T, t0 + steps)
        columns = _Columns(pa, tensor_type, context.binary)
        _step_columns(columns, context, index, ids, (t0, t1))
        _output_and_state_columns(columns, context, (t0, t1))
        table = columns.merged()
        rows = (t1 - t0) * B
        table["info"] = _info_column(pa, texts, t0 * B, rows)
        table[LAYOUT_COLUMN] = strings(pa, rows, [(0, layout_text)] if t0 == 0 else [])
        yield pa.table(table).replace_schema_metadata(metadata)


def _row_bytes(rollout: Rollout) -> int:
    """About the bytes of leaf values in one row (one step of one env), `next_` ones included."""
    arrays = [leaf for f in _FIELDS for _, leaf in _tree.flatten(getattr(rollout, f))]
    arrays += list(rollout.model_outs.arrays.values())
    return 2 * sum(cell_size(a.dtype, a.shape[2:]) for a in arrays) + 64


def _layout(rollout: Rollout, style: Style) -> dict[str, Any]:
    fields = _field_layouts(rollout, style)
    outs = rollout.model_outs.arrays
    return {
        "format": FORMAT,
        "version": LAYOUT_VERSION,
        **({"style": "compact"} if style == "compact" else {}),
        "fields": fields,
        "model_outs": [_output_layout(key, array, style) for key, array in outs.items()],
        "truncation": rollout.truncated is not None,
        **({"final_obs": True} if rollout.final_obses is not None else {}),
    }


def _check_exportable(rollout: Rollout, tensor_type: TensorType) -> None:
    if tensor_type not in ("list", "extension"):
        raise ValueError(f"tensor_type must be 'list' or 'extension', got {tensor_type!r}")
    rollout.revalidate()
    if rollout.num_steps == 0:
        raise ValueError(
            "the rollout has no steps (T = 0): the table has one row per transition, so it "
            "would have no row to hold the rollout's observation"
        )


Leaves = list[tuple[str, AnyArray]]


def _field_layouts(rollout: Rollout, style: Style) -> dict[str, Any]:
    """The layout's `fields` entry."""
    fields: dict[str, Any] = {}
    for field, (prefix, next_prefix) in _FIELDS.items():
        entries = []
        for path, leaf in _tree.flatten(getattr(rollout, field)):
            entry: dict[str, Any] = {
                "path": list(path), "dtype": leaf.dtype.str, "shape": list(leaf.shape[2:]),
                "column": None, "next": None,
            }  # fmt: skip
            if 0 not in leaf.shape[2:]:  # a leaf with no values per row (empty states) has none
                entry["column"] = _column_name(prefix, path)
                entry["next"] = _column_name(next_prefix, path)
            if is_binary(style, leaf.dtype, leaf.shape[2:]):
                entry["binary"] = True
            entries.append(entry)
        nested = not _tree.is_leaf(getattr(rollout, field))
        fields[field] = {"nested": nested, "leaves": entries}
    return fields


def _field_leaves(rollout: Rollout, field: str) -> Leaves:
    """A field's leaves that get columns, by column name."""
    prefix = _FIELDS[field][0]
    return [
        (_column_name(prefix, path), leaf)
        for path, leaf in _tree.flatten(getattr(rollout, field))
        if 0 not in leaf.shape[2:]
    ]


def _output_layout(key: str, array: AnyArray, style: Style) -> dict[str, Any]:
    column, next_column = _output_columns(key)
    return {
        "key": key, "column": column, "next": next_column,
        "dtype": array.dtype.str, "shape": list(array.shape[2:]),
        **({"per_step": True} if array.ndim == 1 else {}),
        **({"binary": True} if is_binary(style, array.dtype, array.shape[2:]) else {}),
    }  # fmt: skip


class _Context:
    """What every piece of a rollout's table needs: the rollout, its leaves and where it ends."""

    def __init__(
        self, rollout: Rollout, layout: dict[str, Any], tensor_type: TensorType, style: Style
    ) -> None:
        self.rollout, self.style, self.tensor_type = rollout, style, tensor_type
        self.T, self.B = rollout.num_steps, rollout.batch_size
        self.obses = _field_leaves(rollout, "obses")
        self.states = _field_leaves(rollout, "states")
        self.ends: AnyArray = episode_ends(rollout.dones)
        self.binary = {
            column
            for item in _layout_items(layout)
            if item.get("binary")
            for column in (item["column"], item["next"], reset_column(item["column"]))
        }
        finals = rollout.final_obses
        self.finals: dict[str, AnyArray] = {}
        if finals is not None:
            paths = {path: name for name, path in _column_paths(rollout)}
            self.finals = {paths[path]: leaf for path, leaf in _tree.flatten(finals)}
        # the number of episode ends before each step (final observations in (t, b) order)
        self.ends_before = np.concatenate([[0], np.cumsum(self.ends.sum(axis=1))])

    def last_step(self, t0: int, t1: int) -> AnyArray:
        """`[t1 - t0, B]`: true on the rollout's last step, if this piece has it."""
        last = np.zeros((t1 - t0, self.B), bool)
        if t1 == self.T:
            last[-1] = True
        return last


def _layout_items(layout: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for field in TREE_FIELDS:
        for leaf in layout["fields"][field]["leaves"]:
            if leaf["column"] is not None:
                yield leaf
    yield from layout["model_outs"]


def _column_paths(rollout: Rollout) -> Iterator[tuple[str, _tree.Path]]:
    for path, _ in _tree.flatten(rollout.obses):
        yield _column_name(STEP_COLUMNS["obses"], path), path


class _Columns:
    """The table's columns in order, each name once: the per-step ones, then the `later` ones."""

    def __init__(self, pa: Any, tensor_type: TensorType, binary: set[str]) -> None:
        self.pa, self.tensor_type, self.binary = pa, tensor_type, binary
        self.now: dict[str, Any] = {}
        self.later: dict[str, Any] = {}  # the columns after the per-step ones, in order

    def flat(self, name: str, values: AnyArray) -> None:
        """One of the layout's own columns, from a flat array."""
        self.now[name] = from_numpy(self.pa, values)

    def leaf(
        self, name: str, array: AnyArray, *, later: bool = False, nulls: AnyArray | None = None
    ) -> None:
        """A `[T, B, ...]` leaf or output (null where `nulls`), refused if its name is taken."""
        if name in self.now or name in self.later:
            raise ValueError(
                f"two leaves of the rollout would both be column {name!r} (a key with a "
                "'.' in it?); rename one to export the rollout"
            )
        target = self.later if later else self.now
        if name in self.binary:
            target[name] = _binary_column(self.pa, array, nulls)
        else:
            target[name] = _leaf_column(self.pa, array, self.tensor_type, nulls)

    def sparse(self, name: str, values: AnyArray, cells: AnyArray, *, later: bool = False) -> None:
        """A column of `values` (`[n, B, ...]`) only at `cells` (`[n, B]`), null elsewhere.

        The storage of the null cells is zeros that are never written, so never paged in.
        """
        stored = np.zeros(values.shape, values.dtype)
        stored[cells] = values[cells]
        self.leaf(name, stored, later=later, nulls=~cells)

    def merged(self) -> dict[str, Any]:
        return {**self.now, **self.later}


def _step_columns(
    columns: _Columns, context: _Context, index: int, ids: RolloutIds, steps: tuple[int, int]
) -> None:
    """The index columns, then what a transition is: obs, action, reward, flags, next_obs."""
    rollout, (t0, t1), B = context.rollout, steps, context.B
    n = t1 - t0
    ends = context.ends[t0:t1]
    cut = (rollout.truncated[t0:t1] == 1) if rollout.truncated is not None else ends & False
    columns.flat("rollout", np.full(n * B, index, np.int32))
    columns.flat("step", np.repeat(np.arange(t0, t1, dtype=np.int32), B))
    columns.flat("env", np.tile(np.arange(B, dtype=np.int32), n))
    columns.flat("episode_id", ids.steps(t0, t1).reshape(-1))
    for name, leaf in context.obses:
        columns.leaf(name, leaf[t0:t1])
    outs = rollout.model_outs.arrays
    if "actions" in outs:
        columns.leaf(STEP_COLUMNS["actions"], _per_env(outs["actions"], B)[t0:t1])
    columns.flat(STEP_COLUMNS["rews"], rollout.rews[t0:t1].reshape(-1).astype(_STORED["rews"]))
    columns.flat("terminated", (ends & ~cut).reshape(-1))
    columns.flat("truncated", (ends & cut).reshape(-1))
    _next_obs_columns(columns, context, steps)
    columns.flat("is_first", rollout.dones[t0:t1].reshape(-1) == 1)
    if rollout.final_values is not None:
        final_values = rollout.final_values[t0:t1].reshape(-1)
        columns.flat(STEP_COLUMNS["final_values"], final_values.astype(_STORED["final_values"]))


def _next_obs_columns(columns: _Columns, context: _Context, steps: tuple[int, int]) -> None:
    """`next_obs...`: `obses[t + 1]`, or with `final_obses` the true final observation at ends.

    With `final_obses`, `reset_obs...` holds `obses[t + 1]` too: at an episode end, the
    observation the env reset to (the next row's `obs`, or the bootstrap row's at the last
    step). For a leaf stored as bytes (compact layout), `next_obs...` holds values only on
    the last step and at episode ends, `reset_obs...` only at episode ends on the last step:
    elsewhere they are the next row's `obs`, and null.
    """
    (t0, t1), binary = steps, context.binary
    ends, last = context.ends[t0:t1], context.last_step(t0, t1)
    for name, leaf in context.obses:
        after = leaf[t0 + 1 : t1 + 1]
        if name not in context.finals:
            _next(columns, "next_" + name, after, last)
            continue
        finals = context.finals[name][context.ends_before[t0] : context.ends_before[t1]]
        if name in binary:
            values = np.zeros(after.shape, after.dtype)
            values[last] = after[last]
            values[ends] = finals
            columns.leaf("next_" + name, values, nulls=~(ends | last))
        else:
            values = after.copy()
            values[ends] = finals
            columns.leaf("next_" + name, values)
    for name, leaf in context.obses:
        if name in context.finals:
            after = leaf[t0 + 1 : t1 + 1]
            _next(columns, reset_column(name), after, ends & last)


def _next(
    columns: _Columns, name: str, after: AnyArray, last: AnyArray, later: bool = False
) -> None:
    """A `next_` column: every value, or of a binary leaf only those at `last` (compact)."""
    if name in columns.binary:
        columns.sparse(name, after, last, later=later)
    else:
        columns.leaf(name, after, later=later)


def _output_and_state_columns(columns: _Columns, context: _Context, steps: tuple[int, int]) -> None:
    """The other outputs and the states at t, then every output and state at t + 1."""
    (t0, t1), B = steps, context.B
    last = context.last_step(t0, t1)
    outs = context.rollout.model_outs.arrays
    for key, array in outs.items():
        if key != "actions":
            columns.leaf(_output_columns(key)[0], _per_env(array, B)[t0:t1])
    for key in sorted(outs, key=lambda key: key != "actions"):  # next_action first
        after = _per_env(outs[key], B)[t0 + 1 : t1 + 1]
        _next(columns, _output_columns(key)[1], after, last, later=True)
    for name, leaf in context.states:
        columns.leaf(name, leaf[t0:t1])
    for name, leaf in context.states:
        _next(columns, "next_" + name, leaf[t0 + 1 : t1 + 1], last, later=True)


def _per_env(array: AnyArray, B: int) -> AnyArray:
    """A model output as `[T+1, B, ...]`: a per-step scalar `[T+1]` repeated on each env."""
    if array.ndim == 1:
        return np.broadcast_to(array[:, None], (len(array), B))
    return array


def info_texts(rollout: Rollout) -> list[tuple[int, str]] | None:
    """`(row, JSON)` of each non-empty info (row `t * B + b`), checked as `save` checks them."""
    infos = given_infos(rollout)
    if infos is None:
        return None
    B = rollout.batch_size
    texts = []
    for t, b, info in info_entries(infos):  # converted and checked as save does
        texts.append((t * B + b, json.dumps(info, ensure_ascii=False, allow_nan=False)))
    try:
        for _, text in texts:
            text.encode()
    except UnicodeEncodeError:  # a lone surrogate: refused as save refuses it, naming it
        sparse_infos_to_json(infos)
        raise
    return texts


def _info_column(pa: Any, texts: list[tuple[int, str]] | None, start: int, rows: int) -> Any:
    """The `info` column of rows `start` to `start + rows`: JSON text, null where empty."""
    if texts is None:
        return pa.nulls(rows, pa.string())
    rows_of = [row for row, _ in texts]  # ascending
    part = texts[bisect_left(rows_of, start) : bisect_left(rows_of, start + rows)]
    return strings(pa, rows, [(row - start, text) for row, text in part])
