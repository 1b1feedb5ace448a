"""`make mutate`'s summary: the kill rate per package and per module, from mutmut's results.

Run after `mutmut run` (from the repository root): reads `mutants/**/*.py.meta` and prints two
Markdown tables, one row per package of `trajkit` in layer order (`_base`, `_core`, `_models`,
`_io`, each integration: `arrow`, `gym`, ...; a single module such as `plot` is its own; `_cli`
with `cli.py` and `__main__.py`; `trajkit` for `__init__.py`) and one per module, with the
mutants killed (a test failed, or it timed out), those not killed (survived, or no test
reached them), how many of those are listed as equivalent in `tests/mutation_equivalents.md`
(by name, in backquotes: `trajkit.<module>.x_<function>__mutmut_<n>`), and those not run yet
(a run restricted to some names, or interrupted). The kill rate is killed / (run -
equivalent), the rate among the mutants a test could kill; "raw" is killed / run. Below the
tables: the survivors that are not listed (the gaps to close with a test), and the listed
names that are stale (killed now, or no longer a mutant of their module).
`mutmut show NAME` shows one mutant.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MUTANTS = Path("mutants")
UNDER_MUTMUT = "MUTANT_UNDER_TEST" in os.environ
"""True in a test that mutmut runs: its trampolines add frames between a caller and a warning,
so the tests of a warning's frame check it only outside mutmut."""
EQUIVALENTS = Path(__file__).with_name("mutation_equivalents.md")
# mutmut's names: the module, then `x_<function>` or `xǁ<Class>ǁ<method>`, then the number.
NAME = re.compile(r"`(trajkit\.[\w.ǁ]+__mutmut_\d+)`")
KILLED = ("killed", "timeout", "segfault", "suspicious", "caught by type check")
NOT_KILLED = ("survived", "no tests")
COLUMNS = ("mutants", "killed", "survived", "no tests", "equivalent", "not run", "kill rate", "raw")


@dataclass
class Tally:
    """How the mutants of a module (or of several) ended."""

    found: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)  # not killed and not listed
    stale: list[str] = field(default_factory=list)  # listed, but killed or not a mutant

    def __iadd__(self, other: Tally) -> Tally:
        self.found += other.found
        self.survivors += other.survivors
        self.stale += other.stale
        return self

    def row(self, name: str) -> str:
        """One Markdown table row."""
        f = self.found
        run = f["killed"] + f["survived"] + f["no tests"]
        could = run - f["equivalent"]
        rate = f"{100 * f['killed'] / could:.1f} %" if could else "-"
        raw = f"{100 * f['killed'] / run:.1f} %" if run else "-"
        counts = (
            run + f["not run"],
            f["killed"],
            f["survived"],
            f["no tests"],
            f["equivalent"],
            f["not run"],
        )
        return f"| {name} | " + " | ".join(str(c) for c in counts) + f" | {rate} | {raw} |"


def equivalents(path: Path = EQUIVALENTS) -> set[str]:
    """The mutant names listed as equivalent (each in backquotes, anywhere in the file)."""
    return set(NAME.findall(path.read_text(encoding="utf-8"))) if path.is_file() else set()


def module_name(meta: Path, root: Path = MUTANTS) -> str:
    """`_models/rules.py` for `mutants/src/trajkit/_models/rules.py.meta`."""
    return meta.relative_to(root / "src" / "trajkit").as_posix().removesuffix(".meta")


# Modules at the top of `trajkit` that belong to a layer: the command line's entry points.
LAYER_OF = {"cli.py": "_cli", "__main__.py": "_cli", "__init__.py": "trajkit"}
# The packages in layer order (tests/test_layers.py); the integrations sort between.
FIRST, LAST = ("_base", "_core", "_models", "_io"), ("_cli", "trajkit")


def package_name(module: str) -> str:
    """`_models` for `_models/rules.py`; `plot` for `plot.py`; `_cli` for `cli.py`."""
    head = module.split("/")[0]
    return LAYER_OF.get(head, head.removesuffix(".py"))


def layer_order(package: str) -> tuple[int, str]:
    """Sorts `_base`, `_core`, `_models`, `_io`, the integrations by name, `_cli`, `trajkit`."""
    if package in FIRST:
        return (FIRST.index(package), "")
    if package in LAST:
        return (len(FIRST) + 1 + LAST.index(package), "")
    return (len(FIRST), package)


def tally(meta: Path, listed: set[str]) -> Tally:
    """How the mutants of one module ended (timeouts and crashes count as killed)."""
    from mutmut.stats import status_by_exit_code  # a dev tool: only where it is installed

    exit_codes = json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
    result = Tally()
    for name, code in exit_codes.items():
        status = status_by_exit_code[code]
        if status in KILLED:
            result.found["killed"] += 1
            if name in listed:
                result.stale.append(name)
        elif status in NOT_KILLED:
            result.found[status] += 1
            if name in listed:
                result.found["equivalent"] += 1
            else:
                result.survivors.append(name)
        else:
            result.found["not run"] += 1
    dotted = "trajkit." + module_name(meta).removesuffix(".py").replace("/", ".")
    dotted = dotted.removesuffix(".__init__")
    mine = (n for n in listed if n.partition("__mutmut_")[0].rpartition(".")[0] == dotted)
    result.stale += sorted(n for n in mine if n not in exit_codes)
    return result


def report(root: Path = MUTANTS, listed: set[str] | None = None) -> str:
    """The Markdown tables (per package, per module), then unlisted survivors and stale names."""
    listed = equivalents() if listed is None else listed
    modules: dict[str, Tally] = {}
    for meta in sorted(root.rglob("*.py.meta")):
        result = tally(meta, listed)
        if sum(result.found.values()):
            modules[module_name(meta, root)] = result
    packages: dict[str, Tally] = {}
    for module, result in modules.items():
        packages.setdefault(package_name(module), Tally()).__iadd__(result)
    total = Tally()
    for result in packages.values():
        total += result
    head = " | ".join(COLUMNS) + " |"
    lines = ["| package | " + head, "|---" * (len(COLUMNS) + 1) + "|"]
    order = sorted(packages, key=layer_order)
    lines += [packages[name].row(f"`{name}`") for name in order]
    lines += [total.row("**all**"), "", "| module | " + head, "|---" * (len(COLUMNS) + 1) + "|"]
    lines += [result.row(f"`{name}`") for name, result in modules.items()]
    if total.survivors:
        lines += ["", f"Survivors not listed in {EQUIVALENTS.name} ({len(total.survivors)}):"]
        lines += [f"- {name}" for name in total.survivors]
    if total.stale:
        lines += ["", f"Listed in {EQUIVALENTS.name} but killed or gone ({len(total.stale)}):"]
        lines += [f"- {name}" for name in total.stale]
    return "\n".join(lines)


if __name__ == "__main__":
    if not MUTANTS.is_dir():
        sys.exit("no mutants/ folder: run `make mutate` (or `mutmut run`) first")
    print(report())
