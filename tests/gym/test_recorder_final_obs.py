"""The recorder keeps every ended episode's true final observation, in every autoreset mode.

Each env's column is checked against a hand-stepped CartPole of its own: reset with the same
seed (env b gets `seed + b`, as the vector env seeds it), sent the recorded actions, reset
(unseeded, as autoreset does) when an episode ends. Its observations at the ends are the
true final ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym
from gymnasium.vector import AutoresetMode, VectorWrapper

import trajkit
from tests.gym.helpers import DICT_SPACE, choose, split
from trajkit import Rollout
from trajkit._base.types import AnyArray
from trajkit.gym import RolloutRecorder

LIMIT = 15
B = 3
SEED = 11


def policy(obs: AnyArray) -> dict[str, AnyArray]:
    return {"actions": choose(obs), "critic": obs @ np.array([0.1, 0.2, 0.3, 0.4], np.float32)}


def vector(envs: list[Any], mode: AutoresetMode, make: Callable[[], Any] | None = None) -> Any:
    def cartpole() -> Any:
        return gym.make("CartPole-v1", max_episode_steps=LIMIT)

    env = gym.vector.SyncVectorEnv([make or cartpole] * B, autoreset_mode=mode)
    envs.append(env)
    return env


def replay_column(r: Rollout, b: int, env: Any, first: bool) -> list[AnyArray]:
    """Step env b's own CartPole through the rollout; its true observation after each step."""
    actions = r.actions()
    after = []
    if first:
        obs, _ = env.reset(seed=SEED + b)
        np.testing.assert_array_equal(obs, r.obses[0, b])
    for t in range(r.num_steps):
        obs, _, terminated, truncated, _ = env.step(int(actions[t, b]))
        after.append(np.asarray(obs))
        assert bool(terminated or truncated) == bool(r.dones[t + 1, b] == 1), (t, b)
        if terminated or truncated:
            obs, _ = env.reset()
        np.testing.assert_array_equal(obs, r.obses[t + 1, b])  # the next row, reset or not
    return after


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_next_obses_at_every_end_is_the_true_final_observation(
    envs: list[Any], mode: AutoresetMode
) -> None:
    recorder = RolloutRecorder(vector(envs, mode), policy, seed=SEED)
    references = [gym.make("CartPole-v1", max_episode_steps=LIMIT) for _ in range(B)]
    envs.extend(references)
    ends = 0
    for call in range(2):  # across record() calls too
        r = recorder.record(40)
        assert r.final_obses is not None
        nxt = r.next_obses()
        assert isinstance(nxt, np.ndarray)
        for b in range(B):
            want = np.stack(replay_column(r, b, references[b], first=call == 0))
            np.testing.assert_array_equal(nxt[:, b], want)
        ended = r.dones[1:] == 1
        ends += int(ended.sum())
        # The final observation is not the next episode's first one.
        assert (r.next_obses()[ended] != r.obses[1:][ended]).any(axis=-1).all()
        # The critic's value at a truncation is its value on the same final observation.
        trunc = r.truncated == 1
        assert r.final_values is not None
        expected = nxt[trunc] @ np.array([0.1, 0.2, 0.3, 0.4], np.float32)
        np.testing.assert_allclose(r.final_values[trunc], expected, rtol=1e-6)
    assert ends > 4


def test_every_mode_records_the_same_final_observations_and_files_keep_them(
    envs: list[Any], tmp_path: Any
) -> None:
    got = {
        mode: RolloutRecorder(vector(envs, mode), policy, seed=SEED).record(50)
        for mode in AutoresetMode
    }
    want = got[AutoresetMode.NEXT_STEP]
    assert want.final_obses is not None
    assert len(want.final_obses) == int(want.dones[1:].sum()) > 0
    for mode, r in got.items():
        assert r == want, mode
    trajkit.save(want, tmp_path / "r.npz")
    assert trajkit.load(tmp_path / "r.npz") == want


def test_a_rollout_without_ends_has_empty_final_obses(envs: list[Any]) -> None:
    r = RolloutRecorder(vector(envs, AutoresetMode.SAME_STEP), policy, seed=SEED).record(2)
    assert r.final_obses is not None
    assert r.final_obses.shape == (0, 4)
    assert r.final_obses.dtype == np.float32


def dict_cartpole() -> Any:
    env = gym.make("CartPole-v1", max_episode_steps=LIMIT)
    return gym.wrappers.TransformObservation(env, split, DICT_SPACE)


def dict_policy(obs: dict[str, AnyArray]) -> dict[str, AnyArray]:
    return policy(np.concatenate([obs["position"], obs["velocity"]], axis=1))


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_dict_observations_keep_nested_final_observations(
    envs: list[Any], mode: AutoresetMode
) -> None:
    nested = RolloutRecorder(vector(envs, mode, dict_cartpole), dict_policy, seed=SEED)
    flat = RolloutRecorder(vector(envs, mode), policy, seed=SEED)
    got, want = nested.record(40), flat.record(40)
    assert isinstance(got.final_obses, dict)
    assert want.final_obses is not None
    np.testing.assert_array_equal(got.final_obses["position"], want.final_obses[:, :2])
    np.testing.assert_array_equal(got.final_obses["velocity"], want.final_obses[:, 2:])


def test_same_step_without_final_obs_is_refused(envs: list[Any]) -> None:
    class NoFinalObs(VectorWrapper):
        def step(self, actions: Any) -> Any:
            obs, rews, terms, truncs, infos = self.env.step(actions)
            infos = {k: v for k, v in infos.items() if k not in ("final_obs", "_final_obs")}
            return obs, rews, terms, truncs, infos

    env = NoFinalObs(vector(envs, AutoresetMode.SAME_STEP))
    recorder = RolloutRecorder(env, policy, seed=SEED)
    with pytest.raises(
        RuntimeError,
        match="a SAME_STEP env ended an episode without reporting its final observation",
    ):
        recorder.record(40)
