"""`trajkit.gym.RolloutRecorder` against real Gymnasium CartPole-v1 vector environments.

Every test runs each autoreset mode. CartPole's observation is its full state, so the
dynamics can be replayed from any recorded observation: that checks, independently of the
recorder, that rows line up and that truncation bootstraps use the true final observation.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.vector import AutoresetMode

from tests.gym.helpers import choose
from trajkit import Rollout
from trajkit._base.types import AnyArray
from trajkit._models.rollout import given_infos
from trajkit.gym import RolloutRecorder

ROOT = Path(__file__).resolve().parents[2]
MODES = list(AutoresetMode)
LIMIT = 20
NUM_ENVS = 4
GAMMA, LAM = 0.99, 0.95
CRITIC_W = np.array([0.3, -0.2, 1.0, 0.5], np.float32)
ACTOR_W = np.array([[0.5, -0.5], [0.1, -0.1], [2.0, -2.0], [0.3, -0.3]], np.float32)

VecEnv = Any
MakeEnv = Callable[..., VecEnv]


def critic(obs: AnyArray) -> AnyArray:
    values: AnyArray = np.asarray(obs, np.float32) @ CRITIC_W + np.float32(1.0)
    return values


def policy(obs: AnyArray) -> dict[str, AnyArray]:
    """Deterministic row by row: the same observation always gives the same outputs."""
    logits = obs @ ACTOR_W
    actions = choose(obs)
    log_softmax = logits - np.logaddexp(logits[:, 0], logits[:, 1])[:, None]
    return {
        "actions": actions,
        "critic": critic(obs),
        "actor": logits,
        "log_probs": log_softmax[np.arange(len(obs)), actions],
    }


@pytest.fixture
def make_env() -> Iterator[MakeEnv]:
    envs: list[VecEnv] = []

    def make(
        mode: AutoresetMode,
        *,
        num_envs: int = NUM_ENVS,
        wrappers: list[Callable[[Any], Any]] | None = None,
        copy: bool = True,
    ) -> VecEnv:
        env = gym.make_vec(
            "CartPole-v1",
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": mode, "copy": copy},
            wrappers=wrappers,
            max_episode_steps=LIMIT,
        )
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


class CartPoleReplay:
    """Steps CartPole's dynamics from a recorded observation (which is its full state)."""

    def __init__(self) -> None:
        self.sim = CartPoleEnv()
        self.env: gym.Env[AnyArray, int | AnyArray] = self.sim  # the same env, typed
        self.env.reset(seed=0)

    def step(self, obs: AnyArray, action: int) -> tuple[AnyArray, float]:
        self.sim.state = np.asarray(obs, dtype=np.float64)
        self.sim.steps_beyond_terminated = None
        next_obs, reward, _, _, _ = self.env.step(int(action))
        return np.asarray(next_obs), float(reward)


def episode_ends(r: Rollout) -> list[tuple[int, int]]:
    """(t, b) of every step that ended an episode."""
    return [(int(t), int(b)) for t, b in zip(*np.nonzero(r.dones[1:] == 1), strict=True)]


def concat(parts: list[Rollout]) -> dict[str, AnyArray]:
    """Join consecutive rollouts into arrays, sharing each boundary row once."""
    rows = {
        "obses": [p.obses for p in parts],
        "dones": [p.dones for p in parts],
        **{f"out.{k}": [p.model_outs.arrays[k] for p in parts] for k in parts[0].model_outs.arrays},
    }
    joined = {k: np.concatenate([a[:-1] for a in v[:-1]] + [v[-1]]) for k, v in rows.items()}
    for name in ("rews", "truncated", "final_values"):
        joined[name] = np.concatenate([getattr(p, name) for p in parts])
    return joined


# ------------------------------------------------------------------- episode returns


