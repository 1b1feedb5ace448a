"""What a rollout's checked arrays cost: reads, writes and in-place ops, against NumPy.

A rollout's arrays are read-only views of its storage with their supported writes checked
(`trajkit.CheckedArray`). Each operation is timed on a rollout's field, on a plain ndarray
and on a bare ndarray subclass (`class Bare(np.ndarray): pass`, the least any subclass
costs), interleaved in one run (best of `ROUNDS`):

* **Reads and arithmetic** (`x * 2`, `x + x`, `np.exp(x)`, `x.mean()`, `np.mean(x)`,
  `x.sum()`, `x[t]`, `x > 0`) on a small field (`rews` `[128, 8]`) and on a field of 1 MB or
  more (an observation `[1025, 64, 16]` float32, 4.2 MB). Targets: at most the bare
  subclass's cost; at most 1.1x plain from 1 MB.
* **Writes of a collection loop**: `rews[t] = r` (a `[B]` float64 row), `rews[t, b] = x`,
  `model_outs[t]["critic"] = v`, `rews -= bonus` (obs-tower2's Prierarchy).
* **An in-place op on a large field** (`obses += 1.0`, `obses *= 0.5` on a `[1025, 64, 224]`
  float32 observation, 58.8 MB, checked finite), against the same op in place on a plain
  array; with the peak of memory traced during the op (tracemalloc) over the field's bytes.
  Targets: at most 2x plain, no temporary copy of the field (peak well under 1x).

Printed as microseconds (milliseconds for the large op) and ratios.

Run: `python benchmarks/bench_writes.py [--quick]` (or `python benchmarks/run.py writes`).
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from _timing import interleaved

import trajkit

ROUNDS = 7


class Bare(np.ndarray[Any, np.dtype[Any]]):
    """A bare ndarray subclass: what a subclass costs with nothing of its own."""


Case = tuple[str, Callable[[], None], Callable[[], None], int]

READS: dict[str, Callable[[Any], Any]] = {
    "x * 2": lambda x: x * 2,
    "x + x": lambda x: x + x,
    "np.exp(x)": np.exp,
    "x.mean()": lambda x: x.mean(),
    "np.mean(x)": np.mean,
    "x.sum()": lambda x: x.sum(),
    "x[t]": lambda x: x[3],
    "x > 0": lambda x: x > 0,
}


def row_loop(rews: np.ndarray, rows: list[np.ndarray]) -> Callable[[], None]:
    """`rews[t] = rows[t]` for every t."""

    def loop() -> None:
        for t, row in enumerate(rows):
            rews[t] = row

    return loop


def scalar_loop(rews: np.ndarray, scalars: list[float]) -> Callable[[], None]:
    """`rews[t, 3] = scalars[t]` for every t."""

    def loop() -> None:
        for t, x in enumerate(scalars):
            rews[t, 3] = x

    return loop


def output_loop(outs: Any, rows: list[np.ndarray]) -> Callable[[], None]:
    """`outs[t]["critic"] = rows[t]` (a rollout's model outputs) for every t."""

    def loop() -> None:
        for t, row in enumerate(rows):
            outs[t]["critic"] = row

    return loop


def subtract(rews: np.ndarray, bonus: np.ndarray) -> Callable[[], None]:
    """`rews -= bonus`, in place."""

    def once() -> None:
        np.subtract(rews, bonus, out=rews, casting="same_kind")

    return once


def rollout(T: int, B: int, obs: tuple[int, ...]) -> trajkit.Rollout:
    return trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=np.random.default_rng(0).normal(size=(T + 1, B, *obs)).astype(np.float32),
        rews=np.zeros((T, B), np.float32),
        dones=np.zeros((T + 1, B), np.float32),
        infos=None,
        model_outs={"critic": np.zeros((T + 1, B), np.float32)},
    )


def write_cases(T: int, B: int) -> list[Case]:
    """The write loops, each into a rollout and into a plain array (name, both, writes)."""
    rng = np.random.default_rng(0)
    r: Any = rollout(T, B, (4,))
    plain_rews = np.zeros((T, B), np.float32)
    plain_critic = np.zeros((T + 1, B), np.float32)
    rows = [rng.normal(size=B) for _ in range(T)]
    scalars = [float(x) for x in rng.normal(size=T)]
    bonus = rng.normal(size=(T, B)) * 1e-3

    def bonus_rollout() -> None:
        r.rews -= bonus  # through the attribute, as obs-tower2's Prierarchy writes it

    return [
        ("rews[t] = r ([B] row)", row_loop(r.rews, rows), row_loop(plain_rews, rows), T),
        (
            "rews[t, b] = x (one float)",
            scalar_loop(r.rews, scalars),
            scalar_loop(plain_rews, scalars),
            T,
        ),
        (
            'model_outs[t]["critic"] = v',
            output_loop(r.model_outs, rows),
            row_loop(plain_critic, rows),
            T,
        ),
        ("rews -= bonus (whole [T, B])", bonus_rollout, subtract(plain_rews, bonus), 1),
    ]


