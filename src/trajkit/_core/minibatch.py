"""The minibatch engine: one plan and one sampler for every way trajkit cuts data into minibatches.

[`MinibatchPlan`][trajkit.MinibatchPlan] holds how minibatches are drawn, checked once;
`sample` draws by it from a source of **parts**, each a `Table` (loaded when it is reached,
for the files of a dataset) that takes its items by index and finishes them into a
minibatch. Every public minibatch function is a thin adapter that makes a plan and a source:
the `(t, b)` entries of a rollout (`Rollout.minibatches`, `trajkit.torch.minibatches`,
`minibatch_indices`), its env columns (the sequence minibatches), the transitions of
rollouts (`transition_minibatches`), the files of a `Dataset` (`Dataset.minibatches`,
`transition_minibatches`). A rollout's `[T, B, ...]` arrays are rows `[T·B, ...]`: entry
`(t, b)` is row `t * B + b` (`as_rows`), gathered by one `numpy.take` per array.

obs-tower2's endless stream of `Rollout.batches` and `Rollout.entries` (batches that span
epochs; Python's global `random` when no seed is given, so that `random.seed(s)` reproduces
runs written against obs-tower2) is the seed's API, kept as the seed defines it:
`obs_tower2_epochs` and `obs_tower2_batches`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np

from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray, IntArray, Seed

__all__ = [
    "AdvantageNormalization",
    "ArraysTable",
    "Entries",
    "MinibatchPlan",
    "Part",
    "StreamSeed",
    "Table",
    "as_rows",
    "check_size",
    "obs_tower2_batches",
    "obs_tower2_epochs",
    "sample",
    "take_into",
    "take_rows",
]

StreamSeed: TypeAlias = "int | np.random.Generator | random.Random | None"
"""A seed of a shuffled stream (a string, so that importing this module leaves `numpy.random`
unimported until a stream is drawn)."""

AdvantageNormalization: TypeAlias = Literal["rollout", "minibatch"] | None
"""How minibatch methods standardize advantages: not at all, over the rollout, or per batch."""

# --------------------------------------------------------------------------------------------
# The plan: checked at the call
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
    """How minibatches are drawn: the parameters that every minibatch function takes.

    [`Rollout.minibatches`][trajkit.Rollout.minibatches],
    [`Rollout.sequence_minibatches`][trajkit.Rollout.sequence_minibatches],
    [`minibatch_indices`][trajkit.minibatch_indices],
    [`sequence_minibatch_indices`][trajkit.sequence_minibatch_indices],
    [`transition_minibatches`][trajkit.transition_minibatches],
    [`trajkit.torch.minibatches`][trajkit.torch.minibatches] and
    [`Dataset.minibatches`][trajkit.dataset.Dataset.minibatches] take these as keyword
    arguments of the same names (those that apply to them), make a plan of them, and draw
    from it with one sampler. A plan checks its values when it is made, so those functions
    refuse a bad argument at the call, never at the first minibatch.

    The scheme: each epoch draws a fresh permutation of the source's items (`(t, b)` entries,
    env columns or transitions; `numpy.random.Generator.permutation`) and cuts it into
    minibatches of `minibatch_size`, the last one smaller unless `drop_last`: every item
    appears exactly once per epoch. A source of files (a `Dataset`) goes through a shuffle
    buffer: each epoch permutes the files, loads `files_per_buffer` of them at a time,
    shuffles their items together with those left over from the previous buffer, and cuts
    full minibatches; the items left over (fewer than `minibatch_size`) carry over to the
    next buffer, and the epoch's last ones make its last, smaller minibatch.

    Attributes:
        minibatch_size: Items per minibatch, at least 1 (`envs_per_batch` of the sequence
            minibatches, which count env columns).
        epochs: Passes over the source, at least 0.
        drop_last: Drop each epoch's last minibatch when it is smaller than
            `minibatch_size`.
        seed: An int, a `numpy.random.Generator` (which advances), or `None` for fresh
            entropy. It drives every shuffle, of files and of items.
        shuffle: `False` draws the items in order, files in order and each file's items in
            order (for an evaluation pass); no randomness is used then.
        files_per_buffer: For a source of files, the files loaded into the shuffle buffer
            at a time, at least 1; memory holds one buffer and the items carried over.
        normalize_advantages: PPO minibatches only. `None` leaves `advantages` as computed;
            `"rollout"` standardizes them once over each rollout (population std);
            `"minibatch"` standardizes each minibatch on its own with the unbiased std, as
            stable-baselines3 and CleanRL do (a minibatch of one is left as is). `returns`
            are never changed.

    Raises:
        ValueError: If a size is not an integer (a bool included) or is below its minimum,
            or `normalize_advantages` is not one of its values; the message names the
            argument.
        TypeError: If `seed` is of another type.

    Examples:
        >>> from trajkit import MinibatchPlan
        >>> MinibatchPlan(256, epochs=4, seed=0).drop_last
        False
        >>> MinibatchPlan(0)
        Traceback (most recent call last):
        ...
        ValueError: minibatch_size must be >= 1, got 0
    """

    minibatch_size: int
    epochs: int = 1
    drop_last: bool = False
    seed: Seed = None
    shuffle: bool = True
    files_per_buffer: int = 4
    normalize_advantages: AdvantageNormalization = None

    def __post_init__(self) -> None:
        for name, minimum in (("minibatch_size", 1), ("epochs", 0), ("files_per_buffer", 1)):
            object.__setattr__(self, name, check_size(name, getattr(self, name), minimum))
        for name in ("drop_last", "shuffle"):  # frozen: set through object
            object.__setattr__(self, name, bool(getattr(self, name)))
        if self.normalize_advantages not in (None, "rollout", "minibatch"):
            raise ValueError(
                "normalize_advantages must be None, 'rollout' or 'minibatch', got "
                f"{self.normalize_advantages!r}"
            )
        seeds = int | np.integer | np.random.Generator | None
        if isinstance(self.seed, bool) or not isinstance(self.seed, seeds):
            as_generator(self.seed)  # its TypeError, now (a generator is made only to draw)


# --------------------------------------------------------------------------------------------
# Sources: tables of rows
# --------------------------------------------------------------------------------------------


def _as_is(taken: Any) -> Any:
    return taken


class Table:
    """One loaded part of a source: `rows` items, taken by index and finished into a minibatch.

    Subclasses implement `take` (by default the items are their indices); `finish`
    (rebuilding nested fields, normalizing advantages; by default the taken rows as they
    are) is given to the constructor; `cut` may be overridden to prepare an epoch's
    permutation once (send it to a GPU, say). `what` names the count of items in messages.
    """

    def __init__(self, rows: int, finish: Callable[[Any], Any] = _as_is, what: str = "N") -> None:
        self.rows = rows
        self.finish = finish
        self.what = what

    def take(self, rows: IntArray) -> Any:
        """The items at `rows`, not yet finished: by default, their indices."""
        return rows

    def cut(self, order: IntArray, size: int) -> Iterator[Any]:
        """The minibatches of the rows `order`, `size` at a time (the last may be smaller)."""
        for at in range(0, len(order), size):
            yield self.finish(self.take(order[at : at + size]))


Part = Table | Callable[[], Table]
"""A part of a source: a table in memory, or a function that loads it when it is reached."""


class ArraysTable(Table):
    """Named arrays, their items along `axis`: rows (`as_rows` of `[T, B, ...]`) or env columns.

    Rows `[N, ...]` are taken by `numpy.take`; with `axis=1`, whole env columns of
    `[T, B, ...]` arrays.
    """

    def __init__(
        self,
        arrays: Mapping[str, Any],
        rows: int,
        finish: Callable[[Any], Any] = _as_is,
        axis: int = 0,
    ) -> None:
        super().__init__(rows, finish, "B" if axis else "T*B")
        self.arrays, self.axis = arrays, axis
        # A list holds the leaves of nested observations (of transitions carried over).
        self.leaves = any(isinstance(value, list) for value in arrays.values())

    def take(self, rows: IntArray) -> dict[str, Any]:
        if self.axis:
            return {name: arr.take(rows, axis=self.axis) for name, arr in self.arrays.items()}
        if not self.leaves:
            return take_rows(self.arrays, rows)
        return {
            name: [take_into(a, rows) for a in v] if isinstance(v, list) else take_into(v, rows)
            for name, v in self.arrays.items()
        }


class Entries(Table):
    """The `(t, b)` entries of T steps of B envs: row `t * B + b` as `(t_idx, b_idx)` arrays.

    Through the code `t << shift | b` (`2**shift >= B`): a shift and a mask split it, several
    times faster than `numpy.divmod` by B. Where B is a power of two, the code is the row.
    """

    def __init__(self, num_steps: int, num_envs: int) -> None:
        super().__init__(num_steps * num_envs, what="T*B")
        self.shift = shift = (num_envs - 1).bit_length()
        steps = np.arange(num_steps, dtype=np.intp)[:, None] << shift
        self.codes = None if num_envs == 1 << shift else (steps | np.arange(num_envs)).ravel()

    def take(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        codes = rows if self.codes is None else self.codes.take(rows)
        return codes >> self.shift, codes & ((1 << self.shift) - 1)

    def cut(self, order: IntArray, size: int) -> Iterator[tuple[IntArray, IntArray]]:
        t_idx, b_idx = self.take(order)  # the whole epoch at once, then views of it
        for at in range(0, len(order), size):
            yield t_idx[at : at + size], b_idx[at : at + size]


class _Buffer(Table):
    """Rows of several tables: item `i` is row `at[i]` of `tables[which[i]]`."""

    def __init__(self, tables: list[Table], which: IntArray, at: IntArray) -> None:
        super().__init__(len(at), tables[0].finish, tables[0].what)
        self.tables, self.which, self.at = tables, which, at

    def take(self, rows: IntArray) -> Any:
        return _gather(self.tables, self.which[rows], self.at[rows])

    @classmethod
    def of(cls, tables: list[Table]) -> Table:
        """Every row of each of `tables`, table after table: one table to draw from.

        Rows in memory (`ArraysTable`s: a dataset's PPO arrays) are copied into one, so that a
        minibatch is one take per array; other tables (transitions, whose observations are
        read from the files) are joined by index.
        """
        if len(tables) == 1:
            return tables[0]
        rows = [t for t in tables if isinstance(t, ArraysTable) and not t.axis]
        if len(rows) == len(tables):
            names = rows[0].arrays
            joined = {name: np.concatenate([t.arrays[name] for t in rows]) for name in names}
            return ArraysTable(joined, sum(t.rows for t in rows), rows[0].finish)
        which = np.repeat(np.arange(len(tables), dtype=np.intp), [t.rows for t in tables])
        at = np.concatenate([np.arange(t.rows, dtype=np.intp) for t in tables])
        return cls(tables, which, at)


def _assemble(parts: list[tuple[IntArray, Any]], n: int) -> Any:
    """Put the gathered parts `(positions, values)` into one array (or list of leaves)."""
    first = parts[0][1]
    if isinstance(first, list):
        return [_assemble([(p, v[i]) for p, v in parts], n) for i in range(len(first))]
    out = np.empty((n, *first.shape[1:]), dtype=first.dtype)
    for at, values in parts:
        out[at] = values
    return out


def _gather(tables: Sequence[Table], which: IntArray, rows: IntArray) -> Any:
    """Take the items `(tables[which[i]], rows[i])`, in that order, from tables of dicts.

    Each table's `take` gives name to `[n, ...]` array (or a list of such arrays, the leaves
    of nested observations); the parts are put back in the order asked for.
    """
    if len(tables) == 1:
        return tables[0].take(rows)
    parts: dict[str, list[tuple[IntArray, Any]]] = {}
    order = np.argsort(which, kind="stable")
    bounds = np.flatnonzero(np.diff(which[order])) + 1
    for group in np.split(order, bounds):
        if group.size:
            got = tables[int(which[group[0]])].take(rows[group])
            for name, value in got.items():
                parts.setdefault(name, []).append((group, value))
    return {name: _assemble(got, len(rows)) for name, got in parts.items()}


# --------------------------------------------------------------------------------------------
# The sampler
# --------------------------------------------------------------------------------------------


def sample(
    plan: MinibatchPlan, parts: Sequence[Part], *, name: str = "minibatch_size"
) -> Iterator[Any]:
    """Draw the minibatches of `parts` as `plan` says (see `MinibatchPlan`): an iterator.

    Checked now: where every part is in memory, a `drop_last` size larger than all their
    items together, which would yield nothing, is refused (`name` is the size argument's,
    `what` of the first table names the count). Parts are loaded (`part()`) when their
    buffer is reached, and let go once their last row is drawn.

    Examples:
        >>> table = ArraysTable({"x": np.arange(5)}, 5)
        >>> [b["x"].tolist() for b in sample(MinibatchPlan(2, shuffle=False), [table])]
        [[0, 1], [2, 3], [4]]
        >>> sample(MinibatchPlan(6, drop_last=True), [table])
        Traceback (most recent call last):
        ...
        ValueError: minibatch_size=6 is larger than the 5 entries available (T*B=5), so \
