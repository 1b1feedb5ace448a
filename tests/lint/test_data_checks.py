"""Each TK1xx check finds its bug in a rollout that has it, and nothing in one that does not."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import codes, dones_for, rollout
from trajkit.lint.data import episodes

# ------------------------------------------------------------------------------------- TK101


def test_episodes_lists_starts_ends_and_flags() -> None:
    r = rollout(dones_for([3, 2], 7), truncated=np.array([0, 0, 0, 0, 1, 0, 0]))
    listed = [(e.env, e.start, e.end, e.truncated, e.length) for e in episodes(r)]
    assert listed == [(0, 0, 2, False, 3), (0, 3, 4, True, 2), (0, 5, None, False, None)]


def test_tk101_known_limit_flags_terminations_at_the_limit() -> None:
    r = rollout(dones_for([10, 10, 10], 32), truncated=np.zeros(32))
    [found] = codes(r, "TK101", max_episode_steps=10)
    assert (found.code, found.env, found.step) == ("TK101", 0, 9)
    assert found.message.startswith(
        "3 episode(s) end at exactly the time limit of 10 steps with truncated = 0"
    )


def test_tk101_known_limit_passes_flagged_truncations() -> None:
    truncated = np.zeros(32)
    truncated[[9, 19, 29]] = 1
    r = rollout(dones_for([10, 10, 10], 32), truncated=truncated)
    assert codes(r, "TK101", max_episode_steps=10) == []
    assert codes(r, "TK101") == []  # the heuristic too: the ends at 10 are flagged


def test_tk101_heuristic_without_a_limit() -> None:
    r = rollout(dones_for([4, 12, 12, 7, 12, 12], 60))  # no truncation data at all
    [found] = codes(r, "TK101")
    assert "4 of 6 complete episodes end at the same, longest length 12" in found.message
    assert (found.env, found.step) == (0, 15)


def test_tk101_heuristic_passes_varied_lengths() -> None:
    assert codes(rollout(dones_for([4, 12, 9, 7, 12, 3, 11], 60)), "TK101") == []


# ------------------------------------------------------------------------------------- TK102


def _sparse(late: bool) -> np.ndarray:
    """Rewards of episodes of length 5: 0, then +1 on the ending step (or the step after)."""
    rews = np.zeros(30)
    for end in (4, 9, 14, 19, 24):
        rews[end + 1 if late else end] = 1.0
    return rews


def test_tk102_finds_rewards_recorded_after_the_end() -> None:
    r = rollout(dones_for([5] * 6, 30), rews=_sparse(late=True))
    [found] = codes(r, "TK102")
    assert (found.env, found.step) == (0, 5)
    assert found.message.startswith("5 of 5 first steps after a termination get a reward")


def test_tk102_passes_rewards_on_the_ending_step() -> None:
    assert codes(rollout(dones_for([5] * 6, 30), rews=_sparse(late=False)), "TK102") == []


def test_tk102_passes_dense_rewards() -> None:
    assert codes(rollout(dones_for([5] * 6, 30), rews=np.ones(30)), "TK102") == []


# ------------------------------------------------------------------------------------- TK103


def _policy(T: int, shift: int, *, log_probs: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    actor = rng.normal(size=(T + 1, 2, 4)).astype(np.float32) * 3
    logp = actor - np.log(np.exp(actor).sum(-1, keepdims=True))
    actions = np.array(
        [[rng.choice(4, p=np.exp(logp[t, b])) for b in range(2)] for t in range(T + 1)]
    )
    chosen = np.take_along_axis(logp, actions[..., None], -1)[..., 0]
    if not log_probs:
        actions = actor.argmax(-1)
    outs = {"actor": actor, "actions": np.roll(actions, shift, axis=0)}
    if log_probs:
        outs["log_probs"] = chosen
    return outs


@pytest.mark.parametrize("log_probs", [True, False])
def test_tk103_finds_actions_on_the_next_row(log_probs: bool) -> None:
    r = rollout(np.zeros((25, 2)), outs=_policy(24, 1, log_probs=log_probs))
    [found] = codes(r, "TK103")
    assert found.code == "TK103"
    assert (found.env, found.step) == (0, 1)
    assert found.message.endswith("each action is stored one row late")
    assert "0% fit their own policy outputs and 100% those of actions[t+1]" in found.message


def test_tk103_finds_actions_one_row_early() -> None:
    r = rollout(np.zeros((25, 2)), outs=_policy(24, -1, log_probs=True))
    [found] = codes(r, "TK103")
    assert found.message.endswith("each action is stored one row early")


@pytest.mark.parametrize("log_probs", [True, False])
def test_tk103_passes_aligned_actions(log_probs: bool) -> None:
    r = rollout(np.zeros((25, 2)), outs=_policy(24, 0, log_probs=log_probs))
    assert codes(r, "TK103") == []


# ------------------------------------------------------------------------------------- TK104


def _twice(ends: list[int], T: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations and rewards where each ending step repeats its observation, reward 0."""
    obses = np.random.default_rng(0).normal(size=(T + 1, 1, 3)).astype(np.float32)
    rews = np.ones(T)
    for t in ends:
        obses[t + 1] = obses[t]
        rews[t] = 0.0
    return obses, rews


