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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajkit.lint.registry import check_selectors

__all__ = [
    "DEFAULT_REWARD_SCALE_RATIO",
    "LintConfig",
    "LintOptions",
    "checked_action_space",
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
        trust_env_args: Replay passes a recording's env arguments as they are, not only
            those trajkit's recorder writes (see `trajkit.lint.replay`).

    Examples:
        >>> LintOptions(frozenset({"TK101"})).runs("TK1")
        True
    """

    codes: frozenset[str]
    max_episode_steps: int | None = None
    action_space: Mapping[str, Any] | None = None
    reward_scale_ratio: float = DEFAULT_REWARD_SCALE_RATIO
    trust_env_args: bool = False

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
    tool = data.get("tool", {})
    trajkit = tool.get("trajkit", {}) if isinstance(tool, dict) else {}
    table = trajkit.get("lint") if isinstance(trajkit, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ValueError(f"{path}: tool.trajkit.lint must be a table, got {table!r}")
    return table


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
    if space is not None:
        space = checked_action_space(space, f"{where}: action-space")
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


_SPACE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # type: (required, optional)
    "Box": ((), ("low", "high", "shape", "dtype")),
    "Discrete": (("n",), ("start",)),
    "MultiBinary": (("n",), ()),
    "MultiDiscrete": (("nvec",), ("start",)),
}


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return _integer(value) and value >= 1  # type: ignore[operator]


def _number_or_none(value: object) -> bool:
    return value is None or (
        isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    )


def _rectangular(value: object, leaf: Callable[[object], bool]) -> tuple[int, ...] | None:
    """The shape of `value`, a leaf or a nested list of equal-length lists of leaves; else None."""
    if not isinstance(value, list):
        return () if leaf(value) else None
    shapes = {_rectangular(item, leaf) for item in value}
    if len(shapes) > 1 or None in shapes:
        return None
    inner = shapes.pop() if shapes else ()
    return None if inner is None else (len(value), *inner)


def _space_problem(space: Mapping[str, Any]) -> str | None:
    """What is wrong with an action-space description, or `None` (its keys are known)."""
    kind = space["type"]
    if kind == "Discrete":
        n, start = space["n"], space.get("start", 0)
        if not _integer(n) or n < 1 or not _integer(start):
            return f"Discrete needs an integer n >= 1 and an integer start, got {dict(space)!r}"
    elif kind == "MultiBinary":
        if _rectangular(space["n"], _count) is None:
            return f"MultiBinary n must be an integer >= 1 or lists of them, got {space['n']!r}"
    elif kind == "MultiDiscrete":
        if _rectangular(space["nvec"], _count) is None:
            return f"MultiDiscrete nvec must be integers >= 1 (nested lists), got {space['nvec']!r}"
        if _rectangular(space.get("start", 0), _integer) is None:
            return f"MultiDiscrete start must be integers, got {space['start']!r}"
    else:
        return _box_problem(space)
    return None


def _box_problem(space: Mapping[str, Any]) -> str | None:
    shape = space.get("shape")
    if shape is not None and (
        not isinstance(shape, list) or not all(_integer(d) and d >= 0 for d in shape)
    ):
        return f"Box shape must be a list of integers >= 0, got {shape!r}"
    for key in ("low", "high"):
        value = space.get(key)
        dims = _rectangular(value, _number_or_none)
        if dims is None:
            return f"Box {key} must be a number, null (unbounded) or nested lists, got {value!r}"
        if shape is not None and dims and _broadcasts(dims, tuple(shape)) is False:
            return f"Box {key} has shape {dims}, which does not fit shape {tuple(shape)}"
    low, high = space.get("low"), space.get("high")
    if isinstance(low, int | float) and isinstance(high, int | float) and low > high:
        return f"Box low must be <= high, got low={low!r}, high={high!r}"
    dtype = space.get("dtype")
    if dtype is not None and not _numeric_dtype(dtype):
        return f"Box dtype must name a NumPy number type such as 'float32', got {dtype!r}"
    return None


def _numeric_dtype(name: object) -> bool:
    if not isinstance(name, str):
        return False
    try:
        return np.dtype(name).kind in "fiu"
    except TypeError:
        return False


def _broadcasts(dims: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether an array of `dims` broadcasts to `shape` (NumPy's rule, trailing dims)."""
    if len(dims) > len(shape):
        return False
    return all(d in (1, s) for d, s in zip(dims[::-1], shape[::-1], strict=False))


def checked_action_space(value: object, name: str) -> dict[str, Any]:
    """`value` as an action-space description that TK106 and TK107 can read, checked.

    The description is the recording's JSON form (`trajkit.gym.describe_space`): a table
    with a `type` of `Box` (`low`, `high`: a number, `null` for unbounded, or nested lists;
    `shape`; `dtype`), `Discrete` (`n`, `start`), `MultiBinary` (`n`) or `MultiDiscrete`
    (`nvec`, `start`), and no other keys.

    Raises:
        ValueError: Naming `name`, what is wrong and what is allowed.

    Examples:
        >>> checked_action_space({"type": "Discrete", "n": 4}, "action-space")
        {'type': 'Discrete', 'n': 4}
        >>> checked_action_space({"type": "Weird"}, "action-space")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: action-space: type must be one of Box, Discrete, MultiBinary, ...
    """
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise ValueError(f"{name} must be a table with a type, got {value!r}")
    kind = value["type"]
    if kind not in _SPACE_KEYS:
        raise ValueError(f"{name}: type must be one of {', '.join(_SPACE_KEYS)}, got {kind!r}")
    required, optional = _SPACE_KEYS[kind]
    missing = [key for key in required if key not in value]
    if missing:
        raise ValueError(f"{name}: {kind} needs {', '.join(missing)}, got {dict(value)!r}")
    unknown = sorted(set(value) - {"type", *required, *optional})
    if unknown:
        allowed = ", ".join(("type", *required, *optional))
        raise ValueError(
            f"{name}: unknown key(s) {', '.join(unknown)} for {kind}; known: {allowed}"
        )
    problem = _space_problem(value)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")
    return dict(value)