drop_last=True would yield no minibatch at all: use minibatch_size <= 5, or drop_last=False \
to get one smaller minibatch per epoch
    """
    size, tables = plan.minibatch_size, [part for part in parts if isinstance(part, Table)]
    count = sum(t.rows for t in tables)
    if plan.drop_last and len(tables) == len(parts) and 0 < count < size:
        raise ValueError(
            f"{name}={size} is larger than the {count} entries available "
            f"({tables[0].what}={count}), so drop_last=True would yield no minibatch at all: "
            f"use {name} <= {count}, or drop_last=False to get one smaller minibatch per epoch"
        )
    rng = as_generator(plan.seed) if plan.shuffle else None
    return _draw(plan, parts, rng)


def _order(n: int, rng: np.random.Generator | None) -> IntArray:
    """A fresh permutation of `range(n)`, or `range(n)` in order when not shuffling.

    (A permutation of fewer than two draws nothing: one part is never shuffled.)
    """
    order: IntArray = np.arange(n, dtype=np.intp) if rng is None or n < 2 else rng.permutation(n)
    return order


def _load(part: Part) -> Table:
    return part if isinstance(part, Table) else part()


def _draw(
    plan: MinibatchPlan, parts: Sequence[Part], rng: np.random.Generator | None
) -> Iterator[Any]:
    size, per_buffer = plan.minibatch_size, plan.files_per_buffer
    for _ in range(plan.epochs):
        files = _order(len(parts), rng)
        carry: list[Table] = []
        for start in range(0, len(parts), per_buffer):
            loaded = [_load(parts[i]) for i in files[start : start + per_buffer]]
            buffer = _Buffer.of(carry + loaded)
            del loaded
            order = _order(buffer.rows, rng)
            full = buffer.rows - buffer.rows % size
            yield from buffer.cut(order[:full], size)
            rest = order[full:]
            if start + per_buffer < len(parts):  # carried into the next buffer
                carry = (
                    [ArraysTable(buffer.take(rest), len(rest), buffer.finish)] if len(rest) else []
                )
            elif len(rest) and not plan.drop_last:  # the epoch's last, smaller minibatch
                yield from buffer.cut(rest, size)
            del buffer  # memory holds one buffer's tables, and the few rows carried


# --------------------------------------------------------------------------------------------
# obs-tower2's endless stream
# --------------------------------------------------------------------------------------------


def _check_stream(
    num_steps: int, num_envs: int, method: str, *, batch_size: int = 1, count: int | None = None
) -> tuple[int, int, int, int | None]:
    """Check the sizes of an obs-tower2 stream: T·B > 0 unless no batch is asked for.

    `method` names the caller in the message (`"batches()"`, `"entries()"`, ...): obs-tower2
    looped forever on an empty rollout. `count=None` is the endless stream of `entries()`.

    Examples:
        >>> _check_stream(0, 2, "entries()")
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