@pytest.mark.parametrize("mode", MODES)
def test_rewards_between_starts_sum_to_record_episode_statistics(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    # Per-env RecordEpisodeStatistics, which works in every mode. The vector one is checked
    # below without DISABLED: in gymnasium 1.4, SyncVectorEnv.reset pops "reset_mask" from the
    # options dict it shares with the wrapper, which then restarts every env's statistics.
    env = make_env(mode, wrappers=[gym.wrappers.RecordEpisodeStatistics])
    recorder = RolloutRecorder(env, policy, seed=1)
    checked = 0
    for _ in range(2):
        r = recorder.record(45)
        for b in range(r.batch_size):
            starts = np.flatnonzero(r.dones[:, b] == 1)
            for s, e in itertools.pairwise(starts.tolist()):
                episode = r.infos[e - 1][b]["episode"]
                assert episode["r"] == pytest.approx(float(r.rews[s:e, b].sum()))
                assert episode["l"] == e - s
                checked += 1
        ends = set(episode_ends(r))
        with_stats = {
            (t, b) for t in range(r.num_steps) for b in range(r.batch_size) if r.infos[t][b]
        }
        assert with_stats == ends
    assert checked >= 10


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_record_episode_statistics(make_env: MakeEnv, mode: AutoresetMode) -> None:
    env = gym.wrappers.vector.RecordEpisodeStatistics(make_env(mode))
    r = RolloutRecorder(env, policy, seed=2, info_keys=["episode"]).record(60)
    stats = r.episode_stats()
    reported = [
        r.infos[t][b]["episode"]["r"]
        for b in range(r.batch_size)
        for t in range(r.num_steps)
        if "episode" in r.infos[t][b]
    ]
    assert stats.episodes == len(reported) >= 10
    assert stats.returns.tolist() == pytest.approx(reported)
    assert stats.terminations > 0
    assert stats.truncations > 0


@pytest.mark.parametrize("mode", MODES)
def test_completed_episodes_match_record_episode_statistics_across_rollouts(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    # Short rollouts, so that most episodes span several of them; the per-env wrapper's
    # info["episode"] is the reference (the vector one restarts under DISABLED, see above).
    env = make_env(mode, wrappers=[gym.wrappers.RecordEpisodeStatistics])
    recorder = RolloutRecorder(env, policy, seed=5, info_keys=["episode"])
    logged = []
    for _ in range(12):
        r = recorder.record(7)
        reported = sorted(
            (t, b, r.infos[t][b]["episode"]["r"], r.infos[t][b]["episode"]["l"])
            for t in range(r.num_steps)
            for b in range(r.batch_size)
            if "episode" in r.infos[t][b]
        )
        done = recorder.last_episodes
        assert len(done) == len(reported) == r.episode_stats().episodes
        assert done.returns.tolist() == pytest.approx([e[2] for e in reported])
        assert done.lengths.tolist() == [e[3] for e in reported]
        assert done.envs.tolist() == [e[1] for e in reported]
        assert int(done.truncated.sum()) == r.episode_stats().truncations
        logged.extend(done.lengths.tolist())
    assert recorder.episodes.lengths.tolist() == logged
    assert max(logged) > 7  # some episodes spanned several rollouts
    assert len(logged) >= 8


# --------------------------------------------------------------------- rows line up


@pytest.mark.parametrize("mode", MODES)
def test_each_action_was_taken_in_the_observation_on_its_row(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    recorder = RolloutRecorder(make_env(mode), policy, seed=3)
    replay = CartPoleReplay()
    for _ in range(2):
        r = recorder.record(30)
        actions = r.actions()
        assert np.array_equal(actions, np.stack([choose(o) for o in r.obses]))
        assert np.allclose(r.value_predictions(), np.stack([critic(o) for o in r.obses]))
        continuing = 0
        for t in range(r.num_steps):
            for b in range(r.batch_size):
                next_obs, reward = replay.step(r.obses[t, b], actions[t, b])
                assert r.rews[t, b] == reward
                if r.dones[t + 1, b] == 0:
                    np.testing.assert_allclose(r.obses[t + 1, b], next_obs, rtol=1e-5, atol=1e-5)
                    continuing += 1
                else:  # row t+1 holds a fresh episode's reset observation
                    assert np.abs(r.obses[t + 1, b]).max() <= 0.05
        assert continuing > r.num_steps * r.batch_size // 2


# ----------------------------------------------------------------- same advantages


def test_all_modes_give_the_same_rollouts_and_advantages(make_env: MakeEnv) -> None:
    recorded = {
        mode: list(map(RolloutRecorder(make_env(mode), policy, seed=4).record, [40, 40]))
        for mode in MODES
    }
    reference = recorded[AutoresetMode.NEXT_STEP]
    stats = reference[0].episode_stats()
    assert stats.terminations > 0
    assert stats.truncations > 0
    for mode in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
        for r, ref in zip(recorded[mode], reference, strict=True):
            assert r == ref, mode
            np.testing.assert_allclose(r.advantages(GAMMA, LAM), ref.advantages(GAMMA, LAM))
            np.testing.assert_allclose(r.returns(GAMMA, LAM), ref.returns(GAMMA, LAM))


# ------------------------------------------------------------------------ truncation


@pytest.mark.parametrize("mode", MODES)
def test_truncated_steps_bootstrap_from_the_true_final_observation(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    r = RolloutRecorder(make_env(mode), policy, seed=5).record(80)
    assert r.truncated is not None
    assert r.final_values is not None
    replay = CartPoleReplay()
    values = r.value_predictions()
    advantages = r.advantages(GAMMA, LAM)
    actions = r.actions()
    truncations = terminations = 0
    for t, b in episode_ends(r):
        if r.truncated[t, b]:
            final_obs, _ = replay.step(r.obses[t, b], actions[t, b])
            expected = float(critic(final_obs[None])[0])
            assert r.final_values[t, b] == pytest.approx(expected, abs=1e-4)
            delta = r.rews[t, b] + GAMMA * expected - values[t, b]
            truncations += 1
        else:
            assert r.final_values[t, b] == 0
            delta = r.rews[t, b] - values[t, b]
            terminations += 1
        assert advantages[t, b] == pytest.approx(delta, abs=1e-4)
    assert truncations > 0
    assert terminations > 0
    # Only steps that end an episode carry truncation data.
    assert not (r.truncated * (1 - r.dones[1:])).any()
    assert not (r.final_values * (1 - r.truncated)).any()
    # Complete episodes: truncated exactly when they reached the time limit.
    for b in range(r.batch_size):
        starts = np.flatnonzero(r.dones[:, b] == 1)
        for s, e in itertools.pairwise(starts.tolist()):
            if e - s < LIMIT:
                assert r.truncated[e - 1, b] == 0


def test_without_a_critic_truncations_are_flagged_with_zero_final_values(
    make_env: MakeEnv,
) -> None:
    # Seeded: from random starts, about one run in 200 has no truncation in 50 steps (CI met one).
    r = RolloutRecorder(
        make_env(AutoresetMode.SAME_STEP), lambda o: {"actions": choose(o)}, seed=5
    ).record(50)
    assert r.model_outs.keys() == ("actions",)
    assert r.truncated is not None
    assert r.final_values is not None
    assert r.truncated.sum() > 0
    assert not r.final_values.any()


# ------------------------------------------------------------------ joining rollouts


@pytest.mark.parametrize("mode", MODES)
def test_rollouts_recorded_across_calls_join_up(make_env: MakeEnv, mode: AutoresetMode) -> None:
    pieces = RolloutRecorder(make_env(mode), policy, seed=6)
    parts = [pieces.record(7), pieces.record(0), pieces(11), pieces.record(12)]
    whole = RolloutRecorder(make_env(mode), policy, seed=6).record(30)
    for before, after in itertools.pairwise(parts):
        assert np.array_equal(before.obses[-1], after.obses[0])
        assert before.dones[-1].tolist() == after.dones[0].tolist()
        assert before.model_outs[-1]["actions"].tolist() == after.model_outs[0]["actions"].tolist()
    joined = concat(parts)
    assert joined["obses"].shape[0] == 31
    expected = concat([whole])
    assert joined.keys() == expected.keys()
    for key in expected:
        assert np.array_equal(joined[key], expected[key]), key
    assert [row for p in parts for row in p.infos] == whole.infos
    assert int(joined["dones"][1:].sum()) > 0


@pytest.mark.parametrize("mode", MODES)
def test_long_rollouts_across_calls_join_up_and_count_the_same_episodes(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    # Lengths beyond the log's first capacity and uneven calls: the log grows, and moves its
    # live entries to the front, between rollouts.
    pieces = RolloutRecorder(make_env(mode), policy, seed=8)
    parts = [pieces.record(n) for n in (70, 0, 130, 65, 1, 200)]
    recorder = RolloutRecorder(make_env(mode), policy, seed=8)
    whole = recorder.record(466)
    joined, expected = concat(parts), concat([whole])
    for key in expected:
        assert np.array_equal(joined[key], expected[key]), key
    for name in ("returns", "lengths", "envs", "truncated"):
        np.testing.assert_allclose(
            getattr(pieces.episodes, name), getattr(recorder.episodes, name), rtol=1e-12
        )
    assert len(recorder.episodes) > 50


def test_policy_and_env_buffers_reused_between_calls_are_recorded_as_they_were(
    make_env: MakeEnv,
) -> None:
    # A policy that writes into the same arrays every call, and an env that returns the
    # same observation array every step (copy=False): the recorder copies what it logs.
    buffers: dict[str, AnyArray] = {}

    def reusing(obs: AnyArray) -> dict[str, AnyArray]:
        for key, value in policy(obs).items():
            if key not in buffers:
                buffers[key] = np.empty_like(value)
            buffers[key][...] = value
        return buffers

    env = make_env(AutoresetMode.NEXT_STEP, copy=False)
    got = RolloutRecorder(env, reusing, seed=3).record(50)
    expected = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), policy, seed=3).record(50)
    assert got == expected


def test_outputs_in_another_key_order_or_as_lists_are_recorded_under_their_keys(
    make_env: MakeEnv,
) -> None:
    calls = 0

    def shuffled(obs: AnyArray) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        outs = policy(obs)
        keys = list(outs)[::-1] if calls % 2 == 0 else list(outs)  # the first as `policy`
        return {key: outs[key].tolist() if calls % 3 == 0 else outs[key] for key in keys}

    got = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), shuffled, seed=5).record(30)
    expected = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), policy, seed=5).record(30)
    assert got == expected


