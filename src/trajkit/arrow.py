"""Rollouts as Arrow tables and Parquet files (needs `trajkit[arrow]`).

One row per transition: row `t * B + b` of a rollout is step `t` of env `b` (time-major),
T rows per env. A row holds what a data engineer expects of a transition, and the values
after it in `next_` columns, so the rollout's last observation row (the bootstrap row) is the
`next_` values of each env's last transition. The layout, column by column:

- `rollout`, `step`, `env` (int32): which rollout of the table, t and b;
- `episode_id` (int64): an id per episode; in a file of several rollouts (`write_parquet`),
  an episode that goes on into the next rollout (`dones[T]` is 0 for that env) keeps its id;
- `obs`, `obs.<key>...` (the leaf's dtype): the observation `obses[t]`; scalars, or nested
  fixed-size lists of the leaf's shape (`[84, 84, 4]` images read as such by pyarrow, polars,
  DuckDB, pandas and HF `datasets`);
- `action`: `model_outs['actions'][t]`, when the rollout has actions;
- `reward` (float32), `terminated` and `truncated` (bool): step t's reward and how it ended
  its episode (both false when the episode goes on);
- `next_obs...`: `obses[t + 1]`, the observation after the step;
- `is_first` (bool): `dones[t]`, the observation `obs` starts an episode;
- `final_value` (float32): `final_values[t]`, when the rollout has truncation bootstraps;
- `out.<key>`: the other model outputs at t (`out.critic`, `out.log_probs`, ...);
- `state...`: env states at t (leaves with no values per row, such as empty states
  `(T+1, B, 0)`, are left out);
- `next_action`, `next_out.<key>`, `next_state...`: the same at t + 1;
- `info` (string): the step's info as JSON; null when empty;
- `trajkit_layout` (string): this layout as JSON, on the first row of each rollout (step 0,
  env 0), null elsewhere.

The layout JSON (also in the schema's metadata, key `trajkit`) records what the column
names cannot: the exact tree paths of nested leaves, each leaf's dtype and shape, which
fields are present and the layout version, so that [`from_arrow`][trajkit.arrow.from_arrow]
rebuilds the same rollout (`==`), dtypes and shapes included, even from a file that polars,
DuckDB or HF `datasets` rewrote (they drop schema metadata, and keep the column).

Examples:
    >>> import trajkit.arrow
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=4, num_envs=2)
    >>> table = trajkit.arrow.to_arrow(r)
    >>> table.num_rows, table.column("obs").type
    (8, FixedSizeListType(fixed_size_list<item: float>[4]))
    >>> trajkit.arrow.from_arrow(table) == r
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.atomic import atomic_write
from trajkit._io.infos import (
    BYTES_PER_NESTED,
    NESTED_ALLOWANCE,
    info_entries,
    infos_to_json,
    sparse_infos_to_json,
    strict_json_loads,
)
from trajkit._io.mapped import mapped_files
from trajkit._io.remote import is_url
from trajkit._models.arrays import first_true
from trajkit._models.rollout import Rollout, given_infos
from trajkit._models.rules import FIELD_RULES, conform_into, lossless

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "LAYOUT_COLUMN",
    "LAYOUT_VERSION",
    "MAX_ROWS",
    "from_arrow",
    "read_parquet",
    "to_arrow",
    "write_parquet",
]

LAYOUT_VERSION = 2
"""The version of the columnar layout, recorded in each table's layout JSON.

