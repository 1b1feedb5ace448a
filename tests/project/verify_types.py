"""pyright's type-completeness check of trajkit (`make typecheck`): what Pylance users see.

Runs `pyright --verifytypes trajkit --ignoreexternal` and fails on every diagnostic but one
known, external one: `trajkit.sb3.TrajkitCallback` (defined in `trajkit.sb3._callback`)
subclasses stable-baselines3's `BaseCallback`, whose own types pyright rates incomplete
("Type of base class unknown", "Type of metaclass unknown"), which `--ignoreexternal` does
not cover for a base class. Any other diagnostic, on `TrajkitCallback`'s own members too,
fails the check.

Run as `python tests/project/verify_types.py`; PYTHONPATH must find the source (the Makefile sets
it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXTERNAL = {
    ("trajkit.sb3._callback.TrajkitCallback", "Type of base class unknown"),
    ("trajkit.sb3._callback.TrajkitCallback", "Type of metaclass unknown"),
}
"""Diagnostics that belong to another package's types: (symbol, message)."""


def main() -> int:
    pyright = Path(sys.executable).with_name("pyright")
    command = [str(pyright), "--pythonpath", sys.executable, "--verifytypes", "trajkit"]
    done = subprocess.run(
        [*command, "--ignoreexternal", "--outputjson"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(done.stdout)["typeCompleteness"]
    except (ValueError, KeyError):
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        return 1
    found = [
        (symbol["name"], diagnostic["message"])
        for symbol in report["symbols"]
        for diagnostic in symbol["diagnostics"]
        if diagnostic["severity"] == "error"
    ]
    unexpected = [each for each in found if each not in EXTERNAL]
    for name, message in unexpected:
        print(f"{name}: {message}", file=sys.stderr)
    score = report["completenessScore"]
    print(f"type completeness {score:.1%}; {len(found) - len(unexpected)} known external gaps")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