class ColumnRewards(gym.vector.VectorWrapper):
    """Returns rewards (and ending flags) as lists, or rewards of another size."""

    def __init__(self, env: Any, size: int | None = None) -> None:
        super().__init__(env)
        self.size = size

    def step(self, actions: Any) -> Any:
        obs, rews, terms, truncs, infos = self.env.step(actions)
        if self.size is not None:
            return obs, np.zeros(self.size), terms, truncs, infos
        return obs, rews.tolist(), terms.tolist(), truncs.astype(np.int8), infos


def test_rewards_and_flags_of_other_types_are_converted(make_env: MakeEnv) -> None:
    env = ColumnRewards(make_env(AutoresetMode.NEXT_STEP))
    got = RolloutRecorder(env, policy, seed=4).record(30)
    expected = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), policy, seed=4).record(30)
    assert got == expected


def test_rewards_of_the_wrong_size_are_refused(make_env: MakeEnv) -> None:
    env = ColumnRewards(make_env(AutoresetMode.NEXT_STEP), size=NUM_ENVS + 1)
    recorder = RolloutRecorder(env, policy, seed=4)
    message = (
        "rews must hold one reward per env, shape (4,), got shape (5,) (step 1 of the recording)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        recorder.record(3)


# ------------------------------------------------------------------------------ infos


class StepInfo(gym.Wrapper[Any, Any, Any, Any]):
    """Adds NumPy-typed, nested and ending-only keys to every step's info."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.count = 0

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.count += 1
        info = {
            **info,
            "count": np.int64(self.count),
            "pos": np.asarray(obs[:2], np.float32),
            "nested": {"flag": np.bool_(self.count % 2 == 0)},
        }
        if terminated or truncated:
            info["ending"] = "truncated" if truncated and not terminated else "terminated"
        return obs, reward, terminated, truncated, info


def test_infos_become_json_compatible_per_env_dicts(make_env: MakeEnv) -> None:
    infos: dict[AutoresetMode, list[list[dict[str, Any]]]] = {}
    for mode in MODES:
        r = RolloutRecorder(make_env(mode, wrappers=[StepInfo]), policy, seed=7).record(30)
        infos[mode] = r.infos
        json.dumps(r.infos)
        assert r.truncated is not None
        for t, b in episode_ends(r):
            assert r.infos[t][b]["ending"] == ("truncated" if r.truncated[t, b] else "terminated")
        first = r.infos[0][0]
        assert first == {
            "count": 1,
            "pos": pytest.approx(r.obses[1, 0, :2].tolist()),
            "nested": {"flag": False},
        }
        assert type(first["count"]) is int
        assert all("final_obs" not in i and "final_info" not in i for row in r.infos for i in row)
    # The same steps give the same infos in every mode (reset infos are never recorded).
    assert infos[AutoresetMode.SAME_STEP] == infos[AutoresetMode.NEXT_STEP]
    assert infos[AutoresetMode.DISABLED] == infos[AutoresetMode.NEXT_STEP]


class OnlyResetInfo(gym.Wrapper[Any, Any, Any, Any]):
    """An info on every reset, none on steps."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "reset": True}


class ResetInfo(StepInfo, OnlyResetInfo):
    """StepInfo's step infos, and an info on every reset too."""


def test_next_step_phantom_steps_infos_are_neither_recorded_nor_kept(make_env: MakeEnv) -> None:
    # NEXT_STEP reports a reset's info on the phantom step: not a transition of the rollout.
    env = make_env(AutoresetMode.NEXT_STEP, wrappers=[ResetInfo])
    recorder = RolloutRecorder(env, policy, seed=3)
    ends = 0
    for _ in range(6):
        r = recorder.record(30)
        ends += len(episode_ends(r))
        assert r.infos is not None
        assert all("count" in info and "reset" not in info for row in r.infos for info in row)
        # Only the entries not yet returned keep infos (at most a phantom step's per env).
        assert len(recorder._infos) <= NUM_ENVS
    assert ends >= 6  # phantom steps did happen (LIMIT = 20 steps per episode at most)


def test_next_step_reset_infos_alone_give_no_infos(make_env: MakeEnv) -> None:
    # Only the phantom steps have infos: the rollouts have none (no T x B empty dicts).
    env = make_env(AutoresetMode.NEXT_STEP, wrappers=[OnlyResetInfo])
    recorder = RolloutRecorder(env, policy, seed=3)
    rollouts = [recorder.record(30) for _ in range(3)]
    assert sum(len(episode_ends(r)) for r in rollouts) >= 3  # phantom steps did happen
    assert [given_infos(r) for r in rollouts] == [None, None, None]


def test_info_keys_keeps_only_the_chosen_keys(make_env: MakeEnv) -> None:
    env = make_env(AutoresetMode.SAME_STEP, wrappers=[StepInfo])
    r = RolloutRecorder(env, policy, seed=8, info_keys={"ending"}).record(30)
    kept = {key for row in r.infos for info in row for key in info}
    assert kept == {"ending"}
    env = make_env(AutoresetMode.NEXT_STEP, wrappers=[StepInfo])
    r = RolloutRecorder(env, policy, seed=8, info_keys=()).record(5)
    assert r.infos == [[{}] * NUM_ENVS] * 5


# ----------------------------------------------------------------------------- states


@pytest.mark.parametrize("mode", MODES)
def test_states_are_empty_by_default_and_recorded_by_state_fn(
    make_env: MakeEnv, mode: AutoresetMode
) -> None:
    r = RolloutRecorder(make_env(mode), policy, seed=9).record(25)
    assert r.states.shape == (26, NUM_ENVS, 0)
    assert r.states.dtype == np.float32

    def state_fn(env: Any) -> AnyArray:
        return np.array(env.get_attr("state"))

    recorder = RolloutRecorder(make_env(mode), policy, seed=9, state_fn=state_fn)
    for _ in range(2):
        r = recorder.record(25)
        # CartPole's observation is its state: they agree on every row, resets included.
        assert np.array_equal(r.states, r.obses)
        assert r.states.dtype == np.float32  # CartPole's float64 state, as the rule stores it


# ----------------------------------------------------------------------------- errors


def test_a_policy_with_the_wrong_batch_size_is_refused(make_env: MakeEnv) -> None:
    def short(obs: AnyArray) -> dict[str, AnyArray]:
        return {"actions": choose(obs), "critic": critic(obs)[:-1]}

    recorder = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), short)
    with pytest.raises(ValueError, match=r"'critic' has shape \(3,\), expected leading .* B=4"):
        recorder.record(3)


