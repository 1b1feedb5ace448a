"""The minibatch engine: every way trajkit cuts a rollout into minibatches draws and gathers here.

A rollout holds T steps of B environments. Per-step fields (rewards, advantages, returns) have
leading dims [T, B]; observation-aligned fields (observations, states, dones, model outputs) have
[T+1, B], and only their rows 0..T-1 are ever minibatched. Entry `(t, b)` is row `t * B + b` of
the array viewed as [T·B, ...].

The engine has three parts, and every minibatch API is a thin adapter over them:

* **Checks** (`check_size`, `plan_minibatches`, `plan_sequences`,
  `check_stream`): the size arguments, validated when an adapter is called, never at its
  first `next()`.
* **Drawing**: `minibatch_rows` (each epoch a fresh permutation of all rows, cut into
  minibatches), `epoch_rows` (whole epochs), `sequence_rows` (env columns, for
  recurrent policies), and the obs-tower2 stream of `obs_tower2_epochs` and
  `obs_tower2_batches` (endless permutations, batches that may span epochs).
* **Gathering**: `as_rows` (a [T, B, ...] array as [T·B, ...], a view where the layout
  allows), `take_rows` (one `numpy.take` per array) and `take_into` (one array, into a
  buffer).

The adapters: `Rollout.minibatches` and `Rollout.sequence_minibatches` (NumPy),
`Rollout.batches` and `Rollout.entries` (obs-tower2's `(t, b)` tuples),
`trajkit.torch.minibatches` (tensors; on a GPU the rows are gathered by torch) and
`Dataset.minibatches` (rows of several files in one shuffle buffer). For your own arrays, the
public pair is [`minibatch_indices`][trajkit.minibatch_indices] + [`gather`][trajkit.gather]
(or [`sequence_minibatch_indices`][trajkit.sequence_minibatch_indices] +
[`gather_sequences`][trajkit.gather_sequences]), in `trajkit._core.indices`: they check your
indices and arrays, then draw and gather here.

Randomness comes from the `seed` argument (see `trajkit._base.rng.as_generator`), with one
deliberate exception: `Rollout.batches()` and `Rollout.entries()` called without a seed shuffle
with Python's global `random` module, as obs-tower2 did, so that `random.seed(s)` reproduces
runs of code written against it (`python_random_epochs`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray, IntArray

__all__ = [
    "MinibatchPlan",
    "Seed",
    "StreamSeed",
    "as_rows",
    "check_size",
    "check_stream",
    "epoch_pairs",
    "epoch_rows",
    "minibatch_rows",
    "obs_tower2_batches",
    "obs_tower2_epochs",
    "plan_minibatches",
    "plan_sequences",
    "python_random_epochs",
    "sequence_rows",
    "take_into",
    "take_rows",
]

Seed = int | np.random.Generator | None
StreamSeed = int | np.random.Generator | random.Random | None

# --------------------------------------------------------------------------------------------
# Checks: at the call
# --------------------------------------------------------------------------------------------


def check_size(name: str, value: object, minimum: int) -> int:
    """Return `value` as an int, or raise ValueError if it is not an integer >= `minimum`.

    Examples:
        >>> check_size("epochs", 2, 0)
        2
        >>> check_size("epochs", True, 0)
        Traceback (most recent call last):
        ...
        ValueError: epochs must be an integer >= 0, got True
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class MinibatchPlan:
    """Checked sizes of an epoch-by-epoch minibatch draw over `rows` entries.

    Attributes:
        num_steps: T (1 for a draw over env columns).
        num_envs: B.
        size: Entries per minibatch.
        epochs: Passes over the entries.
        drop_last: Whether an epoch's last, smaller minibatch is dropped.
    """

    num_steps: int
    num_envs: int
    size: int
    epochs: int
    drop_last: bool

    @property
    def rows(self) -> int:
        """The entries one epoch covers: T·B."""
        return self.num_steps * self.num_envs

    def starts(self) -> range:
        """Start offsets of the minibatches that cut one epoch.

        Examples:
            >>> list(plan_minibatches(5, 1, 2, drop_last=True).starts())
            [0, 2]
        """
        n = self.rows
        return range(0, n - n % self.size if self.drop_last else n, self.size)


def _check_drop_last(name: str, size: int, n: int, drop_last: bool, what: str) -> None:
    """Refuse a `drop_last` minibatch size that would yield nothing at all from `n` entries."""
    if drop_last and 0 < n < size:
        raise ValueError(
            f"{name}={size} is larger than the {n} entries available ({what}={n}), so "
            f"drop_last=True would yield no minibatch at all: use {name} <= {n}, or "
            "drop_last=False to get one smaller minibatch per epoch"
        )


