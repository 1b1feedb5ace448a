"""The env's fields of a recording's metadata: spaces as JSON, and what a vector env tells.

`describe_space` is the form `Recording.observation_space` and `.action_space` hold (lint
compares recordings by it), so each space type's JSON is pinned whole; `describe_env` reads
the id, the `make_vec` arguments that JSON can hold, the time limit and the wrappers.
"""

from __future__ import annotations

import json
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from trajkit.gym._describe import describe_env, describe_space


@pytest.mark.parametrize(
    ("space", "described"),
    [
        (spaces.Discrete(3), {"type": "Discrete", "n": 3, "start": 0}),
        (spaces.Discrete(2, start=-1), {"type": "Discrete", "n": 2, "start": -1}),
        (
            spaces.Box(-1.0, np.inf, (2,)),
            {"type": "Box", "shape": [2], "dtype": "float32", "low": -1.0, "high": None},
        ),
        (
            spaces.Box(-np.inf, 2.5, (1, 2), np.float64),
            {"type": "Box", "shape": [1, 2], "dtype": "float64", "low": None, "high": 2.5},
        ),
        (
            spaces.Box(np.array([-1.0, -np.inf], np.float32), np.array([2.0, 3.0], np.float32)),
            {
                "type": "Box",
                "shape": [2],
                "dtype": "float32",
                "low": [-1.0, None],
                "high": [2.0, 3.0],
            },
        ),
        (
            spaces.Box(0, 255, (2, 2), np.uint8),
            {"type": "Box", "shape": [2, 2], "dtype": "uint8", "low": 0.0, "high": 255.0},
        ),
        (
            spaces.Box(np.zeros((2, 1), np.float32), np.array([[1.0], [np.inf]], np.float32)),
            {
                "type": "Box",
                "shape": [2, 1],
                "dtype": "float32",
                "low": 0.0,
                "high": [[1.0], [None]],
            },
        ),
        (
            spaces.MultiDiscrete([3, 4], start=[1, 0]),
            {"type": "MultiDiscrete", "nvec": [3, 4], "start": [1, 0]},
        ),
        (spaces.MultiBinary(4), {"type": "MultiBinary", "n": 4}),
        (spaces.MultiBinary([2, 3]), {"type": "MultiBinary", "n": [2, 3]}),
        (spaces.Text(5), {"type": "Text"}),
        (
            spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Tuple([spaces.MultiBinary(1)])}),
            {
                "type": "Dict",
                "spaces": {
                    "a": {"type": "Discrete", "n": 2, "start": 0},
                    "b": {"type": "Tuple", "spaces": [{"type": "MultiBinary", "n": 1}]},
                },
            },
        ),
    ],
    ids=lambda x: type(x).__name__ if isinstance(x, spaces.Space) else "",
)
def test_describe_space(space: spaces.Space[Any], described: dict[str, Any]) -> None:
    result = describe_space(space)
    assert result == described
    assert json.loads(json.dumps(result, allow_nan=False)) == described


def test_an_empty_box_has_empty_bounds() -> None:
    described = describe_space(spaces.Box(0.0, 1.0, (0,)))
    assert (described["low"], described["high"]) == ([], [])


def _vec(**kwargs: Any) -> Any:
    return gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", **kwargs)


CARTPOLE_SPACES = {
    "observation_space": describe_space(gym.make("CartPole-v1").observation_space),
    "action_space": {"type": "Discrete", "n": 2, "start": 0},
}


def test_describe_env_of_make_vec() -> None:
    env = _vec(max_episode_steps=50)
    try:
        assert describe_env(env) == {
            "env_id": "CartPole-v1",
            "env_kwargs": {"max_episode_steps": 50},
            "unrecorded_kwargs": [],
            "vectorization_mode": "sync",
            "max_episode_steps": 50,
            **CARTPOLE_SPACES,
            "wrappers": [],
        }
    finally:
        env.close()


def test_describe_env_records_what_json_holds_and_names_the_rest() -> None:
    env = _vec(
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        sutton_barto_reward=True,
    )
    env.spec.kwargs["weights"] = math.nan  # (kwargs JSON cannot hold)
    env.spec.kwargs["shaping"] = lambda reward: reward
    try:
        described = describe_env(env)
    finally:
        env.close()
    assert described["env_kwargs"] == {
        "sutton_barto_reward": True,
        "vector_kwargs": {"autoreset_mode": "SameStep"},
    }
    assert described["unrecorded_kwargs"] == ["shaping", "weights"]
    assert described["max_episode_steps"] == 500  # the registered limit


def test_describe_env_names_the_vector_wrappers_outside_in() -> None:
    env = gym.wrappers.vector.RecordEpisodeStatistics(
        gym.wrappers.vector.ClipReward(_vec(), -1.0, 1.0)
    )
    try:
        described = describe_env(env)
    finally:
        env.close()
    assert described["wrappers"] == ["RecordEpisodeStatistics", "ClipReward"]
    assert described["env_id"] == "CartPole-v1"
    assert described["max_episode_steps"] == 500


def test_describe_env_of_a_hand_built_vector_env() -> None:
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=20)] * 2)
    try:
        described = describe_env(env)
    finally:
        env.close()
    assert described == {
        "env_id": None,
        "env_kwargs": {},
        "unrecorded_kwargs": [],
        "vectorization_mode": None,
        "max_episode_steps": 20,  # the sub-envs' own TimeLimit
        **CARTPOLE_SPACES,
        "wrappers": [],
    }


def test_a_time_limit_that_is_not_a_positive_int_is_not_recorded() -> None:
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=None)])
    env.envs[0].spec.max_episode_steps = None  # type: ignore[union-attr]
    try:
        assert describe_env(env)["max_episode_steps"] is None
    finally:
        env.close()


@pytest.mark.parametrize(
    ("limit", "recorded"), [(0, None), (1, 1), (2, 2), (-1, None), (1.0, None)]
)
def test_the_time_limit_is_recorded_from_1(limit: Any, recorded: int | None) -> None:
    env = _vec()
    env.spec.kwargs["max_episode_steps"] = limit
    env.envs[0].spec.max_episode_steps = None
    try:
        assert describe_env(env)["max_episode_steps"] == recorded
    finally:
        env.close()
