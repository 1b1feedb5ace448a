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
    "ArrayTree",
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

ArrayTree: TypeAlias = Any
"""An array, or a `dict` (str keys) / `tuple` of array trees: nested observations and states.

Typed as `Any`, so that code written for flat rollouts (`r.obses.shape`) keeps type-checking;
at runtime it is an ndarray for a flat field and a `dict`/`tuple` for a Gymnasium `Dict`/`Tuple`
space. See `trajkit._core.tree` for the helpers that walk it.
"""
