"""TK102 and TK103: rewards and actions stored one row off, and their evidence thresholds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, lint_rollouts, rollout
from trajkit import Rollout
from trajkit.lint.alignment import (
    MIN_SHIFTED,
    MIN_TELLING,
    MIN_TELLING_LOGP,
    ActionFit,
    RewardShift,
    _apart,
    _decoys,
    _fits,
    action_fit,
    misaligned_actions,
    reward_shift,
    shift_wins,
    shifted_rewards,
)
from trajkit.lint.policy import LOGP_TOL, log_softmax

# ------------------------------------------------------------------------------ TK102


def _terminal(episodes: int, shift: int, length: int = 5) -> Any:
    """Episodes of `length` steps paying +1 on the terminating step, shifted by `shift`."""
    T = episodes * length + 3
    rews = np.zeros(T)
    rews[np.arange(length - 1, episodes * length, length) + shift] = 1.0
    return rollout(dones_for([length] * episodes, T), rews=rews)


def test_tk102_finds_late_and_early_terminal_rewards() -> None:
    [late] = codes(_terminal(8, 1), "TK102")
    assert (late.env, late.step) == (0, 5)
    assert late.message.startswith(
        "the rewards of 8 of 8 terminated episodes of the dataset stand out on the next "
        "episode's first step (8 of 8 here; rews[5, 0] = 1)"
    )
    assert late.message.endswith("rewards stored one step late?")
    [early] = codes(_terminal(8, -1), "TK102")
    assert (early.step, early.message.endswith("one step early?")) == (3, True)
    assert codes(_terminal(8, 0), "TK102") == []


def test_tk102_dense_rewards_give_no_evidence() -> None:
    assert codes(rollout(dones_for([5] * 6, 30), rews=np.ones(30)), "TK102") == []
    assert codes(rollout(dones_for([5] * 6, 30)), "TK102") == []  # continuous


@pytest.mark.parametrize(("episodes", "hit"), [(MIN_SHIFTED - 1, False), (MIN_SHIFTED, True)])
def test_tk102_needs_min_shifted_episodes(episodes: int, hit: bool) -> None:
    # many controls that stand out never: the chance says yes from 3 episodes on
    counts = _shift(late=(episodes, episodes), own=(episodes, 0), first=(10**4, 0))
    assert bool(shifted_rewards([("a.npz", counts)])) is hit


@pytest.mark.parametrize(("episodes", "hit"), [(6, False), (7, True)])
def test_tk102_the_chance_of_as_many_standing_out(episodes: int, hit: bool) -> None:
    # n shifted steps stand out, none of the n recorded terminating steps: their rate is
    # bounded by 3 / (n + 3), and its n-th power falls under 1e-3 at n = 7 (1.4e-3 at 6)
    assert bool(codes(_terminal(episodes, -1), "TK102")) is hit


def test_tk102_a_phase_of_fixed_length_episodes_is_no_shift() -> None:
    """Dense rewards of fixed-length episodes: the steps of one phase stand out of the
    middle steps' range by themselves, and the recorded terminating steps nearly as often."""
    assert shifted_rewards([("a.npz", _shift(early=(20, 11), own=(20, 7)))]) == []
    assert shifted_rewards([("a.npz", _shift(early=(20, 15), own=(20, 1)))]) != []


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
        # many controls that never stand out keep the chance small where it is not judged
        ({"late": (10, 5), "first": (10**4, 0)}, False),  # half stand out: not most
        ({"late": (10, 6), "first": (10**4, 0)}, True),
        ({"late": (10, 10), "own": (10, 5)}, False),  # half the terminating steps stand out
        ({"late": (10, 10), "own": (10, 4), "first": (10**4, 0)}, True),
        ({"late": (10, 10), "own": (10**4, 0), "first": (2, 1)}, False),  # the control, as much
        ({"late": (10, 10), "own": (10**4, 0), "first": (3, 1)}, True),
        ({"early": (10, 10), "own": (10**4, 0), "before": (2, 1)}, False),
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
    assert (found.env, found.step) == (0, 0)  # row 0 holds another row's action too
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
    fit = ActionFit(
        by,
        {"late": (telling, 0, telling, (1, 0), 0, 0), "early": (10**4, 0, 0, None, 10**4, 0)},
    )
    assert bool(misaligned_actions([("a.npz", fit)])) is (more == 0)


