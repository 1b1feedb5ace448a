"""A rollout as an Arrow table: one row per transition, in the layout `trajkit.arrow` documents."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.infos import info_entries, sparse_infos_to_json
from trajkit._models.rollout import Rollout, given_infos
from trajkit.arrow._layout import (
    FORMAT,
    LAYOUT_COLUMN,
    LAYOUT_VERSION,
    META_KEY,
    TensorType,
    load_pyarrow,
    reset_column,
)

_FIELDS = {"obses": ("obs", "next_obs"), "states": ("state", "next_state")}


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
        flat = pa.array(values)
    else:
        mask = pa.array(nulls.reshape(-1))
        flat = pa.array(values, mask=None if cell else nulls.reshape(-1))
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


def _column_name(prefix: str, path: _tree.Path) -> str:
    return ".".join([prefix, *map(str, path)])


def _output_columns(key: str) -> tuple[str, str]:
    if key == "actions":
        return "action", "next_action"
    return f"out.{key}", f"next_out.{key}"


def new_episodes(dones: AnyArray, carried: AnyArray) -> AnyArray:
    """`[T, B]`: where a new episode id starts (an episode start, or t = 0 unless carried)."""
    new: AnyArray = dones[:-1] == 1
    new[0] = ~carried
    return new


def episode_ids(rollouts: Sequence[Rollout]) -> list[AnyArray]:
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
        new = new_episodes(r.dones, carried)
        count = np.cumsum(new.T.reshape(-1)).reshape(B, -1).T  # env-major numbering
        seen = np.cumsum(new, axis=0) > 0
        previous = running if running is not None and len(running) == B else np.zeros(B, int)
        local: AnyArray = np.where(seen, next_id + count - 1, previous[None, :]).astype(np.int64)
        ids.append(local)
        next_id += int(new.sum())
        running = np.where(r.dones[-1] == 1, -1, local[-1])
    return ids


def rollout_table(
    rollout: Rollout, index: int, ids: AnyArray | None, tensor_type: TensorType
) -> Any:
    """The table of `to_arrow`, its `rollout` column `index`, its episode ids `ids` (or its own)."""
    pa = load_pyarrow()
    _check_exportable(rollout, tensor_type)
    if ids is None:
        ids = episode_ids([rollout])[0]
    fields, firsts = _field_layouts(rollout)
    outs = rollout.model_outs.arrays
    layout: dict[str, Any] = {
        "format": FORMAT,
        "version": LAYOUT_VERSION,
        "fields": fields,
        "model_outs": [_output_layout(key, array) for key, array in outs.items()],
        "truncation": rollout.truncated is not None,
        **({"final_obs": True} if rollout.final_obses is not None else {}),
    }
    columns = _Columns(pa, tensor_type)
    _step_columns(columns, rollout, index, ids, firsts["obses"])
    _output_and_state_columns(columns, rollout, firsts["states"])
    table = columns.merged()
    rows = rollout.num_steps * rollout.batch_size
    table["info"] = _info_column(pa, rollout, rows)
    layout_text = json.dumps(layout)
    table[LAYOUT_COLUMN] = pa.array([layout_text] + [None] * (rows - 1), pa.string())
    return pa.table(table).replace_schema_metadata({META_KEY: layout_text.encode()})


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


def _field_layouts(rollout: Rollout) -> tuple[dict[str, Any], dict[str, Leaves]]:
    """The layout's `fields` entry, and each field's leaves that get columns (by column name)."""
    fields: dict[str, Any] = {}
    firsts: dict[str, Leaves] = {"obses": [], "states": []}
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
        fields[field] = {"nested": nested, "leaves": entries}
    return fields, firsts


def _output_layout(key: str, array: AnyArray) -> dict[str, Any]:
    column, next_column = _output_columns(key)
    return {
        "key": key, "column": column, "next": next_column,
        "dtype": array.dtype.str, "shape": list(array.shape[2:]),
        **({"per_step": True} if array.ndim == 1 else {}),
    }  # fmt: skip


class _Columns:
    """The table's columns in order, each name once: the per-step ones, then the `later` ones."""

    def __init__(self, pa: Any, tensor_type: TensorType) -> None:
        self.pa, self.tensor_type = pa, tensor_type
        self.now: dict[str, Any] = {}
        self.later: dict[str, Any] = {}  # the columns after the per-step ones, in order

    def flat(self, name: str, values: AnyArray) -> None:
        """One of the layout's own columns, from a flat array."""
        self.now[name] = self.pa.array(values)

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
        target[name] = _leaf_column(self.pa, array, self.tensor_type, nulls)

    def merged(self) -> dict[str, Any]:
        return {**self.now, **self.later}