def test_a_policy_without_actions_is_refused(make_env: MakeEnv) -> None:
    recorder = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), lambda o: {"critic": critic(o)})
    with pytest.raises(ValueError, match=r"no 'actions' key \(keys: \['critic'\]\)"):
        recorder.record(3)


def test_a_policy_must_return_a_mapping(make_env: MakeEnv) -> None:
    recorder = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), choose)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must return a mapping of model outputs"):
        recorder.record(3)


def test_a_policy_whose_outputs_change_is_refused(make_env: MakeEnv) -> None:
    calls: list[int] = []

    def fickle(obs: AnyArray) -> Mapping[str, AnyArray]:
        calls.append(1)
        outs = {"actions": choose(obs)}
        return outs if len(calls) == 1 else {**outs, "critic": critic(obs)}

    recorder = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), fickle)
    with pytest.raises(ValueError, match="outputs changed between calls"):
        recorder.record(3)
    # The env was stepped before the failure: the recorder refuses to go on.
    with pytest.raises(RuntimeError, match=r"failed in an earlier call \(ValueError: the polic"):
        recorder.record(3)


def test_a_failure_in_the_first_reset_can_be_retried(make_env: MakeEnv) -> None:
    broken = [True]

    def policy_fixed_later(obs: AnyArray) -> Mapping[str, AnyArray]:
        return {"critic": critic(obs)} if broken[0] else policy(obs)

    env = make_env(AutoresetMode.NEXT_STEP)
    recorder = RolloutRecorder(env, policy_fixed_later, seed=10)
    with pytest.raises(ValueError, match="no 'actions' key"):
        recorder.record(3)
    broken[0] = False
    r = recorder.record(3)
    assert r == RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), policy, seed=10).record(3)


