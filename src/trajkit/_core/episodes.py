"""Episode statistics from time-major rewards and episode-start flags: the one definition.

Two counts, and every place that shows one names it:

- **episode ends**: the steps where an episode ended, the (t, b) with `dones[t+1] = 1`
  (terminations plus truncations): `EpisodeStats.episodes`, `DatasetStats.episodes`, the
  length of the recorder's `last_episodes` (whose returns are whole, counted across rollouts),
  and `trajkit info`'s "episode ends";
- **complete episodes**: the episodes that both start (`dones[s] = 1`, row 0 included) and end
  inside one rollout: `len(EpisodeStats.returns)`, `trajkit info`'s "complete episodes" and
  the title of `trajkit.plot.plot_episodes`.

An episode that began in an earlier rollout ends inside this one without being complete in
it, so a rollout has at least as many episode ends as complete episodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trajkit._base.types import ArrayLike, BoolArray, Float64Array, Int64Array

__all__ = ["EpisodeStats", "check_truncations", "episode_ends", "episode_stats"]


def episode_ends(dones: ArrayLike) -> BoolArray:
    """Where a step ended its episode, `[T, B]`: `dones[t+1] == 1` (E of them in all).

    The schema's one home of it (the rule table declares it from here, for `_core` to read).

    Examples:
        >>> import numpy as np
        >>> episode_ends(np.array([[1, 0], [0, 1], [1, 0]])).astype(int).tolist()
        [[0, 1], [1, 0]]
    """
    ends: BoolArray = np.asarray(dones)[1:] == 1
    return ends


def check_truncations(truncated: ArrayLike, dones: ArrayLike) -> None:
    """The rule "a truncated step ends its episode": `truncated[t] = 1` needs `dones[t+1] = 1`.

    Examples:
        >>> check_truncations([[0], [1]], [[0], [0], [0]])
        Traceback (most recent call last):
        ...
        ValueError: truncated[1, 0] is 1 but dones[2, 0] is 0: a truncated step must end \
