"""The recorder's checks of one step, on a stand-in vector env: flags, rewards, observations.

`StepGuard` reads only the env's spaces and its number of envs, so each check is pinned here
without running an env: what it returns (a bool `[B]`, float64 rewards, the batch in the
space's order), and each refusal's message with where the value came from; SAME_STEP's final
observations replace the rows of the envs that ended, in a copy of the batch.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from gymnasium import spaces

from trajkit.gym._guard import StepGuard

B = 3
F32 = spaces.Box(-10.0, 10.0, (2,), np.float32)
DICT = spaces.Dict({"count": spaces.Discrete(50), "pos": F32})
FIRST = "step 0 of the recording (the first reset)"


def _guard(space: Any = DICT) -> StepGuard:
    env: Any = SimpleNamespace(
        single_observation_space=space, single_action_space=spaces.Discrete(3), num_envs=B
    )

    def policy(obs: Any) -> dict[str, Any]:
        return {"actions": np.zeros(B, np.int64), "critic": np.arange(B, dtype=np.float32)}

    return StepGuard(env, policy, None)


def _refused(message: str) -> Any:
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


def test_flags_are_one_bool_per_env() -> None:
    flags = _guard().flags(np.array([1, 0, 1]), "terminated")
    assert flags.dtype == np.bool_
    assert flags.tolist() == [True, False, True]
    with _refused(f"terminated must hold only 0 and 1, got 2 at (b=1) (env 1, {FIRST})"):
        _guard().flags(np.array([1, 2, 0]), "terminated")
    with _refused(f"truncated must hold one flag per env, shape (3,), got shape (2,) ({FIRST})"):
        _guard().flags([1, 0], "truncated")
    with _refused(f"truncated must hold one flag per env, shape (3,), got shape () ({FIRST})"):
        _guard().flags(True, "truncated")


def test_rewards_are_float64_checked_as_the_rollout_stores_them() -> None:
    guard = _guard()
    guard.step = 4
    rews = guard.rewards([1, 2, 3])
    assert rews.dtype == np.float64
    assert rews.tolist() == [1.0, 2.0, 3.0]
    precise = guard.rewards(np.array([0.1, 0.2, 0.3]))
    assert precise.tolist() == [0.1, 0.2, 0.3]  # kept in float64 for the sums
    with _refused(
        "rews must hold one reward per env, shape (3,), got shape () (step 4 of the recording)"
    ):
        guard.rewards(np.float32(1))
    with _refused("rews must be finite, got nan at (b=1) (env 1, step 4 of the recording)"):
        guard.rewards([1.0, np.nan, 2.0])
    with _refused(
        "rews holds 1e+300 at (b=1), beyond float32's range (+-3.403e+38): stored as float32 "
        "it would become inf (env 1, step 4 of the recording)"
    ):
        guard.rewards(np.array([1.0, 1e300, 2.0]))


def test_the_critic_is_float64() -> None:
    critic = _guard().critic({})
    assert critic.dtype == np.float64
    assert critic.tolist() == [0.0, 1.0, 2.0]


def _obs() -> dict[str, Any]:
    return {"count": np.array([1, 2, 3]), "pos": np.zeros((B, 2), np.float32)}


def test_a_dict_batch_in_another_order_is_read_by_the_space() -> None:
    obs = _obs()
    batch = _guard().obs_batch({"pos": obs["pos"], "count": obs["count"]})
    assert list(batch) == ["count", "pos"]
    np.testing.assert_array_equal(batch["count"], [1, 2, 3])


@pytest.mark.parametrize(
    ("obs", "problem"),
    [
        ({"pos": 0, "x": 1}, "missing obses['count']; not in the space: obses['x']"),
        ({"pos": 0}, "missing obses['count']"),
        ({"pos": 0, "count": 0, "y": 1, "x": 2}, "not in the space: obses['x'], obses['y']"),
    ],
)
def test_a_dict_batch_of_another_structure_is_refused(obs: dict[str, Any], problem: str) -> None:
    with _refused(
        f"obses must have the structure of the observation space: {problem} ({FIRST}; space {DICT})"
    ):
        _guard().obs_batch(obs)


def _finals(**rows: Any) -> Any:
    finals = np.empty(B, object)
    finals[1] = {"count": 5, "pos": np.ones(2)}
    finals[2] = {"count": 7, "pos": np.full(2, 2.0)}
    for b, row in rows.items():
        finals[int(b[1:])] = row
    return finals


WHICH = np.array([False, True, True])


def test_final_observations_replace_the_rows_of_the_envs_that_ended() -> None:
    obs = _obs()
    batch = _guard().with_final_obs(obs, {"final_obs": _finals(), "_final_obs": WHICH}, WHICH)
    assert batch["count"].tolist() == [1, 5, 7]
    assert batch["pos"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert batch["pos"].dtype == np.float32
    np.testing.assert_array_equal(obs["pos"], np.zeros((B, 2)))  # a copy


def test_final_observations_of_a_box_space() -> None:
    obs = np.zeros((B, 2), np.float32)
    finals = np.empty(B, object)
    finals[2] = np.array([3.0, 4.0])
    which = np.array([False, False, True])
    batch = _guard(F32).with_final_obs(obs, {"final_obs": finals, "_final_obs": which}, which)
    assert batch.tolist() == [[0, 0], [0, 0], [3, 4]]
    finals[2] = np.array([3.0])
    where = f"env 2's final observation in infos['final_obs'], {FIRST}; space {F32}"
    with _refused(f"obses must have shape (2,) (the space's), got shape (1,) ({where})"):
        _guard(F32).with_final_obs(obs, {"final_obs": finals, "_final_obs": which}, which)


@pytest.mark.parametrize(
    ("rows", "env", "problem"),
    [
        ({"b2": {"count": 7}}, 2, "obses['pos'] is missing"),
        (
            {"b1": {"count": 5, "pos": np.ones(3)}},
            1,
            "obses['pos'] must have shape (2,) (the space's), got shape (3,)",
        ),
        (
            {"b1": {"count": 5, "pos": np.array([np.nan, 1])}},
            1,
            "obses['pos'] must be finite, got nan at (0)",
        ),
        ({"b2": {"count": 7.5, "pos": np.ones(2)}}, 2, "obses['count']"),
    ],
)
def test_a_bad_final_observation_is_refused_naming_the_env(
    rows: dict[str, Any], env: int, problem: str
) -> None:
    where = f"env {env}'s final observation in infos['final_obs'], {FIRST}"
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}.* \\({re.escape(where)}; space "):
        _guard().with_final_obs(_obs(), {"final_obs": _finals(**rows), "_final_obs": WHICH}, WHICH)


@pytest.mark.parametrize(
    "infos",
    [
        {"final_obs": _finals(), "_final_obs": np.array([False, True, False])},
        {"final_obs": _finals()},
        {"_final_obs": WHICH},
    ],
)
def test_an_end_without_its_final_observation_is_an_error(infos: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError, match=r"without reporting its final observation in infos"):
        _guard().with_final_obs(_obs(), infos, WHICH)