def plan_minibatches(
    num_steps: int,
    num_envs: int,
    minibatch_size: int,
    *,
    epochs: int = 1,
    drop_last: bool = False,
) -> MinibatchPlan:
    """Check the sizes of a draw of `(t, b)` minibatches; the `ValueError` names the argument.

    Examples:
        >>> plan_minibatches(4, 2, 3, epochs=2).rows
        8
        >>> plan_minibatches(4, 2, 0)
        Traceback (most recent call last):
        ...
        ValueError: minibatch_size must be >= 1, got 0
    """
    num_steps = check_size("num_steps", num_steps, 0)
    num_envs = check_size("num_envs", num_envs, 1)
    size = check_size("minibatch_size", minibatch_size, 1)
    epochs = check_size("epochs", epochs, 0)
    _check_drop_last("minibatch_size", size, num_steps * num_envs, drop_last, "T*B")
    return MinibatchPlan(num_steps, num_envs, size, epochs, bool(drop_last))


def plan_sequences(
    num_envs: int, envs_per_batch: int, *, epochs: int = 1, drop_last: bool = False
) -> MinibatchPlan:
    """Check the sizes of a draw of env columns (`T` is 1: one entry per env).

    Examples:
        >>> plan_sequences(5, 2).rows
        5
    """
    num_envs = check_size("num_envs", num_envs, 1)
    size = check_size("envs_per_batch", envs_per_batch, 1)
    epochs = check_size("epochs", epochs, 0)
    _check_drop_last("envs_per_batch", size, num_envs, drop_last, "B")
    return MinibatchPlan(1, num_envs, size, epochs, bool(drop_last))


def check_stream(
    num_steps: int,
    num_envs: int,
    method: str,
    *,
    batch_size: int = 1,
    count: int | None = None,
) -> tuple[int, int, int, int | None]:
    """Check the sizes of an obs-tower2 stream: T·B > 0 unless no batch is asked for.

    `method` names the caller in the message (`"batches()"`, `"entries()"`, ...): obs-tower2
    looped forever on an empty rollout. `count=None` is the endless stream of `entries()`.

    Returns:
        `(num_steps, num_envs, batch_size, count)` as ints.

    Examples:
        >>> check_stream(0, 2, "entries()")
        Traceback (most recent call last):
        ...
        ValueError: entries() needs at least one entry, got num_steps=0, num_envs=2 (T*B == 0)
    """
    num_steps = check_size("num_steps", num_steps, 0)
    num_envs = check_size("num_envs", num_envs, 1)
    batch_size = check_size("batch_size", batch_size, 1)
    count = None if count is None else check_size("count", count, 0)
    if num_steps * num_envs == 0 and count != 0:
        what = (
            "needs at least one entry"
            if count is None
            else f"cannot draw {count} batches from an empty rollout"
        )
        raise ValueError(
            f"{method} {what}, got num_steps={num_steps}, num_envs={num_envs} (T*B == 0)"
        )
    return num_steps, num_envs, batch_size, count


# --------------------------------------------------------------------------------------------
# Drawing: epoch by epoch
# --------------------------------------------------------------------------------------------


def _shuffled_codes(num_steps: int, num_envs: int, rng: np.random.Generator) -> Iterator[IntArray]:
    """Endless in-place shuffles of one private array holding every entry `(t, b)`.

    As obs-tower2's `entries()` does with its list, the same array is shuffled again each
    epoch, and a permutation is drawn only when its epoch is reached. Entry `(t, b)` is the
    code `t << shift | b` with `2**shift >= B`, so the split is a shift and a mask, several
    times faster than `numpy.divmod` by B. The array yielded is overwritten by the next
    shuffle: callers derive new arrays from it first.
    """
    shift = (num_envs - 1).bit_length()
    steps = np.arange(num_steps, dtype=np.intp) << shift
    codes = (steps[:, None] | np.arange(num_envs, dtype=np.intp)).ravel()
    while True:
        rng.shuffle(codes)
        yield codes


def epoch_pairs(
    num_steps: int, num_envs: int, rng: np.random.Generator
) -> Iterator[tuple[IntArray, IntArray]]:
    """Endless fresh permutations of all `(t, b)`, each as a pair of new `(t_idx, b_idx)` arrays."""
    shift = (num_envs - 1).bit_length()
    mask = (1 << shift) - 1
    for codes in _shuffled_codes(num_steps, num_envs, rng):
        yield codes >> shift, codes & mask


