"""The recorder on every Gymnasium space, with real envs, in all three autoreset modes.

- `Pendulum-v1`: Box actions from a Gaussian policy;
- CartPole with Dict observations (a `TransformObservation` wrapper), checked leaf by leaf
  against the same episodes recorded from plain CartPole;
- `Blackjack-v1`: Tuple observations of Discrete spaces;
- a small env of this file with MultiBinary and nested Dict/Tuple observations and
  MultiDiscrete actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym
from gymnasium.vector import AutoresetMode

import trajkit
from tests.gym.helpers import DICT_SPACE, split
from trajkit import Rollout
from trajkit._base.types import AnyArray
from trajkit.gym import RolloutRecorder

MODES = list(AutoresetMode)
B = 3
VecEnv = gym.vector.VectorEnv[Any, Any, Any]


def vector(
    envs: list[VecEnv], make: Callable[[], gym.Env[Any, Any]], mode: AutoresetMode
) -> VecEnv:
    env = gym.vector.SyncVectorEnv([make] * B, autoreset_mode=mode)
    envs.append(env)
    return env


def record_in_every_mode(
    envs: list[VecEnv], make: Callable[[], gym.Env[Any, Any]], policy: Any, steps: int = 30
) -> list[Rollout]:
    """Record two rollouts per mode; check the modes agree; return NEXT_STEP's."""
    recorded = {}
    for mode in MODES:
        recorder = RolloutRecorder(vector(envs, make, mode), policy, seed=3)
        recorded[mode] = [recorder.record(steps), recorder.record(steps)]
    reference = recorded[AutoresetMode.NEXT_STEP]
    for mode in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
        for got, want in zip(recorded[mode], reference, strict=True):
            assert got == want, mode
    return reference


# ----------------------------------------------------------------- Box actions: Pendulum