Version 1 (one row per observation row, T+1 per env) was never released; its tables are
refused with a message naming the version."""

LAYOUT_COLUMN = "trajkit_layout"
"""The column holding the layout JSON (on each rollout's first row), so that a file rewritten
by a tool that drops schema metadata (polars, DuckDB, HF `datasets`) still reads back."""

TensorType = Literal["list", "extension"]

_META_KEY = b"trajkit"
_FORMAT = "trajkit-arrow"
_FIELDS = {"obses": ("obs", "next_obs"), "states": ("state", "next_state")}


def _pyarrow() -> Any:
    return require("pyarrow", "arrow", "trajkit.arrow")


def _leaf_column(pa: Any, array: AnyArray, tensor_type: TensorType) -> Any:
    """A `[T, B, ...]` array as one column of T*B values.

    Trailing dimensions become nested fixed-size lists (or an `arrow.fixed_shape_tensor`).
    """
    cell = array.shape[2:]
    flat = pa.array(np.ascontiguousarray(array).reshape(-1))
    if not cell:
        return flat
    if tensor_type == "extension":
        tensor = pa.fixed_shape_tensor(pa.from_numpy_dtype(array.dtype), list(cell))
        storage = pa.FixedSizeListArray.from_arrays(flat, int(np.prod(cell)))
        return pa.ExtensionArray.from_storage(tensor, storage)
    for size in reversed(cell):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return flat


def _column_name(prefix: str, path: _tree.Path) -> str:
    return ".".join([prefix, *map(str, path)])


def _output_columns(key: str) -> tuple[str, str]:
    if key == "actions":
        return "action", "next_action"
    return f"out.{key}", f"next_out.{key}"


def _new_episodes(dones: AnyArray, carried: AnyArray) -> AnyArray:
    """`[T, B]`: where a new episode id starts (an episode start, or t = 0 unless carried)."""
    new: AnyArray = dones[:-1] == 1
    new[0] = ~carried
    return new


def _episode_ids(rollouts: Sequence[Rollout]) -> list[AnyArray]:
    """Each rollout's `[T, B]` episode ids, numbered across the sequence.

    Within a rollout, new ids go env by env (env b's episodes after env b-1's). An env's
    first row keeps the id of its episode in the previous rollout when that rollout has the
    same number of envs, did not end the episode there (`dones[T]` is 0) and this one does
    not start one (`dones[0]` is 0): consecutive rollouts of one recorder.
    """
    ids: list[AnyArray] = []
    next_id = 0
    running: AnyArray | None = None  # per env, the id going on past the previous rollout, or -1
    for r in rollouts:
        B = r.batch_size
        carried = np.zeros(B, bool)
        if running is not None and len(running) == B:
            carried = (running >= 0) & (r.dones[0] != 1)
        new = _new_episodes(r.dones, carried)
        count = np.cumsum(new.T.reshape(-1)).reshape(B, -1).T  # env-major numbering
        seen = np.cumsum(new, axis=0) > 0
        previous = running if running is not None and len(running) == B else np.zeros(B, int)
        local: AnyArray = np.where(seen, next_id + count - 1, previous[None, :]).astype(np.int64)
        ids.append(local)
        next_id += int(new.sum())
        running = np.where(r.dones[-1] == 1, -1, local[-1])
    return ids


def to_arrow(rollout: Rollout, *, index: int = 0, tensor_type: TensorType = "list") -> pa.Table:
    """Return a rollout as an Arrow table in the documented layout (see the module).

    Args:
        rollout: The rollout, of at least one step; its model outputs must be complete.
        index: The value of the `rollout` column (to tell rollouts apart in one table).
        tensor_type: How leaves with a trailing shape are stored: `"list"` (nested
            fixed-size lists, which every tool reads) or `"extension"` (Arrow's canonical
            `arrow.fixed_shape_tensor`, which HF `datasets` cannot read).

    Returns:
        A `pyarrow.Table` of `T * B` rows, with trajkit's layout in its schema metadata and
        its `trajkit_layout` column.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If the rollout has no steps, its model outputs are still being built,
            two leaves would share a column name, or an info value cannot be stored as JSON
            exactly (as for `trajkit.save`).

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> table = trajkit.arrow.to_arrow(example_rollout(num_steps=3, num_envs=2))
        >>> table.column_names[:7]
        ['rollout', 'step', 'env', 'episode_id', 'obs', 'action', 'reward']
    """
    return _table(rollout, index, None, tensor_type)


def _table(
    rollout: Rollout, index: int, episode_ids: AnyArray | None, tensor_type: TensorType
) -> Any:
    pa = _pyarrow()
    if tensor_type not in ("list", "extension"):
        raise ValueError(f"tensor_type must be 'list' or 'extension', got {tensor_type!r}")
    rollout.revalidate()
    T, B = rollout.num_steps, rollout.batch_size
    if T == 0:
        raise ValueError(
            "the rollout has no steps (T = 0): the table has one row per transition, so it "
            "would have no row to hold the rollout's observation"
        )
    rows = T * B
    if episode_ids is None:
        episode_ids = _episode_ids([rollout])[0]
    ends = rollout.dones[1:] == 1
    cut = (rollout.truncated == 1) if rollout.truncated is not None else np.zeros((T, B), bool)
    columns: dict[str, Any] = {
        "rollout": pa.array(np.full(rows, index, np.int32)),
        "step": pa.array(np.repeat(np.arange(T, dtype=np.int32), B)),
        "env": pa.array(np.tile(np.arange(B, dtype=np.int32), T)),
        "episode_id": pa.array(episode_ids.reshape(-1)),
    }
    later: dict[str, Any] = {}  # the columns after the per-step ones, in order

    def add(target: dict[str, Any], name: str, array: AnyArray) -> None:
        if name in columns or name in later:
            raise ValueError(
                f"two leaves of the rollout would both be column {name!r} (a key with a "
                "'.' in it?); rename one to export the rollout"
            )
        target[name] = _leaf_column(pa, array, tensor_type)

    layout: dict[str, Any] = {"format": _FORMAT, "version": LAYOUT_VERSION, "fields": {}}
    firsts: dict[str, list[tuple[str, AnyArray]]] = {"obses": [], "states": []}
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
                firsts[field].append((entry["column"], leaf))
            entries.append(entry)
        nested = not _tree.is_leaf(getattr(rollout, field))
        layout["fields"][field] = {"nested": nested, "leaves": entries}
    for name, leaf in firsts["obses"]:
        add(columns, name, leaf[:T])
    outs = rollout.model_outs.arrays
    if "actions" in outs:
        add(columns, "action", _per_env(outs["actions"], B)[:T])
    columns["reward"] = pa.array(rollout.rews.reshape(-1).astype(np.float32))
    columns["terminated"] = pa.array((ends & ~cut).reshape(-1))
    columns["truncated"] = pa.array((ends & cut).reshape(-1))
    for name, leaf in firsts["obses"]:
        add(columns, "next_" + name, leaf[1:])
    columns["is_first"] = pa.array(rollout.dones[:T].reshape(-1) == 1)
    if rollout.final_values is not None:
        columns["final_value"] = pa.array(rollout.final_values.reshape(-1).astype(np.float32))
    layout["model_outs"] = []
    for key, array in outs.items():
        column, next_column = _output_columns(key)
        layout["model_outs"].append(
            {
                "key": key, "column": column, "next": next_column,
                "dtype": array.dtype.str, "shape": list(array.shape[2:]),
                **({"per_step": True} if array.ndim == 1 else {}),
            }
        )  # fmt: skip
        if key != "actions":
            add(columns, column, _per_env(array, B)[:T])
    for key in sorted(outs, key=lambda key: key != "actions"):  # next_action first
        add(later, _output_columns(key)[1], _per_env(outs[key], B)[1:])
    for name, leaf in firsts["states"]:
        add(columns, name, leaf[:T])
    for name, leaf in firsts["states"]:
        add(later, "next_" + name, leaf[1:])
    columns.update(later)
    layout["truncation"] = rollout.truncated is not None
    columns["info"] = _info_column(pa, rollout, rows)
    layout_text = json.dumps(layout)
    columns[LAYOUT_COLUMN] = pa.array([layout_text] + [None] * (rows - 1), pa.string())
    table = pa.table(columns)
    return table.replace_schema_metadata({_META_KEY: layout_text.encode()})


def _per_env(array: AnyArray, B: int) -> AnyArray:
    """A model output as `[T+1, B, ...]`: a per-step scalar `[T+1]` repeated on each env."""
    if array.ndim == 1:
        return np.broadcast_to(array[:, None], (len(array), B))
    return array


def _info_column(pa: Any, rollout: Rollout, rows: int) -> Any:
    infos = given_infos(rollout)
    if infos is None:
        return pa.nulls(rows, pa.string())
    B = rollout.batch_size
    texts: list[str | None] = [None] * rows  # empty infos: null
    for t, b, info in info_entries(infos):  # converted and checked as save does
        texts[t * B + b] = json.dumps(info, ensure_ascii=False, allow_nan=False)
    try:
        return pa.array(texts, pa.string())
    except UnicodeEncodeError:  # a lone surrogate: refused as save refuses it, naming it
        sparse_infos_to_json(infos)
        raise


MAX_ROWS = 1 << 24
"""The most rows [`from_arrow`][trajkit.arrow.from_arrow] and
[`read_parquet`][trajkit.arrow.read_parquet] read unless told otherwise (16,777,216): a
Parquet file of constant rows compresses to almost nothing, so its declared row count is
checked against this budget before anything is read."""

_INDEX = ("rollout", "step", "env", "episode_id")
_FLAGS = ("reward", "terminated", "truncated", "is_first", "final_value")
_MAX_PATH = 64  # the deepest tree path a leaf may have in the layout
_MAX_CELL_DIMS = 32  # trailing dimensions of a leaf (NumPy allows 64 in all)


def from_arrow(table: pa.Table, *, max_rows: int | None = MAX_ROWS) -> Rollout:
    """Rebuild the rollout that [`to_arrow`][trajkit.arrow.to_arrow] turned into `table`.

    Rows may come in any order (they are sorted by step, then env); the table must hold one
    rollout, every (step, env) of T steps by B envs exactly once. The layout comes from the
    schema metadata (key `trajkit`) or, when a tool dropped it, from the `trajkit_layout`
    column; where both are there they must agree. The structure is checked before anything
    the size of the rollout is built:

    - every column of the layout is present (`final_value` when the layout records
      truncations), and no other column: trajkit never drops data it does not know;
    - numbers and flags are in numeric or boolean columns (timestamps, strings, ... are
      refused), cells of the layout's shape as nested lists (fixed-size or not) or
      fixed-shape tensors, with no nulls (`info` may be null anywhere: an empty info);
    - `terminated` or `truncated` is true exactly where the next row's `is_first` is, never
      both, `truncated` only when the layout records truncations;
    - each `next_` column equals its column one step later (`next_obs` at step t is `obs` at
      step t+1), so that the last step's is the bootstrap row;
    - `episode_id` is one id per episode as `is_first` cuts them, a different one for each;
    - values are stored in the dtype the layout records for each leaf only where no value
      changes (no wrap, no truncation, no overflow to inf), under the rules every door
      applies (finite observations, 0/1 flags, ...);
    - infos are checked by the rule `trajkit.save` applies, so an imported rollout saves.

    Args:
        table: A table in trajkit's layout.
        max_rows: The most rows to accept (`None`: no limit); see `MAX_ROWS`.

    Returns:
        The rollout.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: Naming the column (and the step and env) for anything above.

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=3, num_envs=2, nested=True)
        >>> table = trajkit.arrow.to_arrow(r)
        >>> trajkit.arrow.from_arrow(table) == r
        True
        >>> trajkit.arrow.from_arrow(table.replace_schema_metadata(None)) == r  # as polars writes
        True
        >>> trajkit.arrow.from_arrow(table.drop_columns(["step"]))
        Traceback (most recent call last):
        ...
        ValueError: the table has no column 'step', which trajkit's layout needs
    """
    rollout, _ = _read(table, max_rows)
    return rollout


def _read(table: Any, max_rows: int | None) -> tuple[Rollout, AnyArray]:
    """The rollout of a one-rollout table, and its episode ids `[T, B]`."""
    pa = _pyarrow()
    layout = _layout(pa, table)
    _check_columns(pa, table, layout)
    rows = table.num_rows
    if max_rows is not None and rows > max_rows:
        raise ValueError(
            f"the table has {rows} rows, more than max_rows={max_rows}; pass a larger "
            "max_rows (or None) to read it"
        )
    if rows == 0:
        raise ValueError("the table has no rows; a rollout has at least one step per env")
    ids = _index_column(table, "rollout")
    if int(ids.min()) != int(ids.max()):
        raise ValueError(
            f"the table holds {len(np.unique(ids))} rollouts; split it by its "
            "'rollout' column (read_parquet does) before from_arrow"
        )
    grid = _Grid.of(pa, table)
    T, B = grid.T, grid.B
    float32 = np.dtype(np.float32)
    flag = FIELD_RULES["truncated"]
    starts = conform_into(FIELD_RULES["dones"], float32, grid.cells("is_first"), "is_first")
    terminated = conform_into(flag, float32, grid.cells("terminated"), "column 'terminated'")
    cut = conform_into(flag, float32, grid.cells("truncated"), "column 'truncated'")
    dones = np.concatenate([starts, _ends(starts, terminated, cut)[None]])
    episodes = grid.cells("episode_id")
    _check_episodes(episodes, dones)
    rews = conform_into(FIELD_RULES["rews"], float32, grid.cells("reward"), "rews")
    truncated = final_values = None
    if layout["truncation"]:
        truncated = cut
        final_values = conform_into(
            FIELD_RULES["final_values"], float32, grid.cells("final_value"), "final_values"
        )
    elif (cut == 1).any():
        t, b = first_true(cut == 1)
        raise ValueError(
            f"column 'truncated' is true at step {t}, env {b}, but the table's layout says "
            "the rollout has no truncations ('truncation': false)"
        )
    fields: dict[str, Any] = {}
    for field in ("obses", "states"):
        entry = layout["fields"][field]
        rule = FIELD_RULES[field]
        pairs = []
        for leaf in entry["leaves"]:
            path, dtype, shape = tuple(leaf["path"]), np.dtype(leaf["dtype"]), leaf["shape"]
            if leaf["column"] is None:
                pairs.append((path, np.zeros((T + 1, B, *shape), dtype)))
                continue
            name = f"{_tree.format_path(field, path)} (column {leaf['column']!r})"
            values = conform_into(rule, dtype, grid.both(leaf, shape), name)
            pairs.append((path, values))
        fields[field] = _tree.unflatten_paths(pairs) if entry["nested"] else pairs[0][1]
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
        copy=False,
    )
    return rollout, episodes


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
    new = _new_episodes(dones, np.zeros(dones.shape[1], bool))
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


class _Grid:
    """The rows of a one-rollout table as a (step, env) grid, read column by column."""

    def __init__(self, pa: Any, table: Any, T: int, B: int, order: AnyArray | None) -> None:
        self.pa, self.table, self.T, self.B, self.order = pa, table, T, B, order

    @classmethod
    def of(cls, pa: Any, table: Any) -> _Grid:
        """Check that `step` and `env` index every (step, env) once; before any allocation."""
        rows = table.num_rows
        steps = _index_column(table, "step")
        envs = _index_column(table, "env")
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
        column = self.table.column(name).combine_chunks()
        if self.order is not None:
            column = column.take(self.pa.array(self.order))
        return column

    def cells(self, name: str, shape: Sequence[int] = ()) -> AnyArray:
        """A column as `[T, B, *shape]`: a value in every cell, no null anywhere."""
        pa = self.pa
        column = self._column(name)
        if column.null_count:
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            raise ValueError(
                f"column {name!r} is null at {self._where(int(np.argmax(nulls)))}; a "
                "rollout has a value at every step"
            )
        if isinstance(column.type, pa.FixedShapeTensorType):
            column = column.storage
            shape_here: Sequence[int] = (int(np.prod(shape)),)
        else:
            shape_here = shape
        per_row = 1  # values of the current level in one row
        for level, size in enumerate(shape_here):
            if level and column.null_count:
                self._inner_null(name, column, per_row)
            if not pa.types.is_fixed_size_list(column.type):
                lengths = pa.compute.list_value_length(column).to_numpy(zero_copy_only=False)
                if (lengths != size).any():
                    i = int(np.argmax(lengths != size))
                    raise ValueError(
                        f"column {name!r} holds a list of {int(lengths[i])} values at "
                        f"{self._where(i // per_row)}, where the layout's cell shape "
                        f"{list(shape)} needs {size} (level {level + 1})"
                    )
            column = column.flatten()
            per_row *= size
        if len(shape_here) and column.null_count:
            self._inner_null(name, column, per_row)
        values = column.to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(values.reshape(self.T, self.B, *shape))

    def _inner_null(self, name: str, column: Any, per_row: int) -> None:
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        raise ValueError(
            f"column {name!r} holds a null value at "
            f"{self._where(int(np.argmax(nulls)) // per_row)}; a rollout has a value at every "
            "step"
        )

    def both(self, item: dict[str, Any], shape: Sequence[int]) -> AnyArray:
        """A leaf or output's column and its `next_` column as `[T+1, B, ...]`, checked to agree."""
        values = self.cells(item["column"], shape)
        after = self.cells(item["next"], shape)
        same = values[1:] == after[:-1]
        if values.dtype.kind == "f" or after.dtype.kind == "f":  # NaN is NaN here, as in `==`
            same |= np.isnan(values[1:].astype(np.float64)) & np.isnan(
                after[:-1].astype(np.float64)
            )
        if not same.all():
            t, b = (int(i) for i in np.argwhere(~same)[0][:2])
            raise ValueError(
                f"column {item['next']!r} contradicts column {item['column']!r}: it holds at "
                f"step {t}, env {b} another value than {item['column']!r} at step {t + 1} (the "
                "values after a step are those of the next step)"
            )
        return np.concatenate([values, after[-1:]])

    def texts(self, name: str) -> list[str | None]:
        """A string column's values in grid order (nulls as `None`)."""
        try:
            texts: list[str | None] = self._column(name).to_pylist()
        except UnicodeDecodeError as exc:
            raise ValueError(f"column {name!r} holds text that is not UTF-8: {exc}") from None
        return texts


