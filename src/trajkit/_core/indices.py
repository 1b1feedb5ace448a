"""The public index functions: minibatches of your own `[T, B, ...]` arrays, over the engine.

[`minibatch_indices`][trajkit.minibatch_indices] + [`gather`][trajkit.gather] (or
[`sequence_minibatch_indices`][trajkit.sequence_minibatch_indices] +
[`gather_sequences`][trajkit.gather_sequences]) draw and gather as `Rollout.minibatches` does,
for arrays that are not a rollout's: the indices come from the minibatch engine
(`trajkit._core.minibatch`) with the same plan, and the gathers check your indices and arrays.
`index_stream` and `index_batches`, obs-tower2's stream as arrays, are deprecated.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray, IntArray, Seed
from trajkit._core.minibatch import (
    Entries,
    MinibatchPlan,
    StreamSeed,
    Table,
    check_size,
    obs_tower2_batches,
    obs_tower2_epochs,
    sample,
    take_into,
)

__all__ = [
    "gather",
    "gather_sequences",
    "index_batches",
    "index_stream",
    "minibatch_indices",
    "sequence_minibatch_indices",
]


def minibatch_indices(
    num_steps: int,
    num_envs: int,
    minibatch_size: int,
    *,
    epochs: int = 1,
    drop_last: bool = False,
    seed: Seed = None,
    shuffle: bool = True,
) -> Iterator[tuple[IntArray, IntArray]]:
    """Shuffled `(t, b)` minibatches over a rollout, epoch by epoch.

    Each epoch draws a fresh permutation of the T·B steps and cuts it into minibatches of
    `minibatch_size`, as [`MinibatchPlan`][trajkit.MinibatchPlan] describes: with
    `drop_last=False` every epoch covers each `(t, b)` with `0 <= t < T`, `0 <= b < B`
    exactly once; with `drop_last=True` every minibatch has exactly `minibatch_size` entries.
    The same entries, in the same order, as
    [`Rollout.minibatches`][trajkit.Rollout.minibatches] with the same arguments.

    Args:
        num_steps: T, the number of steps in the rollout (may be 0: nothing is yielded).
        num_envs: B, the number of environments (at least 1).
        minibatch_size: Entries per minibatch (at least 1).
        epochs: Passes over the rollout (at least 0).
        drop_last: Drop each epoch's last minibatch when it is smaller than `minibatch_size`.
        seed: An int seed, a `numpy.random.Generator` (which advances), or `None` for fresh
            entropy.
        shuffle: `False` for the entries in order, `t` by `t`.

    Returns:
        An iterator of `(t_idx, b_idx)` pairs of equal-length 1-D `np.intp` arrays, ready for
        [`gather`][trajkit.gather].

    Raises:
        ValueError: If a size argument is not an integer (booleans included) or is below its
            minimum, or if `drop_last` and `minibatch_size > T·B > 0` (nothing would be
            yielded). Raised at the call, not at the first `next()`.
        TypeError: If `seed` is not an int, a Generator or `None`.

    Examples:
        >>> batches = list(minibatch_indices(3, 2, 4, epochs=2, seed=0))
        >>> [len(t_idx) for t_idx, b_idx in batches]
        [4, 2, 4, 2]
        >>> t_idx = np.concatenate([t for t, _ in batches[:2]])
        >>> b_idx = np.concatenate([b for _, b in batches[:2]])
        >>> sorted(zip(t_idx.tolist(), b_idx.tolist()))
        [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
        >>> [len(t) for t, _ in minibatch_indices(3, 2, 4, drop_last=True, seed=0)]
        [4]
    """
    entries = Entries(check_size("num_steps", num_steps, 0), check_size("num_envs", num_envs, 1))
    plan = MinibatchPlan(
        minibatch_size, epochs=epochs, drop_last=drop_last, seed=seed, shuffle=shuffle
    )
    return sample(plan, [entries])


def sequence_minibatch_indices(
    num_envs: int,
    envs_per_batch: int,
    *,
    epochs: int = 1,
    drop_last: bool = False,
    seed: Seed = None,
    shuffle: bool = True,
) -> Iterator[IntArray]:
    """Shuffled minibatches of whole environment columns, for recurrent policies.

    Each minibatch is a set of env indices `b`; with [`gather_sequences`][trajkit.gather_sequences]
    it selects all T steps of those environments, keeping the time order a recurrent policy
    needs. The envs are the items of a [`MinibatchPlan`][trajkit.MinibatchPlan] of
    `envs_per_batch`: each epoch a fresh permutation of `range(B)`, the last, smaller
    minibatch kept unless `drop_last`.

    Args:
        num_envs: B, the number of environments (at least 1).
        envs_per_batch: Environments per minibatch (at least 1).
        epochs: Passes over the environments (at least 0).
        drop_last: Drop each epoch's last minibatch when it is smaller than `envs_per_batch`.
        seed: An int seed, a `numpy.random.Generator` (which advances), or `None` for fresh
            entropy.
        shuffle: `False` for the envs in order.

    Returns:
        An iterator of 1-D `np.intp` arrays of env indices.

    Raises:
        ValueError: If a size argument is not an integer or is below its minimum.
        TypeError: If `seed` is not an int, a Generator or `None`.

    Examples:
        >>> batches = list(sequence_minibatch_indices(5, 2, seed=0))
        >>> [len(b_idx) for b_idx in batches]
        [2, 2, 1]
        >>> sorted(np.concatenate(batches).tolist())
        [0, 1, 2, 3, 4]
    """
    envs = Table(check_size("num_envs", num_envs, 1), what="B")  # an env's index is its item
    plan = MinibatchPlan(
        check_size("envs_per_batch", envs_per_batch, 1),
        epochs=epochs,
        drop_last=drop_last,
        seed=seed,
        shuffle=shuffle,
    )
    return sample(plan, [envs], name="envs_per_batch")


def _as_index(name: str, idx: Any) -> AnyArray:
    """Check that `idx` is a 1-D integer array and return it as an ndarray (not yet cast)."""
    arr = np.asarray(idx)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr


def _as_arrays(arrays: Mapping[str, AnyArray]) -> dict[str, AnyArray]:
    """Return the arrays as ndarrays, each checked to have leading dims [T or T+1, B]."""
    out: dict[str, AnyArray] = {}
    for name, value in arrays.items():
        arr = np.asarray(value)
        if arr.ndim < 2:
            raise ValueError(
                f"array {name!r} must have leading dims [T, B, ...], got shape {arr.shape}"
            )
        out[name] = arr
    return out


def _check_range(name: str, idx: AnyArray, arrays: Mapping[str, AnyArray], axis: int) -> None:
    """Raise ValueError naming the array and the index if `idx` falls outside an array's axis."""
    if not len(idx):
        return
    lo, hi = int(idx.min()), int(idx.max())
    for array_name, arr in arrays.items():
        if lo < 0 or hi >= arr.shape[axis]:
            raise ValueError(
                f"{name} {lo if lo < 0 else hi} is out of range for array {array_name!r} of "
                f"shape {arr.shape} (axis {axis} has size {arr.shape[axis]})"
            )


def _surely_in_range(t_idx: AnyArray, b_idx: AnyArray, arrays: Mapping[str, AnyArray]) -> bool:
    """Cheap check that `np.intp` indices fit every array: one reduction per index array.

    Viewed as unsigned, a negative index is larger than any valid one. `False` means "check
    exactly" (other dtypes, or an index out of range), not necessarily an error.
    """
    if t_idx.dtype != np.intp or b_idx.dtype != np.intp:
        return False
    t_top = int(np.maximum.reduce(t_idx.view(np.uintp)))
    b_top = int(np.maximum.reduce(b_idx.view(np.uintp)))
    for arr in arrays.values():
        shape = arr.shape
        if t_top >= shape[0] or b_top >= shape[1]:
            return False
    return True


def gather(
    arrays: Mapping[str, AnyArray],
    t_idx: IntArray,
    b_idx: IntArray,
    *,
    out: Mapping[str, AnyArray] | None = None,
) -> dict[str, AnyArray]:
    """Gather the entries `(t_idx[i], b_idx[i])` of every array: `{name: arr[t_idx, b_idx]}`.

    Works for per-step arrays ([T, B, ...]) and observation-aligned arrays ([T+1, B, ...]) alike.
    When an array is C-contiguous in its first two dims (the usual case, also for `obses[:-1]`)
    the gather is one `numpy.take` of the flat index `t * B + b` on a [(T or T+1)·B, ...] view;
    other arrays (transposed, strided) fall back to fancy indexing. The result is always a new
    array, never a view.

    Args:
        arrays: Named arrays, each with leading dims [T or T+1, B, ...].
        t_idx: 1-D integer array of step indices.
        b_idx: 1-D integer array of env indices, the same length as `t_idx`.
        out: Optional arrays to gather into, one per name, each of the result's shape and
            dtype (for instance the previous minibatch's, when it is no longer needed).
            Writing into the same buffers every time saves a fresh allocation, and its page
            faults, per minibatch: for large minibatches that is most of the cost beyond
            copying the bytes.

    Returns:
        A dict with the same keys: each value has shape `[len(t_idx), ...]` (the array's
        trailing dims) and the array's dtype; the arrays of `out` where given.

    Raises:
        ValueError: If `t_idx` or `b_idx` is not a 1-D integer array, if their lengths differ,
            if an array has fewer than 2 dims, or if an index is negative or past an array's
            leading dims (the message names the array and the index).

    Examples:
        >>> rews = np.arange(6, dtype=np.float32).reshape(3, 2)
        >>> obses = np.arange(8, dtype=np.uint8).reshape(4, 2)
        >>> out = gather({"rews": rews, "obses": obses}, np.array([2, 0]), np.array([1, 0]))
        >>> out["rews"]
        array([5., 0.], dtype=float32)
        >>> out["obses"]
        array([5, 0], dtype=uint8)
        >>> gather({"rews": rews}, np.array([3]), np.array([0]))
        Traceback (most recent call last):
        ...
        ValueError: t_idx 3 is out of range for array 'rews' of shape (3, 2) (axis 0 has size 3)
        >>> buffers = {"rews": np.empty(2, np.float32)}
        >>> gather({"rews": rews}, np.array([1, 2]), np.array([1, 0]), out=buffers)["rews"]
        array([3., 4.], dtype=float32)
    """
    t_arr = _as_index("t_idx", t_idx)
    b_arr = _as_index("b_idx", b_idx)
    if len(t_arr) != len(b_arr):
        raise ValueError(
            f"t_idx and b_idx must have the same length, got {len(t_arr)} and {len(b_arr)}"
        )
    checked = _as_arrays(arrays)
    if len(t_arr) and not _surely_in_range(t_arr, b_arr, checked):
        _check_range("t_idx", t_arr, checked, 0)
        _check_range("b_idx", b_arr, checked, 1)

    if out is not None:
        _check_out(out, checked, len(t_arr))
    t_arr = t_arr.astype(np.intp, copy=False)
    b_arr = b_arr.astype(np.intp, copy=False)
    flat_envs, flat = -1, t_arr  # the flat index t * B + b, recomputed when B changes
    result: dict[str, AnyArray] = {}
    for name, arr in checked.items():
        shape = arr.shape
        envs = shape[1]
        into = None if out is None else out[name]
        if arr.strides[0] == envs * arr.strides[1]:  # [T, B] merge into one axis: a view
            if envs != flat_envs:
                flat, flat_envs = t_arr * envs, envs
                flat += b_arr
            # Indices are range-checked above.
            result[name] = take_into(arr.reshape((shape[0] * envs, *shape[2:])), flat, into)
        elif into is None:
            result[name] = arr[t_arr, b_arr]
        else:
            into[...] = arr[t_arr, b_arr]
            result[name] = into
    return result


def _check_out(out: Mapping[str, AnyArray], arrays: Mapping[str, AnyArray], n: int) -> None:
    """Refuse `out` buffers that do not match the gather's names, shapes and dtypes."""
    if set(out) != set(arrays):
        raise ValueError(
            f"out must have the same names as arrays: got {sorted(out)}, expected {sorted(arrays)}"
        )
    for name, arr in arrays.items():
        buffer = out[name]
        shape = (n, *arr.shape[2:])
        if (
            not isinstance(buffer, np.ndarray)
            or buffer.shape != shape
            or buffer.dtype != arr.dtype
            or not buffer.flags.c_contiguous
            or not buffer.flags.writeable
        ):
            got = (
                f"{buffer.dtype}{list(buffer.shape)}"
                if isinstance(buffer, np.ndarray)
                else type(buffer).__name__
            )
            raise ValueError(
                f"out[{name!r}] must be a writable C-contiguous {arr.dtype} array of shape "
                f"{shape}, got {got}"
            )


def gather_sequences(arrays: Mapping[str, AnyArray], b_idx: IntArray) -> dict[str, AnyArray]:
    """Gather whole environment columns of every array: `{name: arr[:, b_idx]}`.

    The result stays time-major, as a recurrent policy consumes it.

    Args:
        arrays: Named arrays, each with leading dims [T or T+1, B, ...].
        b_idx: 1-D integer array of env indices, e.g. from
            [`sequence_minibatch_indices`][trajkit.sequence_minibatch_indices].

    Returns:
        A dict with the same keys: each value has shape `[T or T+1, len(b_idx), ...]` and the
        array's dtype. It is a new array, never a view.

    Raises:
        ValueError: If `b_idx` is not a 1-D integer array, if an array has fewer than 2 dims, or
            if an index is negative or past an array's B (the message names the array and the
            index).

    Examples:
        >>> dones = np.arange(6, dtype=np.float32).reshape(2, 3)
        >>> gather_sequences({"dones": dones}, np.array([2, 0]))["dones"]
        array([[2., 0.],
               [5., 3.]], dtype=float32)
    """
    b_arr = _as_index("b_idx", b_idx)
    checked = _as_arrays(arrays)
    _check_range("b_idx", b_arr, checked, 1)
    b_arr = b_arr.astype(np.intp, copy=False)
    return {name: arr.take(b_arr, axis=1) for name, arr in checked.items()}


# --------------------------------------------------------------------------------------------
# Deprecated: obs-tower2's stream as arrays (use Rollout.entries / Rollout.batches)
# --------------------------------------------------------------------------------------------


def _numpy_default(seed: StreamSeed) -> StreamSeed:
    """These functions shuffle with fresh NumPy entropy where `seed` is `None`."""
    return as_generator(None) if seed is None else seed


def index_stream(
    num_steps: int,
    num_envs: int,
    *,
    seed: int | np.random.Generator | random.Random | None = None,
) -> Iterator[tuple[IntArray, IntArray]]:
    """Deprecated: obs-tower2's endless shuffled stream of `(t, b)`, one permutation at a time.

    Deprecated after 0.1.0: use [`Rollout.entries`][trajkit.Rollout.entries] for obs-tower2's
    stream, or [`minibatch_indices`][trajkit.minibatch_indices] for arrays, epoch by epoch.
    `trajkit.index_stream` warns with a `DeprecationWarning` (`trajkit.__getattr__`) and will
    be removed.

    Each item is one fresh permutation of all T·B steps, as a pair of `np.intp` arrays
    `(t_idx, b_idx)`: the stream of `Rollout.entries`, epoch by epoch, with its `seed` (but
    `None` is fresh NumPy entropy) and its refusals (T·B == 0: obs-tower2 looped forever).

    Examples:
        >>> stream = index_stream(2, 2, seed=0)
        >>> t_idx, b_idx = next(stream)
        >>> sorted(zip(t_idx.tolist(), b_idx.tolist()))
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    return obs_tower2_epochs(num_steps, num_envs, _numpy_default(seed), method="index_stream")


def index_batches(
    num_steps: int,
    num_envs: int,
    batch_size: int,
    count: int,
    *,
    seed: int | np.random.Generator | random.Random | None = None,
) -> Iterator[tuple[IntArray, IntArray]]:
    """Deprecated: `count` batches of `batch_size` entries, as obs-tower2's `Rollout.batches()`.

    Deprecated after 0.1.0: use [`Rollout.batches`][trajkit.Rollout.batches] for obs-tower2's
    batches, or [`minibatch_indices`][trajkit.minibatch_indices] for arrays, epoch by epoch.
    `trajkit.index_batches` warns with a `DeprecationWarning` (`trajkit.__getattr__`) and will
    be removed.

    Each batch is a pair of `np.intp` arrays `(t_idx, b_idx)`: the batches of
    `Rollout.batches` (which may span epochs), with its `seed` (but `None` is fresh NumPy
    entropy) and its refusals.

    Examples:
        >>> batches = list(index_batches(2, 3, 4, 3, seed=0))
        >>> [len(t_idx) for t_idx, b_idx in batches]
        [4, 4, 4]
    """
    return obs_tower2_batches(
        num_steps, num_envs, batch_size, count, _numpy_default(seed), method="index_batches"
    )