class GaussianPolicy:
    """A seeded linear-Gaussian policy: actions, log-probabilities and a critic."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def __call__(self, obs: AnyArray) -> dict[str, AnyArray]:
        mean = obs @ np.array([[0.5], [-0.2], [0.1]], np.float32)
        # Seeded by the observation, so that every autoreset mode draws the same actions.
        noise = np.random.default_rng(abs(hash(obs.tobytes())) % 2**32).normal(size=mean.shape)
        actions = np.clip(mean + 0.3 * noise, -2.0, 2.0).astype(np.float32)
        log_probs = (-0.5 * noise**2 - np.log(0.3 * np.sqrt(2 * np.pi))).sum(axis=-1)
        return {"actions": actions, "log_probs": log_probs, "critic": obs.sum(axis=-1)}


def make_pendulum() -> gym.Env[Any, Any]:
    return gym.wrappers.TimeLimit(gym.make("Pendulum-v1").unwrapped, 25)


def test_pendulum_with_a_gaussian_policy(envs: list[VecEnv], tmp_path: Any) -> None:
    first, second = record_in_every_mode(envs, make_pendulum, GaussianPolicy())
    assert first.model_outs.arrays["actions"].dtype == np.float32
    assert first.actions().shape == (31, B, 1)
    assert first.obses.shape == (31, B, 3)
    assert first.episode_stats().truncations == B  # 25-step time limit, never terminated
    np.testing.assert_array_equal(second.obses[0], first.obses[-1])
    assert np.all(first.rews <= 0)  # Pendulum's rewards are costs
    trajkit.save(first, tmp_path / "p.npz")
    assert trajkit.load(tmp_path / "p.npz") == first
    batch = next(first.minibatches(16, gamma=0.99, lam=0.95, seed=0))
    assert batch["actions"].shape == (16, 1)


# ----------------------------------------------------- Dict observations: CartPole split


def make_dict_cartpole() -> gym.Env[Any, Any]:
    env = gym.make("CartPole-v1", max_episode_steps=20)
    return gym.wrappers.TransformObservation(env, split, DICT_SPACE)


def make_cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", max_episode_steps=20)


def flat_policy(obs: AnyArray) -> dict[str, AnyArray]:
    return {
        "actions": (obs[:, 2] + 0.1 * obs[:, 3] > 0).astype(np.int64),
        "critic": obs @ np.array([0.1, 0.2, 0.3, 0.4], np.float32),
    }


def dict_policy(obs: dict[str, AnyArray]) -> dict[str, AnyArray]:
    return flat_policy(np.concatenate([obs["position"], obs["velocity"]], axis=1))


def test_dict_observation_cartpole_matches_plain_cartpole(envs: list[VecEnv]) -> None:
    nested = record_in_every_mode(envs, make_dict_cartpole, dict_policy)
    flat = record_in_every_mode(envs, make_cartpole, flat_policy)
    for got, want in zip(nested, flat, strict=True):
        assert isinstance(got.obses, dict)
        assert list(got.obses) == ["position", "velocity"]
        np.testing.assert_array_equal(got.obses["position"], want.obses[..., :2])
        np.testing.assert_array_equal(got.obses["velocity"], want.obses[..., 2:])
        np.testing.assert_array_equal(got.rews, want.rews)
        np.testing.assert_array_equal(got.dones, want.dones)
        np.testing.assert_array_equal(got.final_values, want.final_values)  # truncations
        np.testing.assert_array_equal(got.advantages(0.9, 0.9), want.advantages(0.9, 0.9))
    stats = nested[0].episode_stats()
    assert stats.truncations + stats.terminations > 0


# -------------------------------------------------------- Tuple observations: Blackjack


def blackjack_policy(obs: tuple[AnyArray, AnyArray, AnyArray]) -> dict[str, AnyArray]:
    total, dealer, _ = obs
    return {"actions": (total < 17).astype(np.int64), "critic": (dealer / 10.0).astype(float)}


def make_blackjack() -> gym.Env[Any, Any]:
    return gym.make("Blackjack-v1")


def test_blackjack_tuple_observations(envs: list[VecEnv], tmp_path: Any) -> None:
    first, _ = record_in_every_mode(envs, make_blackjack, blackjack_policy, steps=12)
    assert isinstance(first.obses, tuple)
    assert [leaf.shape for leaf in first.obses] == [(13, B)] * 3
    assert [leaf.dtype.kind for leaf in first.obses] == ["i"] * 3
    assert first.episode_stats().terminations > 0  # hands end often
    trajkit.save(first, tmp_path / "b.npz")
    assert trajkit.load(tmp_path / "b.npz") == first
    spec = trajkit.RolloutSpec.from_rollout(first)
    assert [path for path, _ in spec.leaves("obses")] == [(0,), (1,), (2,)]


# --------------------------------------- MultiBinary and nested observations, MultiDiscrete


class GridEnv(gym.Env[dict[str, Any], AnyArray]):
    """Moves on a 5x5 grid with MultiDiscrete actions; nested Dict/Tuple observations."""

    observation_space = gym.spaces.Dict(
        {
            "cell": gym.spaces.MultiBinary(25),
            "where": gym.spaces.Tuple(
                (gym.spaces.MultiDiscrete([5, 5]), gym.spaces.Dict({"t": gym.spaces.Discrete(9)}))
            ),
        }
    )
    action_space = gym.spaces.MultiDiscrete([3, 3])

    def _obs(self) -> dict[str, Any]:
        cell = np.zeros(25, np.int8)
        cell[self.pos[0] * 5 + self.pos[1]] = 1
        return {"cell": cell, "where": (self.pos.copy(), {"t": self.t})}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = self.np_random.integers(0, 5, 2)
        self.t = 0
        return self._obs(), {}

    def step(self, action: AnyArray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.pos = np.clip(self.pos + np.asarray(action) - 1, 0, 4)
        self.t += 1
        at_goal = bool((self.pos == 4).all())
        return self._obs(), float(at_goal), at_goal, self.t >= 8, {}


def grid_policy(obs: dict[str, Any]) -> dict[str, AnyArray]:
    pos, t = obs["where"][0], obs["where"][1]["t"]
    towards = np.where(pos < 4, 2, 1)
    still = np.ones_like(pos)
    # Moves every third step, so that far starts hit the time limit and near ones the goal.
    return {
        "actions": np.where((t % 3 == 0)[:, None], towards, still).astype(np.int64),
        "critic": obs["where"][1]["t"] / 10.0,
    }


def test_multi_discrete_actions_and_nested_observations(envs: list[VecEnv], tmp_path: Any) -> None:
    first, _ = record_in_every_mode(envs, GridEnv, grid_policy, steps=20)
    assert first.actions().dtype == np.int32
    assert first.actions().shape == (21, B, 2)
    assert first.obses["cell"].shape == (21, B, 25)
    assert first.obses["where"][0].shape == (21, B, 2)
    assert first.obses["where"][1]["t"].shape == (21, B)
    stats = first.episode_stats()
    assert stats.terminations > 0
    assert stats.truncations > 0
    trajkit.save(first, tmp_path / "g.npz")
    assert trajkit.load(tmp_path / "g.npz") == first
    batch = next(first.minibatches(8, gamma=0.9, lam=0.9, seed=0))
    assert batch["obses"]["where"][1]["t"].shape == (8,)
