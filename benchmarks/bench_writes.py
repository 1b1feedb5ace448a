"""The cost of checked writes: per-step writes into a `Rollout` against a plain ndarray.

Every write into a rollout's arrays passes the field's rule (finite rewards, 0/1 episode
starts, no value changed by the dtype); this measures what that costs where writes are
many and small: a collection loop writing one step of B envs at a time.

Candidates, one loop over T steps each, interleaved (best of `ROUNDS`):

* `rews[t] = r` (a `[B]` float64 row) into `rollout.rews`, against the same into a plain
  float32 ndarray;
* `rews[t, b] = x` (one Python float), against the same into the plain array;
* `model_outs[t]["critic"] = v` (a `[B]` row), against a plain `[T+1, B]` float32 array;
* `rews -= bonus` (obs-tower2's Prierarchy: the whole `[T, B]` array in place), against a
  plain array.

Printed as microseconds per write and the ratio to the plain array.

Run: `python benchmarks/bench_writes.py [--quick]` (or `python benchmarks/run.py writes`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import interleaved

import trajkit

ROUNDS = 7


Case = tuple[str, Callable[[], None], Callable[[], None], int]


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


def make_cases(T: int, B: int) -> list[Case]:
    """The four write loops, each into a rollout and into a plain array (name, both, writes)."""
    rng = np.random.default_rng(0)
    rollout = trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=np.zeros((T + 1, B, 4), np.float32),
        rews=np.zeros((T, B), np.float32),
        dones=np.zeros((T + 1, B), np.float32),
        infos=None,
        model_outs={"critic": np.zeros((T + 1, B), np.float32)},
    )
    plain_rews = np.zeros((T, B), np.float32)
    plain_critic = np.zeros((T + 1, B), np.float32)
    rows = [rng.normal(size=B) for _ in range(T)]
    scalars = [float(x) for x in rng.normal(size=T)]
    bonus = rng.normal(size=(T, B)) * 1e-3

    def bonus_rollout() -> None:
        rollout.rews -= bonus  # through the attribute, as obs-tower2's Prierarchy writes it

    return [
        ("rews[t] = r ([B] row)", row_loop(rollout.rews, rows), row_loop(plain_rews, rows), T),
        (
            "rews[t, b] = x (one float)",
            scalar_loop(rollout.rews, scalars),
            scalar_loop(plain_rews, scalars),
            T,
        ),
        (
            'model_outs[t]["critic"] = v',
            output_loop(rollout.model_outs, rows),
            row_loop(plain_critic, rows),
            T,
        ),
        ("rews -= bonus (whole [T, B])", bonus_rollout, subtract(plain_rews, bonus), 1),
    ]


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    T, B = (64, 8) if quick else (512, 8)
    rounds = 2 if quick else ROUNDS
    print(f"numpy {np.__version__}, trajkit {trajkit.__version__}; T={T}, B={B}, best of {rounds}")
    print("\n| write | rollout (us/write) | plain ndarray (us/write) | ratio |")
    print("|---|---|---|---|")
    for name, checked, plain, writes in make_cases(T, B):
        t_checked, t_plain = interleaved(checked, plain, rounds=rounds, steady=True)
        us_checked, us_plain = t_checked / writes * 1e6, t_plain / writes * 1e6
        print(f"| {name} | {us_checked:.2f} | {us_plain:.2f} | {us_checked / us_plain:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
