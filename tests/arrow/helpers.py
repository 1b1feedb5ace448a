"""What the Arrow tests share: an image rollout, table edits, and the fuzz's mutated tables."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")
pc = pytest.importorskip("pyarrow.compute")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402


def image_rollout(final: bool = True, **kwargs: Any) -> trajkit.Rollout:
    """A recording with a uint8 [16, 16, 4] image (1,024 bytes a step) and a small vector."""
    base = {"num_steps": 9, "num_envs": 3, "done_prob": 0.3, "truncation": True, "seed": 4}
    r = example_rollout(**{**base, **kwargs}, final_obs=final)
    T, B = r.num_steps, r.batch_size
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (T + 1, B, 16, 16, 4), dtype=np.uint8)
    if r.final_obses is None:
        return r.replace(obses={"image": image, "vector": r.obses})
    finals = rng.integers(0, 256, (len(r.final_obses), 16, 16, 4), dtype=np.uint8)
    return r.replace(
        obses={"image": image, "vector": r.obses},
        final_obses={"image": finals, "vector": r.final_obses},
    )


def with_column(table: Any, name: str, values: Any) -> Any:
    """`table` with column `name` replaced by `values` (an Arrow array), metadata kept."""
    return table.set_column(table.column_names.index(name), name, values)


def nulled(table: Any, name: str, row: int) -> Any:
    column = table.column(name).combine_chunks()
    mask = np.zeros(table.num_rows, bool)
    mask[row] = True
    storage = column.storage if isinstance(column.type, pa.FixedShapeTensorType) else column
    if pa.types.is_fixed_size_list(storage.type):
        cell = storage.type.list_size
        values = storage.values.slice(storage.offset * cell, len(storage) * cell)
        masked = pa.FixedSizeListArray.from_arrays(values, cell, mask=pa.array(mask))
        if storage is column:
            return with_column(table, name, masked)
        return with_column(table, name, pa.ExtensionArray.from_storage(column.type, masked))
    return with_column(
        table, name, pc.if_else(pa.array(mask), pa.scalar(None, column.type), column)
    )


def layout_of(table: Any) -> dict[str, Any]:
    layout: dict[str, Any] = json.loads(table.schema.metadata[b"trajkit"])
    return layout


def with_layout(table: Any, layout: dict[str, Any], raw: bytes | None = None) -> Any:
    """`table` with `layout` (or the bytes `raw`) in its metadata and its layout column."""
    text = raw if raw is not None else json.dumps(layout).encode()
    column = table.column("trajkit_layout").to_pylist()
    values = [None if value is None else text.decode("utf-8", "replace") for value in column]
    table = with_column(table, "trajkit_layout", pa.array(values, pa.string()))
    return table.replace_schema_metadata({b"trajkit": text})


SAMPLES = [
    example_rollout(num_steps=3, num_envs=2, seed=0),
    example_rollout(num_steps=2, num_envs=3, truncation=True, done_prob=0.5, seed=1),
    example_rollout(num_steps=3, num_envs=1, nested=True, action_kind="box", seed=2),
]
_TABLES = [ta.to_arrow(r) for r in SAMPLES]
_TYPES = [pa.int8(), pa.int64(), pa.uint8(), pa.float16(), pa.float64(), pa.bool_(), pa.string()]


@st.composite
def mutations(draw: st.DrawFn) -> tuple[int, Any]:
    """A valid table, mutated one to three times in ways that keep or lose its data.

    Left out: edits that change data the layout lets a tool change (a value, a null info,
    which means an empty one, a lossy cast), after which a different rollout is right.
    """
    which = draw(st.integers(0, len(_TABLES) - 1))
    table = _TABLES[which]
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(table.column_names))
        op = draw(st.sampled_from(list(_MUTATORS)))
        table = _MUTATORS[op](draw, table, name)
    return which, table


Mutator = Callable[[st.DrawFn, Any, str], Any]


def _drop(draw: st.DrawFn, table: Any, name: str) -> Any:
    return table.drop_columns([name])


def _null(draw: st.DrawFn, table: Any, name: str) -> Any:
    if not table.num_rows or name == "info":
        return table
    return nulled(table, name, draw(st.integers(0, table.num_rows - 1)))


def _retype(draw: st.DrawFn, table: Any, name: str) -> Any:
    """A lossless cast of a flat column to another type."""
    column = table.column(name)
    if pa.types.is_nested(column.type):
        return table
    type_ = draw(st.sampled_from(_TYPES))
    if name.startswith("out.") and type_ == pa.float16():
        return table  # the constructor's int32 check warns on float16 (told the lead)
    try:
        values = column.cast(type_, safe=False)
        lost = not values.cast(column.type).equals(column)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return table
    return table if lost else with_column(table, name, values)


def _filter(draw: st.DrawFn, table: Any, name: str) -> Any:
    rows = table.num_rows
    if not rows:
        return table
    keep = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
    return table.filter(pa.array(keep))


def _take(draw: st.DrawFn, table: Any, name: str) -> Any:
    """Rows reordered, repeated or left out."""
    rows = table.num_rows
    if not rows:
        return table
    index = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=rows + 2))
    return table.take(pa.array(index))


def _step(draw: st.DrawFn, table: Any, name: str) -> Any:
    """One `step` out of range, or of another row."""
    if not (
        "step" in table.column_names
        and pa.types.is_integer(table.schema.field("step").type)
        and table.column("step").null_count == 0
        and table.num_rows
    ):
        return table
    steps = table.column("step").to_numpy().astype(np.int64)
    big = draw(st.sampled_from([2**27, 2**31 - 1, -1, 2**62, 4]))
    steps[draw(st.integers(0, table.num_rows - 1))] = big
    return with_column(table, "step", pa.array(steps))


def _meta(draw: st.DrawFn, table: Any, name: str) -> Any:
    """The layout JSON changed in one place, where the table keeps it."""
    if not table.schema.metadata:
        return table
    layout = layout_of(table)
    key = draw(st.sampled_from(["nested", "truncation", "outs", "dtype"]))
    if key == "nested":
        layout["fields"]["obses"]["nested"] = not layout["fields"]["obses"]["nested"]
    elif key == "truncation":
        layout["truncation"] = not layout["truncation"]
    elif key == "outs" and layout["model_outs"]:
        layout["model_outs"].pop()
    elif key == "dtype":
        layout["fields"]["obses"]["leaves"][0]["dtype"] = "|b1"
    if "trajkit_layout" in table.column_names:
        return with_layout(table, layout)
    return table.replace_schema_metadata({b"trajkit": json.dumps(layout).encode()})


def _strip(draw: st.DrawFn, table: Any, name: str) -> Any:
    """As polars, DuckDB and HF datasets write a file again."""
    return table.replace_schema_metadata(None)


def _lists(draw: st.DrawFn, table: Any, name: str) -> Any:
    """One level of fixed-size lists as variable-size lists, as DuckDB reads it back."""
    if not pa.types.is_fixed_size_list(table.column(name).type):
        return table
    inner = table.column(name).type.value_type
    return with_column(table, name, table.column(name).cast(pa.list_(inner)))


_MUTATORS: dict[str, Mutator] = {
    "drop": _drop,
    "null": _null,
    "type": _retype,
    "filter": _filter,
    "take": _take,
    "step": _step,
    "meta": _meta,
    "strip": _strip,
    "lists": _lists,
}
