"""The numba GAE kernels behind `gae(..., backend="numba")`.

`gae_loop` is a plain reverse loop over time, each step a row of B environments;
`gae_loop_by_env` runs the same arithmetic env by env, carrying each env's advantage in a
register. Row by row, the B recursions overlap in the processor, but each step reads back
what the step before wrote; with one or two environments that round trip through memory is
the whole cost (about 2.5x the register loop at T=16384, B=1), while env by env, with many
environments, would stride through memory. `kernel_for(n_envs)` picks the loop
(`BY_ENV_MAX`), and compiles it with numba on first use (one explicit signature: read-only
C-contiguous float32 arrays, float64 scalars), caching the machine code on disk
(`cache=True`), so only the first use in a fresh environment pays the compilation. numba
itself is imported only then: neither `import trajkit` nor importing this module imports it.

The loop does the seed's arithmetic in the seed's order, so without truncation its results
match the seed's NumPy loop to the last bit on ordinary inputs. With truncation it also checks, in
the same pass, that every truncated step ends its episode, and reports the first one that does not:
the flags cost one read and one branch per entry, and one multiply-add per truncated entry, instead
of separate NumPy passes over the whole rollout.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, TypeAlias, cast

import numpy as np

from trajkit._base.types import Float32Array

__all__ = ["BY_ENV_MAX", "compiled_kernel", "gae_loop", "gae_loop_by_env", "kernel_for"]

BY_ENV_MAX = 2
"""Rollouts of at most this many envs run `gae_loop_by_env`; wider ones `gae_loop`."""

Kernel: TypeAlias = Callable[
    [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array, float, float, bool],
    tuple[Float32Array, int],
]

_IN = "Array(float32, 2, 'C', readonly=True)"
"""Input arrays are typed read-only, which also accepts writable arrays: `load(mmap=True)`
gives read-only memory maps, and the kernel never writes its inputs."""

_SIGNATURE: str = (
    f"Tuple((float32[:, ::1], int64))({_IN}, {_IN}, {_IN}, {_IN}, {_IN}, float64, float64, boolean)"
)


def gae_loop(
    rewards: Float32Array,
    values: Float32Array,
    dones: Float32Array,
    truncated: Float32Array,
    final_values: Float32Array,
    gamma: float,
    lam: float,
    has_truncation: bool,
) -> tuple[Float32Array, int]:
    """Return GAE advantages [T, B] by a reverse loop over time (the kernel numba compiles).

    Args:
        rewards: Rewards [T, B], C-contiguous float32.
        values: Critic values [T + 1, B], C-contiguous float32.
        dones: Episode-start flags [T + 1, B] (0 or 1), C-contiguous float32.
        truncated: Truncation flags [T, B] when `has_truncation`, else any (unread) array.
        final_values: Values of the true final observations [T, B], read only where
            `truncated` is non-zero; any (unread) array when not `has_truncation`.
        gamma: Discount factor.
        lam: GAE lambda.
        has_truncation: Whether `truncated` and `final_values` are given.

    Returns:
        The advantages, float32 [T, B], and the flat index `t * B + b` of the first truncated
        step whose episode does not end (`truncated[t, b] != 0` while `dones[t + 1, b] == 0`),
        or -1 when there is none. When it is not -1 the advantages are meaningless.

    Examples:
        >>> r = np.ones((2, 1), np.float32)
        >>> z = np.zeros((3, 1), np.float32)
        >>> e = np.empty((0, 0), np.float32)
        >>> gae_loop(r, z, z, e, e, 0.5, 1.0, False)
        (array([[1.5],
               [1. ]], dtype=float32), -1)
        >>> gae_loop(r, z, z, np.array([[0], [1]], np.float32), r, 0.5, 1.0, True)[1]
        1
    """
    n_steps, n_envs = rewards.shape
    out = np.empty((n_steps, n_envs), dtype=np.float32)
    one = np.float32(1.0)
    g = np.float32(gamma)
    gl = np.float32(gamma * lam)
    bad = -1
    for t in range(n_steps - 1, -1, -1):
        for b in range(n_envs):
            not_done = one - dones[t + 1, b]
            delta = (rewards[t, b] - values[t, b]) + not_done * g * values[t + 1, b]
            if has_truncation and truncated[t, b] != 0:
                # Rows are visited last to first: the latest hit is the first in row order.
                if dones[t + 1, b] == 0 and (bad < 0 or t * n_envs + b < bad):
                    bad = t * n_envs + b
                delta += g * final_values[t, b]
            if t + 1 < n_steps:
                delta += not_done * gl * out[t + 1, b]
            out[t, b] = delta
    return out, bad


def gae_loop_by_env(
    rewards: Float32Array,
    values: Float32Array,
    dones: Float32Array,
    truncated: Float32Array,
    final_values: Float32Array,
    gamma: float,
    lam: float,
    has_truncation: bool,
) -> tuple[Float32Array, int]:
    """`gae_loop`, env by env: each env's advantage carried in a register, not re-read.

    The same arithmetic in the same order as `gae_loop`, so the same bits; the same
    arguments and results.

    Examples:
        >>> r = np.ones((2, 1), np.float32)
        >>> z = np.zeros((3, 1), np.float32)
        >>> e = np.empty((0, 0), np.float32)
        >>> gae_loop_by_env(r, z, z, e, e, 0.5, 1.0, False)
        (array([[1.5],
               [1. ]], dtype=float32), -1)
        >>> gae_loop_by_env(r, z, z, np.array([[0], [1]], np.float32), r, 0.5, 1.0, True)[1]
        1
    """
    n_steps, n_envs = rewards.shape
    out = np.empty((n_steps, n_envs), dtype=np.float32)
    one = np.float32(1.0)
    g = np.float32(gamma)
    gl = np.float32(gamma * lam)
    bad = -1
    for b in range(n_envs):
        carried = np.float32(0.0)  # the advantage of step t + 1
        for t in range(n_steps - 1, -1, -1):
            not_done = one - dones[t + 1, b]
            delta = (rewards[t, b] - values[t, b]) + not_done * g * values[t + 1, b]
            if has_truncation and truncated[t, b] != 0:
                if dones[t + 1, b] == 0 and (bad < 0 or t * n_envs + b < bad):
                    bad = t * n_envs + b
                delta += g * final_values[t, b]
            if t + 1 < n_steps:
                delta += not_done * gl * carried
            carried = delta
            out[t, b] = delta
    return out, bad


@functools.cache
def compiled_kernel(loop: Callable[..., tuple[Float32Array, int]] = gae_loop) -> Kernel:
    """Return `loop` compiled by numba (compiled, or loaded from the disk cache, once).

    Args:
        loop: `gae_loop` or `gae_loop_by_env`.

    Returns:
        The compiled kernel, with the arguments of `gae_loop`.

    Raises:
        ImportError: If numba is not installed.

    Examples:
        >>> import importlib.util
        >>> importlib.util.find_spec("numba") is None or compiled_kernel() is compiled_kernel()
        True
    """
    numba: Any = importlib.import_module("numba")
    return cast(Kernel, numba.njit(_SIGNATURE, cache=True, nogil=True)(loop))


def kernel_for(n_envs: int) -> Kernel:
    """The compiled kernel for rollouts of `n_envs` envs (see `BY_ENV_MAX`).

    Examples:
        >>> import importlib.util
        >>> importlib.util.find_spec("numba") is None or kernel_for(1) is not kernel_for(64)
        True
    """
    return compiled_kernel(gae_loop_by_env if n_envs <= BY_ENV_MAX else gae_loop)
