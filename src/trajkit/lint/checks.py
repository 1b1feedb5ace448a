"""The checks on one rollout's data (TK1xx): each reads the arrays of one file and its recording.

`check_rollout` runs those that need nothing but the file. The others gather evidence over
many files: TK101, TK105, TK113 and TK112's shared starts over the episodes joined across the
files of a recording (`trajkit.lint.join`); TK102, TK103, TK108-TK110, TK112's copied
columns, TK114 and TK115 over the whole dataset (`trajkit.lint.crossfile`). Every check
reports once per file, at the first place where it applies, with the number of places in the
message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trajkit._models.rollout import Rollout
from trajkit.lint.boundaries import reset_twice
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding
from trajkit.lint.rewards import clipped_rewards
from trajkit.lint.spaces import action_findings, observation_finding

__all__ = ["check_rollout"]


def check_rollout(
    rollout: Rollout,
    options: LintOptions,
    *,
    path: str | None = None,
    recording: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Run the selected checks that need one file alone.

    Args:
        rollout: The rollout.
        options: The selected codes and the settings.
        path: The file it came from, named in the findings.
        recording: Its file's `recording` metadata (a dict), if any.

    Returns:
        The findings, in code order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1, keys=("actions",))
        >>> r.model_outs.arrays["actions"][3, 0] = 9
        >>> space = {"type": "Discrete", "n": 3}
        >>> options = LintOptions(frozenset({"TK106"}), action_space=space)
        >>> [f.code for f in check_rollout(r, options)]
        ['TK106']
    """
    recording = recording or {}
    codes = options.codes
    space = recording.get("action_space") or options.action_space
    found: list[Finding | None] = []
    if "TK104" in codes:
        found.append(reset_twice(rollout, path))
    found.extend(action_findings(rollout, space, codes, path))
    if "TK111" in codes:
        found.append(clipped_rewards(rollout, recording, path))
    if "TK116" in codes:
        found.append(observation_finding(rollout, recording, path))
    return [f for f in found if f is not None]  # in code order, as appended