def _numpy_epochs(
    num_steps: int, num_envs: int, rng: np.random.Generator
) -> Iterator[tuple[IntArray, IntArray]]:
    """Endless permutations of every `(t, b)`: one order shuffled again, in place, each pass.

    As obs-tower2's `entries()` shuffled its list of every `(t, b)`.
    """
    entries, order = Entries(num_steps, num_envs), np.arange(num_steps * num_envs)
    while True:
        rng.shuffle(order)
        yield entries.take(order)


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


def _stream_source(
    num_steps: int, num_envs: int, seed: StreamSeed
) -> Iterator[tuple[IntArray, IntArray]]:
    """The endless permutations for `seed`: `None` is Python's global `random` (obs-tower2's).

    The one place trajkit touches global random state, deliberately: `random.shuffle` is
    looked up at each pass, as obs-tower2 did.
    """
    if seed is None:
        return _list_epochs(num_steps, num_envs, lambda codes: random.shuffle(codes))
    if isinstance(seed, random.Random):
        return _list_epochs(num_steps, num_envs, seed.shuffle)
    return _numpy_epochs(num_steps, num_envs, as_generator(seed))


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
    num_steps, num_envs, _, _ = _check_stream(num_steps, num_envs, method)
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
    num_steps, num_envs, batch_size, given = _check_stream(
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
