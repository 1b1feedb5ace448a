"""The recorder as a door into trajkit: every value is checked by the rule table, nothing is cast.

A small vector wrapper (`Tamper`) changes one part of what a real `SyncVectorEnv` returns at a
chosen step (0: the first reset). Each refusal is pinned: the rule table's message comes first
(`obses must be finite`, `rews must be finite`, ...), then where the value came from (env,
step, space). A `record()` that raises either leaves the recorder as it was (a failure in the
first reset: a retry records the same steps) or refuses further use, saying why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym
from gymnasium.vector import AutoresetMode

import trajkit
import trajkit.gym.recorder as gym_recorder
from trajkit._base.types import AnyArray
from trajkit.gym import RolloutRecorder

B = 3
MODES = list(AutoresetMode)
VecEnv = gym.vector.VectorEnv[Any, Any, Any]
U8 = gym.spaces.Box(0, 255, (4,), np.uint8)
F32 = gym.spaces.Box(-10.0, 10.0, (4,), np.float32)
DICT = gym.spaces.Dict({"count": gym.spaces.Discrete(50), "pos": F32})


def fill(space: Any, value: int) -> Any:
    """An element of `space` (Box, Discrete or Dict of them) made of `value`."""
    if isinstance(space, gym.spaces.Dict):
        return {key: fill(sub, value) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Discrete):
        return np.int64(value)
    return np.full(space.shape, value % 7, space.dtype)


class Counter(gym.Env[Any, Any]):
    """Observations count the steps; reward 1 (action 1) or 0.5; episodes of `length` steps.

    Episodes end by termination, except every third one, cut by a time limit (truncation).
    """

    def __init__(self, space: Any = U8, length: int = 4) -> None:
        self.observation_space = space
        self.action_space = gym.spaces.Discrete(2)
        self.length = length
        self.t = 0
        self.episode = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return fill(self.observation_space, 0), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        end = self.t == self.length
        cut = end and self.episode % 3 == 2
        if end:
            self.episode += 1
        reward = 1.0 if int(action) == 1 else 0.5
        return fill(self.observation_space, self.t), reward, end and not cut, cut, {"n": self.t}


class Tamper(gym.vector.VectorWrapper):
    """Applies `change` to part `part` ("obs", "rews", "terms", "truncs", "infos") at step `at`.

    Step 0 is the first reset (only "obs" there); step k the k-th `step` call.
    """

    def __init__(self, env: VecEnv, part: str, at: int, change: Callable[[Any], Any]) -> None:
        super().__init__(env)
        self.part, self.at, self.change = part, at, change
        self.steps = 0
        self.armed = True

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = self.env.reset(**kwargs)
        if "options" not in kwargs or kwargs["options"] is None:
            self.steps = 0
        if self.armed and self.at == 0 and self.steps == 0 and self.part == "obs":
            obs = self.change(obs)
        return obs, infos

    def step(self, actions: Any) -> Any:
        self.steps += 1
        names = ("obs", "rews", "terms", "truncs", "infos")
        parts = dict(zip(names, self.env.step(actions), strict=True))
        if self.armed and self.steps == self.at:
            parts[self.part] = self.change(parts[self.part])
        return tuple(parts.values())


def counter_env(
    envs: list[VecEnv],
    space: Any = U8,
    mode: AutoresetMode = AutoresetMode.NEXT_STEP,
    length: int = 4,
) -> VecEnv:
    env = gym.vector.SyncVectorEnv([lambda: Counter(space, length)] * B, autoreset_mode=mode)
    envs.append(env)
    return env


def first_leaf(obs: Any) -> AnyArray:
    leaf: AnyArray = obs["count"] if isinstance(obs, dict) else obs
    return leaf


def policy(obs: Any) -> dict[str, AnyArray]:
    leaf = first_leaf(obs).reshape(B, -1)
    return {
        "actions": (leaf.sum(axis=1) % 2).astype(np.int64),
        "critic": np.ones(B, np.float32),
    }


def tampered(
    envs: list[VecEnv], part: str, at: int, change: Callable[[Any], Any], **kwargs: Any
) -> Tamper:
    env = Tamper(counter_env(envs, **kwargs), part, at, change)
    envs.append(env)
    return env


def setting(index: tuple[int, ...], value: Any, dtype: Any = None) -> Callable[[Any], Any]:
    """A change that sets `obs[index] = value`, in `dtype` (else the batch's own)."""

    def change(batch: Any) -> Any:
        out = np.array(batch, dtype=dtype)
        out[index] = value
        return out

    return change


def pinned(message: str) -> str:
    """A regex for `message` from its start; " … " stands for any text (a rule's details)."""
    return "^" + ".*".join(re.escape(part) for part in message.split(" … "))


# ---------------------------------------------------------------------------- observations


@pytest.mark.parametrize(
    ("space", "change", "message"),
    [
        (
            U8,
            setting((1, 2), 300, np.int64),
            "obses must fit in uint8 … got 300 at (b=1, 2) (env 1, step 2 of the recording; "
            "space Box(0, 255, (4,), uint8))",
        ),
        (
            U8,
            setting((2, 0), -1.7, np.float64),
            "obses must be integer-valued … got -1.7 at (b=2, 0) (env 2, step 2 of the "
            "recording; space Box(0, 255, (4,), uint8))",
        ),
        (
            F32,
            setting((0, 3), 1e300, np.float64),
            "obses holds 1e+300 at (b=0, 3), beyond float32's range (+-3.403e+38): stored as "
            "float32 it would become inf (env 0, step 2 of the recording; space Box(-10.0, "
            "10.0, (4,), float32))",
        ),
        (
            F32,
            setting((1, 1), np.nan),
            "obses must be finite, got nan at (b=1, 1) (env 1, step 2 of the recording; space "
            "Box(-10.0, 10.0, (4,), float32))",
        ),
        (
            F32,
            setting((2, 1), -np.inf, np.float64),
            "obses must be finite, got -inf at (b=2, 1) (env 2, step 2 of the recording; "
            "space Box(-10.0, 10.0, (4,), float32))",
        ),
        (
            U8,
            lambda obs: obs[:, :1],
            "obses must have shape (3, 4): B=3 observations of the space's shape (4,), got "
            "shape (3, 1) (step 2 of the recording; space Box(0, 255, (4,), uint8))",
        ),
        (
            U8,
            lambda obs: obs[:, :, None],
            "obses must have shape (3, 4): B=3 observations of the space's shape (4,), got "
            "shape (3, 4, 1) (step 2 of the recording",
        ),
        (
            U8,
            lambda obs: [["a"] * 4] * B,
            "obses must hold real numbers",
        ),
    ],
    ids=["wrap", "truncate", "overflow", "nan", "inf", "stretch", "extra-dim", "strings"],
)
def test_observations_that_do_not_fit_the_space_are_refused(
    envs: list[VecEnv], space: Any, change: Callable[[Any], Any], message: str
) -> None:
    recorder = RolloutRecorder(tampered(envs, "obs", 2, change, space=space), policy, seed=0)
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(4)


def test_a_dict_leaf_that_does_not_fit_is_named_by_its_path(envs: list[VecEnv]) -> None:
    def nan_pos(obs: Any) -> Any:
        return {**obs, "pos": setting((2, 0), np.nan)(obs["pos"])}

    recorder = RolloutRecorder(tampered(envs, "obs", 3, nan_pos, space=DICT), policy, seed=0)
    message = "obses['pos'] must be finite, got nan at (b=2, 0) (env 2, step 3 of the recording; "
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(5)


def test_a_dict_without_a_leaf_of_the_space_is_refused(envs: list[VecEnv]) -> None:
    def drop_pos(obs: Any) -> Any:
        return {"count": obs["count"], "speed": obs["pos"]}

    recorder = RolloutRecorder(tampered(envs, "obs", 1, drop_pos, space=DICT), policy, seed=0)
    message = (
        "obses must have the structure of the observation space: missing obses['pos']; not in "
        "the space: obses['speed'] (step 1 of the recording; space Dict("
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(5)


def test_dict_observations_in_another_key_order_are_recorded_in_the_spaces(
    envs: list[VecEnv],
) -> None:
    def reorder(obs: Any) -> Any:
        return {"pos": obs["pos"], "count": obs["count"]}

    got = RolloutRecorder(tampered(envs, "obs", 2, reorder, space=DICT), policy, seed=0).record(5)
    want = RolloutRecorder(counter_env(envs, DICT), policy, seed=0).record(5)
    assert got == want
    assert list(got.obses) == ["count", "pos"]


def test_observations_of_another_dtype_that_fit_are_stored_in_the_spaces_dtype(
    envs: list[VecEnv],
) -> None:
    as_lists = tampered(envs, "obs", 2, lambda obs: obs.astype(np.float64).tolist())
    got = RolloutRecorder(as_lists, policy, seed=0).record(5)
    want = RolloutRecorder(counter_env(envs), policy, seed=0).record(5)
    assert got.obses.dtype == np.uint8
    assert got == want


def test_a_bad_first_reset_can_be_retried_and_records_the_same_steps(
    envs: list[VecEnv],
) -> None:
    env = tampered(envs, "obs", 0, setting((0, 0), np.nan), space=F32)
    recorder = RolloutRecorder(env, policy, seed=0)
    message = (
        "obses must be finite, got nan at (b=0, 0) (env 0, step 0 of the recording (the first "
        "reset); space Box(-10.0, 10.0, (4,), float32))"
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(3)
    env.armed = False
    got = [recorder.record(3), recorder.record(3)]
    fresh = RolloutRecorder(counter_env(envs, F32), policy, seed=0)
    assert got == [fresh.record(3), fresh.record(3)]


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP])
def test_a_final_observation_that_does_not_fit_is_refused(
    envs: list[VecEnv], mode: AutoresetMode
) -> None:
    def bad_final(infos: Any) -> Any:
        final = np.array(infos["final_obs"], dtype=object)
        for b in np.flatnonzero(infos["_final_obs"]):
            final[b] = np.full(4, np.nan, np.float32)
        return {**infos, "final_obs": final}

    # Episodes of 2 steps: the third (steps 5-6) is cut by the time limit, at step 6.
    env = tampered(envs, "infos", 6, bad_final, space=F32, mode=mode, length=2)
    recorder = RolloutRecorder(env, policy, seed=0)
    message = (
        "obses must be finite, got nan at (0) (env 0's final observation in "
        "infos['final_obs'], step 6 of the recording; space Box(-10.0, 10.0, (4,), float32))"
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(8)


# -------------------------------------------------------------------- rewards and flags


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            setting((1,), np.nan),
            "rews must be finite, got nan at (b=1) (env 1, step 3 of the recording)",
        ),
        (
            setting((2,), 1e300),
            "rews holds 1e+300 at (b=2), beyond float32's range (+-3.403e+38): stored as "
            "float32 it would become inf (env 2, step 3 of the recording)",
        ),
        (lambda rews: ["1.0"] * B, "rews must hold real numbers"),
        (
            lambda rews: rews[:, None],
            "rews must hold one reward per env, shape (3,), got shape (3, 1) (step 3 of the "
            "recording)",
        ),
    ],
    ids=["nan", "overflow", "strings", "column"],
)
def test_rewards_that_break_the_rews_rule_are_refused(
    envs: list[VecEnv], change: Callable[[Any], Any], message: str
) -> None:
    recorder = RolloutRecorder(tampered(envs, "rews", 3, change), policy, seed=0)
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(5)