@pytest.mark.parametrize(("mirror", "hit"), [(23, False), (25, True)])
def test_tk103_the_chance_of_as_many_shifted_fits_against_the_mirror(
    mirror: int, hit: bool
) -> None:
    # 3 of 3 telling rows fit the shifted reading, none their own, none of `mirror` rows the
    # other shift where it proposes another action: p = 3 / (3 + mirror + 3); p^3 is
    # 1.1e-3 at 23, 9.1e-4 at 25 (24 gives 1e-3 itself).
    fit = ActionFit(
        "log_probs", {"late": (3, 0, 3, (1, 0), 3, 3), "early": (10**4, 0, 0, None, mirror, 0)}
    )
    assert bool(misaligned_actions([("a.npz", fit)])) is hit


@pytest.mark.parametrize(("decoys", "hit"), [(23, False), (25, True)])
def test_tk103_the_chance_of_as_many_shifted_fits_against_decoys(decoys: int, hit: bool) -> None:
    # As above, the coincidence rate from decoys (actions no reading proposes) alone.
    counts = {"late": (3, 0, 3, (1, 0), 3, 3), "early": (0, 0, 0, None, 0, 0)}
    fit = ActionFit("log_probs", counts, decoys=(decoys, 0))
    assert bool(misaligned_actions([("a.npz", fit)])) is hit
    fitting = ActionFit("log_probs", counts, decoys=(10**4, 10**4 // 2))  # decoys often fit
    assert misaligned_actions([("a.npz", fitting)]) == []


def test_tk103_own_fits_count_against_the_shift() -> None:
    # 10 telling rows: 10 fit the shift, 4 their own (ties elsewhere excluded): the own
    # fits make coincidences common, p = 7 / 13 over own rows and mirror rows.
    counts = {"late": (10, 4, 10, (1, 0), 10, 10), "early": (0, 0, 0, None, 0, 0)}
    assert misaligned_actions([("a.npz", ActionFit("log_probs", counts))]) == []


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


# ---------------------------------------------------------- exact counts, from mutation runs


def test_reward_shift_counts_each_alignment_and_control() -> None:
    """Episodes of 5: a truncation ends the first, terminations the second and third."""
    truncated = np.zeros(20)
    truncated[4] = 1
    rews = np.zeros(20)
    rews[[9, 14]] = 1.0  # the terminating steps pay
    r = rollout(dones_for([5, 5, 5, 5], 20), rews=rews, truncated=truncated)
    first = reward_shift(r, {"index": 0}).counts
    assert {k: v[:2] for k, v in first.items()} == {
        "0": (3, 2),  # steps 9, 14 and 19 (step 4 is a truncation); 19 pays nothing
        "late": (2, 0),  # steps 10 and 15 (step 20 is past the file)
        "early": (3, 0),  # steps 8, 13 and 18
        "first": (2, 0),  # step 5 (after the truncation) and step 0 (the recording's first)
        "before": (1, 0),  # step 3
    }
    assert first["0"][2:] == ((9, 0), 1.0)
    assert first["late"][2:] == (None, 0.0)
    later = reward_shift(r, {"index": 1}).counts
    assert later["first"][:2] == (1, 0)  # row 0 continues an earlier file: no control
    assert reward_shift(r, None).counts["first"][:2] == (2, 0)


def test_reward_shift_without_middle_steps_sees_nothing_stand_out() -> None:
    r = rollout(dones_for([2, 2], 4), rews=np.array([0.0, 5.0, 0.0, 5.0]))
    assert all(v[1] == 0 for v in reward_shift(r, None).counts.values())


def test_tk102_messages_name_the_shift_and_the_counts() -> None:
    late = _shift(late=(10, 10), own=(10, 2))
    skipped = RewardShift({**_shift().counts})
    found = shifted_rewards([("a.npz", skipped), ("b.npz", late)])
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK102", "b.npz", 0, 1)]
    assert found[0].message == (
        "the rewards of 10 of 10 terminated episodes of the dataset stand out on the next "
        "episode's first step (10 of 10 here; rews[1, 0] = 1), and 2 of 10 on the terminating "
        "steps: rewards stored one step late?"
    )
    [early] = shifted_rewards([("a.npz", _shift(early=(10, 10), own=(10, 0)))])
    assert "stand out on the step before (10 of 10 here" in early.message


def test_fits_by_log_probs_within_the_relative_tolerance() -> None:
    actor = np.zeros((3, 1, 2))
    logp = np.full((3, 1), np.log(0.5))
    outs = {"actor": actor, "actions": np.zeros((3, 1), np.int64), "log_probs": logp}
    r = rollout(np.zeros(3), outs=outs)
    rows = np.array([0, 1, 2])
    scale = 1 + abs(np.log(0.5))
    for offset, fits in ((0.9 * 1e-3 * scale, True), (1.1 * 1e-3 * scale, False)):
        outs["log_probs"] = logp + offset
        ok = _fits(rollout(np.zeros(3), outs=outs), rows, outs["actions"][rows])
        assert ok is not None
        assert bool(ok[0].all()) is fits
    assert _fits(r, rows, outs["actions"][rows]) is not None


def test_action_fit_counts_telling_rows() -> None:
    actor = np.eye(3)[[0, 1, 2, 0, 1]][:, None, :] * 5.0  # greedy: 0, 1, 2, 0, 1
    logp = log_softmax(actor)
    actions = np.array([0, 1, 2, 0, 1])[:, None]
    chosen = np.take_along_axis(logp, actions[..., None], -1)[..., 0]
    late = {"actor": actor, "actions": np.roll(actions, 1, 0), "log_probs": chosen}
    fit = action_fit(rollout(np.zeros(5), outs=late))
    assert fit is not None
    assert fit.by == "log_probs"
    # late, rows 0 to 3: each action differs from the next, none fits its own row, all fit
    # the next row's outputs; rows 2 and 3 propose another action than the early shift.
    # early, rows 1 to 4: on rows 2 to 4 the two actions are both non-greedy, their
    # log-probabilities tie, and tell nothing; row 1 fits the previous row's action (the roll).
    assert fit.counts == {"late": (4, 0, 4, (0, 0), 2, 2), "early": (1, 0, 1, (1, 0), 0, 0)}
    assert fit.decoys == (1, 0)  # row 1's candidates are 0 and 1: action 2 is a decoy
    assert action_fit(rollout(np.zeros(3), outs={k: v[:3] for k, v in late.items()})) is not None
    assert action_fit(rollout(np.zeros(2), outs={k: v[:2] for k, v in late.items()})) is None


def test_action_fit_of_box_actions_with_features() -> None:
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(9, 1, 2))
    std = np.full_like(mean, 0.5)
    actions = mean + std * rng.normal(size=mean.shape)
    dens = -0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    outs = {"mean": mean, "std": std, "log_probs": dens.sum(-1), "actions": np.roll(actions, 1, 0)}
    fit = action_fit(rollout(np.zeros(9), outs=outs))
    assert fit is not None
    assert fit.counts["late"][:3] == (8, 0, 8)  # rows 0 to 7
    assert fit.decoys[0] == 12  # rows 1 to 7: the actions two rows away (6 + 6 of them)


def test_tk103_every_reading_is_judged_and_the_messages() -> None:
    far = (10**4, 0, 0, None, 10**4, 0)
    weak = ActionFit("log_probs", {"late": (2, 0, 2, (1, 0), 2, 2), "early": far})
    none = ActionFit(
        "the greedy action of actor",
        {"late": (0, 0, 0, None, 0, 0), "early": (9, 0, 0, None, 9, 0)},
    )
    greedy = ActionFit(
        "the greedy action of actor", {"late": (10, 2, 9, (4, 1), 10, 9), "early": far}
    )
    found = misaligned_actions([("a.npz", weak), ("b.npz", none), ("c.npz", greedy)])
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK103", "c.npz", 1, 4)]
    assert found[0].message == (
        "of the 10 rows of the dataset whose action differs from the next row's, 20% fit their "
        "own policy outputs and 90% those of actions[t+1] (by the greedy action of actor): "
        "each action is stored one row late"
    )
    early = ActionFit("log_probs", {"early": (9, 0, 9, (2, 0), 9, 9), "late": far})
    [found_early] = misaligned_actions([("a.npz", early)])
    assert found_early.message == (
        "of the 9 rows of the dataset whose action differs from the previous row's, 0% fit "
        "their own policy outputs and 100% those of actions[t-1] (by log_probs): each action "
        "is stored one row early"
    )


def test_action_fit_rows_whose_two_actions_tie_tell_nothing() -> None:
    actor = np.zeros((7, 1, 3))
    actor[..., 2] = 4.0  # actions 0 and 1 are equally likely on every row
    actions = np.array([0, 1, 0, 1, 0, 1, 0])[:, None]
    chosen = np.take_along_axis(log_softmax(actor), actions[..., None], -1)[..., 0]
    outs = {"actor": actor, "actions": np.roll(actions, 1, 0), "log_probs": chosen}
    fit = action_fit(rollout(np.zeros(7), outs=outs))
    assert fit is not None
    assert fit.counts["late"][0] == fit.counts["early"][0] == 0
    assert fit.decoys == (5, 0)  # action 2 on rows 1 to 5: never the stored log-probability


def test_action_fit_decoys_that_fit_the_stored_log_probability() -> None:
    actor = np.zeros((5, 1, 4))
    actions = np.array([0, 0, 0, 0, 0])[:, None]
    chosen = np.full((5, 1), np.log(0.25))  # uniform logits: every action fits
    fit = action_fit(
        rollout(np.zeros(5), outs={"actor": actor, "actions": actions, "log_probs": chosen})
    )
    assert fit is not None
    assert fit.decoys == (9, 9)  # rows 1 to 3, actions 1 to 3


def test_action_fit_by_the_greedy_action_where_it_moves() -> None:
    greedy = np.array([0, 1, 2, 0, 1, 2, 0])
    actor = np.eye(3)[greedy][:, None, :] * 5.0
    actions = np.roll(greedy, 1)[:, None]  # each row holds the previous row's greedy action
    fit = action_fit(rollout(np.zeros(7), outs={"actor": actor, "actions": actions}))
    assert fit is not None
    assert fit.by == "the greedy action of actor"
    # late, rows 1 to 5 (row 0's action, the roll's wrap, is row 1's): the next row's
    # greedy action differs on every one, and its action is this row's greedy one
    assert fit.counts["late"][:4] == (5, 0, 5, (1, 0))
    pairs = np.array([0, 0, 1, 1, 2, 2, 0])  # the greedy action persists over two rows
    steady = np.eye(3)[pairs][:, None, :] * 5.0
    moved = np.roll(pairs, 1)[:, None]
    still = action_fit(rollout(np.zeros(7), outs={"actor": steady, "actions": moved}))
    assert still is not None
    # where the next row's greedy action is this row's, its action fits both: no telling row
    assert still.counts["late"][0] == 0


# ------------------------------------------------------- TK103's tolerance, on both sides


def test_apart_beyond_the_relative_tolerance_on_both_sides() -> None:
    """Two log-probabilities differ past LOGP_TOL * (1 + |x|); a missing reading always does."""
    tol = LOGP_TOL
    x = np.array([0.0, 0.0, -3.0, -3.0])
    y = x + np.array([tol, 1.5 * tol, 3 * tol, 4.5 * tol])  # (1 + |x|) is 1, 1, 4, 4
    assert np.asarray(_apart(x, y)).tolist() == [False, True, False, True]
    assert _apart(None, y) is True
    assert _apart(x, None) is True


def _decoy_table(stored: float, offsets: tuple[float, float]) -> Any:
    """Three rows, three Discrete actions; row 1's log-probabilities of actions 1 and 2 lie
    `offsets` (in tolerances at `stored`) from its stored log-probability."""
    scale = LOGP_TOL * (1 + abs(stored))
    p = np.exp([stored + offsets[0] * scale, stored + offsets[1] * scale])
    row = np.log([1 - p.sum(), *p])
    actor = np.tile(row, (3, 1, 1))
    return actor, np.full((3, 1), stored)


def test_decoys_fit_within_the_relative_tolerance_and_not_past_it() -> None:
    actor, logp = _decoy_table(np.log(0.3), (0.9, 1.1))
    actions = np.zeros((3, 1), np.int64)  # row 1's candidates: action 0 only
    r = rollout(np.zeros(3), outs={"actor": actor, "actions": actions, "log_probs": logp})
    assert _decoys(r) == (2, 1)  # actions 1 and 2; 1 fits (0.9 of the tolerance), 2 not


@pytest.mark.parametrize(("roll", "name"), [(1, "late"), (-1, "early")])
def test_action_fit_counts_the_rows_only_one_shift_explains(roll: int, name: str) -> None:
    """A cycle of three greedy actions, stored one row late or early: on rows 1 to 5 the two
    neighbours' actions differ (a, a+1, a+2 of the cycle) and their log-probabilities too, so
    each of those rows tells the shifts apart, and all five fit the true shift."""
    greedy = np.array([0, 1, 2, 0, 1, 2, 0])
    actor = np.eye(3)[greedy][:, None, :] * 5.0
    chosen = np.take_along_axis(log_softmax(actor), greedy[:, None, None], -1)[..., 0]
    outs = {"actor": actor, "actions": np.roll(greedy, roll)[:, None], "log_probs": chosen}
    fit = action_fit(rollout(np.zeros(7), outs=outs))
    assert fit is not None
    other = "early" if name == "late" else "late"
    assert fit.counts == {name: (5, 0, 5, (1, 0), 5, 5), other: (0, 0, 0, None, 0, 0)}
    assert fit.decoys == (1, 0)


def _gaussian(T: int, shift: int, seed: int) -> Rollout:
    """Gaussian actions with their log-probabilities, the actions rolled `shift` rows."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(T + 1, 2, 1))
    std = np.full_like(mean, 0.5)
    actions = mean + std * rng.normal(size=mean.shape)
    logp = (-0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))[..., 0]
    outs = {"mean": mean, "std": std, "log_probs": logp, "actions": np.roll(actions, shift, 0)}
    return rollout(np.zeros((T + 1, 2)), outs=outs, seed=seed)


def test_tk103_a_file_with_actions_on_the_next_row_is_left_out_of_tk110() -> None:
    """In a dataset whose other file fits its log-probabilities, a file whose actions are a
    row late misfits its own: TK103 says why, and TK110 (another policy's log-probabilities)
    does not judge that file."""
    files = [_gaussian(8, 0, seed=0), _gaussian(40, 1, seed=1)]
    assert [(f.code, f.path) for f in lint_rollouts(files, "TK1")] == [("TK103", "r1.npz")]


@pytest.mark.parametrize(("index", "hit"), [(0, True), (1, False)])
def test_tk102_the_recording_s_first_file_has_first_steps_to_compare(index: int, hit: bool) -> None:
    """3 envs, 8 terminations: the 5 next first steps pay 2, every other step 0. In the
    recording's first file, row 0's 3 first steps (paying 0) are controls too: steps stand
    out at a rate of at most 3 / (8 + 3 + 3), and 5 of 5 is a chance of 4.5e-4, reported; in
    a later file, row 0 continues earlier episodes: 3 / 11, 1.5e-3, not reported."""
    dones = np.stack([dones_for([5, 5, 5], 15)] * 2 + [dones_for([10, 5], 15)], axis=1)
    rews = np.zeros((15, 3))
    rews[[5, 10, 5, 10, 10], [0, 0, 1, 1, 2]] = 2.0
    recording = {"id": "a", "index": index, "num_envs": 3}
    found = lint_rollouts([rollout(dones, rews=rews)], "TK102", [recording])
    assert [(f.code, f.env, f.step) for f in found] == ([("TK102", 0, 5)] if hit else [])
