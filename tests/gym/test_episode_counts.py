"""One recording, every place that shows an episode count: each agrees with the one definition.

Issue 29: the recorder said 89 episodes, the plot title 82 and `trajkit info` 43 for one
file. The definition (`trajkit._core.episodes`): **episode ends** are the (t, b) with
`dones[t+1] = 1`; **complete episodes** start (`dones[s] = 1`) and end inside the rollout.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("matplotlib")

import gymnasium as gym

import trajkit
from trajkit import Rollout
from trajkit.cli import main
from trajkit.dataset import DatasetStats
from trajkit.gym import RolloutRecorder
from trajkit.plot import plot_episodes


def _by_definition(r: Rollout) -> tuple[int, int]:
    """(episode ends, complete episodes) of `r`, counted env by env from `dones` alone."""
    ends = complete = 0
    for b in range(r.batch_size):
        column = r.dones[:, b] == 1
        ends += int(column[1:].sum())
        complete += max(int(column.sum()) - 1, 0)  # consecutive starts bound an episode
    return ends, complete


@pytest.fixture(scope="module")
def recording() -> tuple[RolloutRecorder, Rollout]:
    """The second of two rollouts of CartPole: some of its episodes began in the first."""
    env = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(3, np.int64)}, seed=0)
    recorder.record(25)
    rollout = recorder.record(60)
    env.close()
    return recorder, rollout


def test_the_recording_tells_the_two_counts_apart(
    recording: tuple[RolloutRecorder, Rollout],
) -> None:
    _, r = recording
    ends, complete = _by_definition(r)
    assert 0 < complete < ends  # episodes carried over from the first rollout end here


def test_episode_stats_and_dataset_stats_count_by_the_definition(
    recording: tuple[RolloutRecorder, Rollout],
) -> None:
    _, r = recording
    ends, complete = _by_definition(r)
    stats = r.episode_stats()
    assert (stats.episodes, len(stats.returns), len(stats.lengths)) == (ends, complete, complete)
    assert DatasetStats.of(r).episodes == ends


def test_the_recorder_counts_episode_ends_and_says_so(
    recording: tuple[RolloutRecorder, Rollout],
) -> None:
    recorder, r = recording
    ends, _ = _by_definition(r)
    assert len(recorder.last_episodes) == ends
    assert repr(recorder.last_episodes).startswith(f"CompletedEpisodes(episode_ends={ends},")


def test_the_plot_title_counts_complete_episodes_and_says_so(
    recording: tuple[RolloutRecorder, Rollout],
) -> None:
    _, r = recording
    _, complete = _by_definition(r)
    figure = plot_episodes([r])
    assert figure.axes[0].get_title() == f"{complete} complete episodes in 1 rollout(s)"
    dots = sum(np.asarray(c.get_offsets()).shape[0] for c in figure.axes[0].collections)
    assert dots == complete  # one per complete episode, terminated or truncated


def test_trajkit_info_names_both_counts(
    recording: tuple[RolloutRecorder, Rollout],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, r = recording
    ends, complete = _by_definition(r)
    path = tmp_path / "run.npz"
    trajkit.save(r, path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^episode ends: +{ends} within the steps \(dones\[1:\] == 1\)", out, re.M)
    assert re.search(
        rf"^complete episodes: {complete} \(start and end inside the rollout\)", out, re.M
    )