@pytest.mark.parametrize("part", ["terms", "truncs"])
def test_ending_flags_other_than_0_and_1_are_refused(envs: list[VecEnv], part: str) -> None:
    recorder = RolloutRecorder(
        tampered(envs, part, 2, lambda flags: np.array([0, 2, 0])), policy, seed=0
    )
    name = "terminated" if part == "terms" else "truncated"
    with pytest.raises(
        ValueError, match=f"^{name} must hold only 0 and 1, got 2 at .*env 1, step 2"
    ):
        recorder.record(5)


def test_rewards_and_flags_as_lists_or_small_dtypes_are_recorded_unchanged(
    envs: list[VecEnv],
) -> None:
    def lists(part: str) -> Tamper:
        return tampered(envs, part, 2, lambda v: np.asarray(v).astype(np.float32).tolist())

    want = RolloutRecorder(counter_env(envs), policy, seed=0).record(6)
    for part in ("rews", "terms", "truncs"):
        assert RolloutRecorder(lists(part), policy, seed=0).record(6) == want, part


# ------------------------------------------------------------------------ policy outputs


def with_output(key: str, value: Callable[[Any], Any], at_call: int = 3) -> Callable[..., Any]:
    """`policy`, but output `key` is `value(obs)` from its `at_call`-th call on (0: the first)."""
    calls = [0]

    def changed(obs: Any) -> dict[str, Any]:
        outs: dict[str, Any] = dict(policy(obs))
        if calls[0] >= at_call:
            outs[key] = value(obs)
        calls[0] += 1
        return outs

    return changed


