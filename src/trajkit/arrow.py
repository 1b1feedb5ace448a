"""Rollouts as Arrow tables and Parquet files (needs `trajkit[arrow]`).

One row per observation row of each env, time-major (row `t * B + b` is step `t` of env `b`),
T+1 rows per env: the last one (`bootstrap = true`) holds the observation and model outputs
kept for bootstrapping, with no reward. The layout, column by column:

- `rollout`, `step`, `env` (int32): which rollout of the table, t and b;
- `episode` (int64): an id unique within the rollout (env b's episodes after env b-1's);
- `bootstrap` (bool): the row T, with the observation and model outputs only;
- `done` (bool): `dones[t]`, the observation starts an episode;
- `reward` (float32), `terminated` and `truncated` (bool): step t's reward and how it ended
  its episode (both false when the episode goes on); null on the bootstrap row;
- `final_value` (float32): `final_values[t]`, when the rollout has truncation bootstraps;
- `obs`, `obs.<key>...` (the leaf's dtype): observation leaves, scalars or fixed-shape tensors
  (Arrow's canonical `arrow.fixed_shape_tensor`); `state...` likewise for env states (leaves
  with no values per row, such as empty states `(T+1, B, 0)`, are left out);
- `out.<key>`: the model outputs (`out.actions`, `out.critic`, ...);
- `info` (string): the step's info as JSON; null when empty and on the bootstrap row.

The schema's metadata (key `trajkit`) records what the column names cannot: the exact tree
paths of nested leaves, which fields were present and the layout version, so that
[`from_arrow`][trajkit.arrow.from_arrow] rebuilds the same rollout (`==`), dtypes and shapes
included. Tools that know nothing of trajkit read the columns as they are: pyarrow, polars,
DuckDB and HF `datasets` read Parquet files written by
[`write_parquet`][trajkit.arrow.write_parquet].

Examples:
    >>> import trajkit.arrow
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=4, num_envs=2)
    >>> table = trajkit.arrow.to_arrow(r)
    >>> table.num_rows, table.column("reward").null_count
    (10, 2)
    >>> trajkit.arrow.from_arrow(table) == r
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

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

__all__ = ["LAYOUT_VERSION", "MAX_ROWS", "from_arrow", "read_parquet", "to_arrow", "write_parquet"]

LAYOUT_VERSION = 1
"""The version of the columnar layout, recorded in each table's schema metadata."""

_META_KEY = b"trajkit"
_FORMAT = "trajkit-arrow"


def _pyarrow() -> Any:
    return require("pyarrow", "arrow", "trajkit.arrow")


def _leaf_column(pa: Any, array: AnyArray) -> Any:
    """An `[T+1, B, ...]` array as one column of (T+1)*B values, tensors for trailing dims."""
    rows = array.shape[0] * array.shape[1]
    cell = array.shape[2:]
    flat = np.ascontiguousarray(array).reshape(rows, -1) if cell else array.reshape(rows)
    if not cell:
        return pa.array(flat)
    tensor_type = pa.fixed_shape_tensor(pa.from_numpy_dtype(array.dtype), list(cell))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), int(np.prod(cell)))
    return pa.ExtensionArray.from_storage(tensor_type, storage)


def _column_name(prefix: str, path: _tree.Path) -> str:
    return ".".join([prefix, *map(str, path)])


def _episode_ids(dones: AnyArray) -> AnyArray:
    """Per (t, b), an episode id unique within the rollout (env-major numbering)."""
    flags = dones.astype(np.int64)
    within = np.cumsum(flags, axis=0) - flags[:1]  # episode index within each env, from 0
    counts = within[-1] + 1
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ids: AnyArray = within + offsets[None, :]
    return ids