def epoch_rows(plan: MinibatchPlan, rng: np.random.Generator) -> Iterator[IntArray]:
    """Each epoch's permutation of all rows `t * B + b`, drawn when the epoch starts.

    The same permutations, in the same order, as the `(t_idx, b_idx)` pairs of
    [`minibatch_indices`][trajkit.minibatch_indices] for the same generator state.

    Examples:
        >>> rows = next(epoch_rows(plan_minibatches(2, 3, 6), as_generator(0)))
        >>> sorted(rows.tolist())
        [0, 1, 2, 3, 4, 5]
    """
    num_envs = plan.num_envs
    shift = (num_envs - 1).bit_length()
    mask = (1 << shift) - 1
    for codes in itertools.islice(_shuffled_codes(plan.num_steps, num_envs, rng), plan.epochs):
        if num_envs == 1 << shift:  # the code is the row
            yield codes.copy()
            continue
        rows = codes >> shift
        rows *= num_envs
        rows += codes & mask
        yield rows


def minibatch_rows(plan: MinibatchPlan, rng: np.random.Generator) -> Iterator[IntArray]:
    """The rows of each minibatch: every epoch's permutation cut as `plan` says.

    Examples:
        >>> [len(rows) for rows in minibatch_rows(plan_minibatches(3, 2, 4), as_generator(0))]
        [4, 2]
    """
    starts, size = plan.starts(), plan.size
    for rows in epoch_rows(plan, rng):
        for start in starts:
            yield rows[start : start + size]


def sequence_rows(plan: MinibatchPlan, rng: np.random.Generator) -> Iterator[IntArray]:
    """The env indices of each minibatch of whole env columns (`plan` from `plan_sequences`).

    Each epoch is `rng.permutation(B)`, drawn when the epoch starts.

    Examples:
        >>> draws = sequence_rows(plan_sequences(5, 2), as_generator(0))
        >>> sorted(np.concatenate(list(draws)).tolist())
        [0, 1, 2, 3, 4]
    """
    starts, size = plan.starts(), plan.size
    for _ in range(plan.epochs):
        perm = rng.permutation(plan.num_envs).astype(np.intp, copy=False)
        for start in starts:
            yield perm[start : start + size]


# --------------------------------------------------------------------------------------------
# Drawing: obs-tower2's endless stream
# --------------------------------------------------------------------------------------------


def _list_epochs(
    num_steps: int, num_envs: int, shuffle: Callable[[list[int]], None]
) -> Iterator[tuple[IntArray, IntArray]]:
    """Endless permutations drawn as obs-tower2's `entries()` drew them, with Python's `random`.

    obs-tower2 kept a list of every `(t, b)` in t-major order and called `random.shuffle` on
    it, in place, at the start of every pass. `random.shuffle`'s draws depend only on the list's
    length, so shuffling the codes `t * B + b` of that list the same way, in place, pass after
    pass, gives obs-tower2's sequence entry for entry under the same `random.seed`.
    """
    codes = list(range(num_steps * num_envs))
    while True:
        shuffle(codes)
        t_idx, b_idx = np.divmod(np.array(codes, dtype=np.intp), num_envs)
        yield t_idx, b_idx


def python_random_epochs(num_steps: int, num_envs: int) -> Iterator[tuple[IntArray, IntArray]]:
    """obs-tower2's stream of permutations, shuffled by Python's global `random` module.

    The one place trajkit touches global random state, deliberately: `Rollout.batches()` and
    `Rollout.entries()` called without a seed shuffle this way, so that `random.seed(s)`
    reproduces runs of code written against obs-tower2. `random.shuffle` is looked up at each
    pass, as obs-tower2 did.
    """
    return _list_epochs(num_steps, num_envs, lambda codes: random.shuffle(codes))


def _stream_source(
    num_steps: int, num_envs: int, seed: StreamSeed
) -> Iterator[tuple[IntArray, IntArray]]:
    """The endless permutations for `seed`: `None` is Python's global `random` (obs-tower2's)."""
    if seed is None:
        return python_random_epochs(num_steps, num_envs)
    if isinstance(seed, random.Random):
        return _list_epochs(num_steps, num_envs, seed.shuffle)
    return epoch_pairs(num_steps, num_envs, as_generator(seed))


