"""NumPy arrays to Arrow arrays and back through their buffers.

`pyarrow.array(ndarray)`, `pyarrow.array(list)` and `Array.to_numpy()` import pandas, when it
is installed, the first time they run: about a second of a fresh process, more than writing
a 100 MB rollout takes. Flat primitive arrays need none of it: their Arrow buffers are NumPy
memory (bit-packed for booleans and validity).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray


def _bits(mask: AnyArray) -> AnyArray:
    bits: AnyArray = np.packbits(mask.reshape(-1), bitorder="little")
    return bits


def validity(pa: Any, valid: AnyArray | None) -> Any:
    """An Arrow validity bitmap (1: a value, 0: null) of a boolean array, or `None`."""
    return None if valid is None else pa.py_buffer(_bits(valid))


def from_numpy(pa: Any, values: AnyArray, valid: AnyArray | None = None) -> Any:
    """A numeric or boolean array, flattened, as an Arrow array, null where `valid` is false.

    Zero-copy for numbers in native byte order; booleans are packed into bits.
    """
    values = values.reshape(-1)
    bitmap = validity(pa, valid)
    if values.dtype == np.bool_:
        bits = pa.py_buffer(_bits(values))
        return pa.Array.from_buffers(pa.bool_(), len(values), [bitmap, bits])
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [bitmap, data])


def strings(pa: Any, rows: int, entries: Sequence[tuple[int, str]]) -> Any:
    """An Arrow string array of `rows` values, null but at the `(row, text)` of `entries`.

    Built from the entries alone (rows ascending), so a column of mostly nulls costs little.
    """
    return binaries(pa, rows, [(row, text.encode()) for row, text in entries], pa.string())


def binaries(pa: Any, rows: int, entries: Sequence[tuple[int, bytes]], kind: Any) -> Any:
    """As `strings`, of bytes, as an Arrow array of type `kind` (`binary` or `string`).

    The bytes are not checked to be UTF-8: cast a `binary` array to `string` for that.
    """
    encoded = [data for _, data in entries]
    where = np.fromiter((row for row, _ in entries), np.int64, len(entries))
    lengths = np.zeros(rows, np.int32)
    lengths[where] = [len(e) for e in encoded]
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.zeros(rows, bool)
    valid[where] = True
    bitmap = validity(pa, None if valid.all() else valid)
    data = pa.py_buffer(b"".join(encoded))
    return pa.Array.from_buffers(kind, rows, [bitmap, pa.py_buffer(offsets), data])


def to_numpy(array: Any) -> AnyArray:
    """A numeric or boolean Arrow array (or chunked array) with no nulls as a 1-D NumPy array.

    Zero-copy for numbers in one chunk, or in chunks that follow each other in memory (as
    slices of one array do); booleans are unpacked.
    """
    if hasattr(array, "chunks"):
        if array.num_chunks == 1:
            return to_numpy(array.chunk(0))
        parts = [to_numpy(chunk) for chunk in array.chunks]
        dtype = np.dtype(array.type.to_pandas_dtype())
        if not parts:
            return np.zeros(0, dtype)
        return _adjoining(parts) if _adjoin(parts) else np.concatenate(parts)
    buffer, n, offset = array.buffers()[1], len(array), array.offset
    if str(array.type) == "bool":
        if buffer is None:
            return np.zeros(0, bool)
        bits = np.frombuffer(buffer, np.uint8)
        unpacked: AnyArray = np.unpackbits(bits, bitorder="little", count=offset + n)[offset:]
        return unpacked.view(np.bool_)
    dtype = np.dtype(array.type.to_pandas_dtype())
    if buffer is None:
        return np.zeros(0, dtype)
    values: AnyArray = np.frombuffer(buffer, dtype, count=n, offset=offset * dtype.itemsize)
    return values


def _adjoin(parts: list[AnyArray]) -> bool:
    """Whether `parts` (1-D, C-contiguous, of one dtype) each start where the one before ends."""
    return all(a.ctypes.data + a.nbytes == b.ctypes.data for a, b in itertools.pairwise(parts))


class _Span:
    """The memory of parts that follow each other (`_adjoin`), as one array; it holds them."""

    def __init__(self, parts: list[AnyArray]) -> None:
        self.parts = parts  # (their memory stays while the array made of this object lives)
        self.__array_interface__ = {
            "data": (parts[0].ctypes.data, True),  # read-only, as `frombuffer` views are
            "shape": (sum(len(part) for part in parts),),
            "typestr": parts[0].dtype.str,
            "version": 3,
        }


def _adjoining(parts: list[AnyArray]) -> AnyArray:
    """`np.concatenate(parts)` without the copy, for parts that `_adjoin`."""
    whole: AnyArray = np.asarray(_Span(parts))
    return whole


def take_rows(pa: Any, data: Any, indices: AnyArray) -> Any:
    """`data.take(indices)` (a table, an array or a chunked array; `indices` NumPy ints).

    pyarrow's `take` and `filter` of a fixed-size list of fixed-size lists that is a slice
    (an offset at any of its levels) return zeros, or bytes from past the slice (pyarrow
    26.0.1): such columns are copied whole first (`_unsliced`). A readable rollout with a
    leaf of shape `[2, 1]` whose rows are out of order, read from a row group it shares
    with another rollout, came back with zeros in that leaf.
    """
    return _unsliced(pa, data).take(from_numpy(pa, indices))


def filter_rows(pa: Any, column: Any, mask: AnyArray) -> Any:
    """`column.filter(mask)` (an array or chunked array; `mask` NumPy bools), as `take_rows`."""
    return _unsliced(pa, column).filter(from_numpy(pa, mask))


def _unsliced(pa: Any, data: Any) -> Any:
    """`data` with each nested fixed-size list column that is a slice copied into one array."""
    if isinstance(data, pa.Table):
        for i, column in enumerate(data.columns):
            copied = _unsliced(pa, column)
            if copied is not column:
                data = data.set_column(i, data.schema.field(i), copied)
        return data
    chunks = data.chunks if hasattr(data, "chunks") else [data]
    if not any(_nested_slice(pa, chunk) for chunk in chunks):
        return data
    joined = pa.concat_arrays(chunks)  # (fresh buffers: every offset 0)
    return pa.chunked_array([joined], data.type) if hasattr(data, "chunks") else joined


def _nested_slice(pa: Any, array: Any) -> bool:
    """Whether `array` is a fixed-size list of fixed-size lists with an offset at any level.

    Its values' offset too, where pyarrow has not been seen to fail: a copy costs little.
    """
    levels, offset = 0, False
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    while pa.types.is_fixed_size_list(storage.type):
        levels, offset = levels + 1, offset or storage.offset != 0
        storage = storage.values
    return levels > 1 and (offset or storage.offset != 0)
