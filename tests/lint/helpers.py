"""Small rollouts built by hand, each with exactly one of the bugs `trajkit lint` finds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trajkit import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.data import check_rollout
from trajkit.lint.registry import CHECKS, Finding


def dones_for(lengths: Sequence[int], T: int) -> np.ndarray[Any, Any]:
    """A `[T+1]` dones column: episodes of `lengths` back to back from row 0."""
    dones = np.zeros(T + 1)
    row = 0
    dones[0] = 1
    for length in lengths:
        row += length
        if row <= T:
            dones[row] = 1
    return dones


def rollout(
    dones: np.ndarray[Any, Any],
    *,
    rews: np.ndarray[Any, Any] | None = None,
    obses: np.ndarray[Any, Any] | None = None,
    truncated: np.ndarray[Any, Any] | None = None,
    outs: Mapping[str, np.ndarray[Any, Any]] | None = None,
    seed: int = 0,
) -> Rollout:
    """A rollout with these `dones` (`[T+1]` or `[T+1, B]`), random observations by default."""
    if dones.ndim == 1:
        dones = dones[:, None]
    T, B = dones.shape[0] - 1, dones.shape[1]
    rng = np.random.default_rng(seed)
    if obses is None:
        obses = rng.normal(size=(T + 1, B, 3)).astype(np.float32)
    if rews is None:
        rews = rng.normal(size=(T, B))
    final = None if truncated is None else np.zeros((T, B))
    if truncated is not None and truncated.ndim == 1:
        truncated = truncated[:, None]
    return Rollout(
        states=np.zeros((T + 1, B, 0)),
        obses=obses,
        rews=rews.reshape(T, B),
        dones=dones,
        infos=None,
        model_outs=dict(outs) if outs is not None else {"critic": np.zeros((T + 1, B))},
        truncated=truncated,
        final_values=final,
    )


def codes(r: Rollout, select: str, **settings: Any) -> list[Finding]:
    """The findings of the checks whose codes start with `select`."""
    options = LintOptions(frozenset(c for c in CHECKS if c.startswith(select)), **settings)
    return check_rollout(r, options, path="r.npz")
