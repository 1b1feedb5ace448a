"""iter_minari: a Minari dataset one episode at a time, each read alone and checked.

from_minari is its list; the dataset itself is refused by the call, an episode when the
iteration comes to it, after the episodes before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import trajkit.minari as tm
from trajkit.testing import example_rollout


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Four episodes of 10 steps (an example rollout of 4 envs, none ending early)."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    r = example_rollout(num_steps=10, num_envs=4, keys={"actions"}, done_prob=0.0)
    return tm.to_minari([r], "trajkit/iter-v0")


def _reads(dataset: Any, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The episode indices the dataset is asked for, call by call."""
    asked: list[list[int]] = []
    iterate = dataset.iterate_episodes

    def spy(indices: Any = None) -> Any:
        asked.append([int(i) for i in indices])
        return iterate(indices)

    monkeypatch.setattr(dataset, "iterate_episodes", spy)
    return asked


def test_iter_minari_reads_one_episode_when_asked_for_it(
    dataset: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _reads(dataset, monkeypatch)
    episodes = tm.iter_minari(dataset)
    assert asked == []
    first = next(episodes)
    assert asked == [[0]]
    assert first.num_steps == 10
    assert first.batch_size == 1
    rest = list(episodes)
    assert asked == [[0], [1], [2], [3]]
    assert [first, *rest] == tm.from_minari(dataset) == tm.from_minari("trajkit/iter-v0")


def test_an_episode_refused_midway_comes_after_the_ones_before_it(
    dataset: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = dataset.storage
    get = storage.get_episodes

    def damaged(indices: Any) -> Any:
        for episode in get(indices):
            if int(episode["id"]) == 2:
                episode = {**episode, "rewards": np.full(10, np.nan)}
            yield episode

    monkeypatch.setattr(storage, "get_episodes", damaged)
    episodes = tm.iter_minari(dataset)
    assert [e.num_steps for e in (next(episodes), next(episodes))] == [10, 10]
    with pytest.raises(ValueError, match=r"^episode 2: rews must be finite, got nan"):
        next(episodes)


def test_a_missing_dataset_is_refused_by_the_call(dataset: Any) -> None:
    with pytest.raises(tm.MinariDatasetError, match=r"^Minari dataset 'trajkit/missing-v0': "):
        tm.iter_minari("trajkit/missing-v0")  # not only once iterated
