"""Start-up of the `trajkit` command: each command in a fresh interpreter, as users run it.

Times, in one run, `python -c pass` (the interpreter alone, the baseline), `import trajkit`,
`trajkit --help` and `--version` (through `python -m trajkit` and the `trajkit` console
script), and `validate`, `lint` and `info` of one small file (T=64, B=4; 22 kB). The commands
run in turn, `ROUNDS` times over (so that each sees the same load on a shared machine); each
keeps its best and its median time. The goals of issue 45: `--help` under 0.15 s, `validate`
and `lint` of one small file under 0.3 s.

The package's bytecode is compiled first (`compileall`), as `pip install` does: without it
every run would compile trajkit's sources again (this machine sets `PYTHONDONTWRITEBYTECODE`).

With `--against SRC`, each command also runs with `PYTHONPATH=SRC`, another checkout's `src`
folder (say, the last release's), in the same rounds: the last column is its time over this
one's. With `--importtime`, `python -X importtime` of `--help` and of `validate`, summed by
top-level package, follows the table.

Run: `python benchmarks/bench_startup.py [--against OLD/src] [--importtime]` (or `python
benchmarks/run.py startup`).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import SRC, compiled

import trajkit
from trajkit.testing import example_rollout

ROUNDS = 10
GOALS = {"--help": 0.15, "--version": 0.15, "validate": 0.3, "lint": 0.3}


def commands(file: str) -> dict[str, list[str]]:
    """Label -> argv, each run in a fresh interpreter."""
    python = [sys.executable]
    script = shutil.which("trajkit", path=str(Path(sys.executable).parent))
    cli = [*python, "-m", "trajkit"]
    table = {
        "`python -c pass`": [*python, "-c", "pass"],
        "`python -c 'import trajkit'`": [*python, "-c", "import trajkit"],
        "`python -m trajkit --help`": [*cli, "--help"],
        "`python -m trajkit --version`": [*cli, "--version"],
        "`python -m trajkit validate` (one file)": [*cli, "validate", file],
        "`python -m trajkit lint` (one file)": [*cli, "lint", "--no-config", file],
        "`python -m trajkit info` (one file)": [*cli, "info", file],
    }
    if script is not None:  # the console script, as `pip install` writes it
        table["`trajkit --help`"] = [script, "--help"]
        table["`trajkit validate` (one file)"] = [script, "validate", file]
    return table


def run(argv: list[str], src: Path) -> float:
    """Seconds for one command, with `src` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def goal(label: str) -> float | None:
    return next((limit for key, limit in GOALS.items() if key in label), None)


def table(file: str, against: Path | None) -> None:
    runs = commands(file)
    trees = {"now": SRC, **({"against": against} if against is not None else {})}
    times: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for argv in runs.values():  # warm-up: the page cache
        for src in trees.values():
            run(argv, src)
    for _ in range(ROUNDS):
        for label, argv in runs.items():
            for tree, src in trees.items():
                times[label, tree].append(run(argv, src))
    base = min(times["`python -c pass`", "now"])
    header = ["command", "best", "median", "x `python -c pass`", "goal", "met"]
    if against is not None:
        header += ["`--against` best", "`--against` / now"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for label in runs:
        now = times[label, "now"]
        limit = goal(label)
        cells = [
            label,
            f"{min(now) * 1e3:.0f} ms",
            f"{statistics.median(now) * 1e3:.0f} ms",
            f"{min(now) / base:.1f}x",
            "-" if limit is None else f"< {limit * 1e3:.0f} ms",
            "-" if limit is None else ("yes" if min(now) < limit else "**NO**"),
        ]
        if against is not None:
            old = times[label, "against"]
            cells += [f"{min(old) * 1e3:.0f} ms", f"{min(old) / min(now):.1f}x"]
        print("| " + " | ".join(cells) + " |", flush=True)


_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s+)(\S+)")


def importtime(label: str, argv: list[str]) -> None:
    """`python -X importtime` of one command: the total, and self time by top-level package."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env
    )
    by_package: collections.Counter[str] = collections.Counter()
    modules = 0
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match:
            modules += 1
            name = match.group(4)
            top = ".".join(name.split(".")[:2]) if name.startswith("trajkit.") else name
            by_package[top.split(".")[0] if top == name else top] += int(match.group(1))
    total = sum(by_package.values())
    top = ", ".join(f"{name} {us / 1e3:.1f}" for name, us in by_package.most_common(8))
    print(f"| {label} | {modules} | {total / 1e3:.0f} ms | {top} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, metavar="SRC", help="another checkout's src")
    parser.add_argument("--importtime", action="store_true", help="also python -X importtime")
    args, _ = parser.parse_known_args()  # `benchmarks/run.py startup` passes its own
    compiled(SRC, *([args.against] if args.against else []))
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as tmp:
        file = str(Path(tmp) / "run.npz")
        trajkit.save(example_rollout(num_steps=64, num_envs=4, seed=0), file)
        print(f"One small file: {os.path.getsize(file) / 1e3:.1f} kB. {ROUNDS} rounds in turn.\n")
        table(file, args.against)
        if args.importtime:
            print("\n`python -X importtime` (this checkout; self time summed by package, ms):\n")
            print("| command | modules | total | largest |")
            print("|---|---|---|---|")
            importtime("`-m trajkit --help`", ["-m", "trajkit", "--help"])
            importtime("`-m trajkit validate` (one file)", ["-m", "trajkit", "validate", file])
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
