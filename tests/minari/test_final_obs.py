"""Minari export and import keep the true final observation of every ended episode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import trajkit
import trajkit.minari as tm
from trajkit.testing import example_rollout


def rows(r: trajkit.Rollout, start: int, stop: int) -> trajkit.Rollout:
    """Rows start..stop (stop included) of `r`, with the final observations of their ends."""
    assert r.final_obses is not None
    ends = r.dones[1:] == 1
    k0, k1 = int(ends[:start].sum()), int(ends[:stop].sum())
    return trajkit.Rollout(
        states=r.states[start : stop + 1],
        obses=r.obses[start : stop + 1],
        rews=r.rews[start:stop],
        dones=r.dones[start : stop + 1],
        infos=None,
        model_outs={k: v[start : stop + 1] for k, v in r.model_outs.arrays.items()},
        final_obses=r.final_obses[k0:k1],
    )


def last_observations(dataset: Any) -> list[tuple[bool, Any]]:
    return [
        (bool(ep.terminations[-1] or ep.truncations[-1]), ep.observations[-1])
        for ep in dataset.iterate_episodes()
    ]


def test_an_ended_episode_ends_on_its_true_final_observation() -> None:
    r = example_rollout(num_steps=12, num_envs=3, done_prob=0.3, seed=4, final_obs=True)
    assert r.final_obses is not None
    episodes = list(tm.to_minari(r, "trajkit/finals-v0").iterate_episodes())
    nxt = r.next_obses()
    assert isinstance(nxt, np.ndarray)
    ended = 0
    for b in range(3):  # the ended episodes, env by env, in time order
        for t in np.flatnonzero(r.dones[1:, b] == 1).tolist():
            ep = episodes.pop(0)
            assert ep.terminations[-1] or ep.truncations[-1]
            np.testing.assert_array_equal(ep.observations[-1], nxt[t, b])
            ended += 1
    assert ended == len(r.final_obses) > 0
    running = [b for b in range(3) if r.dones[-1, b] == 0]
    assert len(episodes) == len(running)
    for b, ep in zip(running, episodes, strict=True):  # they end on the bootstrap row
        assert not ep.terminations[-1]
        assert not ep.truncations[-1]
        np.testing.assert_array_equal(ep.observations[-1], r.obses[-1, b])


def test_without_final_obses_the_observation_before_is_repeated() -> None:
    r = example_rollout(num_steps=12, num_envs=2, done_prob=0.3, seed=4)
    ended = 0
    for ep in tm.to_minari(r, "trajkit/old-v0").iterate_episodes():
        if ep.terminations[-1] or ep.truncations[-1]:
            np.testing.assert_array_equal(ep.observations[-1], ep.observations[-2])
            ended += 1
    assert ended > 0


def test_a_recording_exports_the_envs_final_observations() -> None:
    gym = pytest.importorskip("gymnasium")
    from trajkit.gym import RolloutRecorder

    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=12)
    try:
        recorder = RolloutRecorder(
            env, lambda obs: {"actions": (obs[:, 2] > 0).astype(np.int64)}, seed=1
        )
        parts = [recorder.record(30), recorder.record(30)]
    finally:
        env.close()
    dataset = tm.to_minari(parts, "trajkit/cartpole-v0", env="CartPole-v1")
    ends = [
        nxt[t, b]  # in the export's order: rollout by rollout, env by env
        for r in parts
        for nxt in [r.next_obses()]
        for b in range(2)
        for t in np.flatnonzero(r.dones[1:, b] == 1).tolist()
    ]
    got = [obs for ended, obs in last_observations(dataset) if ended]
    assert len(got) == len(ends) > 0
    for obs, want in zip(got, ends, strict=True):
        np.testing.assert_array_equal(obs, want)


def test_an_episode_ending_in_a_later_rollout_gets_that_rollouts_final_observation() -> None:
    whole = example_rollout(num_steps=10, num_envs=2, done_prob=0.15, seed=7, final_obs=True)
    parts = [rows(whole, 0, 4), rows(whole, 4, 10)]
    got = last_observations(tm.to_minari(parts, "trajkit/parts-v0"))
    want = last_observations(tm.to_minari(whole, "trajkit/whole-v0"))
    assert len(got) == len(want)
    for (ended_got, obs_got), (ended_want, obs_want) in zip(got, want, strict=True):
        assert ended_got == ended_want
        np.testing.assert_array_equal(obs_got, obs_want)


def test_import_fills_final_obses_from_the_last_observation_of_an_ended_episode() -> None:
    r = example_rollout(num_steps=9, num_envs=2, truncation=True, done_prob=0.3, final_obs=True)
    dataset = tm.to_minari(r, "trajkit/back-v0")
    for back, ep in zip(tm.from_minari(dataset), dataset.iterate_episodes(), strict=True):
        assert back.final_obses is not None
        ended = bool(ep.terminations[-1] or ep.truncations[-1])
        assert back.final_obses.shape == ((1, 4) if ended else (0, 4))
        if ended:
            np.testing.assert_array_equal(back.final_obses[0], ep.observations[-1])
        np.testing.assert_array_equal(back.next_obses()[:, 0], ep.observations[1:])
        # and it goes back out as it came in
    again = tm.to_minari(tm.from_minari(dataset), "trajkit/again-v0")
    for a, b in zip(again.iterate_episodes(), dataset.iterate_episodes(), strict=True):
        np.testing.assert_array_equal(a.observations, b.observations)


def test_final_observations_outside_the_space_are_refused_by_name() -> None:
    gym_spaces = pytest.importorskip("gymnasium.spaces")
    r = example_rollout(num_steps=12, num_envs=2, done_prob=0.3, seed=4)
    ends = np.nonzero(r.dones[1:] == 1)
    finals = np.clip(r.obses[1:][ends], -1, 1)
    finals[1, 2] = 50.0
    r = r.replace(obses=np.clip(r.obses, -1, 1), final_obses=finals)
    box = gym_spaces.Box(-10.0, 10.0, (4,), np.float32)
    with pytest.raises(
        ValueError,
        match=r"final observations hold 50\.0 \[2\] at \(e=1\), outside the space's bounds "
        r"\[-10\.0, 10\.0\]",
    ):
        tm.to_minari(r, "trajkit/outside-v0", observation_space=box)
    wrong = gym_spaces.Box(-10.0, 10.0, (4,), np.float64)  # fitted like obses: float64 here
    back = tm.to_minari(
        r.replace(final_obses=finals.clip(-1, 1)), "trajkit/f64-v0", observation_space=wrong
    )
    assert back.observation_space == wrong
