"""`make mutate`'s summary: the kill rate per mutated module, from mutmut's results.

Run after `mutmut run` (from the repository root): reads `mutants/**/*.py.meta` and prints a
Markdown table with, per module, the mutants killed (a test failed, or it timed out), those
that survived, those no test reached, and those not run yet (a run restricted to some names,
or interrupted). The kill rate is killed / (killed + survived + no tests): the mutants that
were run. Survivors are listed by `mutmut results`; `mutmut show NAME` shows one.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

MUTANTS = Path("mutants")
COLUMNS = ("killed", "survived", "no tests", "not checked")


def counts(meta: Path) -> Counter[str]:
    """How many mutants of one module ended how (timeouts and crashes count as killed)."""
    from mutmut.stats import status_by_exit_code  # a dev tool: only where it is installed

    exit_codes = json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
    found: Counter[str] = Counter()
    for code in exit_codes.values():
        status = status_by_exit_code[code]
        found["killed" if status in ("timeout", "segfault", "suspicious") else status] += 1
    return found


def report(root: Path = MUTANTS) -> str:
    """The Markdown table, one row per module with mutants and a total."""
    rows = ["| module | " + " | ".join(COLUMNS) + " | kill rate |", "|---" * 6 + "|"]
    total: Counter[str] = Counter()
    for meta in sorted(root.rglob("*.py.meta")):
        found = counts(meta)
        if not found:
            continue
        total += found
        rows.append(_row(str(meta.relative_to(root / "src")).removesuffix(".meta"), found))
    rows.append(_row("**all**", total))
    return "\n".join(rows)


def _row(name: str, found: Counter[str]) -> str:
    ran = found["killed"] + found["survived"] + found["no tests"]
    rate = f"{100 * found['killed'] / ran:.0f} %" if ran else "-"
    return f"| {name} | " + " | ".join(str(found[c]) for c in COLUMNS) + f" | {rate} |"


if __name__ == "__main__":
    if not MUTANTS.is_dir():
        sys.exit("no mutants/ folder: run `make mutate` (or `mutmut run`) first")
    print(report())
