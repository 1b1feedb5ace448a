"""`trajkit lint` on a large generated corpus: false alarms and detections (what `make bench` adds).

The measurement of `tests/lint/measure.py` (the generators of `tests/lint/worlds.py` and
`tests/lint/plant.py`) at the published generator seed, with more sets than `make test`
affords: `CLEAN` clean sets and `PER_BUG` of each bug class. It prints the headline, the
table per bug class and the table per check that docs/lint.md shows at the test's size, and
the seconds it took. Not a timing benchmark: its numbers are rates, the same on any machine.
Then TK201 on `IMAGES` generated image datasets (`tests/lint/images.py`: frames whose border,
background and HUD never change), clean and with a channel frozen.

    python benchmarks/bench_lint_corpus.py [CLEAN PER_BUG [IMAGES]]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

from tests.lint.images import rates
from tests.lint.measure import PUBLISHED_SEED, bug_table, measure, summary, table

CLEAN = 1000
PER_BUG = 40
IMAGES = 100


def main(argv: list[str]) -> int:
    sizes = [int(x) for x in argv]
    clean, per_bug, images = sizes + [CLEAN, PER_BUG, IMAGES][len(sizes) :]
    start = time.perf_counter()
    if clean or per_bug:
        result = measure(PUBLISHED_SEED, clean=clean, per_bug=per_bug)
        print(summary(result), "", bug_table(result), "", table(result), sep="\n")
    sets, false, found = rates(range(PUBLISHED_SEED, PUBLISHED_SEED + images))
    print(
        f"\nTK201 on {sets} image sets: {false} clean sets reported, {found} frozen channels found"
    )
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