def _index_column(table: Any, name: str) -> AnyArray:
    """An integer column with no nulls (`rollout`, `step`, `env`), as NumPy."""
    column = table.column(name)
    if column.null_count:
        nulls = column.is_null().to_numpy()
        raise ValueError(f"column {name!r} is null at row {int(np.argmax(nulls))}")
    values: AnyArray = column.to_numpy()
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        row = int(np.argmax(values))
        raise ValueError(f"column {name!r} holds {int(values[row])} at row {row}, out of range")
    return values


def _needed(layout: dict[str, Any]) -> dict[str, tuple[str, list[int]]]:
    """Every column the layout names: its kind (`index`, `number`, `text`) and cell shape."""
    needed: dict[str, tuple[str, list[int]]] = {name: ("index", []) for name in _INDEX}
    needed.update({name: ("number", []) for name in _FLAGS})
    if not layout["truncation"]:
        del needed["final_value"]
    needed["info"] = ("text", [])
    for field in ("obses", "states"):
        for leaf in layout["fields"][field]["leaves"]:
            if leaf["column"] is not None:
                needed[leaf["column"]] = needed[leaf["next"]] = ("number", leaf["shape"])
    for item in layout["model_outs"]:
        needed[item["column"]] = needed[item["next"]] = ("number", item["shape"])
    return needed