its episode (set dones[t+1] = 1 where truncated[t] = 1)
    """
    unended = (np.asarray(truncated) != 0) & (np.asarray(dones)[1:] == 0)
    if np.logical_or.reduce(unended, axis=None):
        t, b = (int(i) for i in np.unravel_index(int(np.argmax(unended)), unended.shape))
        raise ValueError(
            f"truncated[{t}, {b}] is 1 but dones[{t + 1}, {b}] is 0: a truncated step must end "
            "its episode (set dones[t+1] = 1 where truncated[t] = 1)"
        )


@dataclass(frozen=True)
class EpisodeStats:
    """Episode statistics of a rollout, from its `rews`, `dones` and `truncated`.

    Two counts: `episodes` counts **episode ends** (the steps where an episode ended), and
    `len(returns)` counts **complete episodes** (those that start and end inside the
    rollout), never more than the ends.

    Attributes:
        returns: Undiscounted returns of the complete episodes, those that start and end inside
            the rollout (an episode starts at a row with `dones = 1`, row 0 included), ordered
            by env, then time.
        lengths: Their lengths in steps, in the same order.
        terminations: Episode ends in the rollout (`dones[t+1] = 1`) that were terminations.
        truncations: Episode ends that were time-limit truncations (0 without truncation data,
            where every end counts as a termination).

    Examples:
        >>> import numpy as np
        >>> stats = EpisodeStats(np.array([3.0, 5.0]), np.array([3, 5]), 1, 1)
        >>> stats.episodes, stats.mean_return
        (2, 4.0)
    """

    returns: Float64Array = field(repr=False)
    lengths: Int64Array = field(repr=False)
    terminations: int
    truncations: int

    @property
    def episodes(self) -> int:
        """Number of episode ends in the rollout (terminations plus truncations).

        Examples:
            >>> import numpy as np
            >>> EpisodeStats(np.zeros(0), np.zeros(0, np.int64), 2, 1).episodes
            3
        """
        return self.terminations + self.truncations

    @property
    def mean_return(self) -> float:
        """Mean of `returns`, or NaN when no episode is wholly inside the rollout.

        Examples:
            >>> import numpy as np
            >>> EpisodeStats(np.zeros(0), np.zeros(0, np.int64), 1, 0).mean_return
            nan
        """
        return float(self.returns.mean()) if self.returns.size else float("nan")


def episode_stats(
    rewards: ArrayLike, dones: ArrayLike, truncated: ArrayLike | None = None
) -> EpisodeStats:
    """Count episode ends and measure the complete episodes of a rollout, without loops.

    A complete episode runs from one episode start (`dones[s, b] = 1`) to the next
    (`dones[e, b] = 1`, `e > s`): its return is `rewards[s:e, b].sum()` and its length `e - s`.
    Returns are differences of a float64 cumulative sum, so they cost no Python loop.

    Args:
        rewards: Rewards `[T, B]` (times 0..T-1).
        dones: Episode starts `[T+1, B]`, 0/1 (times 0..T).
        truncated: Optional time-limit flags `[T, B]`; an end with `truncated[t] = 1` counts as
            a truncation.

    Returns:
        The `EpisodeStats`.

    Raises:
        ValueError: If the shapes do not fit `[T, B]`, `[T+1, B]` and `[T, B]`.

    Examples:
        >>> import numpy as np
        >>> stats = episode_stats(
        ...     rewards=np.ones((4, 1)),
        ...     dones=[[1], [0], [1], [0], [1]],
        ...     truncated=[[0], [0], [0], [1]],
        ... )
        >>> stats.returns.tolist(), stats.lengths.tolist(), stats.terminations, stats.truncations
        ([2.0, 2.0], [2, 2], 1, 1)
    """
    rews = np.asarray(rewards, dtype=np.float64)
    starts = np.asarray(dones) == 1
    if rews.ndim != 2 or starts.shape != (rews.shape[0] + 1, rews.shape[1]):
        raise ValueError(
            f"rewards must be [T, B] and dones [T+1, B], got shapes {rews.shape} and {starts.shape}"
        )
    ends = episode_ends(starts)
    truncations = 0
    if truncated is not None:
        cut = np.asarray(truncated) == 1
        if cut.shape != rews.shape:
            raise ValueError(f"truncated must be [T, B] = {rews.shape}, got shape {cut.shape}")
        truncations = int((ends & cut).sum())
    total = np.zeros((rews.shape[0] + 1, rews.shape[1]))
    np.cumsum(rews, axis=0, out=total[1:])
    env, first, last = complete_episodes(starts)
    return EpisodeStats(
        returns=total[last, env] - total[first, env],
        lengths=(last - first).astype(np.int64),
        terminations=int(ends.sum()) - truncations,
        truncations=truncations,
    )


def complete_episodes(dones: ArrayLike) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Where each complete episode runs: its env, first row and end row, by env then time.

    A complete episode starts at a row with `dones = 1` and ends at the next such row of its
    env (step `last - 1` ended it): the episodes `EpisodeStats.returns` describe, in order.

    Args:
        dones: Episode starts `[T+1, B]`, 0/1.

    Returns:
        `(env, first, last)`, int64 arrays of one entry per complete episode.

    Examples:
        >>> import numpy as np
        >>> env, first, last = complete_episodes(np.array([[1, 0], [0, 1], [1, 0], [0, 1]]))
        >>> env.tolist(), first.tolist(), last.tolist()
        ([0, 1], [0, 1], [2, 3])
    """
    starts = np.asarray(dones) == 1
    env, time = np.nonzero(starts.T)  # every episode start, ordered by env, then time
    pair = env[1:] == env[:-1]  # consecutive starts of one env bound a complete episode
    return (
        env[1:][pair].astype(np.int64),
        time[:-1][pair].astype(np.int64),
        time[1:][pair].astype(np.int64),
    )
