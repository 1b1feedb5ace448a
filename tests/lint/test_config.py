"""Lint settings: every key and value of `[tool.trajkit.lint]`, `lint()` and the CLI checked.

A setting lint cannot use is refused with one line naming the key and what is allowed, never
accepted and then silently ignored (an `action-space` of an unknown type made TK106 check
nothing).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trajkit.lint import lint, read_config
from trajkit.lint.config import checked_action_space

_SPACE = "action-space"


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            {"type": "Weird"},
            "type must be one of Box, Discrete, MultiBinary, MultiDiscrete, got 'Weird'",
        ),
        ({"n": 3}, "must be a table with a type"),
        ({"type": 3}, "must be a table with a type"),
        ({"type": "Discrete"}, "Discrete needs n"),
        ({"type": "Discrete", "n": 0}, "Discrete needs an integer n >= 1 and an integer start"),
        ({"type": "Discrete", "n": 2.5}, "Discrete needs an integer n >= 1"),
        ({"type": "Discrete", "n": True}, "Discrete needs an integer n >= 1"),
        ({"type": "Discrete", "n": 2, "start": "a"}, "an integer start"),
        (
            {"type": "Discrete", "n": 2, "low": 0},
            "unknown key(s) low for Discrete; known: type, n, start",
        ),
        ({"type": "MultiDiscrete", "nvec": [3, 0]}, "MultiDiscrete nvec must be integers >= 1"),
        (
            {"type": "MultiDiscrete", "nvec": [[3], [3, 3]]},
            "MultiDiscrete nvec must be integers >= 1",
        ),
        (
            {"type": "MultiDiscrete", "nvec": [3], "start": [0.5]},
            "MultiDiscrete start must be integers",
        ),
        ({"type": "MultiBinary", "n": -1}, "MultiBinary n must be an integer >= 1"),
        ({"type": "Box", "low": "x"}, "Box low must be a number, null (unbounded) or nested lists"),
        ({"type": "Box", "high": [1.0, "a"]}, "Box high must be a number"),
        ({"type": "Box", "low": float("nan")}, "Box low must be a number"),
        (
            {"type": "Box", "low": 1.0, "high": -1.0},
            "Box low must be <= high, got low=1.0, high=-1.0",
        ),
        ({"type": "Box", "shape": [2, -1]}, "Box shape must be a list of integers >= 0"),
        ({"type": "Box", "shape": 2}, "Box shape must be a list of integers >= 0"),
        (
            {"type": "Box", "low": [0, 0, 0], "shape": [2]},
            "Box low has shape (3,), which does not fit shape (2,)",
        ),
        ({"type": "Box", "dtype": "object"}, "Box dtype must name a NumPy number type"),
        ({"type": "Box", "dtype": "nope"}, "Box dtype must name a NumPy number type"),
    ],
)
def test_bad_action_spaces_are_refused(space: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^action_space") as info:
        lint([], action_space=space, jobs=1)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "space",
    [
        {"type": "Discrete", "n": 4},
        {"type": "Discrete", "n": 4, "start": -1},
        {"type": "MultiDiscrete", "nvec": [[2, 3], [4, 5]], "start": 0},
        {"type": "MultiBinary", "n": [2, 2]},
        {"type": "Box", "low": -2.0, "high": 2.0, "shape": [1], "dtype": "float32"},
        {"type": "Box", "low": [None, 0], "high": None, "shape": [3, 2]},
        {"type": "Box", "low": [[-1.0], [0.0]], "shape": [2, 4]},
    ],
)
def test_good_action_spaces_pass_unchanged(space: dict[str, Any]) -> None:
    """The recording's own form (`describe_space`, bounds broadcast as NumPy does) passes."""
    assert checked_action_space(space, _SPACE) == space


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('action-space = {type = "Weird"}', "action-space: type must be one of Box, Discrete"),
        ('action-space = {type = "Discrete", n = -4}', "action-space: Discrete needs an integer"),
        ("select = [1]", "select: codes must be strings, got 1"),
        ('ignore = "TK1"', "ignore must be a list of codes"),
        ("max-episode-steps = true", "max-episode-steps must be an integer >= 1, got True"),
        ("max-episode-steps = 1.5", "max-episode-steps must be an integer >= 1, got 1.5"),
        ("reward-scale-ratio = nan", "reward-scale-ratio must be a finite number > 1, got nan"),
        ('reward-scale-ratio = "10"', "reward-scale-ratio must be a finite number > 1"),
        ("replay-trust-env-args = true", "unknown key(s) replay-trust-env-args; known: select"),
    ],
)
def test_settings_refusals_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.trajkit.lint]\n{body}\n")
    with pytest.raises(ValueError, match=r"pyproject.toml: \[tool.trajkit.lint\]: ") as info:
        read_config(path)
    assert message in str(info.value)


def test_a_lint_entry_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.trajkit]\nlint = 3\n")
    with pytest.raises(
        ValueError, match=r"pyproject.toml: tool.trajkit.lint must be a table, got 3"
    ):
        read_config(path)


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trajkit", "lint", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("toml", "argv", "message"),
    [
        ('action-space = {type = "Weird"}', [], "action-space: type must be one of Box"),
        ("[tool.trajkit]\nlint = 3", [], "tool.trajkit.lint must be a table, got 3"),
        ("max-episode-steps = 0", [], "max-episode-steps must be an integer >= 1, got 0"),
        ("select = [", [], "not valid TOML"),
        ("", ["--select", ","], "--select needs at least one code or prefix, got ','"),
        ("", ["--ignore", ""], "--ignore needs at least one code or prefix, got ''"),
        ("", ["--select", "XX"], "--select: XX matches no check"),
        ("", ["--max-episode-steps", "0"], "--max-episode-steps must be >= 1, got 0"),
    ],
    ids=["space", "not-a-table", "limit", "toml", "select", "ignore", "code", "cli-limit"],
)
def test_a_bad_setting_exits_2_with_one_line(
    tmp_path: Path, toml: str, argv: list[str], message: str
) -> None:
    header = "" if toml.startswith("[tool") else "[tool.trajkit.lint]\n"
    (tmp_path / "pyproject.toml").write_text(f"{header}{toml}\n")
    done = _cli(tmp_path, *argv, str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("trajkit lint: error: ")
    assert message in line
