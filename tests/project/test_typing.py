"""Typing tests: snippets a strict user writes must type-check; misuse must be rejected."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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


PYRIGHT_ERROR = re.compile(r"^\s*(?P<path>/\S+\.py):(?P<line>\d+):\d+ - error: ")


def test_pyright_agrees() -> None:
    """pyright (what Pylance users run) passes the same snippets and rejects the same lines."""
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    if pyright is None:
        pytest.skip("pyright is not installed (it comes with the dev extra)")
    files = sorted(CASES.glob("pass_*.py")) + sorted(CASES.glob("fail_*.py"))
    src = Path(__file__).parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    result = subprocess.run(
        [pyright, *map(str, files)], capture_output=True, text=True, env=env, check=False
    )
    actual = {
        (Path(m["path"]).name, int(m["line"]))
        for m in map(PYRIGHT_ERROR.match, result.stdout.splitlines())
        if m
    }
    expected = {(name, line) for f in files for name, line, _ in _expected(f)}
    assert actual == expected, result.stdout + result.stderr