def to_arrow(rollout: Rollout, *, index: int = 0) -> pa.Table:
    """Return a rollout as an Arrow table in the documented layout (see the module).

    Args:
        rollout: The rollout; its model outputs must be complete.
        index: The value of the `rollout` column (to tell rollouts apart in one table).

    Returns:
        A `pyarrow.Table` of `(T+1) * B` rows, with trajkit's metadata in its schema.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If the rollout's model outputs are still being built, or an info value
            cannot be stored as JSON exactly (as for `trajkit.save`).

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> table = trajkit.arrow.to_arrow(example_rollout(num_steps=3, num_envs=2))
        >>> table.column_names[:8]
        ['rollout', 'step', 'env', 'episode', 'bootstrap', 'done', 'reward', 'terminated']
    """
    pa = _pyarrow()
    rollout.revalidate()
    T, B = rollout.num_steps, rollout.batch_size
    rows = (T + 1) * B
    steps = np.repeat(np.arange(T + 1, dtype=np.int32), B)
    last = steps == T

    def per_step(values: AnyArray, dtype: Any) -> Any:
        """A [T, B] field as a column with a null on each bootstrap row."""
        padded = np.zeros(rows, dtype=dtype)
        padded[: T * B] = values.reshape(-1)
        return pa.array(padded, mask=last)

    ends = rollout.dones[1:] == 1
    cut = (rollout.truncated == 1) if rollout.truncated is not None else np.zeros((T, B), bool)
    columns: dict[str, Any] = {
        "rollout": pa.array(np.full(rows, index, np.int32)),
        "step": pa.array(steps),
        "env": pa.array(np.tile(np.arange(B, dtype=np.int32), T + 1)),
        "episode": pa.array(_episode_ids(rollout.dones).reshape(-1)),
        "bootstrap": pa.array(last),
        "done": pa.array(rollout.dones.reshape(-1) == 1),
        "reward": per_step(rollout.rews, np.float32),
        "terminated": per_step(ends & ~cut, bool),
        "truncated": per_step(ends & cut, bool),
    }
    if rollout.final_values is not None:
        columns["final_value"] = per_step(rollout.final_values, np.float32)
    layout: dict[str, Any] = {"format": _FORMAT, "version": LAYOUT_VERSION, "fields": {}}
    for field, prefix in (("obses", "obs"), ("states", "state")):
        entries = []
        for path, leaf in _tree.flatten(getattr(rollout, field)):
            if 0 in leaf.shape[2:]:  # no values per row (empty states): nothing to store
                entries.append(
                    {"column": None, "path": list(path), "dtype": leaf.dtype.str,
                     "shape": list(leaf.shape[2:])}
                )  # fmt: skip
                continue
            name = _column_name(prefix, path)
            columns[name] = _leaf_column(pa, leaf)
            entries.append({"column": name, "path": list(path), "dtype": leaf.dtype.str})
        nested = not _tree.is_leaf(getattr(rollout, field))
        layout["fields"][field] = {"nested": nested, "leaves": entries}
    outs = rollout.model_outs.arrays
    layout["model_outs"] = [
        {"key": key, "column": f"out.{key}", **({"per_step": True} if a.ndim == 1 else {})}
        for key, a in outs.items()
    ]
    for key, array in outs.items():
        if array.ndim == 1:  # a per-step scalar `[T+1]`: the same value on each env's row
            array = np.broadcast_to(array[:, None], (T + 1, B))
        columns[f"out.{key}"] = _leaf_column(pa, array)
    layout["truncation"] = rollout.truncated is not None
    columns["info"] = _info_column(pa, rollout, rows)
    table = pa.table(columns)
    return table.replace_schema_metadata({_META_KEY: json.dumps(layout).encode()})


def _info_column(pa: Any, rollout: Rollout, rows: int) -> Any:
    infos = given_infos(rollout)
    if infos is None:
        return pa.nulls(rows, pa.string())
    B = rollout.batch_size
    texts: list[str | None] = [None] * rows  # empty infos and the bootstrap rows: null
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

_STRUCTURE = ("rollout", "step", "env", "episode", "bootstrap", "done")
_PER_STEP = ("reward", "terminated", "truncated", "final_value", "info")
_MAX_PATH = 64  # the deepest tree path a leaf may have in the metadata
_MAX_CELL_DIMS = 32  # trailing dimensions of an empty leaf (NumPy allows 64 in all)


