"""One batch of an Arrow column as NumPy cells, and the checks that name a cell's position.

A batch holds consecutive rows of a rollout's (step, env) grid: row `i` is step `i // B`,
env `i % B`. Its cells become a NumPy array `[rows, *shape]` straight from Arrow's buffers
(zero-copy but for booleans, which Arrow packs into bits); the checks that refuse a value
name its position in the whole grid, not in the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import first_true, fmt_index
from trajkit._models.rules import stray_bool_byte
from trajkit.arrow._buffers import to_numpy
from trajkit.arrow._layout import load_compute

Where = Callable[[int], str]
"""Names grid cell `i` (`t * B + b`) in a message: `step t, env b (row r)`."""


def cells(pa: Any, name: str, column: Any, item: dict[str, Any], rows: Where) -> AnyArray:
    """The values of an Arrow array with no null at its top level, `[len, *shape]`.

    `item` (a leaf or output of the layout, or `{"shape": []}`) gives the cell's shape and,
    for a column of bytes, its dtype; other values keep the column's own dtype. `rows(i)`
    names the column's row i in messages.
    """
    shape = item["shape"]
    if item.get("binary"):
        return _bytes(name, column, item, rows)
    if isinstance(column.type, pa.FixedShapeTensorType):
        column = column.storage
        levels: Sequence[int] = (int(np.prod(shape)),)
    else:
        levels = shape
    per_row = 1  # values of the current level in one row
    for level, size in enumerate(levels):
        if level and column.null_count:
            _inner_null(name, column, per_row, rows)
        if not pa.types.is_fixed_size_list(column.type):
            lengths = to_numpy(load_compute().list_value_length(column))
            if (lengths != size).any():
                i = int(np.argmax(lengths != size))
                raise ValueError(
                    f"column {name!r} holds a list of {int(lengths[i])} values at "
                    f"{rows(i // per_row)}, where the layout's cell shape "
                    f"{list(shape)} needs {size} (level {level + 1})"
                )
        column = column.flatten()
        per_row *= size
    if len(levels) and column.null_count:
        _inner_null(name, column, per_row, rows)
    values: AnyArray = to_numpy(column)
    return values.reshape(-1, *shape)


def _inner_null(name: str, column: Any, per_row: int, rows: Where) -> None:
    nulls = to_numpy(column.is_null())
    raise ValueError(
        f"column {name!r} holds a null value at {rows(int(np.argmax(nulls)) // per_row)}; a "
        "rollout has a value at every step"
    )


def _bytes(name: str, column: Any, item: dict[str, Any], rows: Where) -> AnyArray:
    """`binary_values`, its refusals naming the row."""
    shape = item["shape"]
    try:
        return binary_values(column, np.dtype(item["dtype"]), shape)
    except _CellSizeError as exc:
        raise ValueError(
            f"column {name!r} holds {exc.length} bytes at {rows(exc.row)}, where the "
            f"layout's cell ({item['dtype']} of shape {list(shape)}) has {exc.width}"
        ) from None
    except _BoolByteError as exc:
        raise _bool_byte(name, exc.byte, rows(exc.row)) from None


def bool_bytes(name: str, values: AnyArray, rows: Where) -> None:
    """Refuse a bool cell `[n, *shape]` read as bytes that holds a byte other than 0 and 1."""
    stray = stray_bool_byte(values)
    if stray is not None:
        per_row = max(1, values[0].size)
        byte = int(values.reshape(-1).view(np.uint8)[stray])
        raise _bool_byte(name, byte, rows(stray // per_row))


def _bool_byte(name: str, byte: int, where: str) -> ValueError:
    return ValueError(
        f"column {name!r} holds the byte {byte} in a bool cell at {where}; "
        "a bool is stored as the byte 0 or 1 (as trajkit's file format stores it)"
    )


def binary_values(column: Any, dtype: np.dtype[Any], shape: Sequence[int]) -> AnyArray:
    """A binary array's values (no nulls) as `[len, *shape]` of `dtype`, zero-copy.

    Fixed-size binary of the cell's size, or variable-size binary whose values are each
    exactly one cell long (refused otherwise, naming the first row that is not). A bool cell
    holds the bytes 0 and 1 only: another byte would make a bool that `trajkit.save` refuses.
    """
    n = len(column)
    width = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
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
    stray = stray_bool_byte(raw) if dtype == np.bool_ else None
    if stray is not None:
        raise _BoolByteError(stray // max(1, width), int(raw[stray]))
    values: AnyArray = raw.view(dtype).reshape(n, *shape)
    return values


class _CellSizeError(ValueError):
    """A binary value of another length than the layout's cell (its row, length, width)."""

    def __init__(self, row: int, length: int, width: int) -> None:
        super().__init__(row, length, width)
        self.row, self.length, self.width = row, length, width


class _BoolByteError(ValueError):
    """A bool cell stored as bytes holding a byte other than 0 and 1 (its row, the byte)."""

    def __init__(self, row: int, byte: int) -> None:
        super().__init__(row, byte)
        self.row, self.byte = row, byte


def no_nulls(name: str, column: Any, rows: Where) -> None:
    """Refuse a null in `column` (an Arrow array), naming the first by `rows`."""
    if column.null_count:
        i = int(np.argmax(to_numpy(column.is_null())))
        raise ValueError(
            f"column {name!r} is null at {rows(i)}; a rollout has a value at every step"
        )


def positioned(
    check: Callable[[AnyArray], AnyArray], values: AnyArray, start: int, per: int
) -> AnyArray:
    """`check(values)`, for values at rows `start...` of a grid of `per` rows a step.

    `check` converts values elementwise and refuses some, naming the first's position by
    the axes of the array it is given. Where it refuses, it is run again on the values
    placed at their rows of a grid of zeros (zeros pass every rule), so that its message
    names the position in the grid: `(t=412, b=3)` rather than that of the batch. `per` is
    1 for a list of final observations (axis `e`). The grid is allocated by the system as
    zero pages, touched only where the values are put.
    """
    try:
        return check(values)
    except ValueError as exc:
        error = exc
    stop = start + len(values)
    rows = -(-stop // per) * per
    grid = np.zeros((rows, *values.shape[1:]), values.dtype)
    grid[start:stop] = values
    check(grid if per == 1 else grid.reshape(rows // per, per, *values.shape[1:]))
    raise error


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


def differ(after: AnyArray, following: AnyArray) -> AnyArray | None:
    """`[rows]`: where a cell of `after` differs from that of `following`, or `None` if none.

    NaN equals NaN here, as in `Rollout` equality.
    """
    same = after == following
    if same.all():
        return None
    if after.dtype.kind == "f" or following.dtype.kind == "f":
        other = ~same
        pairs = np.broadcast_arrays(after, following)
        same[other] = np.isnan(pairs[0][other].astype(np.float64)) & np.isnan(
            pairs[1][other].astype(np.float64)
        )
    if same.ndim > 1:
        same = same.reshape(len(same), -1).all(axis=1)
    different: AnyArray = ~same
    return different if different.any() else None


def contradiction(name: str, column: str, t: int, b: int, at_ends: bool) -> ValueError:
    """Column `name` holds at step t, env b another value than `column` at step t + 1.

    `at_ends`: the layout's `final_obs`, under which `name` may differ at an episode end.
    """
    return ValueError(
        f"column {name!r} contradicts column {column!r}: it holds at step {t}, env {b} "
        f"another value than {column!r} at step {t + 1} (the values after a step are those "
        "of the next step"
        + (", but at an episode end ('final_obs': true in the layout)" if at_ends else "")
        + ")"
    )
