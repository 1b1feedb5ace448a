"""TK101, TK105 and TK113: episodes (joined across files) against the time limit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import codes, dones_for, lint_rollouts, rollout
from trajkit.lint import Finding
from trajkit.lint.timelimit import cut_rate, window

RAW = {"id": "r", "index": 0, "num_envs": 2, "autoreset_mode": "NEXT_STEP", "wrappers": []}


def _cut(episodes: int) -> list[Finding]:
    """Env 0: `episodes` episodes of 10 steps ending untruncated, then one running on."""
    T = 10 * episodes + 5
    r = rollout(dones_for([10] * episodes, T), truncated=np.zeros(T))
    return codes(r, "TK101", max_episode_steps=10)


@pytest.mark.parametrize(("episodes", "hit"), [(4, False), (5, True)])
def test_tk101_cut_episodes_with_nothing_else_to_go_by(episodes: int, hit: bool) -> None:
    # Every episode passed steps 8 and 9 (the window: the last quarter of L = 10, 2 steps)
    # and ended at 10: the rate there is bounded by 3 / (2n + 3), and its n-th power falls
    # under 1e-3 at n = 5 (6.5e-4; 5.5e-3 at 4).
    assert window(10) == 2
    found = _cut(episodes)
    assert [(f.code, f.env, f.step) for f in found] == ([("TK101", 0, 9)] if hit else [])
    if hit:
        assert found[0].message.startswith(
            "5 distinct episodes in 1 file end at exactly the time limit of 10 steps"
        )


@pytest.mark.parametrize(("limit", "steps"), [(3, 1), (4, 1), (7, 1), (8, 2), (100, 25)])
def test_tk101_window_is_the_last_quarter_of_the_limit(limit: int, steps: int) -> None:
    assert window(limit) == steps


@pytest.mark.parametrize(
    ("args", "hit"),
    [
        ((2, 0, 92, 0, 10**6), False),  # per step: 3 / 95, squared 9.97e-4 <= 1e-3
        ((2, 0, 91, 0, 10**6), True),  # 3 / 94 squared: 1.02e-3
        ((2, 0, 10**6, 0, 92), False),
        ((2, 0, 10**6, 0, 91), True),  # the rate at step L-1 alone decides
        ((1, 0, 10**6, 1, 10**6), False),
    ],
)
def test_tk101_the_chance_uses_the_larger_rate(args: tuple[int, ...], hit: bool) -> None:
    cuts, *counts = args
    assert (cut_rate(*counts) ** cuts > 1e-3) is hit


def _flagged_elsewhere(flagged: int, unflagged: int = 0) -> list[Finding]:
    """Env 0: 3 episodes of 10 steps, unflagged; env 1: `flagged` flagged as cut at 10 and
    `unflagged` not; then both run on (no other end)."""
    T = 10 * (flagged + unflagged) + 5
    lengths = [10] * (flagged + unflagged)
    dones = np.stack([dones_for([10, 10, 10], T), dones_for(lengths, T)], axis=1)
    truncated = np.zeros((T, 2))
    truncated[9 : 10 * flagged : 10, 1] = 1
    return codes(rollout(dones, truncated=truncated), "TK101", max_episode_steps=10)


@pytest.mark.parametrize(("flagged", "hit"), [(6, False), (8, True)])
def test_tk101_weighs_unflagged_ends_against_an_env_that_flags_its_cuts(
    flagged: int, hit: bool
) -> None:
    # chances to terminate: 3 + flagged episodes at steps 8 and 9, flagged ones at step 10,
    # none taken: h = 3 / (6 + 3 flagged + 3); h^3 is 1.4e-3 at 6 flagged, 7.5e-4 at 8.
    found = _flagged_elsewhere(flagged)
    assert [(f.env, f.step) for f in found] == ([(0, 9)] if hit else [])


def test_tk101_unflagged_ends_where_cuts_are_flagged_are_terminations_at_the_limit() -> None:
    # env 1 also terminates 4 episodes on the limit's step: that happens, h = 7 / 45
    assert _flagged_elsewhere(8, unflagged=4) == []


def test_tk101_terminations_that_cluster_before_the_limit_are_no_evidence() -> None:
    """A state-driven end near the limit: many episodes end at 9 steps, a few at 10."""
    lengths = [9] * 30 + [10] * 5
    T = sum(lengths) + 3
    r = rollout(dones_for(lengths, T), truncated=np.zeros(T))
    assert codes(r, "TK101", max_episode_steps=10) == []


def test_tk101_an_env_that_flags_an_end_at_the_limit_records_truncations() -> None:
    dones = np.stack([dones_for([10] * 8, 85), dones_for([10] * 8, 85)], axis=1)
    truncated = np.zeros((85, 2))
    truncated[9:80:10, 1] = 1
    found = codes(rollout(dones, truncated=truncated), "TK101", max_episode_steps=10)
    assert [(f.env, f.step) for f in found] == [(0, 9)]  # env 1 flags them: its own are fine
    truncated[9, 0] = 1
    assert codes(rollout(dones, truncated=truncated), "TK101", max_episode_steps=10) == []


def test_tk101_identical_episodes_are_one_piece_of_evidence() -> None:
    """A deterministic env with a fixed start repeats one episode: no independent evidence."""
    T = 200
    dones = dones_for([10] * 20, T)
    obses = np.tile(np.arange(10, dtype=np.float32), 21)[: T + 1, None, None]
    assert codes(rollout(dones, obses=obses), "TK101", max_episode_steps=10) == []
    assert len(codes(rollout(dones), "TK101", max_episode_steps=10)) == 1


def test_tk101_needs_a_time_limit() -> None:
    assert codes(rollout(dones_for([10] * 10, 100)), "TK101") == []


@pytest.mark.parametrize(("length", "over"), [(10, False), (11, True)])
def test_tk105_the_limit_itself_is_allowed(length: int, over: bool) -> None:
    found = codes(rollout(dones_for([length], 14)), "TK105", max_episode_steps=10)
    assert [(f.env, f.step) for f in found] == ([(0, 10)] if over else [])


def test_tk105_message() -> None:
    dones = np.stack([dones_for([8, 8, 8], 30), dones_for([15, 8], 30)], axis=1)
    [found] = codes(rollout(dones), "TK105", max_episode_steps=10)
    assert found.message == (
        "1 episode(s) run past the time limit of 10 steps with no episode end or truncation "
        "(this one starts at row 0)"
    )


@pytest.mark.parametrize(("length", "early"), [(9, True), (10, False)])
def test_tk113_a_truncation_before_the_limit(length: int, early: bool) -> None:
    truncated = np.zeros(20)
    truncated[length - 1] = 1
    r = rollout(dones_for([length, 5], 20), truncated=truncated)
    found = codes(r, "TK113", max_episode_steps=10)
    assert [(f.code, f.env, f.step) for f in found] == ([("TK113", 0, 8)] if early else [])
    if early:
        assert "(this one after 9)" in found[0].message


def test_tk113_a_truncation_of_an_episode_begun_before_the_data_is_not_judged() -> None:
    dones = dones_for([4], 10)
    dones[0] = 0  # row 0 continues an episode whose start is not in the data
    truncated = np.zeros(10)
    truncated[3] = 1
    assert codes(rollout(dones, truncated=truncated), "TK113", max_episode_steps=10) == []


def test_the_recording_s_limit_comes_first() -> None:
    r = rollout(dones_for([12], 14))
    rec = {**RAW, "num_envs": 1, "max_episode_steps": 11}
    [found] = lint_rollouts([r], "TK105", [rec], max_episode_steps=50)
    assert (found.step, "time limit of 11 steps" in found.message) == (11, True)


def test_time_limit_messages() -> None:
    [cut] = _cut(7)
    assert cut.message == (
        "7 distinct episodes in 1 file end at exactly the time limit of 10 steps with "
        "truncated = 0, in envs that flag no such end as a truncation, where a step terminates "
        "an episode 0.18 of the time: record them as truncations (truncated = 1 and their "
        "final_values)"
    )
    assert (cut.code, cut.path) == ("TK101", "r0.npz")
    truncated = np.zeros(20)
    truncated[8] = 1
    [early] = codes(
        rollout(dones_for([9, 5], 20), truncated=truncated), "TK113", max_episode_steps=10
    )
    assert (early.code, early.path) == ("TK113", "r0.npz")
    assert early.message == (
        "1 episode(s) are flagged as truncated before the time limit of 10 steps (this one "
        "after 9): terminations recorded as truncations, or a file's end recorded as a cut?"
    )


def test_row_digests_of_one_env_and_of_the_row() -> None:
    from trajkit.lint.episodes import row_digest

    obses = np.arange(8.0).reshape(4, 2, 1)
    r = rollout(np.zeros((4, 2)), obses=obses)
    assert row_digest(r, 1, 0) != row_digest(r, 1, 1)
    assert row_digest(r, 1, 0) != row_digest(r, 1)
    flagged = rollout(np.array([[0.0, 0], [1, 0], [0, 0], [0, 0]]), obses=obses)
    assert row_digest(flagged, 1) != row_digest(r, 1)  # the row's dones count
    assert row_digest(flagged, 1, 0) == row_digest(r, 1, 0)  # an env's observation alone