def from_arrow(table: pa.Table, *, max_rows: int | None = MAX_ROWS) -> Rollout:
    """Rebuild the rollout that [`to_arrow`][trajkit.arrow.to_arrow] turned into `table`.

    Rows may come in any order (they are sorted by step, then env); the table must hold one
    rollout, every (step, env) of T+1 steps by B envs exactly once, bootstrap rows included.
    The structure is checked before anything the size of the rollout is built:

    - every column of the layout is present (`final_value` when the metadata records
      truncations), and no other column: trajkit never drops data it does not know;
    - numbers and flags are in numeric or boolean columns (timestamps, strings, ... are
      refused), with no nulls, except the per-step columns (`reward`, `terminated`,
      `truncated`, `final_value`, `info`), which are null exactly on the bootstrap rows
      (`info` may be null anywhere: an empty info);
    - `terminated` or `truncated` is true exactly where the next row's `done` is, never both,
      `truncated` only when the metadata records truncations, and `episode` numbers the
      episodes as `done` cuts them;
    - values are stored in the dtype the metadata records for each leaf only where no value
      changes (no wrap, no truncation, no overflow to inf), under the rules every door
      applies (finite observations, 0/1 flags, ...);
    - infos are checked by the rule `trajkit.save` applies, so an imported rollout saves.

    Args:
        table: A table in trajkit's layout, with its schema metadata.
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
        >>> trajkit.arrow.from_arrow(table.drop_columns(["step"]))
        Traceback (most recent call last):
        ...
        ValueError: the table has no column 'step', which trajkit's layout needs
    """
    pa = _pyarrow()
    layout = _layout(table)
    _check_columns(pa, table, layout)
    rows = table.num_rows
    if max_rows is not None and rows > max_rows:
        raise ValueError(
            f"the table has {rows} rows, more than max_rows={max_rows}; pass a larger "
            "max_rows (or None) to read it"
        )
    if rows == 0:
        raise ValueError("the table has no rows; a rollout has at least one step row per env")
    ids = _index_column(pa, table, "rollout")
    if int(ids.min()) != int(ids.max()):
        raise ValueError(
            f"the table holds {len(np.unique(ids))} rollouts; split it by its "
            "'rollout' column (read_parquet does) before from_arrow"
        )
    grid = _Grid.of(pa, table)
    T, B = grid.T, grid.B
    bootstrap = lossless(grid.full("bootstrap"), np.dtype(bool), "column 'bootstrap'")
    if not bootstrap[T].all():
        raise ValueError(
            f"column 'bootstrap' is false at step {T}, env {int(np.argmin(bootstrap[T]))}, "
            f"the last step: the table has no bootstrap rows there (were rows with "
            f"bootstrap = true filtered out? keep them: they hold the observation after the "
            f"last step)"
        )
    if bootstrap[:T].any():
        t, b = first_true(bootstrap[:T])
        raise ValueError(
            f"column 'bootstrap' is true at step {t}, env {b}; only the last step ({T}) is "
            "the bootstrap row"
        )
    dones = conform_into(FIELD_RULES["dones"], np.dtype(np.float32), grid.full("done"), "dones")
    episodes = grid.full("episode")
    expected = _episode_ids(dones)
    if not np.array_equal(episodes, expected):
        t, b = first_true(episodes != expected)
        raise ValueError(
            f"column 'episode' contradicts column 'done' at step {t}, env {b}: it holds "
            f"{int(episodes[t, b])}, where 'done' numbers this episode {int(expected[t, b])} "
            "(a new id on each done row, env b's after env b-1's)"
        )
    rews = conform_into(FIELD_RULES["rews"], np.dtype(np.float32), grid.steps("reward"), "rews")
    truncated, final_values = _ends(grid, dones, layout["truncation"])
    fields: dict[str, Any] = {}
    for field in ("obses", "states"):
        entry = layout["fields"][field]
        rule = FIELD_RULES[field]
        pairs = []
        for leaf in entry["leaves"]:
            path, dtype = tuple(leaf["path"]), np.dtype(leaf["dtype"])
            if leaf["column"] is None:
                pairs.append((path, np.zeros((T + 1, B, *leaf["shape"]), dtype)))
                continue
            name = f"{_tree.format_path(field, path)} (column {leaf['column']!r})"
            values = conform_into(rule, dtype, grid.full(leaf["column"]), name)
            pairs.append((path, values))
        fields[field] = _tree.unflatten_paths(pairs) if entry["nested"] else pairs[0][1]
    outs = {item["key"]: _output(grid, item) for item in layout["model_outs"]}
    return Rollout(
        states=fields["states"],
        obses=fields["obses"],
        rews=rews,
        dones=dones,
        infos=_infos(pa, grid),
        model_outs=outs,
        truncated=truncated,
        final_values=final_values,
        copy=False,
    )


