"""Reworked checks: their false alarms cannot happen; new checks find their bugs; thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from tests.lint.helpers import dones_for, rollout
from trajkit import Rollout
from trajkit.lint import lint
from trajkit.lint.config import LintOptions
from trajkit.lint.data import _shift_wins, check_rollout
from trajkit.lint.registry import CHECKS, Finding

Array = np.ndarray[Any, Any]
RAW = {"id": "r", "index": 0, "num_envs": 1, "autoreset_mode": "NEXT_STEP", "wrappers": []}


def found(
    r: Rollout, select: str, recording: dict[str, Any] | None = None, **kw: Any
) -> list[Finding]:
    options = LintOptions(frozenset(c for c in CHECKS if c.startswith(select)), **kw)
    return check_rollout(r, options, path="r.npz", recording=recording)


# ------------------------------------------------------------------------------------- TK101


def test_tk101_one_termination_at_the_limit_in_a_recorded_file_is_not_a_bug() -> None:
    r = rollout(dones_for([10, 4, 10], 30), truncated=np.zeros(30))
    limited = {**RAW, "max_episode_steps": 10}
    [one] = found(r, "TK101", max_episode_steps=10)  # no recording: one is evidence
    assert one.message.startswith("2 episode(s) end at exactly the time limit of 10 steps")
    assert found(rollout(dones_for([10, 4], 30), truncated=np.zeros(30)), "TK101", limited) == []
    [two] = found(r, "TK101", limited)  # two are, even in a recorded file
    assert (two.env, two.step) == (0, 9)


def test_tk101_a_file_that_flags_truncations_records_them() -> None:
    truncated = np.zeros(30)
    truncated[9] = 1  # the first end at 10 is a truncation: the others terminated there
    r = rollout(dones_for([10, 10, 10], 30), truncated=truncated)
    assert found(r, "TK101", max_episode_steps=10) == []


@pytest.mark.parametrize(("lengths", "hits"), [([9, 9, 9], 0), ([10, 10, 9], 2), ([11, 11], 0)])
def test_tk101_counts_episodes_of_exactly_the_limit(lengths: list[int], hits: int) -> None:
    r = rollout(dones_for(lengths, 30), truncated=np.zeros(30))
    result = found(r, "TK101", max_episode_steps=10)
    assert [f.message.split(" ")[0] for f in result] == ([str(hits)] if hits else [])


def test_tk101_no_heuristic_where_the_recording_states_the_limit() -> None:
    r = rollout(dones_for([4, 12, 12, 7, 12, 12], 60))
    assert len(found(r, "TK101")) == 1
    assert found(r, "TK101", {**RAW, "max_episode_steps": None}) == []


def test_tk101_no_heuristic_over_files_joined_by_a_recording(tmp_path: Path) -> None:
    dones = dones_for([10] * 6, 60)
    obses = np.random.default_rng(0).normal(size=(61, 1, 3)).astype(np.float32)
    for i, s in enumerate(range(0, 60, 6)):
        part = rollout(dones[s : s + 7], obses=obses[s : s + 7], truncated=np.zeros(6), seed=i)
        trajkit.save(part, tmp_path / f"p{i:02d}.npz", recording={**RAW, "index": i})
    assert lint(tmp_path, select=["TK101"], jobs=1) == []


# ------------------------------------------------------------------------------------- TK102


def test_tk102_one_step_episodes_keep_their_reward() -> None:
    """Blackjack: a player who sticks at once ends a one-step episode with its ±1."""
    lengths = [1, 3, 1, 3, 1, 3, 1, 3]
    rews = np.zeros(16)
    ends = np.cumsum(lengths) - 1
    rews[ends] = np.resize([1.0, -1.0, -1.0], len(ends))
    assert found(rollout(dones_for(lengths, 16), rews=rews), "TK102") == []


# ------------------------------------------------------------------------------------- TK103


def _sharp(T: int, shift: int, seed: int = 0) -> dict[str, Array]:
    """A sharp greedy policy whose preference changes every few rows, 20% exploration."""
    rng = np.random.default_rng(seed)
    greedy = np.repeat(rng.integers(0, 3, size=(T // 3 + 2, 2)), 3, axis=0)[: T + 1]
    actor = np.eye(3)[greedy] * 5.0
    explore = rng.random((T + 1, 2)) < 0.2
    actions = np.where(explore, rng.integers(0, 3, (T + 1, 2)), greedy)
    return {"actor": actor, "actions": np.roll(actions, shift, axis=0)}


def test_tk103_a_sharp_policy_with_exploration_does_not_hide_the_shift() -> None:
    late = _sharp(60, 1)
    aligned = (late["actions"] == late["actor"].argmax(-1)).mean()
    assert aligned > 0.5  # most rows fit their own row: the old rule saw nothing
    [f] = found(rollout(np.zeros((61, 2)), outs=late), "TK103")
    assert f.message.endswith("each action is stored one row late")
    assert found(rollout(np.zeros((61, 2)), outs=_sharp(60, 0)), "TK103") == []


@pytest.mark.parametrize(
    ("own", "shifted", "telling", "wins"),
    [
        (0, 5, 10, True),  # exactly half fit the shifted row
        (0, 4, 9, False),  # just under half
        (4, 8, 8, False),  # exactly half fit their own row
        (3, 8, 8, True),  # just under half
        (2, 4, 8, True),  # the shifted reading fits exactly twice as many
        (3, 5, 10, False),  # fewer than twice
    ],
)
def test_tk103_thresholds(own: int, shifted: int, telling: int, wins: bool) -> None:
    assert _shift_wins(own, shifted, telling) is wins


# ------------------------------------------------------------------------------------- TK104


def test_tk104_is_silent_on_integer_observations() -> None:
    dones = dones_for([5, 5, 1], 12)
    obses = np.zeros((13, 1), dtype=np.int64)  # a discrete space: always the start state
    rews = np.zeros(12)
    assert found(rollout(dones, obses=obses, rews=rews), "TK104") == []
    assert len(found(rollout(dones, obses=obses.astype(np.float32), rews=rews), "TK104")) == 1


# ------------------------------------------------------------------------------------- TK105


@pytest.mark.parametrize(("length", "over"), [(10, False), (11, True)])
def test_tk105_the_limit_itself_is_allowed(length: int, over: bool) -> None:
    r = rollout(dones_for([length], 14))
    result = found(r, "TK105", max_episode_steps=10)
    assert [(f.env, f.step) for f in result] == ([(0, 10)] if over else [])


# ------------------------------------------------------------------------------------- TK108


def _smooth(resets: list[int]) -> Array:
    """Float observations that move a little each step and jump where a reset lands."""
    t = np.arange(19, dtype=np.float32)
    jumps = sum((t >= r).astype(np.float32) for r in resets)
    return (np.sin(t) * 0.1 + 10.0 * jumps)[:, None, None]


def _phantom(rews: Array, obses: Array | None = None) -> Rollout:
    """Episodes of 5 real steps, each followed by the kept autoreset step (reward 0)."""
    dones = dones_for([6, 6, 6], 18)
    rews = rews.copy()
    rews[[6, 12]] = 0.0  # the steps leaving rows 6 and 12 (final observations)
    return rollout(dones, rews=rews, obses=_smooth([7, 13]) if obses is None else obses)


def test_tk108_finds_the_phantom_step_by_its_reward() -> None:
    [f] = found(_phantom(np.ones(18)), "TK108")
    assert (f.env, f.step) == (0, 6)
    assert f.message.startswith(
        "every step that leaves a row flagged dones = 1 (2 steps) has reward exactly 0 and "
        "ends nothing, as NEXT_STEP's autoreset step"
    )
    assert found(_phantom(np.ones(18)), "TK102") == []  # not "rewards one step late"
    assert found(_phantom(np.ones(18)), "TK108", {**RAW, "autoreset_mode": "SAME_STEP"}) == []
    assert found(rollout(dones_for([6, 6, 6], 18), rews=np.ones(18)), "TK108") == []


def test_tk108_one_boundary_in_a_file() -> None:
    rews = np.ones(18)
    rews[6] = 0.0
    one = rollout(dones_for([6], 18), rews=rews, obses=_smooth([7]))
    [f] = found(one, "TK108")
    assert f.message.startswith("every step that leaves a row flagged dones = 1 (1 step) has")
    rews[15] = 0.0  # another step earns 0 too: one boundary is not enough then
    assert found(rollout(dones_for([6], 18), rews=rews, obses=_smooth([7])), "TK108") == []
    rews[15] = 1.0  # the jump lands on the flagged row: a real reset
    assert found(rollout(dones_for([6], 18), rews=rews, obses=_smooth([6])), "TK108") == []


def test_tk108_a_first_step_that_earns_0_after_a_real_reset_is_no_phantom() -> None:
    """LunarLander: the first step after a reset earns exactly 0 when no engine fires."""
    clean = _phantom(np.ones(18), _smooth([6, 12]))  # the jump lands on the flagged rows
    assert found(clean, "TK108") == []


def test_tk108_finds_the_phantom_step_by_a_fixed_reset_state() -> None:
    """FrozenLake: rewards are 0 almost everywhere; the reset state 0 follows each phantom."""
    obses = np.arange(1, 20, dtype=np.int64)[:, None]
    obses[[7, 13]] = 0  # after the phantom steps: the reset state
    [f] = found(_phantom(np.zeros(18), obses), "TK108")
    assert (f.env, f.step) == (0, 6)
    obses[[6, 12]] = 0  # the clean layout: the reset state at the flagged rows
    obses[[7, 13]] = 5
    assert found(_phantom(np.zeros(18), obses), "TK108") == []


# ------------------------------------------------------------------------------------- TK109


@pytest.mark.parametrize(("size", "hit"), [(4.0, False), (4.5, True)])
def test_tk109_one_boundary_needs_a_jump_four_times_as_far(size: float, hit: bool) -> None:
    obses = np.zeros((13, 1, 1), dtype=np.float32)
    obses[:, 0, 0] = np.arange(13) % 2  # every step moves by 1
    obses[7:] += size - 1.0  # the reset lands on row 7: a jump of `size` steps
    dones = np.isin(np.arange(13), [0, 6]).astype(float)  # flagged one row early
    result = found(rollout(dones, obses=obses), "TK109")
    assert [(f.env, f.step) for f in result] == ([(0, 6)] if hit else [])


def test_tk109_finds_dones_one_row_early_and_passes_them_in_place() -> None:
    t = np.arange(31, dtype=np.float32)
    resets = (t >= 10).astype(int) + (t >= 20)
    obses = (np.sin(t) + 100 * resets)[:, None, None]
    on_time = np.isin(t, [0, 10, 20]).astype(float)
    assert found(rollout(on_time, obses=obses), "TK109") == []
    [f] = found(rollout(np.isin(t, [0, 9, 19]).astype(float), obses=obses), "TK109")
    assert (f.env, f.step) == (0, 9)
    assert f.message == (
        "the observations jump one row after the row flagged dones = 1 at 2 of 2 episode "
        "starts (this one: row 9): dones stored one row early?"
    )


# ------------------------------------------------------------------------------------- TK110


def _gaussian(clip: bool) -> dict[str, Array]:
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(21, 2, 1)) * 1.5
    std = np.full_like(mean, 0.5)
    sample = mean + std * rng.normal(size=mean.shape)
    actions = np.clip(sample, -2.0, 2.0) if clip else sample
    logp = (-0.5 * ((sample - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    return {"actions": actions, "mean": mean, "std": std, "log_probs": logp}


def test_tk110_the_log_prob_of_the_unclipped_sample_beside_the_clipped_action() -> None:
    space = {"type": "Box", "low": -2.0, "high": 2.0, "shape": [1]}
    outs = _gaussian(clip=True)
    clipped = int((np.abs(outs["actions"]) == 2.0).sum())
    [f] = found(rollout(np.zeros((21, 2)), outs=outs), "TK110", action_space=space)
    assert f"({clipped} of 42 rows, {clipped} of them with an action on a bound" in f.message
    unclipped = rollout(np.zeros((21, 2)), outs=_gaussian(clip=False))
    assert found(unclipped, "TK110", action_space=space) == []


def test_tk110_discrete_and_a_policy_of_another_formula() -> None:
    rng = np.random.default_rng(0)
    actor = rng.normal(size=(21, 2, 3))
    actions = rng.integers(0, 3, size=(21, 2))
    logp = np.take_along_axis(
        actor - np.log(np.exp(actor).sum(-1, keepdims=True)), actions[..., None], -1
    )[..., 0]
    outs = {"actor": actor, "actions": actions, "log_probs": logp.copy()}
    assert found(rollout(np.zeros((21, 2)), outs=outs), "TK110") == []
    outs["log_probs"][4, 1] -= 0.5
    [f] = found(rollout(np.zeros((21, 2)), outs=outs), "TK110")
    assert (f.env, f.step) == (1, 4)
    assert f.message.startswith("log_probs[4, 1] = ")
    outs["log_probs"] = logp / 2  # masked or tempered logits: no row fits, left alone
    assert found(rollout(np.zeros((21, 2)), outs=outs), "TK110") == []


# ------------------------------------------------------------------------------------- TK111


def test_tk111_rewards_clipped_where_the_recording_says_raw() -> None:
    raw = -np.linspace(0.0, 8.0, 30)
    clipped = rollout(dones_for([30], 30), rews=np.clip(raw, -1.0, 1.0))
    [f] = found(clipped, "TK111", RAW)
    assert f.message.startswith("26 rewards are exactly -1 or 1, the largest magnitude")
    assert (f.env, f.step) == (0, 4)
    assert found(clipped, "TK111") == []  # no recording: nothing says the rewards are raw
    wrapped = {**RAW, "wrappers": ["NormalizeReward"]}
    assert found(clipped, "TK111", wrapped) == []
    assert found(rollout(dones_for([30], 30), rews=raw), "TK111", RAW) == []
    taxi = np.resize([-1.0, -1.0, -10.0, 20.0, 20.0, 20.0], 30)
    assert found(rollout(dones_for([30], 30), rews=taxi), "TK111", RAW) == []


# ------------------------------------------------------------------------------------- TK112


def test_tk112_envs_seeded_alike_start_from_the_same_observation() -> None:
    dones = np.stack([dones_for([5, 7], 16), dones_for([7, 5], 16)], axis=1)
    obses = np.random.default_rng(0).normal(size=(17, 2, 3)).astype(np.float32)
    assert found(rollout(dones, obses=obses), "TK112") == []
    obses[7, 1] = obses[0, 0]  # env 1's second reset repeats env 0's first
    [f] = found(rollout(dones, obses=obses), "TK112")
    assert (f.env, f.step) == (1, 0) or (f.env, f.step) == (1, 7)
    assert "start an episode from the same observation" in f.message
    assert found(rollout(dones, obses=np.zeros((17, 2), dtype=np.int64)), "TK112") == []


def test_tk112_leaves_a_fixed_or_few_state_reset_alone() -> None:
    # A custom env whose reset is fixed: every env starts every episode alike by design (each
    # env starts more than once, so the file shows it).
    dones = np.stack([dones_for([5, 7], 16), dones_for([7, 5], 16)], axis=1)
    obses = np.random.default_rng(0).normal(size=(17, 2, 3)).astype(np.float32)
    for t, b in np.argwhere(dones == 1):
        obses[t, b] = [0.5, 0.0, -0.5]
    assert found(rollout(dones, obses=obses), "TK112") == []
    # A reset drawn from a few states: env 0 starts twice alike, so a shared start is chance.
    obses[5, 0], obses[7, 1] = obses[0, 1] + 1, obses[0, 1] + 1
    assert found(rollout(dones, obses=obses), "TK112") == []


# ------------------------------------------------------------------------------------ TK2xx


def test_tk202_a_good_policy_s_small_rewards_are_no_jump(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i, scale in enumerate([5.0, 4.0, 6.0, 0.001, 0.0005]):  # random, then balanced
        r = rollout(dones_for([20], 20), rews=-np.abs(rng.normal(size=20)) * scale, seed=i)
        trajkit.save(r, tmp_path / f"r{i}.npz")
    assert lint(tmp_path, select=["TK202"], jobs=1) == []


def test_tk202_few_reward_values_none_in_common(tmp_path: Path) -> None:
    for i, value in enumerate([1.0, 1.0, 1.0, 0.01]):  # CartPole, then scaled
        trajkit.save(
            rollout(dones_for([20], 20), rews=np.full(20, value), seed=i), tmp_path / f"r{i}.npz"
        )
    [f] = lint(tmp_path, select=["TK202"], jobs=1)
    assert f.path == str(tmp_path / "r3.npz")
    assert f.message.startswith("rewards take the values 0.01 where the other 3 files take 1")


def test_tk201_a_feature_at_its_box_bound_is_a_flag_that_never_went_up(tmp_path: Path) -> None:
    space = {
        "type": "Box",
        "shape": [3],
        "dtype": "float32",
        "low": [-5.0, -5.0, 0.0],
        "high": [5.0, 5.0, 1.0],
    }
    for i in range(3):
        r = rollout(dones_for([6, 9], 20), seed=i)
        r.obses[:, :, 2] = 0.0
        trajkit.save(
            r,
            tmp_path / f"r{i}.npz",
            recording={**RAW, "index": i, "id": f"r{i}", "observation_space": space},
        )
    assert lint(tmp_path, select=["TK201"], jobs=1) == []
    space["low"] = [-5.0, -5.0, -1.0]
    for i in range(3):
        r = trajkit.load(tmp_path / f"r{i}.npz")
        trajkit.save(
            r,
            tmp_path / f"r{i}.npz",
            recording={**RAW, "index": i, "id": f"r{i}", "observation_space": space},
        )
    [f] = lint(tmp_path, select=["TK201"], jobs=1)
    assert f.message.startswith("1 of 3 feature(s) of obses never change")


def test_the_new_checks_are_listed_by_the_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "lint", "--list"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    listed = [line.split()[0] for line in done.stdout.splitlines()]
    assert {"TK108", "TK109", "TK110", "TK111", "TK112"} <= set(listed)
    assert "TK108  warning  phantom-autoreset-step: NEXT_STEP's autoreset step" in done.stdout
