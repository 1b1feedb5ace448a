"""Run every `benchmarks/bench_*.py` script in turn (what `make bench` does).

Each script is standalone, measures trajkit against a baseline in the same process, and prints a
Markdown table of ratios. Pass names to run a subset: `python benchmarks/run.py gae files`.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    scripts = sorted(here.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in argv]
    for script in scripts:
        print(f"\n## {script.stem.removeprefix('bench_')}\n", flush=True)
        runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