def _check_columns(pa: Any, table: Any, layout: dict[str, Any]) -> None:
    """Every column the layout needs is there, of a type that holds it; no other column."""
    names = table.column_names
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"the table has two columns named {twice!r}")
    needed = _needed(layout)
    for name in needed:
        if name not in names:
            raise ValueError(f"the table has no column {name!r}, which trajkit's layout needs")
    for name in names:
        if name not in needed and name != LAYOUT_COLUMN:
            why = (
                "the layout says the rollout has no truncations ('truncation': false)"
                if name == "final_value"
                else "trajkit's layout does not name it"
            )
            raise ValueError(
                f"the table has a column {name!r}, but {why}; drop it or fix the layout "
                "(trajkit does not drop data it cannot place)"
            )
    for name, (kind, shape) in needed.items():
        _check_type(pa, name, table.schema.field(name).type, kind, shape)


def _check_type(pa: Any, name: str, type_: Any, kind: str, shape: Sequence[int] = ()) -> None:
    types = pa.types
    if kind == "text":
        if types.is_string(type_) or types.is_large_string(type_) or types.is_null(type_):
            return
        raise ValueError(f"column {name!r} has type {type_}; it holds JSON text (string)")
    if kind == "index":
        if types.is_integer(type_):
            return
        raise ValueError(f"column {name!r} has type {type_}; it holds integer indices")
    value_type = type_
    if isinstance(type_, pa.FixedShapeTensorType) and list(type_.shape) == list(shape):
        value_type = type_.value_type
    else:
        for size in shape:
            fixed = types.is_fixed_size_list(value_type) and value_type.list_size == size
            if fixed or types.is_list(value_type) or types.is_large_list(value_type):
                value_type = value_type.value_type
            else:
                raise ValueError(
                    f"column {name!r} has type {type_}; trajkit reads cells of shape "
                    f"{list(shape)} there (nested lists of numbers or booleans, or a "
                    "fixed-shape tensor)"
                )
    if types.is_integer(value_type) or types.is_floating(value_type):
        return
    if types.is_boolean(value_type):
        return
    raise ValueError(
        f"column {name!r} has type {type_}; trajkit reads numbers and booleans there "
        "(integers, floats, bools, or nested lists of them)"
    )