def _ends(grid: _Grid, dones: AnyArray, truncation: bool) -> tuple[AnyArray | None, ...]:
    """`truncated` and `final_values`, with the flags checked against `done`."""
    rule = FIELD_RULES["truncated"]
    float32 = np.dtype(np.float32)
    terminated = conform_into(rule, float32, grid.steps("terminated"), "column 'terminated'")
    cut = conform_into(rule, float32, grid.steps("truncated"), "column 'truncated'")
    ended = dones[1:]
    if ((terminated == 1) & (cut == 1)).any():
        t, b = first_true((terminated == 1) & (cut == 1))
        raise ValueError(
            f"columns 'terminated' and 'truncated' are both true at step {t}, env {b}; an "
            "episode ends one way"
        )
    flagged = (terminated == 1) | (cut == 1)
    if not np.array_equal(flagged, ended == 1):
        t, b = first_true(flagged != (ended == 1))
        if flagged[t, b]:
            which = "terminated" if terminated[t, b] == 1 else "truncated"
            raise ValueError(
                f"column {which!r} contradicts column 'done': it is true at step {t}, env "
                f"{b}, but 'done' is false at step {t + 1} (an episode that ended there "
                "makes the next row start one)"
            )
        raise ValueError(
            f"columns 'terminated' and 'truncated' contradict column 'done': both are false "
            f"at step {t}, env {b}, but 'done' is true at step {t + 1} (one of them says how "
            "the episode ended)"
        )
    if not truncation:
        if (cut == 1).any():
            t, b = first_true(cut == 1)
            raise ValueError(
                f"column 'truncated' is true at step {t}, env {b}, but the table's metadata "
                "says the rollout has no truncations ('truncation': false)"
            )
        return None, None
    final_values = conform_into(
        FIELD_RULES["final_values"], float32, grid.steps("final_value"), "final_values"
    )
    return cut, final_values


