"""TK102 and TK103: rewards and actions stored one row off, and their evidence thresholds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, lint_rollouts, rollout
from trajkit.lint.alignment import (
    MIN_SHIFTED,
    MIN_TELLING,
    MIN_TELLING_LOGP,
    ActionFit,
    RewardShift,
    misaligned_actions,
    shift_wins,
    shifted_rewards,
)
from trajkit.lint.policy import log_softmax

# ------------------------------------------------------------------------------ TK102


def _terminal(episodes: int, shift: int, length: int = 5) -> Any:
    """Episodes of `length` steps paying +1 on the terminating step, shifted by `shift`."""
    T = episodes * length + 3
    rews = np.zeros(T)
    rews[np.arange(length - 1, episodes * length, length) + shift] = 1.0
    return rollout(dones_for([length] * episodes, T), rews=rews)


def test_tk102_finds_late_and_early_terminal_rewards() -> None:
    [late] = codes(_terminal(6, 1), "TK102")
    assert (late.env, late.step) == (0, 5)
    assert late.message.startswith(
        "the rewards of 6 of 6 terminated episodes of the dataset stand out on the next "
        "episode's first step (6 of 6 here; rews[5, 0] = 1)"
    )
    assert late.message.endswith("rewards stored one step late?")
    [early] = codes(_terminal(6, -1), "TK102")
    assert (early.step, early.message.endswith("one step early?")) == (3, True)
    assert codes(_terminal(6, 0), "TK102") == []


def test_tk102_dense_rewards_give_no_evidence() -> None:
    assert codes(rollout(dones_for([5] * 6, 30), rews=np.ones(30)), "TK102") == []
    assert codes(rollout(dones_for([5] * 6, 30)), "TK102") == []  # continuous


@pytest.mark.parametrize(("episodes", "hit"), [(MIN_SHIFTED - 1, False), (MIN_SHIFTED, True)])
def test_tk102_needs_min_shifted_episodes(episodes: int, hit: bool) -> None:
    assert bool(codes(_terminal(episodes, 1), "TK102")) is hit


def _shift(**counts: tuple[int, int]) -> RewardShift:
    base: dict[str, tuple[int, int, tuple[int, int] | None, float]] = dict.fromkeys(
        ("0", "late", "early", "first", "before"), (0, 0, None, 0.0)
    )
    for name, (n, k) in counts.items():
        base[name if name != "own" else "0"] = (n, k, (1, 0) if k else None, 1.0)
    return RewardShift(base)


@pytest.mark.parametrize(
    ("counts", "hit"),
    [
        ({"late": (10, 5)}, False),  # half stand out: not most
        ({"late": (10, 6)}, True),
        ({"late": (10, 10), "own": (10, 5)}, False),  # half the terminating steps stand out
        ({"late": (10, 10), "own": (10, 4)}, True),
        ({"late": (10, 10), "first": (2, 1)}, False),  # the control stands out as much
        ({"late": (10, 10), "first": (3, 1)}, True),
        ({"early": (10, 10), "before": (2, 1)}, False),
    ],
)
def test_tk102_thresholds(counts: dict[str, tuple[int, int]], hit: bool) -> None:
    assert bool(shifted_rewards([("a.npz", _shift(**counts))])) is hit


def test_tk102_one_step_episodes_keep_their_reward() -> None:
    """Blackjack: a player who sticks at once ends a one-step episode with its ±1."""
    lengths = [1, 3] * 8
    rews = np.zeros(32)
    ends = np.cumsum(lengths) - 1
    rews[ends] = np.resize([1.0, -1.0, -1.0], len(ends))
    assert codes(rollout(dones_for(lengths, 32), rews=rews), "TK102") == []


def test_tk102_a_first_step_that_pays_by_itself_is_not_late() -> None:
    """An env whose first step pays something special: the recording's first shows it."""
    rews = np.zeros(33)
    rews[np.arange(0, 30, 5)] = 2.0  # every first step, the recording's first too
    r = rollout(dones_for([5] * 6, 33), rews=rews)
    assert lint_rollouts([r], "TK102", [{"id": "a", "index": 0, "num_envs": 1}]) == []


# ------------------------------------------------------------------------------ TK103


def _policy(T: int, shift: int, *, log_probs: bool, B: int = 2, seed: int = 1) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    actor = rng.normal(size=(T + 1, B, 4)).astype(np.float32) * 3
    logp = log_softmax(actor)
    actions = np.array(
        [[rng.choice(4, p=np.exp(logp[t, b])) for b in range(B)] for t in range(T + 1)]
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
    assert (found.env, found.step) == (0, 1)
    assert found.message.endswith("each action is stored one row late")
    assert "0% fit their own policy outputs and 100% those of actions[t+1]" in found.message


def test_tk103_finds_actions_one_row_early_and_passes_aligned_ones() -> None:
    [found] = codes(rollout(np.zeros((25, 2)), outs=_policy(24, -1, log_probs=True)), "TK103")
    assert found.message.endswith("each action is stored one row early")
    for log_probs in (True, False):
        r = rollout(np.zeros((25, 2)), outs=_policy(24, 0, log_probs=log_probs))
        assert codes(r, "TK103") == []


def test_tk103_gaussian_actions_by_their_log_probs() -> None:
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(21, 2, 1))
    std = np.full_like(mean, 0.5)
    actions = mean + std * rng.normal(size=mean.shape)
    logp = (-0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))[..., 0]
    outs = {"mean": mean, "std": std, "log_probs": logp, "actions": np.roll(actions, 1, 0)}
    [found] = codes(rollout(np.zeros((21, 2)), outs=outs), "TK103")
    assert found.message.endswith("(by log_probs): each action is stored one row late")


@pytest.mark.parametrize(
    ("by", "least"), [("log_probs", MIN_TELLING_LOGP), ("the greedy action of actor", MIN_TELLING)]
)
@pytest.mark.parametrize("more", [0, -1])
def test_tk103_needs_enough_telling_rows(by: str, least: int, more: int) -> None:
    telling = least + more
    fit = ActionFit(by, {"late": (telling, 0, telling, (1, 0)), "early": (10**4, 0, 0, None)})
    assert bool(misaligned_actions([("a.npz", fit)])) is (more == 0)


@pytest.mark.parametrize(("mirror", "hit"), [(26, False), (28, True)])
def test_tk103_the_chance_of_as_many_shifted_fits_against_the_mirror(
    mirror: int, hit: bool
) -> None:
    # 3 of 3 telling rows fit the shifted reading, none of `mirror` the other shift:
    # p = 3 / (mirror + 3); p^3 is 1.1e-3 at 26, 9.1e-4 at 28 (27 gives 1e-3 itself).
    fit = ActionFit("log_probs", {"late": (3, 0, 3, (1, 0)), "early": (mirror, 0, 0, None)})
    assert bool(misaligned_actions([("a.npz", fit)])) is hit


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
    assert shift_wins(own, shifted, telling) is wins