def test_a_one_column_critic_is_refused(make_env: MakeEnv) -> None:
    def column(obs: AnyArray) -> dict[str, AnyArray]:
        return {"actions": choose(obs), "critic": critic(obs)[:, None]}

    with pytest.raises(ValueError, match=r"'critic' has shape \(4, 1\), expected \(4,\)"):
        RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), column).record(1)


class TextObsEnv(gym.Env[Any, Any]):
    observation_space = gym.spaces.Dict({"note": gym.spaces.Text(5)})
    action_space = gym.spaces.Discrete(2)


class DictActionEnv(gym.Env[Any, Any]):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})


def test_a_text_observation_space_is_refused() -> None:
    env = gym.vector.SyncVectorEnv([TextObsEnv, TextObsEnv])
    with pytest.raises(
        ValueError,
        match=r"the observation space\['note'\] is Text\(.*\), but trajkit stores "
        r"observations as arrays",
    ):
        RolloutRecorder(env, policy)
    env.close()


def test_a_dict_action_space_is_refused() -> None:
    env = gym.vector.SyncVectorEnv([DictActionEnv, DictActionEnv])
    with pytest.raises(
        ValueError,
        match=r"action space Dict\('a': Discrete\(2\)\): .* must be Discrete, MultiDiscrete, "
        r"MultiBinary or Box",
    ):
        RolloutRecorder(env, policy)
    env.close()