def _output(grid: _Grid, item: dict[str, Any]) -> AnyArray:
    """A model output `[T+1, B, ...]`; a per-step scalar's `[T+1]`, equal on every env."""
    name = f"model_outs[{item['key']!r}] (column {item['column']!r})"
    values = lossless(grid.both(item, item["shape"]), np.dtype(item["dtype"]), name)
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
    texts = grid.texts("info")
    given = [(i, text) for i, text in enumerate(texts) if text is not None]
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


def _layout(pa: Any, table: Any) -> dict[str, Any]:
    """The table's layout, from its schema metadata or its `trajkit_layout` column, checked."""
    raw = (table.schema.metadata or {}).get(_META_KEY)
    texts: list[str] = []
    if LAYOUT_COLUMN in table.column_names:
        column = table.column(LAYOUT_COLUMN)
        _check_type(pa, LAYOUT_COLUMN, column.type, "text")
        texts = pa.compute.unique(column.drop_null()).to_pylist()
        if len(texts) > 1:
            raise ValueError(
                f"column {LAYOUT_COLUMN!r} holds {len(texts)} different layouts; a table (or a "
                "file) holds rollouts of one layout"
            )
    if raw is None and not texts:
        raise ValueError(
            "the table has no trajkit layout: neither schema metadata (key 'trajkit'), which "
            f"polars, DuckDB and HF datasets drop when they rewrite a file, nor a value in a "
            f"column {LAYOUT_COLUMN!r} (keep that column when rewriting; it holds the leaves' "
            "tree paths, dtypes and shapes that the other columns do not)"
        )
    layouts = [_parse(text.encode(), f"column {LAYOUT_COLUMN!r}") for text in texts]
    if raw is not None:
        layouts.append(_parse(raw, "the table's trajkit metadata"))
    if any(layout != layouts[0] for layout in layouts):
        raise ValueError(
            f"the table's trajkit metadata and its column {LAYOUT_COLUMN!r} hold different "
            "layouts; drop the one that is wrong"
        )
    return _check_layout(layouts[0])


