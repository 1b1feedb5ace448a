"""Validation and lint throughput: `trajkit validate` and `trajkit lint` on one process and two.

Two folders, written once into a temporary folder (removed afterwards) and so in the page
cache for every run:

- **small**: 2,000 small files (T=128, B=8, the four known model outputs, truncation; ~70 kB
  each), the shape of a folder of many short recordings;
- **large**: 20 larger files (T=256, B=16, float32 observations 48x48x3; ~110 MB each).

Each folder is checked in full (every CRC-32 and `Rollout` rule) and with `--quick` (ZIP
directory and metadata only), by the `trajkit validate` command itself (output to a buffer),
with `--jobs 1` (the baseline, in this process) and `--jobs 2` (two worker processes, started by
the command: their start-up is part of the time), and with every core when there are more than
two. The job counts run in turn, three times over (so that each sees the same load on a shared
machine), and each keeps its best time; the ratio is the speed-up over `--jobs 1`.

Then **as users run them**: `python -m trajkit validate` and `python -m trajkit lint` in a
fresh interpreter each time (its start-up, imports and workers' start-up all timed), with
`-j 1` and `-j 2`, on a folder of 3,000 small files (T=64, B=4, each its own random rollout;
22 kB each), three rounds in turn, best of each: first on the machine as it is, then while
another process holds a core (a busy loop at the lowest priority, in a session of its own, as
another user's job on a shared workstation or CI runner would be). The goals of issue 45:
`-j 2` at least 1.7x `-j 1` on an idle machine, and never slower than `-j 1` with the busy
process. The package's bytecode is compiled first, as `pip install` does (`compiled`). Before
them, what checking one of these files costs in this process (`check_file`,
best of five passes over 300 files; the goal: at most 1 ms).

With `--small`, only the small folders (no 2 GB folder of large files); with `--cold`, only the
commands in fresh interpreters. With `--ray`, the same
checks also run with `--engine ray` on a local Ray of every core, started
once before the timings (row "Ray").

Run: `python benchmarks/bench_validate.py [--small | --cold] [--ray]` (or `python
benchmarks/run.py validate`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _timing import best_of, compiled

import trajkit
from trajkit._io.engine import cpu_count
from trajkit._io.filecheck import check_file
from trajkit.cli import main as cli_main
from trajkit.testing import example_rollout

SMALL, LARGE = 2000, 20
COLD = 3000  # small files for the fresh-interpreter runs
REPEATS = 3
BUSY = "while True: pass"  # the other process of the contended runs
PER_FILE = 300  # files for the in-process time of one file


def make_folder(root: Path, rollout: trajkit.Rollout, count: int) -> int:
    root.mkdir()
    first = root / "r0000.npz"
    trajkit.save(rollout, first)
    for i in range(1, count):
        shutil.copyfile(first, root / f"r{i:04d}.npz")
    return sum(p.stat().st_size for p in root.iterdir())


def validate(folder: Path, jobs: int, quick: bool) -> None:
    """`trajkit validate`; `jobs=0` means `--engine ray` (a Ray started beforehand)."""
    engine = ["--engine", "ray"] if jobs == 0 else ["--jobs", str(jobs)]
    argv = ["validate", *engine, str(folder), *(["--quick"] if quick else [])]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(argv)
    if code != 0:
        raise RuntimeError(f"validate {argv} failed")


def command(args: list[str]) -> float:
    """Seconds for `python -m trajkit ARGS` in a fresh interpreter (exit 0 or 1 expected)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trajkit", *args], capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"trajkit {args} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def cold(tmp: Path) -> None:
    """Both commands in fresh interpreters on 3,000 distinct small files, -j 1 against -j 2."""
    folder = tmp / "cold"
    folder.mkdir()
    for i in range(COLD):
        rollout = example_rollout(num_steps=64, num_envs=4, seed=i)
        trajkit.save(rollout, folder / f"r{i:04d}.npz")
    nbytes = sum(p.stat().st_size for p in folder.iterdir())
    per_file(folder)
    compiled()
    commands = {
        "`trajkit validate`": ["validate", str(folder)],
        "`trajkit lint --no-config`": ["lint", "--no-config", str(folder)],
    }
    print(
        f"\n{COLD:,} small files ({nbytes / 1e6:,.0f} MB, {nbytes / COLD / 1e3:.1f} kB each), "
        "each command in a fresh interpreter:\n"
    )
    print("| machine | command | `-j 1` | `-j 2` | speed-up |")
    print("|---|---|---|---|---|")
    for args in commands.values():
        command([*args, "-j", "1"])  # warm-up: page cache
    for busy in (False, True):
        with another_process(busy):
            for label, args in commands.items():
                best = {1: float("inf"), 2: float("inf")}
                for _ in range(REPEATS):
                    for jobs in best:
                        best[jobs] = min(best[jobs], command([*args, "-j", str(jobs)]))
                machine = "another process busy" if busy else "as it is"
                print(
                    f"| {machine} (load {os.getloadavg()[0]:.1f}) | {label} | "
                    f"{best[1] * 1e3:,.0f} ms | {best[2] * 1e3:,.0f} ms | "
                    f"{best[1] / best[2]:.2f}x |",
                    flush=True,
                )


