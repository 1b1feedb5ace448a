"""Completed episodes as the recorder reports them: whole returns and lengths across rollouts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np

from trajkit._base.types import BoolArray, Float64Array, Int64Array

__all__ = ["CompletedEpisodes", "episode_sums", "no_episodes"]


@dataclass(frozen=True)
class CompletedEpisodes:
    """Episodes that ended, with their whole returns and lengths, as Gymnasium reports them.

    Each return is the env's own where it reports one: the `r` that
    `RecordEpisodeStatistics` (the vector wrapper, or the per-env one inside the vector env)
    puts in `info["episode"]` on the step that ended the episode, so reward wrappers outside
    it (`NormalizeReward`, scaling, clipping) do not change it. Without one, the return is
    the undiscounted sum of the recorded rewards, counted across `record()` calls (so an
    episode that spanned several rollouts has its full return, equal to the wrapper's up to
    float64 rounding). Lengths are counted by the recorder, in real transitions, as the
    wrapper's `l`. Episodes are ordered by the step they ended at, then by env.

    What `len()` counts is **episode ends** (see `trajkit.episode_stats`): for the rollout
    `record()` returned, `len(recorder.last_episodes) == rollout.episode_stats().episodes`,
    episodes that began in an earlier rollout included. The rollout's **complete episodes**
    (`len(rollout.episode_stats().returns)`, what `trajkit info` and `plot_episodes` also
    show) leave those out, so they are as many or fewer.

    Attributes:
        returns: Undiscounted returns, float64: the env's `info["episode"]["r"]` where
            present, else the sum of the recorded rewards.
        lengths: Lengths in real transitions, int64.
        envs: The env each episode ran in, int64.
        truncated: Whether each episode was cut by a time limit (else it terminated).

    Examples:
        >>> import numpy as np
        >>> done = CompletedEpisodes(
        ...     returns=np.array([12.0, 30.0]),
        ...     lengths=np.array([12, 30]),
        ...     envs=np.array([1, 0]),
        ...     truncated=np.array([False, True]),
        ... )
        >>> len(done), done.mean_return
        (2, 21.0)
        >>> done
        CompletedEpisodes(episode_ends=2, mean_return=21)
    """

    returns: Float64Array = field(repr=False)
    lengths: Int64Array = field(repr=False)
    envs: Int64Array = field(repr=False)
    truncated: BoolArray = field(repr=False)

    def __len__(self) -> int:
        return int(self.returns.size)

    @property
    def mean_return(self) -> float:
        """Mean return, or NaN when no episode ended.

        Examples:
            >>> import numpy as np
            >>> e = np.zeros(0)
            >>> CompletedEpisodes(e, e.astype(int), e.astype(int), e > 0).mean_return
            nan
        """
        return float(self.returns.mean()) if self.returns.size else float("nan")

    def __repr__(self) -> str:
        return f"CompletedEpisodes(episode_ends={len(self)}, mean_return={self.mean_return:.6g})"


EP_FIELDS: Final = ("returns", "lengths", "envs", "truncated")


def no_episodes() -> CompletedEpisodes:
    """No episodes: the recorder's `last_episodes` before its first rollout."""
    return CompletedEpisodes(
        np.zeros(0, np.float64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    )


def episode_sums(
    real: BoolArray,
    rew: Float64Array,
    over: BoolArray,
    carried_returns: Float64Array,
    carried_lengths: Int64Array,
) -> tuple[Float64Array, Int64Array]:
    """Return and length of each env's episode so far, after each logged entry `[K, B]`.

    Counted as `RecordEpisodeStatistics` counts them (real transitions, undiscounted
    rewards), from each env's sums carried over from earlier rollouts (`carried_returns`,
    `carried_lengths`, `[B]`); `over` marks the entries whose episode ended there (the
    entry itself still counts in that episode).
    """
    K, B = real.shape
    sums = np.where(real, rew, 0.0).cumsum(axis=0)
    counts = real.cumsum(axis=0, dtype=np.int64)
    # For each entry, the last earlier entry whose episode ended (-1 if none).
    entry = np.arange(K)[:, None]
    last_over = np.maximum.accumulate(np.where(over, entry, -1), axis=0)
    before = np.concatenate([np.full((1, B), -1), last_over[:-1]])
    envs = np.arange(B)
    began = before >= 0
    returns = sums - np.where(began, sums[before, envs], -carried_returns)
    lengths = counts - np.where(began, counts[before, envs], -carried_lengths)
    return returns, lengths