def column(values: list[Any], dtype: Any) -> Callable[[Any], AnyArray]:
    return lambda obs: np.array(values, dtype=dtype)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "actions",
            column([1.9, 0.0, 1.0], np.float64),
            "model_outs['actions'] must be integer-valued … got 1.9 at (b=0) (env 0, step 3 "
            "of the recording; space Discrete(2))",
        ),
        (
            "actions",
            column([0, 1, np.nan], np.float64),
            "model_outs['actions'] must be finite, got nan at (b=2) (env 2, step 3 of the "
            "recording; space Discrete(2))",
        ),
        (
            "actions",
            column([0, 1, 2**40], np.int64),
            "model_outs['actions'] must fit in int32 … got 1099511627776 at (b=2) (env 2, step "
            "3 of the recording; space Discrete(2))",
        ),
        (
            "critic",
            column([0.0, np.nan, 1.0], np.float32),
            "model_outs['critic'] must be finite, got nan at (b=1) (env 1, step 3 of the "
            "recording)",
        ),
        (
            "critic",
            column([1e300, 0.0, 1.0], np.float64),
            "model_outs['critic'] holds 1e+300 at (b=0), beyond float32's range (+-3.403e+38): "
            "stored as float32 it would become inf (env 0, step 3 of the recording)",
        ),
    ],
    ids=["int-truncated", "nan-action", "int32-overflow", "nan-critic", "critic-overflow"],
)
def test_policy_outputs_that_break_their_rule_are_refused(
    envs: list[VecEnv], key: str, value: Callable[[Any], Any], message: str
) -> None:
    recorder = RolloutRecorder(counter_env(envs), with_output(key, value), seed=0)
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(6)


