"""Small rollouts built by hand, and every lint stage run on them in memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trajkit import Rollout
from trajkit.lint.checks import check_rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.crossfile import CrossFileChecks, summarize
from trajkit.lint.join import EpisodeJoiner, episode_edges
from trajkit.lint.registry import CHECKS, Finding

Array = np.ndarray[Any, Any]


def dones_for(lengths: Sequence[int], T: int) -> Array:
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
    dones: Array,
    *,
    rews: Array | None = None,
    obses: Any = None,
    truncated: Array | None = None,
    outs: Mapping[str, Array] | None = None,
    final_obses: Any = None,
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
        final_obses=final_obses,
    )


def lint_rollouts(
    rollouts: Sequence[Rollout | None],
    select: str = "TK",
    recordings: Sequence[Mapping[str, Any] | None] | None = None,
    **settings: Any,
) -> list[Finding]:
    """Every stage of `trajkit lint` on in-memory rollouts, named `r0.npz`, `r1.npz`, ...

    The checks whose codes start with `select` run; `settings` go to `LintOptions`. `None`
    stands for a file that lint could not read (as `LintFold` folds it: its episodes join none).
    """
    options = LintOptions(frozenset(c for c in CHECKS if c.startswith(select)), **settings)
    across = CrossFileChecks(options)
    joiner = EpisodeJoiner(options)
    found: list[Finding] = []
    for i, r in enumerate(rollouts):
        path = f"r{i}.npz"
        if r is None:
            joiner.add(None)
            continue
        recording = dict(recordings[i] or {}) if recordings is not None else {}
        found += check_rollout(r, options, path=path, recording=recording)
        found += joiner.add(episode_edges(r, path, recording, options.max_episode_steps))
        found += across.add(summarize(r, path, recording, options.action_space))
    return found + joiner.finish() + across.finish()


def codes(r: Rollout, select: str = "TK", **settings: Any) -> list[Finding]:
    """The findings of one rollout (`r0.npz`), its checks starting with `select`."""
    recording = settings.pop("recording", None)
    return lint_rollouts([r], select, [recording], **settings)