def per_file(folder: Path) -> None:
    """In this process: `check_file` of one small file, as `validate --jobs 1` runs it."""
    files = sorted(str(p) for p in folder.iterdir())[:PER_FILE]
    for path in files[:20]:  # warm-up: the page cache, the metadata model's validator
        check_file(path)

    def all_files() -> None:
        for path in files:
            check_file(path)

    seconds = best_of(all_files, 5) / len(files)
    cpu = float("inf")  # CPU time too: on a loaded machine the wall time counts the waits
    for _ in range(5):
        start = time.process_time()
        all_files()
        cpu = min(cpu, (time.process_time() - start) / len(files))
    print(
        f"\nIn this process, `check_file` of one small file ({len(files)} files, best of 5): "
        f"{seconds * 1e3:.3f} ms a file, {cpu * 1e3:.3f} ms of CPU (goal: at most 1 ms)."
    )


@contextlib.contextmanager
def another_process(busy: bool) -> Iterator[None]:
    """With `busy`, a busy loop holds a core meanwhile: lowest priority, a session of its own."""
    if not busy:
        yield
        return
    other = subprocess.Popen(
        [sys.executable, "-c", BUSY], start_new_session=True, preexec_fn=lambda: os.nice(19)
    )
    try:
        yield
    finally:
        other.kill()
        other.wait()


def main() -> None:
    cores = cpu_count()
    job_counts = [1, 2] + ([cores] if cores > 2 else [])
    if "--ray" in sys.argv:  # also `--engine ray`, on a local Ray with every core
        import ray

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(num_cpus=cores, include_dashboard=False, logging_level=logging.ERROR)
        job_counts.append(0)
    print(f"cores available: {cores}\n")
    print("| folder | check | jobs | time | files/s | MB/s | speed-up vs --jobs 1 |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as name:
        tmp = Path(name)
        small = example_rollout(num_steps=128, num_envs=8, truncation=True)
        large = example_rollout(num_steps=256, num_envs=16, obs_shape=(48, 48, 3))
        folders = [(f"{SMALL:,} small files", tmp / "small", small, SMALL)]
        if "--small" not in sys.argv:
            folders.append((f"{LARGE} large files", tmp / "large", large, LARGE))
        if "--cold" in sys.argv:  # only the commands in fresh interpreters
            folders = []
        for label, folder, rollout, count in folders:
            nbytes = make_folder(folder, rollout, count)
            for quick in (False, True):
                validate(folder, 1, quick)  # warm-up: page cache, imports
                best = dict.fromkeys(job_counts, float("inf"))
                for _ in range(REPEATS):  # alternate, so that every count sees the same load
                    for jobs in job_counts:
                        seconds = best_of(lambda: validate(folder, jobs, quick), 1)  # noqa: B023
                        best[jobs] = min(best[jobs], seconds)
                check = "`--quick`" if quick else "full"
                for jobs, seconds in best.items():
                    print(
                        f"| {label} ({nbytes / 1e6:,.0f} MB) | {check} | {jobs or 'Ray'} | "
                        f"{seconds * 1e3:,.0f} ms | {count / seconds:,.0f} | "
                        f"{nbytes / 1e6 / seconds:,.0f} | {best[1] / seconds:.2f}x |",
                        flush=True,
                    )
        cold(tmp)


if __name__ == "__main__":
    main()
