"""Rewards that look clipped where the recording says they are the env's own (TK111, a note).

A recording (`trajkit.save(..., recording=...)`) whose vector wrappers include none that
changes rewards, and that has no unrecorded `make_vec` arguments (such as `wrappers=`), says
that the rewards are the env's own. Clipping shows as a mass at the largest magnitude: at
least `MIN_CLIPPED` rewards (and a tenth of them) exactly at +c or -c, while at least
`MIN_INSIDE` distinct magnitudes lie strictly between 0 and c (a continuous range).

No amount of such data is evidence of a bug: an env whose reward saturates by itself (a
cost at the action bound of a bang-bang controller, `np.clip` inside the env) looks the
same. So TK111 is a note, which does not fail a run; replay (TK302) proves a clip. Rewards
that take a few values only (CartPole's 1, Taxi's -10, -1, 20) are never noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trajkit._models.rollout import Rollout
from trajkit.lint.registry import Finding

__all__ = ["MIN_CLIPPED", "MIN_INSIDE", "clipped_rewards", "states_raw_rewards"]

MIN_CLIPPED = 3
"""TK111: the fewest rewards at the clip value."""

MIN_INSIDE = 3
"""TK111: at least this many distinct magnitudes must lie inside the clip range."""


def states_raw_rewards(recording: Mapping[str, Any] | None) -> bool:
    """Whether a recording says its rewards are the env's own (no reward wrapper).

    Examples:
        >>> states_raw_rewards({"wrappers": [], "unrecorded_kwargs": []})
        True
        >>> states_raw_rewards({"wrappers": ["NormalizeReward"], "unrecorded_kwargs": []})
        False
        >>> states_raw_rewards(None)
        False
    """
    if not recording:
        return False
    wrappers = [str(w) for w in recording.get("wrappers") or ()]
    return not recording.get("unrecorded_kwargs") and not any("Reward" in w for w in wrappers)


def clipped_rewards(
    rollout: Rollout, recording: Mapping[str, Any] | None, path: str | None
) -> Finding | None:
    """TK111: a mass of rewards at ±c over a continuous range inside, where raw ones are said.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=40, num_envs=1)
        >>> r.rews[:] = np.clip(np.linspace(-3, 0, 40), -1, 0)[:, None]
        >>> raw = {"wrappers": [], "unrecorded_kwargs": []}
        >>> clipped_rewards(r, raw, "a.npz").message  # doctest: +ELLIPSIS
        '27 rewards are exactly -1 or 1, the largest magnitude, ...
        >>> clipped_rewards(r, None, "a.npz") is None
        True
    """
    if not states_raw_rewards(recording):
        return None
    rews = rollout.rews.astype(np.float64)
    size = np.abs(rews)
    c = float(size.max(initial=0.0))
    if c == 0.0:
        return None
    at = size == c
    inside = np.unique(size[(size > 0) & (size < c)])
    if at.sum() < max(MIN_CLIPPED, 0.1 * rews.size) or inside.size < MIN_INSIDE:
        return None
    t, b = (int(x) for x in np.argwhere(at)[0])
    return Finding(
        "TK111",
        f"{int(at.sum())} rewards are exactly -{c:g} or {c:g}, the largest magnitude, while "
        f"{inside.size} other magnitudes lie between 0 and {c:g}: clipped, although the "
        "recording names no reward wrapper, or a reward that saturates by itself (replay tells)",
        path,
        b,
        t,
    )
