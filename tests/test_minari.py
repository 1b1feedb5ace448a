"""trajkit.minari against the real minari package, on datasets made in a temporary folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import trajkit
import trajkit.minari as tm
from trajkit._core import tree
from trajkit.testing import example_rollout


@pytest.fixture(autouse=True)
def datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path


def _rows(r: trajkit.Rollout, start: int, stop: int) -> trajkit.Rollout:
    """Rows start..stop of a rollout (stop included): a consecutive piece of it."""

    def cut(x: Any, rows: int) -> Any:
        return tree.map_leaves(lambda leaf: leaf[start : start + rows], x)

    n = stop - start
    return trajkit.Rollout(
        states=cut(r.states, n + 1),
        obses=cut(r.obses, n + 1),
        rews=r.rews[start:stop],
        dones=r.dones[start : stop + 1],
        infos=None,
        model_outs={k: v[start : stop + 1] for k, v in r.model_outs.arrays.items()},
        truncated=None if r.truncated is None else r.truncated[start:stop],
        final_values=None if r.final_values is None else r.final_values[start:stop],
    )


def _summary(dataset: Any) -> list[tuple[int, float, bool, bool]]:
    return [
        (
            len(ep.rewards),
            float(np.sum(ep.rewards)),
            bool(ep.terminations[-1]),
            bool(ep.truncations[-1]),
        )
        for ep in dataset.iterate_episodes()
    ]


def test_episodes_are_cut_at_episode_ends_with_terminations_and_truncations_apart() -> None:
    r = example_rollout(num_steps=12, num_envs=3, truncation=True, done_prob=0.3, seed=4)
    dataset = tm.to_minari(r, "trajkit/cut-v0")
    assert dataset.total_steps == 12 * 3
    ended = int((r.dones[1:] == 1).sum())
    assert dataset.total_episodes == ended + 3  # plus each env's still-running episode
    episodes = list(dataset.iterate_episodes())
    truncations = sum(bool(ep.truncations[-1]) for ep in episodes)
    terminations = sum(bool(ep.terminations[-1]) for ep in episodes)
    assert r.truncated is not None
    assert truncations == int(r.truncated.sum())
    assert terminations == ended - truncations
    assert sum(float(np.sum(ep.rewards)) for ep in episodes) == pytest.approx(float(r.rews.sum()))
    for ep in episodes:
        assert len(ep.observations) == len(ep.rewards) + 1


def test_an_episode_spanning_consecutive_rollouts_is_exported_whole() -> None:
    whole = example_rollout(num_steps=10, num_envs=2, done_prob=0.15, seed=7)
    parts = [_rows(whole, 0, 4), _rows(whole, 4, 10)]
    assert _summary(tm.to_minari(parts, "trajkit/parts-v0")) == _summary(
        tm.to_minari(whole, "trajkit/whole-v0")
    )


def test_import_gives_one_validated_rollout_per_episode() -> None:
    r = example_rollout(num_steps=9, num_envs=2, truncation=True, done_prob=0.3, seed=2)
    dataset = tm.to_minari(r, "trajkit/back-v0")
    rollouts = tm.from_minari("trajkit/back-v0")
    assert len(rollouts) == dataset.total_episodes
    for back, ep in zip(rollouts, dataset.iterate_episodes(), strict=True):
        assert back.batch_size == 1
        assert back.num_steps == len(ep.rewards)
        np.testing.assert_array_equal(back.obses[:, 0], ep.observations)
        np.testing.assert_array_equal(back.rews[:, 0], ep.rewards.astype(np.float32))
        assert back.dones[0, 0] == 1
        ended = bool(ep.terminations[-1] or ep.truncations[-1])
        assert back.dones[-1, 0] == (1 if ended else 0) or back.num_steps == 0
        if ep.truncations[-1]:
            assert back.truncated is not None
            assert back.truncated[-1, 0] == 1
            assert back.final_values is not None
            assert back.final_values[-1, 0] == 0
        else:  # zeros, as the recorder gives them
            assert back.truncated is not None
            assert not back.truncated.any()
        np.testing.assert_array_equal(back.actions()[:-1, 0], ep.actions)


def test_nested_observations_and_box_actions() -> None:
    r = example_rollout(num_steps=6, num_envs=2, nested=True, action_kind="box", seed=3)
    dataset = tm.to_minari(r, "trajkit/nested-v0")
    (first, *_) = tm.from_minari(dataset)
    assert isinstance(first.obses, dict)
    assert tree.paths(first.obses) == tree.paths(r.obses)
    assert first.actions().dtype == np.float32


def test_refusals() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    with pytest.raises(ValueError, match="to_minari needs at least one rollout"):
        tm.to_minari([], "trajkit/none-v0")
    with pytest.raises(ValueError, match="the same number of envs, got B=2 and B=3"):
        tm.to_minari([r, example_rollout(num_steps=3, num_envs=3)], "trajkit/b-v0")
    with pytest.raises(ValueError, match=r"to_minari needs model_outs\['actions'\]"):
        tm.to_minari(example_rollout(keys={"critic"}), "trajkit/noact-v0")
