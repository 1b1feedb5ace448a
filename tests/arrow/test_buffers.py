"""`trajkit.arrow._buffers`: rows taken and kept from Arrow data, whatever its slices.

pyarrow 26.0.1's `take` and `filter` of a fixed-size list of fixed-size lists that is a
slice return zeros (or bytes from past the slice); `take_rows` and `filter_rows` copy such
columns first, and leave every other column as it is.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")

from trajkit.arrow._buffers import _nested_slice, filter_rows, take_rows, to_numpy  # noqa: E402

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


def test_chunks_that_follow_each_other_in_memory_are_one_array_without_a_copy() -> None:
    values = np.arange(10, dtype=np.int32)
    chunked = pa.chunked_array([pa.array(values[:4]), pa.array(values[4:7]), pa.array(values[7:])])
    whole = to_numpy(chunked)
    assert whole.tolist() == list(range(10))
    assert np.shares_memory(whole, values)
    assert not whole.flags.writeable
    memory = weakref.ref(values)
    del values, chunked
    gc.collect()
    assert memory() is not None  # the view holds the memory of its parts
    assert whole.tolist() == list(range(10))


@pytest.mark.parametrize(
    "chunks",
    [
        lambda v: [v[:4], v[5:]],  # a gap
        lambda v: [v[4:], v[:4]],  # in the other order
        lambda v: [v[:4], v[4:].copy()],  # apart
    ],
    ids=["gap", "reversed", "apart"],
)
def test_other_chunks_are_copied_into_one(chunks: Any) -> None:
    values = np.arange(10, dtype=np.int64)
    parts = chunks(values)
    whole = to_numpy(pa.chunked_array([pa.array(part) for part in parts]))
    assert whole.tolist() == np.concatenate(parts).tolist()
    assert not np.shares_memory(whole, values)


def test_chunks_of_booleans_are_unpacked_into_one() -> None:
    flags = np.array([True, False, True, True, False])
    whole = to_numpy(pa.chunked_array([pa.array(flags[:2]), pa.array(flags[2:])]))
    assert whole.dtype == np.bool_
    assert whole.tolist() == flags.tolist()
