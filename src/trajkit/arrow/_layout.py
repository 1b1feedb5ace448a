"""trajkit's Arrow layout: its JSON (parsed and checked) and the columns it names.

The layout JSON says what column names cannot (tree paths, dtypes, shapes, which fields are
present); this module reads it from a table and checks it, and checks that a table has the
columns it names, each of a type that can hold it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from trajkit._base.optional import require
from trajkit._core import tree as _tree
from trajkit._io.infos import strict_json_loads
from trajkit._models.rules import TREE_FIELDS
from trajkit._models.spec import SUPPORTED_DTYPES

LAYOUT_VERSION = 2
"""The version of the columnar layout, recorded in each table's layout JSON.

Version 1 (one row per observation row, T+1 per env) was never released; its tables are
refused with a message naming the version."""

LAYOUT_COLUMN = "trajkit_layout"
"""The column holding the layout JSON (on each rollout's first row), so that a file rewritten
by a tool that drops schema metadata (polars, DuckDB, HF `datasets`) still reads back."""

TensorType = Literal["list", "extension"]

Style = Literal["readable", "compact"]
"""How a table stores its leaves: `"readable"` (every value as a number, `next_` columns in
full) or `"compact"` (large leaves as bytes, `next_` columns only where they say something)."""

LayoutChoice = Literal["auto", "readable", "compact"]
"""The `layout` argument: a style, or `"auto"` (compact where a leaf is large)."""

AUTO_COMPACT_BYTES = 1024
"""`layout="auto"` picks the compact layout for a rollout with a leaf (or model output) whose
cell, one step of one env, holds at least this many bytes (an 84x84 uint8 image: 7,056),
and the readable layout otherwise."""

META_KEY = b"trajkit"
FORMAT = "trajkit-arrow"
_INDEX = ("rollout", "step", "env", "episode_id")
_FLAGS = ("reward", "terminated", "truncated", "is_first", "final_value")
_MAX_PATH = 64  # the deepest tree path a leaf may have in the layout
_MAX_CELL_DIMS = 32  # trailing dimensions of a leaf (NumPy allows 64 in all)
_MAX_CELL_BYTES = int(np.iinfo(np.intp).max)  # the most bytes a NumPy array can index


def load_pyarrow() -> Any:
    return require("pyarrow", "arrow", "trajkit.arrow")


def load_compute() -> Any:
    """`pyarrow.compute`, imported by name: `pa.compute` exists only once something has."""
    return require("pyarrow.compute", "arrow", "trajkit.arrow")


def reset_column(column: str) -> str:
    """The column of the observation an env reset to after an episode end (`final_obs`)."""
    return "reset_" + column


def cell_bytes(item: dict[str, Any]) -> int:
    """The bytes of one cell of a leaf or output of the layout (its dtype times its shape)."""
    size: int = np.dtype(item["dtype"]).itemsize * math.prod(item["shape"])  # Python ints
    return size


def _kind(item: dict[str, Any], sparse: bool = False) -> str:
    if not item.get("binary"):
        return "number"
    return "sparse binary" if sparse else "binary"


def _needed(layout: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every column the layout names: its kind, and the leaf or output it holds.

    Kinds: `index`, `number`, `binary`, `text`; the leaf or output gives the dtype and cell
    shape (empty for the layout's own columns).
    """
    none: dict[str, Any] = {"shape": []}
    needed = dict.fromkeys(_INDEX, ("index", none))
    needed.update(dict.fromkeys(_FLAGS, ("number", none)))
    if not layout["truncation"]:
        del needed["final_value"]
    needed["info"] = ("text", none)
    for field in TREE_FIELDS:
        for leaf in layout["fields"][field]["leaves"]:
            if leaf["column"] is not None:
                needed[leaf["column"]] = (_kind(leaf), leaf)
                needed[leaf["next"]] = (_kind(leaf, sparse=True), leaf)
    if layout.get("final_obs"):
        for leaf in layout["fields"]["obses"]["leaves"]:
            if leaf["column"] is not None:
                needed[reset_column(leaf["column"])] = (_kind(leaf, sparse=True), leaf)
    for item in layout["model_outs"]:
        needed[item["column"]] = (_kind(item), item)
        needed[item["next"]] = (_kind(item, sparse=True), item)
    return needed


def check_columns(pa: Any, schema: Any, layout: dict[str, Any]) -> None:
    """Every column the layout needs is in `schema`, of a type that holds it; no other column."""
    names = list(schema.names)
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
    for name, (kind, item) in needed.items():
        type_ = schema.field(name).type
        if kind in ("binary", "sparse binary"):
            _check_binary(pa, name, type_, item, kind == "sparse binary")
        else:
            check_type(pa, name, type_, kind, item["shape"])


def _check_binary(pa: Any, name: str, type_: Any, item: dict[str, Any], sparse: bool) -> None:
    """A column of bytes: `fixed_size_binary` of one cell's size.

    Or, `sparse` (the `next_` columns, mostly null), binary values of any length, each
    checked when read.
    """
    types, size = pa.types, cell_bytes(item)
    if types.is_fixed_size_binary(type_) and type_.byte_width == size:
        return
    if sparse and (types.is_binary(type_) or types.is_large_binary(type_)):
        return
    expected = (
        f"large_binary or fixed_size_binary[{size}]" if sparse else f"fixed_size_binary[{size}]"
    )
    raise ValueError(
        f"column {name!r} has type {type_}; the layout stores it as bytes, {expected} "
        f"({item['dtype']} of shape {item['shape']})"
    )


def check_type(pa: Any, name: str, type_: Any, kind: str, shape: Sequence[int] = ()) -> None:
    """A column of type `type_` can hold `kind` (`text`, `index`, `number`) of cell `shape`."""
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
    if not isinstance(fields, dict) or set(fields) != set(TREE_FIELDS):
        raise _bad_layout("'fields' must name " + " and ".join(map(repr, TREE_FIELDS)))
    style = layout.get("style", "readable")
    if style not in ("readable", "compact"):
        raise _bad_layout(f"'style' must be 'readable' or 'compact' (or absent), got {style!r}")
    columns: set[str] = {*_INDEX, *_FLAGS, "info", LAYOUT_COLUMN}
    for field in TREE_FIELDS:
        _check_field(field, fields[field], columns, style)
    outs = layout.get("model_outs")
    if not isinstance(outs, list):
        raise _bad_layout("'model_outs' must be a list")
    keys: set[str] = set()
    for item in outs:
        _check_output(item, style)
        if item["key"] in keys:
            raise _bad_layout(f"model output {item['key']!r} is listed twice")
        keys.add(item["key"])
        _claim(item["column"], columns)
        _claim(item["next"], columns)
    if not isinstance(layout.get("truncation"), bool):
        raise _bad_layout("'truncation' must be true or false")
    _check_final_obs(layout, columns)
    return layout


def _check_output(item: Any, style: str) -> None:
    """One of `model_outs`: key, columns, dtype, shape; `per_step` and `binary` if any."""
    if not (
        isinstance(item, dict)
        and set(item) - {"per_step", "binary"} == {"key", "column", "next", "dtype", "shape"}
        and all(isinstance(item[k], str) for k in ("key", "column", "next"))
        and item.get("per_step", True) is True
    ):
        raise _bad_layout(
            "each of 'model_outs' must be {'key': str, 'column': str, 'next': str, "
            "'dtype': str, 'shape': [int, ...]}, with 'per_step': true for a per-step "
            "scalar output"
        )
    name = f"model output {item['key']!r}"
    _check_cell(item, name, style)
    if item.get("per_step") and item["shape"]:
        raise _bad_layout(f"{name} is a per-step scalar ('per_step': true) with a shape")


def _check_cell(item: dict[str, Any], name: str, style: str) -> None:
    """A leaf's or output's `dtype` and `shape`, and `binary` (only in the compact layout)."""
    _check_dtype(item["dtype"], name)
    _check_shape(item["shape"], name)
    if cell_bytes(item) > _MAX_CELL_BYTES:
        raise _bad_layout(
            f"{name} has shape {item['shape']!r}: a cell of {cell_bytes(item)} bytes, more "
            f"than a NumPy array can hold ({_MAX_CELL_BYTES})"
        )
    binary = item.get("binary", False)
    if binary is not False and not (binary is True and style == "compact" and item["shape"]):
        raise _bad_layout(
            f"{name} has 'binary': {binary!r}; only a leaf with a shape, in the compact "
            "layout ('style': 'compact'), is stored as bytes ('binary': true)"
        )


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
    """A dtype trajkit files store (`SUPPORTED_DTYPES`: no float128, no complex, no object)."""
    try:
        dtype = np.dtype(dtype_text) if isinstance(dtype_text, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.shape or dtype.name not in SUPPORTED_DTYPES:
        raise _bad_layout(
            f"{name} has dtype {dtype_text!r}; trajkit stores {', '.join(SUPPORTED_DTYPES)}"
        )


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


def _check_field(field: str, entry: Any, columns: set[str], style: str) -> None:
    """One field's entry: `nested`, and leaves with a path, a dtype, a shape and columns."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("nested"), bool)
        and isinstance(entry.get("leaves"), list)
        and entry["leaves"]
    ):
        raise _bad_layout(f"{field!r} must have 'nested' (true/false) and a list of leaves")
    for leaf in entry["leaves"]:
        _check_leaf(field, leaf, columns, style)
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


def _check_leaf(field: str, leaf: Any, columns: set[str], style: str) -> None:
    """One leaf: its keys, its tree path, its cell, and its columns (claimed once each)."""
    keys = {"column", "next", "path", "dtype", "shape"}
    if not (isinstance(leaf, dict) and set(leaf) - {"binary"} == keys):
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
    _check_cell(leaf, name, style)
    _check_leaf_columns(leaf, name, columns)


def _check_leaf_columns(leaf: dict[str, Any], name: str, columns: set[str]) -> None:
    """A leaf has a column and a `next` column, or (no values per row) neither."""
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
        raise _bad_layout(f"{name} must have a 'column' and a 'next' column (strings), or neither")