def _step_columns(
    columns: _Columns, rollout: Rollout, index: int, ids: AnyArray, obses: Leaves
) -> None:
    """The index columns, then what a transition is: obs, action, reward, flags, next_obs."""
    T, B = rollout.num_steps, rollout.batch_size
    ends = rollout.dones[1:] == 1
    cut = (rollout.truncated == 1) if rollout.truncated is not None else np.zeros((T, B), bool)
    columns.flat("rollout", np.full(T * B, index, np.int32))
    columns.flat("step", np.repeat(np.arange(T, dtype=np.int32), B))
    columns.flat("env", np.tile(np.arange(B, dtype=np.int32), T))
    columns.flat("episode_id", ids.reshape(-1))
    for name, leaf in obses:
        columns.leaf(name, leaf[:T])
    outs = rollout.model_outs.arrays
    if "actions" in outs:
        columns.leaf("action", _per_env(outs["actions"], B)[:T])
    columns.flat("reward", rollout.rews.reshape(-1).astype(np.float32))
    columns.flat("terminated", (ends & ~cut).reshape(-1))
    columns.flat("truncated", (ends & cut).reshape(-1))
    _next_obs_columns(columns, rollout, obses, ends)
    columns.flat("is_first", rollout.dones[:T].reshape(-1) == 1)
    if rollout.final_values is not None:
        columns.flat("final_value", rollout.final_values.reshape(-1).astype(np.float32))


def _next_obs_columns(columns: _Columns, rollout: Rollout, obses: Leaves, ends: AnyArray) -> None:
    """`next_obs...`: `obses[t + 1]`, or with `final_obses` the true final observation at ends.

    With `final_obses`, `reset_obs...` then holds `obses[t + 1]` at ends (the observation
    the env reset to, the next row's `obs`, or the bootstrap row's at the last step), null
    elsewhere.
    """
    if rollout.final_obses is None:
        for name, leaf in obses:
            columns.leaf("next_" + name, leaf[1:])
        return
    after = dict(_tree.flatten(rollout.next_obses()))
    paths = {_column_name("obs", path): path for path, _ in _tree.flatten(rollout.obses)}
    for name, _ in obses:
        columns.leaf("next_" + name, after[paths[name]])
    for name, leaf in obses:
        columns.leaf(reset_column(name), leaf[1:], nulls=~ends)


def _output_and_state_columns(columns: _Columns, rollout: Rollout, states: Leaves) -> None:
    """The other outputs and the states at t, then every output and state at t + 1."""
    T, B = rollout.num_steps, rollout.batch_size
    outs = rollout.model_outs.arrays
    for key, array in outs.items():
        if key != "actions":
            columns.leaf(_output_columns(key)[0], _per_env(array, B)[:T])
    for key in sorted(outs, key=lambda key: key != "actions"):  # next_action first
        columns.leaf(_output_columns(key)[1], _per_env(outs[key], B)[1:], later=True)
    for name, leaf in states:
        columns.leaf(name, leaf[:T])
    for name, leaf in states:
        columns.leaf("next_" + name, leaf[1:], later=True)


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
