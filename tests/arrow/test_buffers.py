"""`trajkit.arrow._buffers`: rows taken and kept from Arrow data, whatever its slices.

pyarrow 26.0.1's `take` and `filter` of a fixed-size list of fixed-size lists that is a
slice return zeros (or bytes from past the slice); `take_rows` and `filter_rows` copy such
columns first, and leave every other column as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")

from trajkit.arrow._buffers import _nested_slice, filter_rows, take_rows  # noqa: E402

CELLS = [[[0], [1]], [[2], [3]], [[4], [5]], [[6], [7]]]


def _nested(values: Any = None) -> Any:
    """`CELLS`: 4 rows of fixed-size lists (2) of fixed-size lists (1) of uint8."""
    flat = pa.array(np.arange(8, dtype=np.uint8)) if values is None else values
    return pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(flat, 1), 2)


def _child_sliced() -> Any:
    """The last two rows of `CELLS`, the offset on the inner level (the outer one at 0)."""
    inner = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8, dtype=np.uint8)), 1)
    return pa.FixedSizeListArray.from_arrays(inner.slice(4), 2)


@pytest.mark.parametrize(
    "sliced",
    [lambda: _nested().slice(2), _child_sliced, lambda: pa.chunked_array([_nested().slice(2)])],
    ids=["outer offset", "inner offset", "chunked"],
)
def test_rows_of_a_sliced_nested_list_are_the_rows_it_holds(sliced: Any) -> None:
    column = sliced()
    assert column.to_pylist() == CELLS[2:]
    assert take_rows(pa, column, np.array([1, 0, 1])).to_pylist() == [CELLS[3], CELLS[2], CELLS[3]]
    assert filter_rows(pa, column, np.array([False, True])).to_pylist() == [CELLS[3]]
    table = take_rows(pa, pa.table({"x": column, "n": [10, 11]}), np.array([1, 0]))
    assert table.to_pydict() == {"x": [CELLS[3], CELLS[2]], "n": [11, 10]}


def test_only_nested_lists_with_an_offset_are_copied() -> None:
    flat = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8, dtype=np.uint8)), 2)
    whole, primitive = _nested(), _nested(pa.array(np.arange(10, dtype=np.uint8)).slice(2))
    for kept in (whole, flat.slice(2), pa.array([1, 2, 3]).slice(1)):
        assert not _nested_slice(pa, kept)
    assert _nested_slice(pa, whole.slice(1))
    assert _nested_slice(pa, _child_sliced())
    assert _nested_slice(pa, primitive)  # (pyarrow takes it right: copied all the same)
    assert take_rows(pa, primitive, np.array([1, 0])).to_pylist() == [[[4], [5]], [[2], [3]]]
    tensor = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(8, dtype=np.uint8).reshape(4, 2))
    assert not _nested_slice(pa, tensor.slice(2))  # (one level: pyarrow takes it right)
    table = pa.table({"x": whole, "n": [1, 2, 3, 4]})
    assert take_rows(pa, table, np.array([3, 0])).column("x").to_pylist() == [CELLS[3], CELLS[0]]