class _Grid:
    """The rows of a one-rollout table as a (step, env) grid, read column by column."""

    def __init__(self, pa: Any, table: Any, T: int, B: int, order: AnyArray | None) -> None:
        self.pa, self.table, self.T, self.B, self.order = pa, table, T, B, order

    @classmethod
    def of(cls, pa: Any, table: Any) -> _Grid:
        """Check that `step` and `env` index every (step, env) once; before any allocation."""
        rows = table.num_rows
        steps = _index_column(pa, table, "step")
        envs = _index_column(pa, table, "env")
        for name, values in (("step", steps), ("env", envs)):
            low = int(values.min())
            if low < 0:
                row = int(np.argmin(values))
                raise ValueError(f"column {name!r} holds {low} at row {row}; it counts from 0")
        T, B = int(steps.max()), int(envs.max()) + 1
        if rows != (T + 1) * B:  # Python ints: no overflow, and nothing allocated yet
            raise ValueError(
                f"the rows are not a full grid of steps 0..{T} by envs 0..{B - 1}: that "
                f"makes {(T + 1) * B} rows, the table has {rows} (each (step, env) once)"
            )
        keys = steps.astype(np.int64) * B + envs.astype(np.int64)  # < rows: bounded above
        counts = np.bincount(keys, minlength=rows)
        if (counts != 1).any():
            key = int(np.argmax(counts > 1))
            t, b = divmod(key, B)
            raise ValueError(
                f"the rows are not a full grid of steps 0..{T} by envs 0..{B - 1}: step "
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

    def _numpy(self, column: Any, rows: int) -> AnyArray:
        if isinstance(column.type, self.pa.FixedShapeTensorType):
            values = column.to_numpy_ndarray()
        else:
            values = column.to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(values.reshape(rows, self.B, *values.shape[1:]))

    def _no_nulls(self, name: str, column: Any) -> None:
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        if nulls.any():
            raise ValueError(
                f"column {name!r} is null at {self._where(int(np.argmax(nulls)))}; a "
                "rollout has a value at every step"
            )
        storage = column.storage if isinstance(column, self.pa.ExtensionArray) else column
        if self.pa.types.is_fixed_size_list(storage.type):
            inner = storage.flatten().is_null().to_numpy(zero_copy_only=False)
            if inner.any():
                cell = max(1, storage.type.list_size)
                raise ValueError(
                    f"column {name!r} holds a null value at "
                    f"{self._where(int(np.argmax(inner)) // cell)}; a rollout has a value "
                    "at every step"
                )

    def full(self, name: str) -> AnyArray:
        """A column of T+1 rows per env, `[T+1, B, ...]`: no nulls anywhere."""
        column = self._column(name)
        self._no_nulls(name, column)
        return self._numpy(column, self.T + 1)

    def steps(self, name: str) -> AnyArray:
        """A per-step column, `[T, B, ...]`: null on the bootstrap rows, and only there."""
        column = self._column(name)
        cut = self.T * self.B
        last = column.slice(cut).is_null().to_numpy(zero_copy_only=False)
        if not last.all():
            b = int(np.argmin(last))
            raise ValueError(
                f"column {name!r} holds a value at {self._where(cut + b)}, a bootstrap row, "
                "which has none (the step after the last is not in the rollout)"
            )
        body = column.slice(0, cut)
        self._no_nulls(name, body)
        return self._numpy(body, self.T)

    def texts(self, name: str) -> list[str | None]:
        """A string column's values in grid order (nulls as `None`)."""
        try:
            texts: list[str | None] = self._column(name).to_pylist()
        except UnicodeDecodeError as exc:
            raise ValueError(f"column {name!r} holds text that is not UTF-8: {exc}") from None
        return texts


def _index_column(pa: Any, table: Any, name: str) -> AnyArray:
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


def _check_columns(pa: Any, table: Any, layout: dict[str, Any]) -> None:
    """Every column the layout needs is there, of a type that holds it; no other column."""
    names = table.column_names
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"the table has two columns named {twice!r}")
    needed = dict.fromkeys(_STRUCTURE, "number")
    needed.update(dict.fromkeys(("rollout", "step", "env", "episode"), "index"))
    needed.update(dict.fromkeys(_PER_STEP, "number"))
    needed["info"] = "text"
    if not layout["truncation"]:
        del needed["final_value"]
    for field in ("obses", "states"):
        for leaf in layout["fields"][field]["leaves"]:
            if leaf["column"] is not None:
                needed[leaf["column"]] = "number"
    for item in layout["model_outs"]:
        needed[item["column"]] = "number"
    for name in needed:
        if name not in names:
            raise ValueError(f"the table has no column {name!r}, which trajkit's layout needs")
    for name in names:
        if name not in needed:
            why = (
                "the metadata says the rollout has no truncations ('truncation': false)"
                if name == "final_value"
                else "trajkit's layout and the table's metadata do not name it"
            )
            raise ValueError(
                f"the table has a column {name!r}, but {why}; drop it or fix the metadata "
                "(trajkit does not drop data it cannot place)"
            )
    for name, kind in needed.items():
        _check_type(pa, name, table.schema.field(name).type, kind)


def _output(grid: Any, item: dict[str, Any]) -> AnyArray:
    """A model output's column `[T+1, B, ...]`; a per-step scalar's `[T+1]`, equal on every env."""
    values: AnyArray = grid.full(item["column"])
    if not item.get("per_step"):
        return values
    first = values[:, :1]
    differs = values != first
    if values.dtype.kind == "f":  # NaN equals NaN here, as in `Rollout` equality
        differs &= ~(np.isnan(values) & np.isnan(first))
    if values.ndim != 2 or differs.any():
        t, b = (int(i) for i in np.argwhere(differs)[0]) if values.ndim == 2 else (0, 0)
        raise ValueError(
            f"column {item['column']!r} holds a per-step scalar ('per_step': true in the "
            f"metadata), so one value per step, but env {b} differs from env 0 at step {t}"
        )
    return values[:, 0].copy()