def _parse(raw: bytes, where: str) -> Any:
    try:
        layout = strict_json_loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"{where} is not valid JSON") from None
    if not isinstance(layout, dict) or layout.get("format") != _FORMAT:
        raise ValueError(f"{where} is not of the {_FORMAT!r} layout")
    if layout.get("version") != LAYOUT_VERSION:
        raise ValueError(
            f"the table uses trajkit's Arrow layout version {layout.get('version')!r}; this "
            f"trajkit reads version {LAYOUT_VERSION} (one row per transition)"
        )
    return layout


def _check_layout(layout: dict[str, Any]) -> dict[str, Any]:
    fields = layout.get("fields")
    if not isinstance(fields, dict) or set(fields) != {"obses", "states"}:
        raise _bad_layout("'fields' must name 'obses' and 'states'")
    columns: set[str] = {*_INDEX, *_FLAGS, "info", LAYOUT_COLUMN}
    for field in ("obses", "states"):
        _check_field(field, fields[field], columns)
    outs = layout.get("model_outs")
    if not isinstance(outs, list):
        raise _bad_layout("'model_outs' must be a list")
    keys: set[str] = set()
    for item in outs:
        if not (
            isinstance(item, dict)
            and set(item) - {"per_step"} == {"key", "column", "next", "dtype", "shape"}
            and all(isinstance(item[k], str) for k in ("key", "column", "next"))
            and item.get("per_step", True) is True
        ):
            raise _bad_layout(
                "each of 'model_outs' must be {'key': str, 'column': str, 'next': str, "
                "'dtype': str, 'shape': [int, ...]}, with 'per_step': true for a per-step "
                "scalar output"
            )
        name = f"model output {item['key']!r}"
        _check_dtype(item["dtype"], name)
        _check_shape(item["shape"], name)
        if item.get("per_step") and item["shape"]:
            raise _bad_layout(f"{name} is a per-step scalar ('per_step': true) with a shape")
        if item["key"] in keys:
            raise _bad_layout(f"{name} is listed twice")
        keys.add(item["key"])
        _claim(item["column"], columns)
        _claim(item["next"], columns)
    if not isinstance(layout.get("truncation"), bool):
        raise _bad_layout("'truncation' must be true or false")
    return layout


