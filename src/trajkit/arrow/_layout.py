"""trajkit's Arrow layout: its JSON (parsed and checked) and the columns it names.

The layout JSON says what column names cannot (tree paths, dtypes, shapes, which fields are
present); this module reads it from a table and checks it, and checks that a table has the
columns it names, each of a type that can hold it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from trajkit._base.optional import require
from trajkit._core import tree as _tree
from trajkit._io.infos import strict_json_loads

LAYOUT_VERSION = 2
"""The version of the columnar layout, recorded in each table's layout JSON.

Version 1 (one row per observation row, T+1 per env) was never released; its tables are
refused with a message naming the version."""

LAYOUT_COLUMN = "trajkit_layout"
"""The column holding the layout JSON (on each rollout's first row), so that a file rewritten
by a tool that drops schema metadata (polars, DuckDB, HF `datasets`) still reads back."""

TensorType = Literal["list", "extension"]

META_KEY = b"trajkit"
FORMAT = "trajkit-arrow"
_INDEX = ("rollout", "step", "env", "episode_id")
_FLAGS = ("reward", "terminated", "truncated", "is_first", "final_value")
_MAX_PATH = 64  # the deepest tree path a leaf may have in the layout
_MAX_CELL_DIMS = 32  # trailing dimensions of a leaf (NumPy allows 64 in all)


def load_pyarrow() -> Any:
    return require("pyarrow", "arrow", "trajkit.arrow")


def load_compute() -> Any:
    """`pyarrow.compute`, imported by name: `pa.compute` exists only once something has."""
    return require("pyarrow.compute", "arrow", "trajkit.arrow")


def reset_column(column: str) -> str:
    """The column of the observation an env reset to after an episode end (`final_obs`)."""
    return "reset_" + column


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
    if layout.get("final_obs"):
        for leaf in layout["fields"]["obses"]["leaves"]:
            if leaf["column"] is not None:
                needed[reset_column(leaf["column"])] = ("number", leaf["shape"])
    for item in layout["model_outs"]:
        needed[item["column"]] = needed[item["next"]] = ("number", item["shape"])
    return needed


def check_columns(pa: Any, table: Any, layout: dict[str, Any]) -> None:
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
        check_type(pa, name, table.schema.field(name).type, kind, shape)


def check_type(pa: Any, name: str, type_: Any, kind: str, shape: Sequence[int] = ()) -> None:
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


def read_layout(pa: Any, table: Any) -> dict[str, Any]:
    """The table's layout, from its schema metadata or its `trajkit_layout` column, checked."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    texts: list[str] = []
    if LAYOUT_COLUMN in table.column_names:
        column = table.column(LAYOUT_COLUMN)
        check_type(pa, LAYOUT_COLUMN, column.type, "text")
        texts = load_compute().unique(column.drop_null()).to_pylist()
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
    if not isinstance(layout, dict) or layout.get("format") != FORMAT:
        raise ValueError(f"{where} is not of the {FORMAT!r} layout")
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
    _check_final_obs(layout, columns)
    return layout


def _check_final_obs(layout: dict[str, Any], columns: set[str]) -> None:
    """The optional `final_obs`: true when `next_obs` holds the final observation at ends.

    Then each observation leaf has a `reset_obs...` column too, the observation after an end.
    """
    if not isinstance(layout.get("final_obs", False), bool):
        raise _bad_layout("'final_obs' must be true or false (or absent: false)")
    if layout.get("final_obs"):
        for leaf in layout["fields"]["obses"]["leaves"]:
            if leaf["column"] is not None:
                _claim(reset_column(leaf["column"]), columns)


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
