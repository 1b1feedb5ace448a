"""Minibatch indices and gathers: the seed's Python loops vs trajkit's minibatch engine.

Three measurements in one process, each the minimum over several back-to-back calls timed with
`time.perf_counter` (trajkit, being faster, gets three times the repeats).

1. index generation (T=2048, B=8) for one and for four epochs: all T·B entries of the seed's
   `entries()` (reimplemented here with `random.shuffle`) vs whole permutations from
   `minibatch_indices` with one minibatch per epoch (the target); then the same cut into
   batches of 512, the seed's `batches()` vs `minibatch_indices` (for information: both add
   the same per-batch work);
2. gathering per-step scalars ([T, B]) for one epoch: the seed's
   `np.array([arr[t, b] for t, b in batch])` per array vs one `gather` call per batch, for what
   a PPO step reads (advantages, returns, log-probs, values, actions: the target), and for
   three arrays (for information: `gather`'s fixed cost per call weighs more);
3. gathering uint8 observations [T+1, B, 84, 84, 4] (T=128, B=8) for one epoch in minibatches of
   256: a raw `np.take` on a reshaped view (flat indices precomputed) vs `gather`.

Run: `python benchmarks/bench_minibatch.py` (or `python benchmarks/run.py minibatch`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from _timing import best_of
from numpy.typing import NDArray

from trajkit import gather, minibatch_indices

IndexPairs = list[tuple[NDArray[np.intp], NDArray[np.intp]]]


def seed_entries(num_steps: int, num_envs: int, rng: random.Random) -> Iterator[tuple[int, int]]:
    """The seed's `Rollout.entries()`: an endless shuffled stream of `(t, b)` tuples."""
    entries = [(t, b) for t in range(num_steps) for b in range(num_envs)]
    while True:
        rng.shuffle(entries)
        yield from entries


def seed_batches(
    num_steps: int, num_envs: int, batch_size: int, count: int, rng: random.Random
) -> Iterator[list[tuple[int, int]]]:
    """The seed's `Rollout.batches()`."""
    entries = seed_entries(num_steps, num_envs, rng)
    for _ in range(count):
        yield [next(entries) for _ in range(batch_size)]


def consume(batches: Iterable[object]) -> None:
    """Take each batch in turn and drop it, as a training loop does."""
    for _ in batches:
        pass


