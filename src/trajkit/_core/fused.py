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

import enum
import functools
import os
import sys
import warnings
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import numpy as np

from trajkit._base.types import AnyArray, Float32Array
from trajkit._core.gae import gae_backend

if TYPE_CHECKING:
    from trajkit._core._numba_checks import Kernels

__all__ = [
    "MIN_BYTES",
    "CastKernel",
    "Rule",
    "cast_kernel",
    "cast_with",
    "close_scope",
    "kernels_enabled",
    "open_scope",
    "passes",
]

Rule: TypeAlias = Literal["finite", "binary"]
CastKernel: TypeAlias = Callable[[AnyArray, Float32Array], bool]
"""A compiled cast-and-check: (flat source, flat float32 destination) -> whether all passed."""

MIN_BYTES: Final = 1 << 12
"""Smaller arrays are left to NumPy: there, calling a kernel costs about what it saves. (From
4 KiB a kernel wins: on 8 KiB of float32 it copies and checks in 1.3 µs, NumPy's copy and
check take 2.4 µs; issue 42 measured it, for the construction of small rollouts.)"""

_SOURCES: Final = (np.dtype(np.float32), np.dtype(np.float64))


class _Scope(enum.Enum):
    OUTSIDE = enum.auto()  # no scope is open: every question reads the environment
    UNDECIDED = enum.auto()  # a scope is open and nobody has asked yet


_SCOPE: ContextVar[bool | _Scope] = ContextVar("trajkit_kernels_on", default=_Scope.OUTSIDE)
"""Whether the kernels are on, as decided within the open scope (see `open_scope`)."""

open_scope: Final[Callable[[], Token[bool | _Scope]]] = functools.partial(
    _SCOPE.set, _Scope.UNDECIDED
)
"""Decide at most once, until `close_scope`, whether the kernels are on.

Whether they are on depends on `TRAJKIT_BACKEND` (read at every call, as for GAE) and on
numba; reading the environment costs about as much as a small check. A `Rollout` validates
all its fields in one scope, so it reads the environment once at most (and not at all when no
field is large enough for a kernel). Opening and closing a scope are single C calls: a
rollout does both every time. (`kernels_enabled` has an example: doctest does not run
examples in the docstrings of module attributes.)
"""

close_scope: Final[Callable[[Token[bool | _Scope]], None]] = _SCOPE.reset
"""End the scope that `open_scope` returned the token for."""


def _kernels_on() -> bool:
    try:
        return gae_backend() == "numba"
    except ValueError:  # TRAJKIT_BACKEND misspelt, or numba asked for and missing: NumPy
        return False


def kernels_enabled() -> bool:
    """Whether the kernels are on (`TRAJKIT_BACKEND` and numba), read once per scope.

    Examples:
        >>> kernels_enabled() in (True, False)
        True
        >>> token = open_scope()
        >>> kernels_enabled() is kernels_enabled()  # decided once within the scope
        True
        >>> close_scope(token)
    """
    state = _SCOPE.get()
    if state is _Scope.OUTSIDE:
        return _kernels_on()
    if state is _Scope.UNDECIDED:
        state = _kernels_on()
        _SCOPE.set(state)  # for the rest of the scope: `close_scope` resets what it opened
    return state


def _kernels_for(array: AnyArray) -> Kernels | None:
    """The compiled kernels, if they apply to `array` (see the module's documentation)."""
    if array.nbytes < MIN_BYTES or array.dtype not in _SOURCES or not array.flags.c_contiguous:
        return None
    if "numba" not in sys.modules and os.environ.get("TRAJKIT_BACKEND") != "numba":
        return None  # not worth importing numba for (see the module's documentation)
    return _compiled() if kernels_enabled() else None


@functools.cache
def _compiled() -> Kernels | None:
    """The kernels, compiled once; None (and one warning) if numba cannot compile them here."""
    from trajkit._core._numba_checks import compiled_kernels

    try:
        return compiled_kernels()
    except Exception as exc:  # e.g. numba finds no folder to cache the kernels in
        warnings.warn(
            f"trajkit cannot compile its numba kernels ({type(exc).__name__}: {exc}); "
            "rollouts are checked with NumPy instead (a little slower, the same results)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def cast_kernel(array: AnyArray, rule: Rule) -> CastKernel | None:
    """The compiled kernel that casts `array` to float32 and checks `rule`; None where none applies.

    Which kernel applies follows from the array's dtype, layout and size and from whether the
    kernels are on: a caller that knows these unchanged may run the same kernel again on
    another array (`cast_with`) without asking again.

    Examples:
        >>> kernel = cast_kernel(np.ones(1 << 15), "finite")  # float64, 256 KiB
        >>> kernel is None or cast_with(kernel, np.ones(1 << 15))[1]
        True
        >>> cast_kernel(np.ones(4), "finite") is None  # too small to gain anything
        True
    """
    if _SCOPE.get() is False:  # (off, as decided in this scope: the common answer without numba)
        return None
    kernels = _kernels_for(array)
    if kernels is None:
        return None
    return kernels.cast_finite if rule == "finite" else kernels.cast_binary


def cast_with(kernel: CastKernel, array: AnyArray) -> tuple[Float32Array, bool]:
    """Run `kernel` (from `cast_kernel`) on `array`: its float32 copy, and whether all passed.

    `array` must be of the dtype, layout and size `kernel` was chosen for.
    """
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
    if _SCOPE.get() is False:  # (as in `cast_kernel`)
        return None
    kernels = _kernels_for(array)
    if kernels is None:
        return None
    kernel = kernels.is_finite if rule == "finite" else kernels.is_binary
    return bool(kernel(array.reshape(-1)))
