"""Benchmark `trajkit.gae` against the seed's NumPy loop and a simple numba kernel.

Run `python benchmarks/bench_gae.py` (or `make bench`, which runs every `bench_*.py` through
`benchmarks/run.py`). In one process, for four float32 shapes (about 1% dones, gamma = 0.99,
lam = 0.95) it times, as the minimum over several repeats of `time.perf_counter`:

* seed: the obs-tower2 `Rollout` loop, written out below (one NumPy row operation per step);
* numpy: `trajkit._core.gae.gae(..., backend="numpy")`;
* numba(bench): the faster of this script's two hand-written numba kernels: a direct
  translation of the seed loop (row by row, with a buffer of the running advantages), and a
  loop env by env that carries each env's advantage in a register (what one writes for a
  single env);
* trajkit-numba: `gae(..., backend="numba")`, including its argument checks.

It prints a Markdown table of times and ratios, and whether each target is met: numpy at least
50x the seed on `narrow`, 300x on `long` and 1.2x on `wide`; numpy within 6x of numba(bench) on
every shape; trajkit-numba within 1.3x of numba(bench). Targets are reported, never asserted.
Then the fixed cost of a call: `gae(..., backend="numba")` and the hand kernels at T=1, B=1.
"""

from __future__ import annotations

import gc
import importlib
import platform
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trajkit._core import gae as gae_module
from trajkit._core.gae import gae

F32 = NDArray[np.float32]
GAMMA = 0.99
LAM = 0.95
SHAPES: dict[str, tuple[int, int]] = {
    "narrow": (2048, 8),
    "medium": (256, 64),
    "wide": (128, 4096),
    "long": (16384, 1),
}
SPEEDUP_TARGETS = {"narrow": 50.0, "long": 300.0, "wide": 1.2}
REPEATS = 30
NUMPY_VS_NUMBA = 6.0
TRAJKIT_NUMBA_VS_BENCH = 1.3


def seed_gae(rews: F32, values: F32, dones: F32, gamma: float, lam: float) -> F32:
    """The seed `Rollout.advantages` loop."""
    T, B = rews.shape
    result = np.zeros([T, B], dtype=np.float32)
    current = np.zeros([B], dtype=np.float32)
    for t in range(T - 1, -1, -1):
        delta = rews[t] - values[t]
        delta += (1 - dones[t + 1]) * gamma * values[t + 1]
        current *= gamma * lam
        current += delta
        result[t] = current
        current *= 1 - dones[t]
    return result


def seed_kernel(rews: F32, values: F32, dones: F32, gamma: float, lam: float) -> F32:
    """The seed loop written as a loop over environments (for numba), all in float32.

    The scalars are float32 too: with Python floats numba would compute every step in float64,
    which is slower than the float32 kernel a user would write and would flatter trajkit.
    """
    T, B = rews.shape
    g = np.float32(gamma)
    gl = np.float32(gamma * lam)
    one = np.float32(1.0)
    result = np.zeros((T, B), dtype=np.float32)
    current = np.zeros(B, dtype=np.float32)
    for t in range(T - 1, -1, -1):
        for b in range(B):
            delta = rews[t, b] - values[t, b] + (one - dones[t + 1, b]) * g * values[t + 1, b]
            current[b] = current[b] * gl + delta
            result[t, b] = current[b]
            current[b] *= one - dones[t, b]
    return result


def env_kernel(rews: F32, values: F32, dones: F32, gamma: float, lam: float) -> F32:
    """A hand-written loop env by env, the running advantage in a register, all in float32."""
    T, B = rews.shape
    g = np.float32(gamma)
    gl = np.float32(gamma * lam)
    one = np.float32(1.0)
    result = np.empty((T, B), dtype=np.float32)
    for b in range(B):
        last = np.float32(0.0)
        for t in range(T - 1, -1, -1):
            not_done = one - dones[t + 1, b]
            last = rews[t, b] - values[t, b] + not_done * (g * values[t + 1, b] + gl * last)
            result[t, b] = last
    return result


def make_inputs(T: int, B: int, seed: int = 0) -> tuple[F32, F32, F32]:
    rng = np.random.default_rng(seed)
    rews = rng.standard_normal((T, B)).astype(np.float32)
    values = rng.standard_normal((T + 1, B)).astype(np.float32)
    dones = (rng.random((T + 1, B)) < 0.01).astype(np.float32)
    return rews, values, dones


def best_time(fn: Callable[[], object], repeats: int, batch_seconds: float = 0.004) -> float:
    """Minimum over `repeats` batches of the mean time of one call, in seconds."""
    fn()  # warm up (and compile)
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    number = max(1, int(batch_seconds / max(once, 1e-9)))
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best = min(best, (time.perf_counter() - start) / number)
    finally:
        gc.enable()
    return best


Kernel = Callable[[F32, F32, F32, float, float], F32]


def load_numba_kernels() -> list[Kernel] | None:
    """The two hand-written kernels compiled by numba, or `None` without numba."""
    try:
        numba: Any = importlib.import_module("numba")
    except ImportError:
        return None
    return [numba.njit(seed_kernel), numba.njit(env_kernel)]


def best_kernel_time(kernels: list[Kernel], args: tuple[Any, ...], repeats: int) -> float:
    """The time of the faster hand kernel on `args` (checked against the first)."""
    expected = kernels[0](*args)
    times = []
    for kernel in kernels:
        if not np.allclose(kernel(*args), expected, rtol=1e-4, atol=1e-4):
            raise RuntimeError("the hand-written kernels disagree")
        times.append(best_time(partial(kernel, *args), repeats))
    return min(times)


def mark(ok: bool) -> str:
    return "yes" if ok else "**NO**"