def test_actions_of_the_wrong_shape_are_refused() -> None:
    env = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, np.float32)})
    with pytest.raises(
        ValueError,
        match=re.escape(
            "the policy's output 'actions' has shape (2,), expected (2, 1): one element of the "
            "action space Box(-2.0, 2.0, (1,), float32) per env"
        ),
    ):
        recorder.record(1)
    env.close()


def test_only_vector_envs_are_accepted() -> None:
    env = gym.make("CartPole-v1")
    with pytest.raises(TypeError, match=r"env must be a gymnasium\.vector\.VectorEnv"):
        RolloutRecorder(env, policy)  # type: ignore[arg-type]
    env.close()


def test_bad_num_steps_are_refused(make_env: MakeEnv) -> None:
    recorder = RolloutRecorder(make_env(AutoresetMode.NEXT_STEP), policy)
    with pytest.raises(ValueError, match="num_steps must be >= 0, got -1"):
        recorder.record(-1)
    with pytest.raises(TypeError, match="num_steps must be an int, got float"):
        recorder.record(2.0)  # type: ignore[arg-type]


def test_a_state_fn_with_the_wrong_shape_is_refused(make_env: MakeEnv) -> None:
    recorder = RolloutRecorder(
        make_env(AutoresetMode.NEXT_STEP), policy, state_fn=lambda env: np.zeros((3, 2))
    )
    with pytest.raises(ValueError, match=r"state_fn returned shape \(3, 2\), expected \(4, ...\)"):
        recorder.record(1)