def _bad_layout(why: str) -> ValueError:
    return ValueError(f"the table's trajkit layout is inconsistent: {why}")


def _claim(column: str, columns: set[str]) -> None:
    if column in columns:
        raise _bad_layout(f"column {column!r} is named twice (or is one of the layout's own)")
    columns.add(column)


def _check_dtype(dtype_text: Any, name: str) -> None:
    try:
        dtype = np.dtype(dtype_text) if isinstance(dtype_text, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "biuf" or dtype.shape:
        raise _bad_layout(f"{name} has dtype {dtype_text!r}, not a real numeric or bool dtype")


def _check_shape(shape: Any, name: str) -> None:
    if not (
        isinstance(shape, list)
        and len(shape) <= _MAX_CELL_DIMS
        and all(type(n) is int and n >= 0 for n in shape)
    ):
        raise _bad_layout(
            f"{name} has shape {shape!r}; a shape is a list of at most {_MAX_CELL_DIMS} "
            "sizes (int >= 0)"
        )


def _check_field(field: str, entry: Any, columns: set[str]) -> None:
    """One field's entry: `nested`, and leaves with a path, a dtype, a shape and columns."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("nested"), bool)
        and isinstance(entry.get("leaves"), list)
        and entry["leaves"]
    ):
        raise _bad_layout(f"{field!r} must have 'nested' (true/false) and a list of leaves")
    for leaf in entry["leaves"]:
        if not (
            isinstance(leaf, dict) and set(leaf) == {"column", "next", "path", "dtype", "shape"}
        ):
            raise _bad_layout(
                f"each leaf of {field!r} must have 'column', 'next', 'path', 'dtype' and 'shape'"
            )
        path = leaf["path"]
        if not (
            isinstance(path, list)
            and len(path) <= _MAX_PATH
            and all(type(key) is str or (type(key) is int and key >= 0) for key in path)
        ):
            raise _bad_layout(
                f"a leaf path of {field!r} must be a list of at most {_MAX_PATH} keys (str) "
                "and indices (int)"
            )
        name = f"leaf {_tree.format_path(field, path)}"
        _check_dtype(leaf["dtype"], name)
        _check_shape(leaf["shape"], name)
        column, after = leaf["column"], leaf["next"]
        if column is None and after is None:
            if 0 not in leaf["shape"]:
                raise _bad_layout(
                    f"{name} has no column, so its 'shape' must have a 0 in it (no values per row)"
                )
        elif isinstance(column, str) and isinstance(after, str):
            _claim(column, columns)
            _claim(after, columns)
        else:
            raise _bad_layout(
                f"{name} must have a 'column' and a 'next' column (strings), or neither"
            )
    if not entry["nested"]:
        (first, *rest) = entry["leaves"]
        if rest or first["path"]:
            raise _bad_layout(
                f"{field!r} is not nested ('nested': false) but has "
                f"{len(entry['leaves'])} leaves or a leaf path; refusing rather than "
                "dropping leaves"
            )
    elif any(not leaf["path"] for leaf in entry["leaves"]):
        raise _bad_layout(f"{field!r} is nested but has a leaf with an empty path")


def write_parquet(
    rollouts: Rollout | Iterable[Rollout],
    path: str | os.PathLike[str],
    *,
    tensor_type: TensorType = "list",
    **options: Any,
) -> None:
    """Write one rollout or several to a Parquet file, in the layout of `to_arrow`.

    Rollouts are numbered by the `rollout` column in the order given. They must share their
    structure (fields, leaves, dtypes and model-output keys); T and B may differ. Episode
    ids run across the rollouts: consecutive rollouts of one recorder (an env's episode
    going on from one into the next) give that episode one id.

    The file is written atomically: into a temporary file next to `path`
    (`.trajkit-XXXXXXXX.tmp`), fsynced, then renamed over `path`, so that an existing file
    is replaced whole or not at all, even if the process is killed midway. A file the
    rollouts are memory-mapped from (`trajkit.load(..., mmap=True)`) is refused as `path`,
    by identity (hard links and symlinks included; found where the system lists a process's
    memory maps, as Linux does). A URL (`s3://...`) is handed to pyarrow as it is.

    Args:
        rollouts: A rollout, or an iterable of rollouts.
        path: The Parquet file to write; an existing regular file is replaced.
        tensor_type: How leaves with a trailing shape are stored (see `to_arrow`).
        **options: Passed to `pyarrow.parquet.write_table` (e.g. `compression="zstd"`).

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If no rollout is given, the rollouts differ in structure, one has no
            steps, or `path` is a file the rollouts are read from.
        OSError: If `path` is a folder, a FIFO, a device or a socket, or cannot be written.

    Examples:
        >>> import os, tempfile
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> rs = [example_rollout(num_steps=4, num_envs=2, seed=s) for s in range(3)]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "runs.parquet")
        ...     trajkit.arrow.write_parquet(rs, path)
        ...     trajkit.arrow.read_parquet(path) == rs
        True
    """
    pa = _pyarrow()
    parquet = require("pyarrow.parquet", "arrow", "trajkit.arrow")
    items = [rollouts] if isinstance(rollouts, Rollout) else list(rollouts)
    if not items:
        raise ValueError("write_parquet needs at least one rollout")
    ids = _episode_ids(items)
    tables = [_table(r, i, ids[i], tensor_type) for i, r in enumerate(items)]
    first = tables[0].schema
    for i, table in enumerate(tables[1:], start=1):
        if not table.schema.equals(first, check_metadata=True):
            raise ValueError(
                f"rollout {i} differs in structure from rollout 0 (fields, leaves, dtypes or "
                "model outputs); write such rollouts to separate files"
            )
    table = pa.concat_tables(tables)
    where = os.fspath(path)
    if is_url(where):
        parquet.write_table(table, where, **options)
        return

    def write(file: IO[bytes]) -> None:
        parquet.write_table(table, file, **options)

    sources = mapped_files(leaf for r in items for leaf in _rollout_arrays(r))
    atomic_write(where, write, inputs=sources, verb="write", by="write_parquet()")


def _rollout_arrays(rollout: Rollout) -> Iterator[AnyArray]:
    """Every array of `rollout`: tree leaves, the per-step fields and the model outputs."""
    for name in ("states", "obses"):
        for _, leaf in _tree.flatten(getattr(rollout, name)):
            yield leaf
    for array in (rollout.rews, rollout.dones, rollout.truncated, rollout.final_values):
        if array is not None:
            yield array
    yield from rollout.model_outs.arrays.values()


def read_parquet(path: str | os.PathLike[str], *, max_rows: int | None = MAX_ROWS) -> list[Rollout]:
    """Read the rollouts of a Parquet file in trajkit's layout (see `write_parquet`).

    The file's row count, as its footer declares it, is checked against `max_rows` before
    any row is read; each rollout is then checked as [`from_arrow`][trajkit.arrow.from_arrow]
    checks a table, and the `episode_id` column against the numbering `write_parquet`
    gives the rollouts. A file that polars, DuckDB or HF `datasets` rewrote (without the
    schema metadata) reads back the same, through its `trajkit_layout` column.

    Args:
        path: The Parquet file.
        max_rows: The most rows to read (`None`: no limit); see `MAX_ROWS`.

    Returns:
        The rollouts, validated, in the order of their `rollout` column.

    Raises:
        ImportError: If pyarrow is not installed.
        OSError: If the file cannot be read.
        ValueError: If the file is not Parquet, has more rows than `max_rows`, or is not in
            trajkit's layout (see `from_arrow`).

    Examples:
        >>> import os, tempfile
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.parquet")
        ...     trajkit.arrow.write_parquet(example_rollout(), path)
        ...     [r.num_steps for r in trajkit.arrow.read_parquet(path)]
        [4]
    """
    pa = _pyarrow()
    parquet = require("pyarrow.parquet", "arrow", "trajkit.arrow")
    where, filesystem = os.fspath(path), None
    if is_url(where):
        filesystem, where = require("pyarrow.fs", "arrow", "trajkit.arrow").FileSystem.from_uri(
            where
        )
    try:
        with parquet.ParquetFile(where, filesystem=filesystem) as file:
            declared = file.metadata.num_rows
            if max_rows is not None and declared > max_rows:
                raise ValueError(
                    f"the file declares {declared} rows, more than max_rows={max_rows}; "
                    "pass a larger max_rows (or None) to read it"
                )
            table = file.read()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"not a readable Parquet file: {exc}") from None
    if table.num_rows != declared:  # pragma: no cover - pyarrow reads what the footer says
        raise ValueError(f"the file declares {declared} rows but holds {table.num_rows}")
    _layout(pa, table)
    if "rollout" not in table.column_names:
        raise ValueError("the table has no column 'rollout', which trajkit's layout needs")
    _check_type(pa, "rollout", table.schema.field("rollout").type, "index")
    ids = _index_column(table, "rollout")
    order = np.argsort(ids, kind="stable")
    bounds = np.flatnonzero(np.diff(ids[order])) + 1
    read = [_read(_rows_of(table, rows), None) for rows in np.split(order, bounds)]
    rollouts = [rollout for rollout, _ in read]
    for i, ((_, got), expected) in enumerate(zip(read, _episode_ids(rollouts), strict=True)):
        if not np.array_equal(got, expected):
            t, b = first_true(got != expected)
            raise ValueError(
                f"column 'episode_id' of rollout {i} holds {int(got[t, b])} at step {t}, env "
                f"{b}, where write_parquet numbers that episode {int(expected[t, b])} (ids run "
                "across the file's rollouts; an episode going on into the next rollout keeps "
                "its id)"
            )
    return rollouts


def _rows_of(table: Any, rows: AnyArray) -> Any:
    """The table's `rows` (ascending): a zero-copy slice where they are consecutive."""
    if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1:
        return table.slice(int(rows[0]), len(rows))
    return table.take(rows)