def main() -> None:
    bench_kernels = load_numba_kernels()
    print(
        f"numpy {np.__version__}, Python {platform.python_version()}, "
        f"gamma={GAMMA}, lam={LAM}, ~1% dones, float32; times are min over repeats (ms).\n"
    )
    header = [
        "shape",
        "T",
        "B",
        "seed ms",
        "numpy ms",
        "numba(bench) ms",
        "trajkit-numba ms",
        "numpy speed-up vs seed",
        "numpy/numba",
        "trajkit-numba/bench-numba",
        "targets met",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    all_met = True
    for name, (T, B) in SHAPES.items():
        rews, values, dones = make_inputs(T, B)
        reference = seed_gae(rews, values, dones, GAMMA, LAM)
        fast = gae(rews, values, dones, GAMMA, LAM, backend="numpy")
        if not np.allclose(fast, reference, rtol=1e-4, atol=1e-4):
            raise RuntimeError(f"{name}: trajkit numpy backend disagrees with the seed loop")

        args = (rews, values, dones, GAMMA, LAM)
        t_seed = best_time(partial(seed_gae, *args), repeats=5)
        t_numpy = best_time(partial(gae, *args, backend="numpy"), REPEATS)
        speedup = t_seed / t_numpy
        checks: list[str] = []
        if name in SPEEDUP_TARGETS:
            ok = speedup >= SPEEDUP_TARGETS[name]
            checks.append(f"{mark(ok)} (>= {SPEEDUP_TARGETS[name]:g}x seed)")
            all_met &= ok
        cells = [name, str(T), str(B), f"{t_seed * 1e3:.3f}", f"{t_numpy * 1e3:.3f}"]
        if bench_kernels is not None:
            t_bench = best_kernel_time(bench_kernels, args, REPEATS)
            t_trajkit = best_time(partial(gae, *args, backend="numba"), REPEATS)
            numpy_ratio = t_numpy / t_bench
            numba_ratio = t_trajkit / t_bench
            ok_numpy = numpy_ratio <= NUMPY_VS_NUMBA
            ok_numba = numba_ratio <= TRAJKIT_NUMBA_VS_BENCH
            checks.append(f"{mark(ok_numpy)} (numpy <= {NUMPY_VS_NUMBA:g}x numba)")
            checks.append(f"{mark(ok_numba)} (trajkit-numba <= {TRAJKIT_NUMBA_VS_BENCH:g}x)")
            all_met &= ok_numpy and ok_numba
            cells += [f"{t_bench * 1e3:.3f}", f"{t_trajkit * 1e3:.3f}"]
            ratios = [f"{speedup:.1f}x", f"{numpy_ratio:.2f}", f"{numba_ratio:.2f}"]
        else:
            cells += ["n/a", "n/a"]
            ratios = [f"{speedup:.1f}x", "n/a", "n/a"]
        print("| " + " | ".join([*cells, *ratios, "; ".join(checks) or "n/a"]) + " |", flush=True)
    if bench_kernels is None:
        print("\nnumba is not installed: the numba columns and targets were skipped.")
    print(f"\nAll targets met: {'yes' if all_met else 'NO'}")
    if bench_kernels is not None:
        fixed_cost(bench_kernels)
    backend_grid()


def fixed_cost(kernels: list[Kernel]) -> None:
    """What a call costs besides the loop: T=1, B=1, where the loop is a few instructions."""
    args = (*make_inputs(1, 1), GAMMA, LAM)
    t_trajkit = best_time(partial(gae, *args, backend="numba"), REPEATS)
    t_bench = best_kernel_time(kernels, args, REPEATS)
    print(
        f"\nFixed cost of a call (T=1, B=1): trajkit-numba {t_trajkit * 1e6:.2f} us, "
        f"numba(bench) {t_bench * 1e6:.2f} us: {(t_trajkit - t_bench) * 1e6:.2f} us of "
        "argument checks and dispatch per call."
    )


GRID_T = (16, 64, 256, 1024, 4096)
GRID_B = (64, 256, 1024, 2048, 4096)


def backend_grid() -> None:
    """Time both NumPy strategies on a grid of shapes; show which one trajkit picks.

    Each cell is (loop over time) / (doubling scan): above 1 the scan is faster. `*` marks
    the strategy `trajkit.gae` picks for that shape, `!` a pick more than 10% slower than the
    other strategy.
    """
    print(
        "\nBackend choice of the NumPy path: time of the loop over time / time of the doubling "
        "scan (above 1: the scan is faster). `S` or `L` is trajkit's pick (scan or loop); `!` "
        "marks a pick more than 10% slower than the other.\n"
    )
    print("| T \\ B | " + " | ".join(map(str, GRID_B)) + " |")
    print("|---" * (len(GRID_B) + 1) + "|")
    wrong = 0
    for T in GRID_T:
        cells = []
        for B in GRID_B:
            if T * B > 1 << 22:
                cells.append("-")
                continue
            r, v, d = make_inputs(T, B)
            loop = best_time(partial(gae_module._gae_row_loop, r, v, d, None, GAMMA, LAM), 5)
            scan = best_time(partial(gae_module._gae_scan, r, v, d, None, GAMMA, LAM), 5)
            picks_loop = gae_module._use_row_loop(T, B)
            slower = (loop if picks_loop else scan) / (scan if picks_loop else loop)
            flag = "!" if slower > 1.1 else ""
            wrong += bool(flag)
            cells.append(f"{loop / scan:.2f} {'L' if picks_loop else 'S'}{flag}")
        print(f"| {T} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nPicks more than 10% slower than the alternative: {wrong}")


if __name__ == "__main__":
    main()
