"""Array type aliases shared by every layer.

`numpy.typing.NDArray` does not pin shapes: shapes live in docstrings and in runtime validation.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "AnyArray",
    "ArrayLike",
    "BoolArray",
    "Float32Array",
    "Float64Array",
    "Int32Array",
    "Int64Array",
    "IntArray",
    "Seed",
]

Float32Array: TypeAlias = NDArray[np.float32]
"""A float32 array (rewards, dones, values, advantages, ...)."""

Float64Array: TypeAlias = NDArray[np.float64]
"""A float64 array (used by references and accumulators)."""

Int32Array: TypeAlias = NDArray[np.int32]
"""An int32 array (discrete actions)."""

Int64Array: TypeAlias = NDArray[np.int64]
"""An int64 array (indices)."""

IntArray: TypeAlias = NDArray[np.intp]
"""A platform index array, as returned by NumPy's index functions."""

BoolArray: TypeAlias = NDArray[np.bool_]
"""A boolean mask."""

AnyArray: TypeAlias = NDArray[Any]
"""An array of any dtype (observations, unknown model outputs)."""

Seed: TypeAlias = "int | np.random.Generator | None"
"""What every shuffling function accepts: an int seed, a Generator, or None for fresh entropy."""