def _cut_stream(
    n: int, batch_size: int, count: int, epochs: Iterator[tuple[IntArray, IntArray]]
) -> Iterator[tuple[IntArray, IntArray]]:
    """Yield `count` batches of `batch_size` cut from endless epochs, spanning epoch boundaries.

    `epochs` yields permutations of all `n` entries; one is drawn only when it is needed.
    """
    t_cur: IntArray = np.empty(0, dtype=np.intp)
    b_cur: IntArray = t_cur
    pos = n  # the first batch draws the first epoch
    for _ in range(count):
        if pos == n:
            t_cur, b_cur = next(epochs)
            pos = 0
        if pos + batch_size <= n:
            yield t_cur[pos : pos + batch_size], b_cur[pos : pos + batch_size]
            pos += batch_size
            continue
        # The batch spans one or more epoch boundaries.
        t_parts, b_parts = [t_cur[pos:]], [b_cur[pos:]]
        need = batch_size - (n - pos)
        while need > 0:
            t_cur, b_cur = next(epochs)
            pos = min(need, n)
            t_parts.append(t_cur[:pos])
            b_parts.append(b_cur[:pos])
            need -= pos
        yield np.concatenate(t_parts), np.concatenate(b_parts)


def obs_tower2_epochs(
    num_steps: int, num_envs: int, seed: StreamSeed, *, method: str = "entries()"
) -> Iterator[tuple[IntArray, IntArray]]:
    """obs-tower2's endless stream of permutations of all `(t, b)`, checked now.

    Args:
        num_steps: T.
        num_envs: B.
        seed: `None` shuffles with Python's global `random` (as obs-tower2 did), a
            `random.Random` with its own state, an int or a `numpy.random.Generator` with NumPy.
        method: The caller, named in messages.

    Raises:
        ValueError: If a size is not an integer or below its minimum, or T·B == 0 (the stream
            would never yield: obs-tower2 looped forever).
        TypeError: If `seed` is of another type.

    Examples:
        >>> t_idx, b_idx = next(obs_tower2_epochs(2, 2, 0))
        >>> sorted(zip(t_idx.tolist(), b_idx.tolist()))
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    num_steps, num_envs, _, _ = check_stream(num_steps, num_envs, method)
    return _stream_source(num_steps, num_envs, seed)


def obs_tower2_batches(
    num_steps: int,
    num_envs: int,
    batch_size: int,
    count: int,
    seed: StreamSeed,
    *,
    method: str = "batches()",
) -> Iterator[tuple[IntArray, IntArray]]:
    """`count` batches of `batch_size` entries cut from obs-tower2's stream, checked now.

    Every consecutive run of T·B entries of the concatenated batches, starting at 0, is a
    permutation of all `(t, b)`; a batch may span an epoch boundary (or several, when
    `batch_size > T·B`). Permutations are drawn lazily, only when the next entry is needed.
    `seed` as for `obs_tower2_epochs`. With `count == 0` nothing is yielded, even when
    T·B == 0.

    Examples:
        >>> [len(t) for t, _ in obs_tower2_batches(2, 3, 4, 3, 0)]
        [4, 4, 4]
    """
    num_steps, num_envs, batch_size, given = check_stream(
        num_steps, num_envs, method, batch_size=batch_size, count=count
    )
    source = _stream_source(num_steps, num_envs, seed)
    return _cut_stream(num_steps * num_envs, batch_size, given or 0, source)


# --------------------------------------------------------------------------------------------
# Gathering
# --------------------------------------------------------------------------------------------


def as_rows(arrays: Mapping[str, AnyArray]) -> dict[str, AnyArray]:
    """Each `[T, B, ...]` array as `[T·B, ...]`: row `t * B + b` is entry `(t, b)`.

    A view where the first two axes merge (C-contiguous in them, as `obses[:T]` of a stored
    rollout is), else a copy. The shape is spelt out, so arrays of size 0 (states of shape
    `(T, B, 0)`, say) reshape too.

    Examples:
        >>> as_rows({"states": np.zeros((3, 2, 0))})["states"].shape
        (6, 0)
    """
    return {
        name: arr.reshape((arr.shape[0] * arr.shape[1], *arr.shape[2:]))
        for name, arr in arrays.items()
    }


def take_into(arr: AnyArray, rows: IntArray, out: AnyArray | None = None) -> AnyArray:
    """Rows `rows` of `arr` by one `numpy.take`; `rows` must already be in range.

    "clip" never clips here, and unlike "raise" it writes straight into `out` instead of
    through a temporary buffer.
    """
    if arr.ndim == 1:  # the common per-step scalar: skip the axis handling
        return arr.take(rows, out=out, mode="clip")
    return arr.take(rows, axis=0, out=out, mode="clip")


def take_rows(rows_of: Mapping[str, AnyArray], rows: IntArray) -> dict[str, AnyArray]:
    """`{name: arr[rows]}` for `[N, ...]` arrays (from `as_rows`), `rows` already in range.

    Examples:
        >>> take_rows({"r": np.arange(4.0)}, np.array([3, 1]))["r"]
        array([3., 1.])
    """
    return {name: take_into(arr, rows) for name, arr in rows_of.items()}