def test_tk104_finds_the_reset_observation_twice_at_every_end() -> None:
    dones = dones_for([5, 5, 1], 12)  # ends at steps 4, 9, 10
    obses, rews = _twice([4, 9, 10], 12)
    [found] = codes(rollout(dones, obses=obses, rews=rews), "TK104")
    assert (found.env, found.step) == (0, 4)
    assert found.message.startswith("obses[5] repeats obses[4] across an episode end")


def test_tk104_passes_a_chance_repeat_a_rewarded_repeat_and_a_single_end() -> None:
    dones = dones_for([5, 5, 1], 12)
    obses, rews = _twice([4, 9], 12)  # not step 10: a chance repeat in a discrete space
    assert codes(rollout(dones, obses=obses, rews=rews), "TK104") == []
    obses, rews = _twice([4, 9, 10], 12)
    assert codes(rollout(dones, obses=obses, rews=np.ones(12)), "TK104") == []
    obses, rews = _twice([4], 12)
    assert codes(rollout(dones_for([5], 12), obses=obses, rews=rews), "TK104") == []


# ------------------------------------------------------------------------------------- TK105


def test_tk105_finds_an_episode_past_the_limit() -> None:
    dones = np.stack([dones_for([8, 8, 8], 30), dones_for([15, 8], 30)], axis=1)
    [found] = codes(rollout(dones), "TK105", max_episode_steps=10)
    assert (found.env, found.step) == (1, 10)
    assert "run past the time limit of 10 steps" in found.message


def test_tk105_passes_episodes_within_the_limit_and_needs_a_limit() -> None:
    dones = np.stack([dones_for([8, 8, 8], 30), dones_for([10, 10, 10], 30)], axis=1)
    assert codes(rollout(dones), "TK105", max_episode_steps=10) == []
    assert codes(rollout(dones_for([40], 30)), "TK105") == []  # no limit known


# ---------------------------------------------------------------------------------- TK106/7


@pytest.mark.parametrize(
    ("space", "actions", "bad"),
    [
        ({"type": "Discrete", "n": 3}, np.array([0, 1, 2, 3, 1]), 3),
        ({"type": "Discrete", "n": 3, "start": 1}, np.array([1, 2, 3, 0, 1]), 3),
        ({"type": "MultiDiscrete", "nvec": [2, 3]}, np.array([[0, 2], [1, 1], [2, 0]]), 2),
        ({"type": "MultiBinary", "n": 2}, np.array([[0, 1], [1, 1], [0, 2]]), 2),
    ],
)
def test_tk106_finds_actions_outside_the_space(
    space: dict[str, object], actions: np.ndarray, bad: int
) -> None:
    T = len(actions) - 1
    outs = {"actions": actions.reshape(T + 1, 1, *actions.shape[1:]).astype(np.int64)}
    [found] = codes(rollout(np.zeros(T + 1), outs=outs), "TK106", action_space=space)
    assert found.step == bad
    assert "is outside" in found.message
    first = space.get("start", 0)
    assert isinstance(first, int)
    ok = np.clip(outs["actions"], first, 1)
    assert codes(rollout(np.zeros(T + 1), outs={"actions": ok}), "TK106", action_space=space) == []


def test_tk107_finds_box_actions_outside_the_bounds() -> None:
    space = {"type": "Box", "low": -2.0, "high": [2.0, None], "shape": [2]}
    actions = np.zeros((5, 1, 2), np.float32)
    actions[3, 0, 0] = 2.5
    actions[2, 0, 1] = 1e6  # unbounded above: fine
    [found] = codes(rollout(np.zeros(5), outs={"actions": actions}), "TK10", action_space=space)
    assert (found.code, found.step) == ("TK107", 3)
    assert "which the env clips" in found.message
    actions[3, 0, 0] = 2.0
    assert codes(rollout(np.zeros(5), outs={"actions": actions}), "TK10", action_space=space) == []