def _check_type(pa: Any, name: str, type_: Any, kind: str) -> None:
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
    if isinstance(type_, pa.FixedShapeTensorType):
        value_type = type_.value_type
    if types.is_integer(value_type) or types.is_floating(value_type):
        return
    if types.is_boolean(value_type):
        return
    raise ValueError(
        f"column {name!r} has type {type_}; trajkit reads numbers and booleans there "
        "(integers, floats, bools, or fixed-shape tensors of them)"
    )


def _infos(pa: Any, grid: _Grid) -> list[list[dict[str, Any]]] | None:
    """The `info` column as infos, checked by the rule `trajkit.save` applies."""
    T, B = grid.T, grid.B
    texts = grid.texts("info")
    for b, text in enumerate(texts[T * B :]):
        if text is not None:
            raise ValueError(
                f"column 'info' holds a value at {grid._where(T * B + b)}, a bootstrap row, "
                "which has none (infos are per step)"
            )
    given = [(i, text) for i, text in enumerate(texts[: T * B]) if text is not None]
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


def _layout(table: Any) -> dict[str, Any]:
    """The table's trajkit metadata, checked to describe a rollout's fields consistently."""
    metadata = table.schema.metadata or {}
    raw = metadata.get(_META_KEY)
    if raw is None:
        raise ValueError(
            "the table has no trajkit metadata (schema metadata key 'trajkit'): it was not "
            "written by trajkit.arrow.to_arrow, or a tool dropped its schema metadata"
        )
    try:
        layout = strict_json_loads(raw)
    except (ValueError, RecursionError):
        raise ValueError("the table's trajkit metadata is not valid JSON") from None
    if not isinstance(layout, dict) or layout.get("format") != _FORMAT:
        raise ValueError(f"the table's trajkit metadata is not of the {_FORMAT!r} layout")
    if layout.get("version") != LAYOUT_VERSION:
        raise ValueError(
            f"the table uses trajkit's Arrow layout version {layout.get('version')!r}; this "
            f"trajkit reads version {LAYOUT_VERSION}"
        )
    fields = layout.get("fields")
    if not isinstance(fields, dict) or set(fields) != {"obses", "states"}:
        raise _bad_metadata("'fields' must name 'obses' and 'states'")
    columns: set[str] = set(_STRUCTURE + _PER_STEP)
    for field in ("obses", "states"):
        _check_field(field, fields[field], columns)
    outs = layout.get("model_outs")
    if not isinstance(outs, list):
        raise _bad_metadata("'model_outs' must be a list")
    keys: set[str] = set()
    for item in outs:
        if not (
            isinstance(item, dict)
            and set(item) - {"per_step"} == {"key", "column"}
            and isinstance(item["key"], str)
            and isinstance(item["column"], str)
            and item.get("per_step", True) is True
        ):
            raise _bad_metadata(
                "each of 'model_outs' must be {'key': str, 'column': str}, with "
                "'per_step': true for a per-step scalar output"
            )
        if item["key"] in keys:
            raise _bad_metadata(f"model output {item['key']!r} is listed twice")
        keys.add(item["key"])
        _claim(item["column"], columns)
    if not isinstance(layout.get("truncation"), bool):
        raise _bad_metadata("'truncation' must be true or false")
    return layout


def _bad_metadata(why: str) -> ValueError:
    return ValueError(f"the table's trajkit metadata is inconsistent: {why}")


def _claim(column: str, columns: set[str]) -> None:
    if column in columns:
        raise _bad_metadata(f"column {column!r} is named twice (or is one of the layout's own)")
    columns.add(column)


