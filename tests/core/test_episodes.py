"""Episode statistics: a vectorised count checked against a loop over envs and episodes."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray

from trajkit import EpisodeStats, Rollout, episode_stats
from trajkit.testing import rollouts


def reference(
    rews: NDArray[np.float32], dones: NDArray[np.float32], truncated: NDArray[np.float32] | None
) -> tuple[list[float], list[int], int, int]:
    returns: list[float] = []
    lengths: list[int] = []
    for b in range(rews.shape[1]):
        start = None
        for t in range(dones.shape[0]):
            if dones[t, b] == 1:
                if start is not None:
                    returns.append(sum(float(x) for x in rews[start:t, b]))
                    lengths.append(t - start)
                start = t
    ends = truncations = 0
    for t in range(rews.shape[0]):
        for b in range(rews.shape[1]):
            if dones[t + 1, b] == 1:
                ends += 1
                truncations += int(truncated is not None and truncated[t, b] == 1)
    return returns, lengths, ends - truncations, truncations


@given(rollouts(max_steps=12))
def test_equals_a_loop_over_envs_and_episodes(r: Rollout) -> None:
    stats = r.episode_stats()
    returns, lengths, terminations, truncations = reference(r.rews, r.dones, r.truncated)
    np.testing.assert_allclose(stats.returns, returns, rtol=1e-6, atol=1e-3)
    assert stats.lengths.tolist() == lengths
    assert (stats.terminations, stats.truncations) == (terminations, truncations)
    assert stats.episodes == int(r.dones[1:].sum())
    assert stats.returns.dtype == np.float64
    assert stats.lengths.dtype == np.int64


def test_golden() -> None:
    rews = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    dones = np.array([[1, 0], [0, 1], [1, 0], [0, 0], [1, 1]])
    truncated = np.array([[0, 0], [1, 0], [0, 0], [0, 1]])
    stats = episode_stats(rews, dones, truncated)
    # env 0: episodes [0, 2) and [2, 4); env 1: [1, 4)
    assert stats.returns.tolist() == [3.0, 7.0, 90.0]
    assert stats.lengths.tolist() == [2, 2, 3]
    # ends: env 0 at steps 1 (truncated) and 3; env 1 at steps 0 and 3 (truncated)
    assert (stats.terminations, stats.truncations, stats.episodes) == (2, 2, 4)
    assert stats.mean_return == pytest.approx(100.0 / 3)


def test_no_truncation_data_counts_every_end_as_a_termination() -> None:
    stats = episode_stats(np.ones((3, 1)), [[1], [0], [1], [1]])
    assert (stats.terminations, stats.truncations) == (2, 0)


@given(hnp.arrays(np.bool_, st.tuples(st.integers(1, 6), st.integers(1, 4))))
def test_no_episode_is_complete_without_two_starts(starts: NDArray[np.bool_]) -> None:
    dones = starts.copy()
    dones[:, 0] = False  # env 0 never starts an episode: nothing of it is counted
    stats = episode_stats(np.ones((len(dones) - 1, dones.shape[1])), dones)
    expected = int(np.maximum(dones.sum(axis=0) - 1, 0).sum())
    assert len(stats.returns) == expected


def test_zero_steps() -> None:
    stats = episode_stats(np.zeros((0, 2)), [[1, 1]])
    assert stats == EpisodeStats(stats.returns, stats.lengths, 0, 0)
    assert stats.returns.shape == (0,)
    assert np.isnan(stats.mean_return)


@pytest.mark.parametrize(
    ("rews", "dones", "truncated", "message"),
    [
        (np.zeros((3, 2)), np.zeros((3, 2)), None, r"dones \[T\+1, B\], got shapes \(3, 2\)"),
        (np.zeros(3), np.zeros((4, 1)), None, r"rewards must be \[T, B\]"),
        (np.zeros((3, 2)), np.zeros((4, 2)), np.zeros((4, 2)), r"truncated must be \[T, B\]"),
    ],
)
def test_shapes_are_checked(
    rews: NDArray[np.float64],
    dones: NDArray[np.float64],
    truncated: NDArray[np.float64] | None,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        episode_stats(rews, dones, truncated)