def repeated(fn: Callable[[], Any], n: int) -> Callable[[], None]:
    """`fn` called `n` times: one timing of many calls (one call is below the clock's grain)."""

    def loop() -> None:
        for _ in range(n):
            fn()

    return loop


def reads(label: str, field: Any, rounds: int, calls: int) -> None:
    """Each read on the field, on a plain array and on a bare subclass of the same data."""
    plain = np.array(field)
    bare = plain.view(Bare)
    for name, op in READS.items():
        times = interleaved(
            repeated(partial(op, field), calls),
            repeated(partial(op, plain), calls),
            repeated(partial(op, bare), calls),
            rounds=rounds,
            steady=True,
        )
        t_field, t_plain, t_bare = (t / calls for t in times)
        print(
            f"| {label} | `{name}` | {t_field * 1e6:.2f} | {t_plain * 1e6:.2f} | "
            f"{t_bare * 1e6:.2f} | {t_field / t_bare:.2f}x | {t_field / t_plain:.2f}x |"
        )


def cpu_interleaved(*fns: Callable[[], object], rounds: int) -> list[float]:
    """`interleaved`, timed in CPU seconds of the process (all its threads).

    An operation of milliseconds is often descheduled on a shared machine; its CPU time is
    what it costs (on a quiet machine, the same as its wall time).
    """
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            fn()
            start = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - start)
    return best


def in_place(shape: tuple[int, ...], rounds: int) -> None:
    """`obses += 1.0` and `obses *= 0.5` on a large field against the same on a plain array."""
    r: Any = rollout(shape[0] - 1, shape[1], shape[2:])
    plain = np.array(r.obses)
    bare = plain.copy().view(Bare)
    other = np.full_like(plain, 0.5)
    ops: dict[str, Callable[[Any], Any]] = {
        "obses += 1.0": lambda x: x.__iadd__(1.0),
        "obses *= 0.5": lambda x: x.__imul__(np.float32(0.5)),
        "obses -= x (x: an array of its shape)": lambda x: x.__isub__(other),
    }
    mb = plain.nbytes / 1e6
    for name, op in ops.items():
        for clock, timing in (("wall", interleaved), ("CPU", cpu_interleaved)):
            t_field, t_plain, t_bare = timing(
                partial(op, r.obses),
                partial(op, plain),
                partial(op, bare),
                rounds=rounds,
            )
            tracemalloc.start()
            op(r.obses)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(
                f"| `{name}` ({mb:.1f} MB), {clock} | {t_field * 1e3:.2f} | "
                f"{t_plain * 1e3:.2f} | {t_bare * 1e3:.2f} | {t_field / t_plain:.2f}x | "
                f"{peak / plain.nbytes:.3f} |"
            )


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    T, B = (64, 8) if quick else (512, 8)
    rounds = 2 if quick else ROUNDS
    print(f"numpy {np.__version__}, trajkit {trajkit.__version__}; best of {rounds}")
    print("\n| field | read | rollout (us) | plain (us) | bare subclass (us) | / bare | / plain |")
    print("|---|---|---|---|---|---|---|")
    reads("`rews` [128, 8]", rollout(128, 8, (4,)).rews, rounds, 20 if quick else 2000)
    reads("`obses` [1025, 64, 16] (4.2 MB)", rollout(1024, 64, (16,)).obses, rounds, 3)
    print(f"\nT={T}, B={B}")
    print("\n| write | rollout (us/write) | plain ndarray (us/write) | ratio |")
    print("|---|---|---|---|")
    for name, checked, plain, writes in write_cases(T, B):
        t_checked, t_plain = interleaved(checked, plain, rounds=rounds, steady=True)
        us_checked, us_plain = t_checked / writes * 1e6, t_plain / writes * 1e6
        print(f"| {name} | {us_checked:.2f} | {us_plain:.2f} | {us_checked / us_plain:.1f}x |")
    print(
        "\n| in place | rollout (ms) | plain (ms) | bare subclass (ms) | / plain | peak / field |"
    )
    print("|---|---|---|---|---|---|")
    in_place((129, 8, 224) if quick else (1025, 64, 224), rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
