"""`[tool.trajkit.lint]` and the action space, in process: every edge of what is accepted.

How TOML is read where the standard library has no `tomllib` (Python 3.10: `tomli`, else a
warning), under a locale that is not UTF-8, from tables that are not where lint looks; and
each limit of an action-space description just inside and just outside.
"""

from __future__ import annotations

import inspect
import locale
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib

from tests.mutation_report import UNDER_MUTMUT
from trajkit.lint import LintConfig, find_config, read_config
from trajkit.lint.config import checked_action_space

TABLE = '[tool.trajkit.lint]\nignore = ["TK202"]\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder whose `pyproject.toml` ignores TK202."""
    (tmp_path / "pyproject.toml").write_text(TABLE, encoding="utf-8")
    return tmp_path


def test_tomli_is_used_where_tomllib_is_missing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tomllib", None)  # Python 3.10: importing it fails
    monkeypatch.setitem(sys.modules, "tomli", tomllib)  # tomli, installed
    assert find_config(project) == project.resolve() / "pyproject.toml"
    assert read_config(project / "pyproject.toml").ignore == ("TK202",)


@pytest.fixture
def no_toml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.10 without tomli."""
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)


def _words(project: Path) -> str:
    path = project / "pyproject.toml"
    return f"{path}: not read: reading TOML on Python 3.10 needs tomli (pip install tomli)"


@pytest.mark.usefixtures("no_toml")
def test_without_a_toml_reader_the_table_is_not_read_with_a_warning(project: Path) -> None:
    with pytest.warns(UserWarning, match=f"^{re.escape(_words(project))}$"):
        assert find_config(project) is None
    path = project / "pyproject.toml"
    with pytest.warns(UserWarning, match=f"^{re.escape(_words(project))}$"):
        assert read_config(path) == LintConfig(path=path)
    if not UNDER_MUTMUT:  # its trampoline's frames lie between the caller and the warning
        line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
        with pytest.warns(UserWarning, match="not read") as caught:
            read_config(path)
        assert (caught[0].filename, caught[0].lineno) == (__file__, line)


@pytest.mark.usefixtures("no_toml")
def test_the_warning_points_at_the_caller_of_read_config(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(warnings, "warn", lambda *args, **kwargs: calls.append((args, kwargs)))
    read_config(project / "pyproject.toml")
    find_config(project)
    assert calls == [((_words(project),), {"stacklevel": 3})] * 2


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """A locale whose encoding is ASCII (`C`), as on a bare server; restored after."""
    if sys.flags.utf8_mode:
        pytest.skip("in UTF-8 mode files are read as UTF-8 whatever the locale")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


@pytest.mark.usefixtures("ascii_locale")
def test_pyproject_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(f"# by José\n{TABLE}".encode())
    assert find_config(tmp_path) == path.resolve()
    assert read_config(path).ignore == ("TK202",)


@pytest.mark.parametrize(
    "body",
    [
        'tool = "trajkit"\n',  # `tool` is not a table
        '[tool]\ntrajkit = "lint"\n',  # `tool.trajkit` is not a table
        "[tool.trajkit]\nother = 1\n",  # no `lint` in it
    ],
)
def test_a_pyproject_without_the_table_is_passed_over(tmp_path: Path, body: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    assert find_config(tmp_path) is None
    assert read_config(path) == LintConfig(path=path)


def test_the_smallest_limits_in_pyproject_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        "[tool.trajkit.lint]\nmax-episode-steps = 1\nreward-scale-ratio = 1.5\n", encoding="utf-8"
    )
    config = read_config(path)
    assert (config.max_episode_steps, config.reward_scale_ratio) == (1, 1.5)


@pytest.mark.parametrize(
    "space",
    [
        {"type": "MultiBinary", "n": 1},
        {"type": "MultiBinary", "n": [1, 2]},
        {"type": "MultiDiscrete", "nvec": [1]},  # no start: from 0
        {"type": "MultiDiscrete", "nvec": [[1, 2]], "start": [[0, -1]]},
        {"type": "Discrete", "n": 1},
        {"type": "Box", "shape": [0], "low": [], "high": []},  # empty
        {"type": "Box", "shape": [2, 0]},
        {"type": "Box", "low": 1.0, "high": 1.0},  # one point
        {"type": "Box", "shape": [2, 3], "low": [[0.0], [1.0]]},  # broadcasts
        {"type": "Box", "shape": [2], "dtype": "int8"},
    ],
)
def test_action_spaces_at_their_limits_are_accepted(space: dict[str, Any]) -> None:
    assert checked_action_space(space, "action-space") == space


@pytest.mark.parametrize(
    ("space", "problem"),
    [
        (
            {"type": "MultiBinary", "n": 0},
            "MultiBinary n must be an integer >= 1 or lists of them, got 0",
        ),
        (
            {"type": "MultiDiscrete", "nvec": [0]},
            "MultiDiscrete nvec must be integers >= 1 (nested lists), got [0]",
        ),
        ({"type": "Box", "shape": [-1]}, "Box shape must be a list of integers >= 0, got [-1]"),
        (
            {"type": "Box", "low": 1.5, "high": 1.0},
            "Box low must be <= high, got low=1.5, high=1.0",
        ),
        (
            {"type": "Box", "dtype": 5},
            "Box dtype must name a NumPy number type such as 'float32', got 5",
        ),
        (
            {"type": "Box", "shape": [2], "low": [[0.0, 1.0]]},  # more dims than the shape
            "Box low has shape (1, 2), which does not fit shape (2,)",
        ),
        (
            {"type": "Box", "shape": [2, 3], "low": [[0.0], [1.0], [2.0]]},  # 3 rows, not 2
            "Box low has shape (3, 1), which does not fit shape (2, 3)",
        ),
        (
            {"type": "Box", "shape": [3, 2], "high": [[0.0, 1.0, 2.0]]},  # 3 columns, not 2
            "Box high has shape (1, 3), which does not fit shape (3, 2)",
        ),
    ],
)
def test_action_spaces_just_outside_are_refused(space: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(f'action-space: {problem}')}$"):
        checked_action_space(space, "action-space")


def test_every_unknown_key_is_named() -> None:
    words = "action-space: unknown key(s) a, b for Discrete; known: type, n, start"
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        checked_action_space({"type": "Discrete", "n": 2, "b": 1, "a": 2}, "action-space")
