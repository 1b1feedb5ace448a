"""The numba kernels behind `trajkit._core.fused`: copy (or cast) and check in one pass.

Each kernel is a plain loop over a flat array, compiled on first use with explicit signatures
(`cache=True`, so a fresh environment compiles once) and without the GIL. The checks are
written as OR-reductions of comparisons, which LLVM vectorises, so a kernel runs at the speed
of the copy it does. numba is imported only by `compiled_kernels`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from trajkit._base.types import AnyArray, Float32Array

__all__ = ["Kernels", "cast_binary", "cast_finite", "compiled_kernels", "is_binary", "is_finite"]


def cast_finite(src: AnyArray, dst: Float32Array) -> bool:
    """Write `src` (float32 or float64, flat) into `dst` as float32; True if all are finite.

    A float64 value beyond float32's range becomes inf in `dst`, so it is reported too.

    Examples:
        >>> dst = np.empty(2, np.float32)
        >>> cast_finite(np.array([1.0, 2.0]), dst), dst.tolist()
        (True, [1.0, 2.0])
        >>> cast_finite(np.array([1.0, np.nan]), dst)
        False
    """
    bad = False
    for i in range(src.size):
        value = np.float32(src[i])
        dst[i] = value
        bad |= (value - value) != 0  # NaN for NaN and ±inf, 0 for every finite value
    return not bad


def cast_binary(src: AnyArray, dst: Float32Array) -> bool:
    """Write `src` (float32 or float64, flat) into `dst` as float32; True if all are 0 or 1.

    Examples:
        >>> dst = np.empty(2, np.float32)
        >>> cast_binary(np.array([0.0, 1.0], np.float32), dst)
        True
        >>> cast_binary(np.array([2.0, 1.0]), dst)
        False
    """
    bad = False
    for i in range(src.size):
        value = np.float32(src[i])
        dst[i] = value
        bad |= (value != 0) & (value != 1)
    return not bad


def is_finite(src: AnyArray) -> bool:
    """Whether every value of `src` (float32 or float64, flat) is finite.

    Examples:
        >>> is_finite(np.array([0.0, np.nan]))
        False
    """
    bad = False
    for i in range(src.size):
        value = src[i]
        bad |= (value - value) != 0
    return not bad


def is_binary(src: AnyArray) -> bool:
    """Whether every value of `src` (float32 or float64, flat) is 0 or 1.

    Examples:
        >>> is_binary(np.array([0.0, 1.0, -0.0]))
        True
    """
    bad = False
    for i in range(src.size):
        value = src[i]
        bad |= (value != 0) & (value != 1)
    return not bad


class Kernels(NamedTuple):
    """The compiled kernels, each taking flat C-contiguous arrays as its Python original does."""

    cast_finite: Callable[[AnyArray, Float32Array], bool]
    cast_binary: Callable[[AnyArray, Float32Array], bool]
    is_finite: Callable[[AnyArray], bool]
    is_binary: Callable[[AnyArray], bool]


_SOURCES = ("float32", "float64")


@functools.cache
def compiled_kernels() -> Kernels:
    """The kernels compiled by numba (compiled, or loaded from the disk cache, once).

    Sources may be read-only (memory maps) and float32 or float64; outputs are float32.

    Raises:
        ImportError: If numba is not installed.

    Examples:
        >>> import importlib.util
        >>> importlib.util.find_spec("numba") is None or compiled_kernels().is_finite(np.ones(3))
        True
    """
    numba: Any = importlib.import_module("numba")

    def compile_(function: Callable[..., bool], with_output: bool) -> Any:
        out = ", float32[::1]" if with_output else ""
        signatures = [f"boolean(Array({dtype}, 1, 'C', readonly=True){out})" for dtype in _SOURCES]
        return numba.njit(signatures, cache=True, nogil=True)(function)

    return Kernels(
        cast_finite=compile_(cast_finite, True),
        cast_binary=compile_(cast_binary, True),
        is_finite=compile_(is_finite, False),
        is_binary=compile_(is_binary, False),
    )
