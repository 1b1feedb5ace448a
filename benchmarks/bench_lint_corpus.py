"""`trajkit lint` on a large generated corpus: false alarms and detections (what `make bench` adds).

The measurement of `tests/lint/measure.py` (the generators of `tests/lint/worlds.py` and
`tests/lint/plant.py`) at the published generator seed, with more sets than `make test`
affords: `CLEAN` clean sets and `PER_BUG` of each bug class. It prints the headline, the
table per bug class and the table per check that docs/lint.md shows at the test's size, and
the seconds it took. Not a timing benchmark: its numbers are rates, the same on any machine.

    python benchmarks/bench_lint_corpus.py [CLEAN PER_BUG]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

from tests.lint.measure import PUBLISHED_SEED, bug_table, measure, summary, table

CLEAN = 1000
PER_BUG = 40


def main(argv: list[str]) -> int:
    clean, per_bug = (int(x) for x in argv) if argv else (CLEAN, PER_BUG)
    start = time.perf_counter()
    result = measure(PUBLISHED_SEED, clean=clean, per_bug=per_bug)
    print(summary(result), "", bug_table(result), "", table(result), sep="\n")
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
