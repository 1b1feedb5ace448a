"""Dataset reports: `trajkit report` against `trajkit lint` on the same files, as users run them.

Every command runs in a fresh interpreter (`python -m trajkit ...`: start-up, imports, worker
start-up and, for the report, matplotlib and the figures, all timed), the candidates in turn,
three rounds, best of each; the ratio is report / lint. Two cases, the issue's goals:

- **1,000 small files** (T=64, B=4, truncation, each its own random rollout; ~12 kB each, as
  in `bench_validate.py`), with `-j 1` and `-j 2`: goal, about the time of `trajkit lint`.
- **a 1 GB image recording**: one file, T=2048, B=64, uint8 84x84 frames (random; 0.93 GB),
  with `-j 1`, against `trajkit lint` and `trajkit validate` (which reads every byte): goal,
  seconds. The report reads 256 rows per file for the image statistics and decodes only the
  frames it shows.

With `--small`, only the small files (no 1 GB file, which takes 2 GB of memory to make).

Run: `python benchmarks/bench_report.py [--small]` (or `python benchmarks/run.py report`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import trajkit
from trajkit.testing import example_rollout

SMALL = 1000
REPEATS = 3


def command(args: list[str]) -> float:
    """Seconds for `python -m trajkit ARGS` in a fresh interpreter (exit 0 or 1 expected)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trajkit", *args], capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"trajkit {args} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def race(candidates: dict[str, list[str]]) -> dict[str, float]:
    """The best time of each command, run in turn `REPEATS` times after one warm-up each."""
    for args in candidates.values():
        command(args)  # warm-up: the page cache, the first import of each module
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(REPEATS):
        for name, args in candidates.items():
            best[name] = min(best[name], command(args))
    return best


def small_files(tmp: Path) -> None:
    folder = tmp / "small"
    folder.mkdir()
    for i in range(SMALL):
        rollout = example_rollout(num_steps=64, num_envs=4, truncation=True, seed=i)
        trajkit.save(rollout, folder / f"r{i:04d}.npz")
    nbytes = sum(p.stat().st_size for p in folder.iterdir())
    out = tmp / "small.html"
    print(f"{SMALL:,} small files ({nbytes / 1e6:,.0f} MB), each command in a fresh interpreter:\n")
    print("| jobs | `trajkit lint` | `trajkit report` | report / lint |")
    print("|---|---|---|---|")
    for jobs in ("1", "2"):
        best = race(
            {
                "lint": ["lint", "--no-config", str(folder), "-j", jobs],
                "report": ["report", "--no-config", str(folder), "-o", str(out), "-j", jobs],
            }
        )
        print(
            f"| {jobs} | {best['lint']:.2f} s | {best['report']:.2f} s | "
            f"{best['report'] / best['lint']:.2f}x |",
            flush=True,
        )


def image_recording(tmp: Path) -> None:
    steps, envs = 2048, 64
    rng = np.random.default_rng(0)
    dones = (rng.random((steps + 1, envs)) < 0.01).astype(np.float32)
    dones[0] = 1
    rollout = trajkit.Rollout(
        np.zeros((steps + 1, envs, 0), np.float32),
        rng.integers(0, 256, (steps + 1, envs, 84, 84), dtype=np.uint8),
        rng.normal(size=(steps, envs)).astype(np.float32),
        dones,
        None,
        {"actions": rng.integers(0, 6, (steps + 1, envs)).astype(np.int32)},
        truncated=np.zeros((steps, envs), np.float32),
        final_values=np.zeros((steps, envs), np.float32),
        copy=False,
    )
    path = tmp / "atari.npz"
    trajkit.save(rollout, path)
    del rollout
    size = path.stat().st_size
    out = tmp / "atari.html"
    print(f"\nOne image recording (T={steps}, B={envs}, uint8 84x84; {size / 1e9:.2f} GB), -j 1:\n")
    best = race(
        {
            "validate": ["validate", str(path)],
            "lint": ["lint", "--no-config", str(path), "-j", "1"],
            "report": ["report", "--no-config", str(path), "-o", str(out), "-j", "1"],
        }
    )
    print("| `trajkit validate` | `trajkit lint` | `trajkit report` | report / lint |")
    print("|---|---|---|---|")
    print(
        f"| {best['validate']:.2f} s | {best['lint']:.2f} s | {best['report']:.2f} s | "
        f"{best['report'] / best['lint']:.2f}x |",
        flush=True,
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as name:
        tmp = Path(name)
        small_files(tmp)
        if "--small" not in sys.argv:
            image_recording(tmp)


if __name__ == "__main__":
    main()
