"""NumPy arrays to Arrow arrays and back through their buffers.

`pyarrow.array(ndarray)`, `pyarrow.array(list)` and `Array.to_numpy()` import pandas, when it
is installed, the first time they run: about a second of a fresh process, more than writing
a 100 MB rollout takes. Flat primitive arrays need none of it: their Arrow buffers are NumPy
memory (bit-packed for booleans and validity).
"""

from __future__ import annotations

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
    encoded = [text.encode() for _, text in entries]
    where = np.fromiter((row for row, _ in entries), np.int64, len(entries))
    lengths = np.zeros(rows, np.int32)
    lengths[where] = [len(e) for e in encoded]
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.zeros(rows, bool)
    valid[where] = True
    bitmap = validity(pa, None if valid.all() else valid)
    data = pa.py_buffer(b"".join(encoded))
    return pa.Array.from_buffers(pa.string(), rows, [bitmap, pa.py_buffer(offsets), data])


def to_numpy(array: Any) -> AnyArray:
    """A numeric or boolean Arrow array (or chunked array) with no nulls as a 1-D NumPy array.

    Zero-copy for one chunk of numbers; booleans are unpacked.
    """
    if hasattr(array, "chunks"):
        if array.num_chunks == 1:
            return to_numpy(array.chunk(0))
        parts = [to_numpy(chunk) for chunk in array.chunks]
        dtype = np.dtype(array.type.to_pandas_dtype())
        return np.concatenate(parts) if parts else np.zeros(0, dtype)
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
