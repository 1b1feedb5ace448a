"""trajkit's source raises exceptions, never `assert`: asserts vanish under `python -O`."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "trajkit"


def test_the_source_has_no_assert_statement() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert found == [], "use an exception (a check, or a narrowing the type allows)"