def _check_field(field: str, entry: Any, columns: set[str]) -> None:
    """One field's entry: `nested`, and leaves with a path, a dtype and a column."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("nested"), bool)
        and isinstance(entry.get("leaves"), list)
        and entry["leaves"]
    ):
        raise _bad_metadata(f"{field!r} must have 'nested' (true/false) and a list of leaves")
    for leaf in entry["leaves"]:
        if not (isinstance(leaf, dict) and {"column", "path", "dtype"} <= set(leaf)):
            raise _bad_metadata(f"each leaf of {field!r} must have 'column', 'path' and 'dtype'")
        path = leaf["path"]
        if not (
            isinstance(path, list)
            and len(path) <= _MAX_PATH
            and all(type(key) is str or (type(key) is int and key >= 0) for key in path)
        ):
            raise _bad_metadata(
                f"a leaf path of {field!r} must be a list of at most {_MAX_PATH} keys (str) "
                "and indices (int)"
            )
        try:
            dtype = np.dtype(leaf["dtype"]) if isinstance(leaf["dtype"], str) else None
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in "biuf" or dtype.shape:
            raise _bad_metadata(
                f"leaf {_tree.format_path(field, path)} has dtype {leaf['dtype']!r}, not a "
                "real numeric or bool dtype"
            )
        column = leaf["column"]
        if column is None:
            shape = leaf.get("shape")
            if not (
                isinstance(shape, list)
                and len(shape) <= _MAX_CELL_DIMS
                and all(type(n) is int and n >= 0 for n in shape)
                and 0 in shape
            ):
                raise _bad_metadata(
                    f"leaf {_tree.format_path(field, path)} has no column, so its 'shape' "
                    "must list its trailing dimensions, one of them 0 (no values per row)"
                )
        elif isinstance(column, str):
            _claim(column, columns)
        else:
            raise _bad_metadata(f"a leaf's column of {field!r} must be a string or null")
    if not entry["nested"]:
        (first, *rest) = entry["leaves"]
        if rest or first["path"]:
            raise _bad_metadata(
                f"{field!r} is not nested ('nested': false) but has "
                f"{len(entry['leaves'])} leaves or a leaf path; refusing rather than "
                "dropping leaves"
            )
    elif any(not leaf["path"] for leaf in entry["leaves"]):
        raise _bad_metadata(f"{field!r} is nested but has a leaf with an empty path")


def write_parquet(
    rollouts: Rollout | Iterable[Rollout], path: str | os.PathLike[str], **options: Any
) -> None:
    """Write one rollout or several to a Parquet file, in the layout of `to_arrow`.

    Rollouts are numbered by the `rollout` column in the order given. They must share their
    structure (fields, leaves, dtypes and model-output keys); T and B may differ.

    The file is written atomically: into a temporary file next to `path`
    (`.trajkit-XXXXXXXX.tmp`), fsynced, then renamed over `path`, so that an existing file
    is replaced whole or not at all, even if the process is killed midway. A file the
    rollouts are memory-mapped from (`trajkit.load(..., mmap=True)`) is refused as `path`,
    by identity (hard links and symlinks included; found where the system lists a process's
    memory maps, as Linux does). A URL (`s3://...`) is handed to pyarrow as it is.

    Args:
        rollouts: A rollout, or an iterable of rollouts.
        path: The Parquet file to write; an existing regular file is replaced.
        **options: Passed to `pyarrow.parquet.write_table` (e.g. `compression="zstd"`).

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If no rollout is given, or the rollouts differ in structure, or `path` is
            a file the rollouts are read from.
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
    tables = [to_arrow(r, index=i) for i, r in enumerate(items)]
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
    checks a table.

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
    _layout(table)
    if "rollout" not in table.column_names:
        raise ValueError("the table has no column 'rollout', which trajkit's layout needs")
    _check_type(pa, "rollout", table.schema.field("rollout").type, "index")
    ids = _index_column(pa, table, "rollout")
    order = np.argsort(ids, kind="stable")
    bounds = np.flatnonzero(np.diff(ids[order])) + 1
    return [from_arrow(_rows_of(table, rows), max_rows=None) for rows in np.split(order, bounds)]


def _rows_of(table: Any, rows: AnyArray) -> Any:
    """The table's `rows` (ascending): a zero-copy slice where they are consecutive."""
    if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1:
        return table.slice(int(rows[0]), len(rows))
    return table.take(rows)
