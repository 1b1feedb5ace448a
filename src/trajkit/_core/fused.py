"""Copy (or cast) a large array to float32 and check its values in one pass, where possible.

NumPy copies an array and checks its values in separate passes, so the check reads again
everything the copy wrote: for a rollout that is most of the cost of validating it beside the
copy. With numba installed (`trajkit[numba]`), the kernels of `trajkit._core._numba_checks`
do both in one pass, at the speed of the copy. These functions return None where no kernel
applies (numba missing or `TRAJKIT_BACKEND=numpy`, a small array, a dtype or layout the
kernels do not take); the caller then uses NumPy. A kernel only says whether every value
passed: the caller finds and names the first bad one.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import numpy as np

from trajkit._base.types import AnyArray, Float32Array
from trajkit._core.gae import gae_backend

__all__ = ["MIN_BYTES", "Rule", "cast_checked", "passes"]

Rule: TypeAlias = Literal["finite", "binary"]

MIN_BYTES: Final = 1 << 16
"""Smaller arrays are left to NumPy: there, calling a kernel costs about what it saves."""

_SOURCES: Final = (np.dtype(np.float32), np.dtype(np.float64))


def _kernels_apply(array: AnyArray) -> bool:
    if array.nbytes < MIN_BYTES or array.dtype not in _SOURCES or not array.flags.c_contiguous:
        return False
    try:
        return gae_backend() == "numba"
    except ValueError:  # TRAJKIT_BACKEND misspelt, or numba asked for and missing: NumPy
        return False


def cast_checked(array: AnyArray, rule: Rule) -> tuple[Float32Array, bool] | None:
    """`array` as a new float32 array, and whether every value obeys `rule`, in one pass.

    Args:
        array: The values, float32 or float64, C-contiguous, at least `MIN_BYTES`.
        rule: `"finite"` (no NaN or ±inf, also after the cast to float32) or `"binary"`
            (only 0 and 1).

    Returns:
        The float32 copy and whether all values passed; None where no kernel applies.

    Examples:
        >>> x = np.ones(1 << 15)  # float64, 256 KiB
        >>> result = cast_checked(x, "finite")
        >>> result is None or (result[0].dtype == np.float32 and result[1])
        True
    """
    if not _kernels_apply(array):
        return None
    from trajkit._core._numba_checks import compiled_kernels

    kernels = compiled_kernels()
    kernel = kernels.cast_finite if rule == "finite" else kernels.cast_binary
    out = np.empty(array.shape, np.float32)
    return out, bool(kernel(array.reshape(-1), out.reshape(-1)))


def passes(array: AnyArray, rule: Rule) -> bool | None:
    """Whether every value of `array` obeys `rule`, in one pass; None where no kernel applies.

    Examples:
        >>> x = np.zeros(1 << 15, np.float32)
        >>> x[-1] = np.nan
        >>> passes(x, "finite") in (None, False)
        True
    """
    if not _kernels_apply(array):
        return None
    from trajkit._core._numba_checks import compiled_kernels

    kernels = compiled_kernels()
    kernel = kernels.is_finite if rule == "finite" else kernels.is_binary
    return bool(kernel(array.reshape(-1)))
