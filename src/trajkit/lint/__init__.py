"""Semantic checks of recorded rollouts: `trajkit lint` and `trajkit.lint.lint`.

Schema validation (`trajkit validate`) catches malformed arrays; lint catches well-formed
data that is wrong. A check that compares the data with what the recording declares (its
spaces, time limit, autoreset mode, indices) is exact and reports at the first step that
contradicts it; a check that infers a property from the data (a time limit cut, a shift,
a copy) warns only with enough independent evidence (episodes, envs, files), and below its
documented threshold says nothing. With `replay=True`, recordings are re-run in their
environment, and every file is accounted for.
Each finding has a stable code (`TK101`), a one-line message, where it was found (file,
env, step) and a severity. The checks, what each reads, its evidence threshold and its
measured false-alarm and detection rates are on the [Lint](../lint.md) page.

Files are found and linted with the same discovery and parallel engine as `trajkit
validate`, on every core, in one streaming pass; the findings come in file order, the same
with any number of processes.

Examples:
    >>> import os, tempfile
    >>> import numpy as np
    >>> import trajkit
    >>> from trajkit.lint import lint
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=16, num_envs=2, keys=("actions",))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     trajkit.save(r, os.path.join(tmp, "a.npz"))
    ...     trajkit.save(r, os.path.join(tmp, "b.npz"))
    ...     findings = lint(tmp, select=["TK2"], jobs=1)
    >>> [(f.code, os.path.basename(f.path)) for f in findings]
    [('TK203', 'b.npz')]
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.metadata import Recording
from trajkit.lint.config import (
    DEFAULT_REWARD_SCALE_RATIO,
    LintConfig,
    LintOptions,
    checked_action_space,
    checked_limit,
    checked_ratio,
    find_config,
    read_config,
)
from trajkit.lint.registry import CHECKS, Check, Finding, Severity, selected_codes
from trajkit.lint.run import LintRun

__all__ = [
    "CHECKS",
    "Check",
    "Finding",
    "LintConfig",
    "Recording",
    "Severity",
    "find_config",
    "lint",
    "read_config",
]


def lint(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    max_episode_steps: int | None = None,
    action_space: Mapping[str, Any] | None = None,
    reward_scale_ratio: float = DEFAULT_REWARD_SCALE_RATIO,
    replay: bool = False,
    trust_env_args: bool = False,
    jobs: int | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> list[Finding]:
    """Lint rollout files and folders; return the findings, in file order, then the dataset's.

    `pyproject.toml` is not read here (the command line reads it): pass its settings, e.g.
    from [`read_config`][trajkit.lint.read_config].

    Args:
        paths: Files and folders (folders are searched for `*.npz`), local or fsspec URLs.
        select: Codes or prefixes of the checks to run (default: all).
        ignore: Codes or prefixes not to run.
        max_episode_steps: The env's time limit, for files whose recording names none.
        action_space: The action space as the recording describes it (`{"type": "Discrete",
            "n": 4}`), for files whose recording has none.
        reward_scale_ratio: TK202's factor.
        replay: Also replay recordings in their environment (TK3xx; needs `trajkit[gym]`).
        trust_env_args: Let replay pass a recording's env arguments as they are; by
            default it passes only those trajkit's recorder writes (see the Lint page).
        jobs: Processes, this one included; `None` for every core, 1 to lint in this
            process only.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        The findings.

    Raises:
        ValueError: For a selector that matches no check, or a bad setting.

    Warns:
        RuntimeWarning: For each check that raised (a bug in lint: please report it), with
            the file and the error; that file's findings are left out, the others returned.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1, keys=("actions",))
        >>> r.model_outs.arrays["actions"][2, 0] = 5
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "a.npz")
        ...     trajkit.save(r, path)
        ...     found = lint(path, action_space={"type": "Discrete", "n": 3}, jobs=1)
        >>> [(f.code, f.env, f.step) for f in found]
        [('TK106', 0, 2)]
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    options = LintOptions(
        selected_codes(select, ignore),
        None
        if max_episode_steps is None
        else checked_limit(max_episode_steps, "max_episode_steps"),
        None if action_space is None else checked_action_space(action_space, "action_space"),
        checked_ratio(reward_scale_ratio, "reward_scale_ratio"),
        trust_env_args=trust_env_args,
    )
    run = LintRun(
        [os.fspath(p) for p in paths], options, replay=replay, jobs=jobs, max_bytes=max_bytes
    )
    try:
        found = list(run)
    finally:
        run.close()
    for failure in run.failures:
        warnings.warn(f"a check failed (please report it): {failure}", RuntimeWarning, stacklevel=2)
    return found
