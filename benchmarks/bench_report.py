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

With `--parquet [--against OTHER/src] [--rollouts N]`, instead, the **peak memory** of
`trajkit report` on a Parquet file of 0.93 GB (32 rollouts, or N, of T=256, B=16, uint8
84x84 frames, compact layout), `-j 1`: the peak RSS of the command's process (`ru_maxrss`,
from `wait4`) and its peak anonymous memory (sampled), with this tree's `trajkit` and, given
`--against`, another's (such as a checkout from before the report streamed Parquet files) in
turn. The frames' bytes are printed beside it: a report that reads the file whole needs at
least that much.

Run: `python benchmarks/bench_report.py [--small | --parquet [--against OTHER/src] ...]` (or
`python benchmarks/run.py report`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def peak_memory(args: list[str], source: str | None = None) -> tuple[int, int]:
    """Peak RSS and peak anonymous memory, in bytes, of `python -m trajkit ARGS`.

    With trajkit from `source`, if given. The peak RSS is the kernel's (`ru_maxrss`, from
    `wait4`); it counts the pages of memory-mapped files the command has touched while they
    are mapped, which the system reclaims as it needs (page cache). The anonymous memory
    (`RssAnon`, the heap: what the command needs of RAM) is sampled every 5 ms.
    """
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = source
    child = subprocess.Popen(
        [sys.executable, "-m", "trajkit", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    anon = 0
    while True:
        pid, code, usage = os.wait4(child.pid, os.WNOHANG)  # the child's own rusage
        if pid:
            break
        anon = max(anon, _anonymous(child.pid))
        time.sleep(0.005)
    child.returncode = os.waitstatus_to_exitcode(code)
    if child.returncode not in (0, 1):
        why = child.stderr.read().decode()[-2000:] if child.stderr else ""
        raise RuntimeError(f"trajkit {args} failed: {why}")
    return usage.ru_maxrss << 10, anon  # kilobytes on Linux


def _anonymous(pid: int) -> int:
    """The process's anonymous memory in bytes now (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/status") as lines:
            return next(int(line.split()[1]) << 10 for line in lines if line.startswith("RssAnon:"))
    except (OSError, StopIteration):
        return 0


def parquet_rollouts(count: int, steps: int, envs: int) -> Iterator[trajkit.Rollout]:
    """`count` image rollouts, made one at a time (so that writing them takes one's memory)."""
    rng = np.random.default_rng(0)
    for _ in range(count):
        dones = (rng.random((steps + 1, envs)) < 0.01).astype(np.float32)
        yield trajkit.Rollout(
            np.zeros((steps + 1, envs, 0), np.float32),
            rng.integers(0, 256, (steps + 1, envs, 84, 84), dtype=np.uint8),
            rng.normal(size=(steps, envs)).astype(np.float32),
            dones,
            None,
            {"actions": rng.integers(0, 6, (steps + 1, envs)).astype(np.int32)},
            copy=False,
        )


def parquet_memory(tmp: Path, against: str | None, count: int) -> None:
    from trajkit.arrow import write_parquet

    steps, envs = 256, 16
    path = tmp / "frames.parquet"
    write_parquet(parquet_rollouts(count, steps, envs), path, layout="compact")
    payload = count * (steps + 1) * envs * 84 * 84
    out = str(tmp / "frames.html")
    args = ["report", "--no-config", "--no-progress", str(path), "-o", out, "-j", "1"]
    print(
        f"`trajkit report` of one Parquet file ({path.stat().st_size / 1e9:.2f} GB; {count} "
        f"rollouts of T={steps}, B={envs}, uint8 84x84; frames {payload / 1e9:.2f} GB), -j 1; "
        f"load: {os.getloadavg()[0]:.2f}\n"
    )
    print("| trajkit | peak RSS | peak anonymous memory | anonymous / frames |")
    print("|---|---|---|---|")
    trees = {"this tree": None} | ({} if against is None else {against: against})
    for name, source in trees.items():
        rss, anon = peak_memory(args, source)
        print(
            f"| {name} | {rss / 1e6:,.0f} MB | {anon / 1e6:,.0f} MB | {anon / payload:.2f}x |",
            flush=True,
        )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as name:
        tmp = Path(name)
        if "--parquet" in sys.argv:
            given = sys.argv.index("--against") + 1 if "--against" in sys.argv else None
            count = (
                int(sys.argv[sys.argv.index("--rollouts") + 1]) if "--rollouts" in sys.argv else 32
            )
            parquet_memory(tmp, None if given is None else os.path.abspath(sys.argv[given]), count)
            return
        small_files(tmp)
        if "--small" not in sys.argv:
            image_recording(tmp)


if __name__ == "__main__":
    main()