def test_a_float64_critic_beyond_float32_is_refused_where_it_appears(envs: list[VecEnv]) -> None:
    calls = [0]

    def float64_critic(obs: Any) -> dict[str, Any]:
        calls[0] += 1
        critic = np.array([0.0, -1e39 if calls[0] == 4 else 1.0, 2.0])
        return {**policy(obs), "critic": critic}

    recorder = RolloutRecorder(counter_env(envs), float64_critic, seed=0)
    message = (
        "model_outs['critic'] holds -1e+39 at (b=1), beyond float32's range … (env 1, step 3 "
        "of the recording)"
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(6)


def test_a_float64_critic_is_recorded_as_float32(envs: list[VecEnv]) -> None:
    def float64_critic(obs: Any) -> dict[str, Any]:
        outs = policy(obs)
        return {**outs, "critic": outs["critic"].astype(np.float64) / 3}

    r = RolloutRecorder(counter_env(envs), float64_critic, seed=0).record(4)
    assert r.model_outs.arrays["critic"].dtype == np.float32
    np.testing.assert_array_equal(r.model_outs.arrays["critic"], np.float32(1 / 3))


def test_an_integer_output_is_not_truncated_by_a_later_float(envs: list[VecEnv]) -> None:
    def aux(obs: Any) -> dict[str, Any]:
        outs = policy(obs)
        step = int(first_leaf(obs).reshape(B, -1)[0, 0])
        kind = np.int64 if step < 2 else np.float64
        return {**outs, "aux": np.array([1, 2, 3], kind) + (0.5 if step == 3 else 0)}

    recorder = RolloutRecorder(counter_env(envs, length=9), aux, seed=0)
    message = (
        "model_outs['aux'] must be integer-valued … got 1.5 at (b=0) (env 0, step 3 of the "
        "recording)"
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(5)


def test_discrete_actions_beyond_the_logits_are_refused(envs: list[VecEnv]) -> None:
    def with_actor(obs: Any) -> dict[str, Any]:
        return {**policy(obs), "actor": np.zeros((B, 2), np.float32)}

    bad = with_output("actions", column([0, 5, 1], np.int64))

    def both(obs: Any) -> dict[str, Any]:
        return {**bad(obs), "actor": with_actor(obs)["actor"]}

    recorder = RolloutRecorder(counter_env(envs), both, seed=0)
    message = (
        "model_outs['actions'] must be in [0, A) with A=2 from model_outs['actor'], got 5 at "
        "(b=1) (env 1, step 3 of the recording; space Discrete(2))"
    )
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(6)


def test_float_actions_that_are_integers_are_recorded_and_sent_as_the_spaces_dtype(
    envs: list[VecEnv],
) -> None:
    sent: list[AnyArray] = []

    class Spy(gym.vector.VectorWrapper):
        def step(self, actions: Any) -> Any:
            sent.append(actions)
            return self.env.step(actions)

    def floats(obs: Any) -> dict[str, Any]:
        outs = policy(obs)
        return {**outs, "actions": outs["actions"].astype(np.float64)}

    got = RolloutRecorder(Spy(counter_env(envs)), floats, seed=0).record(4)
    want = RolloutRecorder(counter_env(envs), policy, seed=0).record(4)
    assert got == want
    assert {a.dtype for a in sent} == {np.dtype(np.int64)}


def test_states_that_break_the_states_rule_are_refused(envs: list[VecEnv]) -> None:
    calls = [0]

    def state_fn(env: Any) -> AnyArray:
        calls[0] += 1
        return np.array([[0.0], [np.inf if calls[0] == 3 else 1.0], [0.0]])

    recorder = RolloutRecorder(counter_env(envs), policy, seed=0, state_fn=state_fn)
    message = "states must be finite, got inf at (b=1, 0) (env 1, step 2 of the recording)"
    with pytest.raises(ValueError, match=pinned(message)):
        recorder.record(5)


# -------------------------------------------------------------------------- transactions


def test_after_a_refused_step_the_recorder_refuses_to_go_on(envs: list[VecEnv]) -> None:
    """The issue's case: a NaN reward in the second record() call."""
    env = tampered(envs, "rews", 7, setting((1,), np.nan))
    recorder = RolloutRecorder(env, policy, seed=0)
    recorder.record(5)
    last, episodes = recorder.last_episodes, recorder.episodes
    with pytest.raises(ValueError, match=r"^rews must be finite"):
        recorder.record(5)
    assert recorder.last_episodes is last
    assert len(recorder.episodes) == len(episodes)
    message = (
        "this recorder failed in an earlier call (ValueError: rews must be finite, got nan at "
        "(b=1) (env 1, step 7 of the recording)) and its env may be mid-step"
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        recorder.record(5)
    assert len(recorder.episodes) == len(episodes)


def test_a_rollout_that_cannot_be_built_leaves_the_recorder_unchanged(
    envs: list[VecEnv], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = RolloutRecorder(counter_env(envs, length=3), policy, seed=0)
    recorder.record(4)
    last, everything = recorder.last_episodes, recorder.episodes
    log = recorder._log
    before = (log.start, log.end, dict(recorder._infos), recorder._count.copy())
    real_rollout = trajkit.Rollout

    def refuse(**kwargs: Any) -> Any:
        raise ValueError("rews must be finite (injected)")

    monkeypatch.setattr(gym_recorder, "Rollout", refuse)
    with pytest.raises(ValueError, match=re.escape("rews must be finite (injected)")):
        recorder.record(4)
    after = (log.start, log.end, recorder._infos, recorder._count)
    assert recorder.last_episodes is last
    assert len(recorder.episodes) == len(everything)
    # Only the steps of the failed call were logged; nothing was taken from the log.
    assert after[0] == before[0]
    assert after[1] > before[1]
    assert set(before[2]) <= set(after[2])
    monkeypatch.setattr(gym_recorder, "Rollout", real_rollout)
    with pytest.raises(RuntimeError, match=r"\(ValueError: rews must be finite \(injected\)\)"):
        recorder.record(4)


# ------------------------------------------------------------------ the env's own returns


def pendulum(mode: AutoresetMode, wrappers: list[Any]) -> VecEnv:
    return gym.make_vec(
        "Pendulum-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        wrappers=wrappers,
        max_episode_steps=15,
    )


def pendulum_policy(obs: AnyArray) -> dict[str, AnyArray]:
    actions = np.clip(obs[:, :1] * 1.5 - obs[:, 2:3], -2.0, 2.0).astype(np.float32)
    return {"actions": actions, "critic": obs.sum(axis=1).astype(np.float32)}


@pytest.mark.parametrize("mode", MODES)
def test_episode_returns_are_the_envs_own_under_normalize_reward(
    envs: list[VecEnv], mode: AutoresetMode
) -> None:
    stats, normalize = gym.wrappers.RecordEpisodeStatistics, gym.wrappers.NormalizeReward
    normalized = pendulum(mode, [stats, normalize])
    plain = pendulum(mode, [])
    envs += [normalized, plain]
    got = RolloutRecorder(normalized, pendulum_policy, seed=0)
    raw = RolloutRecorder(plain, pendulum_policy, seed=0)
    rollouts = [got.record(20) for _ in range(3)]
    raw_rollouts = [raw.record(20) for _ in range(3)]
    assert len(got.episodes) == len(raw.episodes) == 8
    # Recorded rewards are the normalised ones; the returns are the env's undiscounted ones.
    assert not np.allclose(rollouts[0].rews, raw_rollouts[0].rews)
    np.testing.assert_allclose(got.episodes.returns, raw.episodes.returns, rtol=1e-9)
    np.testing.assert_array_equal(got.episodes.lengths, raw.episodes.lengths)
    np.testing.assert_array_equal(got.last_episodes.returns, got.episodes.returns[-4:])
    assert got.episodes.returns.mean() < -50  # Pendulum's scale, not the normalised one


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_episode_returns_come_from_the_vector_record_episode_statistics(
    envs: list[VecEnv], mode: AutoresetMode
) -> None:
    vector = gym.wrappers.vector
    normalized = vector.NormalizeReward(vector.RecordEpisodeStatistics(pendulum(mode, [])))
    plain = pendulum(mode, [])
    envs += [normalized, plain]
    got = RolloutRecorder(normalized, pendulum_policy, seed=0)
    raw = RolloutRecorder(plain, pendulum_policy, seed=0)
    for _ in range(2):
        got.record(20)
        raw.record(20)
    assert len(got.episodes) == 4
    np.testing.assert_allclose(got.episodes.returns, raw.episodes.returns, rtol=1e-9)
