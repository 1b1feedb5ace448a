"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import compileall
import time
from collections.abc import Callable
from pathlib import Path

import trajkit

SRC = Path(trajkit.__file__).resolve().parents[1]
"""The `src` folder of the trajkit that the benchmarks import."""


def compiled(*sources: Path) -> None:
    """Compile trajkit's bytecode in each `src` folder (this one's by default), as `pip
    install` does, before commands are timed in fresh interpreters.

    Without it, a module whose cached bytecode is stale (edited since) is compiled again in
    every run where `PYTHONDONTWRITEBYTECODE` is set, as on these machines: tens of
    milliseconds of each start that users never pay.
    """
    for src in sources or (SRC,):
        compileall.compile_dir(src / "trajkit", quiet=1)


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of `repeats` back-to-back calls of `fn`, in seconds.

    The minimum is the least noisy estimate on a shared machine: noise only ever adds time.
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def interleaved(*fns: Callable[[], object], rounds: int, steady: bool = False) -> list[float]:
    """Minimum wall time of each of `fns`, run in turn `rounds` times, in seconds.

    Alternating the candidates spreads the machine's noise over all of them alike, so that
    their ratios stay fair on a shared machine. With `steady`, each timed call follows an
    untimed call of the same function: every candidate is timed in the state its own loop
    leaves behind (its allocations, its caches), as in a loop that repeats it, not in the
    state the previous candidate left.
    """
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            if steady:
                fn()
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best
