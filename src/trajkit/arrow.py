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
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.infos import info_entries, sparse_infos_to_json, strict_json_loads
from trajkit._models.rollout import Rollout, given_infos

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["LAYOUT_VERSION", "from_arrow", "read_parquet", "to_arrow", "write_parquet"]

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
    layout["model_outs"] = [{"key": key, "column": f"out.{key}"} for key in outs]
    for key, array in outs.items():
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


def from_arrow(table: pa.Table) -> Rollout:
    """Rebuild the rollout that [`to_arrow`][trajkit.arrow.to_arrow] turned into `table`.

    Rows may come in any order (they are sorted by step, then env); the table must hold one
    rollout, the full grid of T+1 steps by B envs. The result is validated like any rollout.

    Args:
        table: A table in trajkit's layout, with its schema metadata.

    Returns:
        The rollout.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If the table lacks trajkit's metadata or a column it names, holds more
            than one rollout, or is not a full grid of steps and envs.

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=3, num_envs=2, nested=True)
        >>> trajkit.arrow.from_arrow(trajkit.arrow.to_arrow(r)) == r
        True
    """
    pa = _pyarrow()
    layout = _layout(table)
    if table.num_rows == 0:
        raise ValueError("the table has no rows; a rollout has at least one step row per env")
    rollout_ids = table.column("rollout").to_numpy()
    if rollout_ids.min() != rollout_ids.max():
        raise ValueError(
            f"the table holds {len(np.unique(rollout_ids))} rollouts; split it by its "
            "'rollout' column (read_parquet does) before from_arrow"
        )
    steps = table.column("step").to_numpy()
    envs = table.column("env").to_numpy()
    B = int(envs.max()) + 1
    T = int(steps.max())
    expected_steps = np.repeat(np.arange(T + 1), B)
    expected_envs = np.tile(np.arange(B), T + 1)

    def in_order() -> bool:
        return (
            len(steps) == (T + 1) * B
            and np.array_equal(steps, expected_steps)
            and np.array_equal(envs, expected_envs)
        )

    if not in_order():  # rows reordered by some tool: sort them back
        table = table.sort_by([("step", "ascending"), ("env", "ascending")])
        steps = table.column("step").to_numpy()
        envs = table.column("env").to_numpy()
    if not in_order():
        raise ValueError(
            f"the rows are not a full grid of steps 0..{T} by envs 0..{B - 1} "
            f"({len(steps)} rows, expected {(T + 1) * B})"
        )

    def grid(name: str, rows: int) -> AnyArray:
        if name not in table.column_names:
            raise ValueError(f"the table has no column {name!r}, which its metadata names")
        column = table.column(name).combine_chunks()
        if column.null_count:  # the bootstrap rows of per-step columns, cut off below
            column = column.fill_null(
                pa.scalar(0, column.type) if column.type != pa.bool_() else False
            )
        if isinstance(column.type, pa.FixedShapeTensorType):
            values = column.to_numpy_ndarray()
        else:
            values = column.to_numpy(zero_copy_only=False)
        values = values[: rows * B]
        return np.ascontiguousarray(values.reshape(rows, B, *values.shape[1:]))

    fields: dict[str, Any] = {}
    for field in ("obses", "states"):
        entry = layout["fields"][field]
        pairs = []
        for leaf in entry["leaves"]:
            if leaf["column"] is None:
                empty = np.zeros((T + 1, B, *leaf["shape"]), leaf["dtype"])
                pairs.append((tuple(leaf["path"]), empty))
                continue
            pairs.append(
                (tuple(leaf["path"]), grid(leaf["column"], T + 1).astype(leaf["dtype"], copy=False))
            )
        fields[field] = _tree.unflatten_paths(pairs) if entry["nested"] else pairs[0][1]
    outs = {item["key"]: grid(item["column"], T + 1) for item in layout["model_outs"]}
    rews = grid("reward", T).astype(np.float32, copy=False)
    dones = grid("done", T + 1)
    truncated = final_values = None
    if layout["truncation"]:
        truncated = grid("truncated", T)
        final_values = grid("final_value", T)
    infos = _infos_from_column(table.column("info"), T, B)
    return Rollout(
        states=fields["states"],
        obses=fields["obses"],
        rews=rews,
        dones=dones,
        infos=infos,
        model_outs=outs,
        truncated=truncated,
        final_values=final_values,
        copy=False,
    )


def _layout(table: Any) -> dict[str, Any]:
    metadata = table.schema.metadata or {}
    raw = metadata.get(_META_KEY)
    if raw is None:
        raise ValueError(
            "the table has no trajkit metadata (schema metadata key 'trajkit'): it was not "
            "written by trajkit.arrow.to_arrow, or a tool dropped its schema metadata"
        )
    layout = json.loads(raw)
    if not isinstance(layout, dict) or layout.get("format") != _FORMAT:
        raise ValueError(f"the table's trajkit metadata is not of the {_FORMAT!r} layout")
    if layout.get("version") != LAYOUT_VERSION:
        raise ValueError(
            f"the table uses trajkit's Arrow layout version {layout.get('version')!r}; this "
            f"trajkit reads version {LAYOUT_VERSION}"
        )
    return layout


def _infos_from_column(column: Any, T: int, B: int) -> list[list[dict[str, Any]]] | None:
    if column.null_count == len(column):
        return None
    texts = column.to_pylist()[: T * B]
    rows: list[list[dict[str, Any]]] = []
    for t in range(T):
        row = []
        for b in range(B):
            text = texts[t * B + b]
            row.append({} if text is None else strict_json_loads(text.encode()))
        rows.append(row)
    return rows


def write_parquet(
    rollouts: Rollout | Iterable[Rollout], path: str | os.PathLike[str], **options: Any
) -> None:
    """Write one rollout or several to a Parquet file, in the layout of `to_arrow`.

    Rollouts are numbered by the `rollout` column in the order given. They must share their
    structure (fields, leaves, dtypes and model-output keys); T and B may differ.

    Args:
        rollouts: A rollout, or an iterable of rollouts.
        path: The Parquet file to write.
        **options: Passed to `pyarrow.parquet.write_table` (e.g. `compression="zstd"`).

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If no rollout is given, or the rollouts differ in structure.

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
    parquet.write_table(pa.concat_tables(tables), os.fspath(path), **options)


def read_parquet(path: str | os.PathLike[str]) -> list[Rollout]:
    """Read the rollouts of a Parquet file in trajkit's layout (see `write_parquet`).

    Args:
        path: The Parquet file.

    Returns:
        The rollouts, validated, in the order of their `rollout` column.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If the file is not in trajkit's layout (see `from_arrow`).

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
    _pyarrow()
    parquet = require("pyarrow.parquet", "arrow", "trajkit.arrow")
    table = parquet.read_table(os.fspath(path))
    _layout(table)
    ids = table.column("rollout").to_numpy()
    order = np.argsort(ids, kind="stable")
    bounds = np.flatnonzero(np.diff(ids[order])) + 1
    return [from_arrow(_rows_of(table, rows)) for rows in np.split(order, bounds)]


def _rows_of(table: Any, rows: AnyArray) -> Any:
    """The table's `rows` (ascending): a zero-copy slice where they are consecutive."""
    if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1:
        return table.slice(int(rows[0]), len(rows))
    return table.take(rows)
