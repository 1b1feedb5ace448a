"""What `trajkit lint` runs with: the options, and `[tool.trajkit.lint]` in `pyproject.toml`.

The table is found by walking up from the current folder to the first `pyproject.toml` that
has one, as ruff finds its settings. Its keys (kebab-case, like ruff's):

- `select`, `ignore`: lists of codes or prefixes (`["TK1", "TK203"]`);
- `max-episode-steps`: the env's time limit, for TK101 and TK105, where the recording does
  not name one;
- `reward-scale-ratio`: TK202's factor (default 10);
- `action-space`: the action space, as the recording describes it (`{type = "Discrete",
  n = 4}`, `{type = "Box", low = -2.0, high = 2.0, shape = [1]}`), for TK106 and TK107.

TOML is read with the standard library's `tomllib` (Python 3.11+), else with `tomli` where
it is installed; on Python 3.10 without `tomli` the table is not read, with a warning.
"""

from __future__ import annotations

import importlib
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajkit.lint.registry import check_selectors

__all__ = [
    "DEFAULT_REWARD_SCALE_RATIO",
    "LintConfig",
    "LintOptions",
    "find_config",
    "read_config",
]

DEFAULT_REWARD_SCALE_RATIO = 10.0
"""TK202 flags a file whose reward scale is this many times above or below the median."""

_KEYS = ("select", "ignore", "max-episode-steps", "reward-scale-ratio", "action-space")


@dataclass(frozen=True)
class LintOptions:
    """The settings every check reads (picklable: they travel to the worker processes).

    Attributes:
        codes: The codes of the checks that run.
        max_episode_steps: The env's time limit, where the recording names none.
        action_space: The action space as a JSON description, where the recording has none.
        reward_scale_ratio: TK202's factor.

    Examples:
        >>> LintOptions(frozenset({"TK101"})).runs("TK1")
        True
    """

    codes: frozenset[str]
    max_episode_steps: int | None = None
    action_space: Mapping[str, Any] | None = None
    reward_scale_ratio: float = DEFAULT_REWARD_SCALE_RATIO

    def runs(self, prefix: str) -> bool:
        """Whether any check whose code starts with `prefix` runs.

        Examples:
            >>> LintOptions(frozenset({"TK203"})).runs("TK3")
            False
        """
        return any(code.startswith(prefix) for code in self.codes)


@dataclass(frozen=True)
class LintConfig:
    """`[tool.trajkit.lint]` of a `pyproject.toml`, checked (unset keys are `None`).

    Examples:
        >>> LintConfig().select is None
        True
    """

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    max_episode_steps: int | None = None
    reward_scale_ratio: float | None = None
    action_space: Mapping[str, Any] | None = None
    path: Path | None = field(default=None, compare=False)


def _toml() -> Any | None:
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    r"""The closest `pyproject.toml` with a `[tool.trajkit.lint]` table, from `start` upwards.

    Args:
        start: The folder to start from (default: the current folder).

    Returns:
        Its path, or `None` if no such file is found up to the root (or TOML cannot be read).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "pyproject.toml").write_text("[tool.trajkit.lint]\n")
        ...     (Path(tmp) / "sub").mkdir()
        ...     find_config(Path(tmp) / "sub") == Path(tmp).resolve() / "pyproject.toml"
        True
    """
    folder = Path(os.getcwd() if start is None else start).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "trajkit" not in text:  # cheap: most projects' files say nothing of trajkit
            continue
        if _table(path, text) is not None:
            return path
    return None


def _table(path: Path, text: str) -> Mapping[str, Any] | None:
    toml = _toml()
    if toml is None:
        warnings.warn(
            f"{path}: not read: reading TOML on Python 3.10 needs tomli (pip install tomli)",
            stacklevel=3,
        )
        return None
    try:
        data = toml.loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("trajkit", {}).get("lint")
    return table if isinstance(table, dict) else None


def read_config(path: str | os.PathLike[str]) -> LintConfig:
    r"""Read and check `[tool.trajkit.lint]` of the `pyproject.toml` at `path`.

    Raises:
        ValueError: Naming the file and the key, for an unknown key or a wrong value.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "pyproject.toml"
        ...     _ = path.write_text('[tool.trajkit.lint]\nignore = ["TK202"]\n')
        ...     read_config(path).ignore
        ('TK202',)
    """
    path = Path(path)
    table = _table(path, path.read_text(encoding="utf-8"))
    if table is None:
        return LintConfig(path=path)
    where = f"{path}: [tool.trajkit.lint]"
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_KEYS)}")

    def codes(key: str) -> tuple[str, ...] | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise ValueError(f"{where}: {key} must be a list of codes, got {value!r}")
        return check_selectors(value, f"{where}: {key}")

    limit = table.get("max-episode-steps")
    if limit is not None:
        limit = checked_limit(limit, f"{where}: max-episode-steps")
    ratio = table.get("reward-scale-ratio")
    if ratio is not None:
        ratio = checked_ratio(ratio, f"{where}: reward-scale-ratio")
    space = table.get("action-space")
    if space is not None and not (isinstance(space, dict) and isinstance(space.get("type"), str)):
        raise ValueError(f"{where}: action-space must be a table with a type, got {space!r}")
    return LintConfig(codes("select"), codes("ignore"), limit, ratio, space, path)


def checked_limit(value: object, name: str) -> int:
    """`value` as a time limit: an integer >= 1.

    Examples:
        >>> checked_limit(0, "max_episode_steps")
        Traceback (most recent call last):
        ...
        ValueError: max_episode_steps must be an integer >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def checked_ratio(value: object, name: str) -> float:
    """`value` as TK202's factor: a finite number > 1.

    Examples:
        >>> checked_ratio(1, "reward_scale_ratio")
        Traceback (most recent call last):
        ...
        ValueError: reward_scale_ratio must be a finite number > 1, got 1
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 1
    ):
        raise ValueError(f"{name} must be a finite number > 1, got {value!r}")
    return float(value)
