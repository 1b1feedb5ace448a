"""Typing tests: snippets a strict user writes must type-check; misuse must be rejected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

CASES = Path(__file__).parent / "typing_cases"
EXPECT = re.compile(r"#\s*expect-error:\s*([\w-]+)")
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[\w-]+)\]$")


def _expected(path: Path) -> set[tuple[str, int, str]]:
    found = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            found.add((path.name, number, match.group(1)))
    return found


def test_snippets_pass_and_misuse_fails() -> None:
    files = sorted(CASES.glob("pass_*.py")) + sorted(CASES.glob("fail_*.py"))
    stdout, stderr, _ = mypy_api.run(["--strict", "--no-error-summary", *map(str, files)])
    actual = set()
    for line in stdout.splitlines():
        match = ERROR.match(line)
        if match:
            actual.add((Path(match["path"]).name, int(match["line"]), match["code"]))
    expected = set().union(*(_expected(f) for f in files))
    assert actual == expected, stdout + stderr
    assert any(name.startswith("fail_") for name, _, _ in expected)