# ---------------------------------------------------------------- the autoreset mode


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        ("SameStep", AutoresetMode.SAME_STEP),
        ("same_step", AutoresetMode.SAME_STEP),
        ("NEXT_STEP", AutoresetMode.NEXT_STEP),
        (AutoresetMode.DISABLED, AutoresetMode.DISABLED),
    ],
)
def test_the_mode_is_read_from_metadata_as_enum_or_string(
    make_env: MakeEnv, given: AutoresetMode | str, mode: AutoresetMode
) -> None:
    env = make_env(mode)
    env.metadata["autoreset_mode"] = given
    recorder = RolloutRecorder(env, policy)
    assert recorder.autoreset_mode is mode
    assert recorder.num_envs == NUM_ENVS
    assert recorder.env is env


def test_a_missing_or_unknown_mode_is_refused(make_env: MakeEnv) -> None:
    env = make_env(AutoresetMode.SAME_STEP)
    del env.metadata["autoreset_mode"]
    with pytest.raises(ValueError, match="no 'autoreset_mode' in its metadata"):
        RolloutRecorder(env, policy)
    recorder = RolloutRecorder(env, policy, autoreset_mode="SameStep")
    assert recorder.autoreset_mode is AutoresetMode.SAME_STEP
    assert recorder.record(2).num_steps == 2
    with pytest.raises(ValueError, match=r"must be a gymnasium\.vector\.AutoresetMode"):
        RolloutRecorder(env, policy, autoreset_mode="sometimes")


# ------------------------------------------------------------------ optional extra


def test_without_gymnasium_the_import_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    for name in [m for m in sys.modules if m == "trajkit.gym" or m.startswith("trajkit.gym.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r"pip install 'trajkit\[gym\]'"):
        importlib.import_module("trajkit.gym")


def test_import_trajkit_does_not_import_gymnasium() -> None:
    code = "import sys, trajkit; sys.exit('gymnasium' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


# -------------------------------------------------------------------------- the demo


def test_make_demo_runs(tmp_path: Path) -> None:
    output = tmp_path / "demo-output"
    done = subprocess.run(
        [sys.executable, "examples/demo.py"],
        cwd=ROOT,
        env={**os.environ, "TRAJKIT_DEMO_OUTPUT": str(output)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "recorded T=256 steps x B=8 envs",
        "episodes finished: ",
        "terminations: ",
        "truncations: ",
        "RecordEpisodeStatistics reports",
        "advantages (gamma=0.99, lambda=0.95): mean",
        "returns    (gamma=0.99, lambda=0.95): mean",
        "demo-output/cartpole.npz: ok",
        "trajkit validate: exit code 0; loaded back equal: True",
        "demo-output/timeline.png",
        "Next, try:",
    ):
        assert line in out, out