def best_times(
    baseline: Callable[[], object], ours: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Minimum wall times (seconds) of `baseline`, then of `ours` (given 3x the repeats)."""
    return best_of(baseline, repeats), best_of(ours, 3 * repeats)


def row(case: str, base_name: str, times: tuple[float, float], speedup_target: float | None) -> str:
    """A table row; trajkit should be `speedup_target` times faster (None: for information)."""
    base, ours = times
    speedup = base / ours
    if speedup_target is None:
        target, met = "info", "-"
    else:
        target = f">= {speedup_target:g}x faster"
        met = "yes" if speedup >= speedup_target else "NO"
    return (
        f"| {case} | {base_name}: {base * 1e3:.2f} ms | {ours * 1e3:.2f} ms | {speedup:.1f}x "
        f"faster | {target} | {met} |"
    )


def bench_entries(epochs: int) -> str:
    num_steps, num_envs = 2048, 8
    n = num_steps * num_envs
    rng = random.Random(0)
    gen = np.random.default_rng(0)

    def seed_epochs() -> None:
        entries = seed_entries(num_steps, num_envs, rng)
        for _ in range(epochs * n):
            next(entries)

    def ours_epochs() -> None:
        consume(minibatch_indices(num_steps, num_envs, n, epochs=epochs, seed=gen))

    return row(
        f"index generation, T={num_steps} B={num_envs}, {epochs} epoch(s) of all (t, b)",
        "seed `entries()`",
        best_times(seed_epochs, ours_epochs, repeats=7),
        20,
    )


def bench_indices(epochs: int) -> str:
    num_steps, num_envs, batch_size = 2048, 8, 512
    count = num_steps * num_envs // batch_size * epochs
    rng = random.Random(0)
    gen = np.random.default_rng(0)
    times = best_times(
        lambda: consume(seed_batches(num_steps, num_envs, batch_size, count, rng)),
        lambda: consume(
            minibatch_indices(num_steps, num_envs, batch_size, epochs=epochs, seed=gen)
        ),
        repeats=7,
    )
    return row(
        f"batches, T={num_steps} B={num_envs}, {epochs} epoch(s) = {count} batches of {batch_size}",
        "seed `batches()`",
        times,
        None,
    )


def bench_scalars(names: tuple[str, ...], speedup_target: float | None) -> str:
    num_steps, num_envs, batch_size = 2048, 8, 512
    count = num_steps * num_envs // batch_size
    gen = np.random.default_rng(0)
    arrays = {
        name: gen.integers(0, 6, (num_steps, num_envs)).astype(np.int32)
        if name == "actions"
        else gen.standard_normal((num_steps, num_envs)).astype(np.float32)
        for name in names
    }
    batches: IndexPairs = list(minibatch_indices(num_steps, num_envs, batch_size, seed=gen))
    tuple_batches = [list(zip(t.tolist(), b.tolist(), strict=True)) for t, b in batches]

    def seed_gather() -> None:
        for batch in tuple_batches:
            for arr in arrays.values():
                np.array([arr[t, b] for t, b in batch])

    def ours_gather() -> None:
        for t_idx, b_idx in batches:
            gather(arrays, t_idx, b_idx)

    return row(
        f"gather {len(arrays)} [T, B] arrays ({', '.join(names)}), T={num_steps} "
        f"B={num_envs}, one epoch = {count} batches of {batch_size}",
        "seed list comprehension",
        best_times(seed_gather, ours_gather, repeats=7),
        speedup_target,
    )


def bench_observations() -> str:
    num_steps, num_envs, batch_size = 128, 8, 256
    count = num_steps * num_envs // batch_size
    gen = np.random.default_rng(0)
    obses = gen.integers(0, 256, size=(num_steps + 1, num_envs, 84, 84, 4), dtype=np.uint8)
    batches: IndexPairs = list(minibatch_indices(num_steps, num_envs, batch_size, seed=gen))
    flats = [t * num_envs + b for t, b in batches]
    arrays = {"obses": obses}

    def raw_take() -> None:
        flat_view = obses.reshape(-1, 84, 84, 4)
        for flat in flats:
            np.take(flat_view, flat, axis=0)

    def ours_gather() -> None:
        for t_idx, b_idx in batches:
            gather(arrays, t_idx, b_idx)

    raw, ours = best_times(raw_take, ours_gather, repeats=20)
    slowdown = ours / raw
    lines = [
        f"| gather uint8 obses [T+1, B, 84, 84, 4], T={num_steps} B={num_envs}, one epoch = "
        f"{count} batches of {batch_size} | raw `np.take`: {raw * 1e3:.2f} ms "
        f"| {ours * 1e3:.2f} ms | {slowdown:.2f}x the raw time | <= 1.3x the raw time "
        f"| {'yes' if slowdown <= 1.3 else 'NO'} |"
    ]
    # Against a memcpy of the same bytes, with large minibatches (1,024 entries, 29 MB): a
    # fresh output per minibatch pays its page faults; `out=` buffers do not.
    big = 1024
    big_batches: IndexPairs = list(minibatch_indices(num_steps, num_envs, big, epochs=2, seed=gen))
    source = obses.reshape(-1, 84, 84, 4)[:big]
    dest = np.empty((big, 84, 84, 4), np.uint8)
    buffers = {"obses": np.empty((big, 84, 84, 4), np.uint8)}

    def memcpy() -> None:
        for _ in big_batches:
            np.copyto(dest, source)

    def ours_gather_big() -> None:
        for t_idx, b_idx in big_batches:
            gather(arrays, t_idx, b_idx)

    def ours_into() -> None:
        for t_idx, b_idx in big_batches:
            gather(arrays, t_idx, b_idx, out=buffers)

    copy_time, fresh = best_times(memcpy, ours_gather_big, repeats=20)
    _, reused = best_times(memcpy, ours_into, repeats=20)
    for label, value, target in (("fresh outputs", fresh, None), ("`out=` buffers", reused, 1.3)):
        ratio = value / copy_time
        met = "n/a" if target is None else ("yes" if ratio <= target else "NO")
        lines.append(
            f"| gather the same obses, 2 minibatches of {big}, {label} | memcpy of the same bytes: "
            f"{copy_time * 1e3:.2f} ms | {value * 1e3:.2f} ms | {ratio:.2f}x the memcpy "
            f"| {'<= 1.3x the memcpy' if target else 'reported'} | {met} |"
        )
    return "\n".join(lines)


def main() -> None:
    lines = [
        "| case | baseline | trajkit | ratio | target | met |",
        "|---|---|---|---|---|---|",
        bench_entries(epochs=1),
        bench_entries(epochs=4),
        bench_indices(epochs=1),
        bench_indices(epochs=4),
        bench_scalars(("advantages", "returns", "log_probs", "values", "actions"), 20),
        bench_scalars(("rews", "advantages", "log_probs"), None),
        bench_observations(),
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
