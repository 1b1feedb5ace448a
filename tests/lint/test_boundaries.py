"""TK104, TK108, TK109 and TK114: the rows and steps around episode boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, rollout
from trajkit import Rollout
from trajkit.lint.boundaries import (
    JUMP_FACTOR,
    MIN_BOUNDARIES,
    FinalEvidence,
    PhantomEvidence,
    StartJumps,
    final_is_reset,
    misplaced_starts,
    phantom_findings,
    start_jumps,
)

# ------------------------------------------------------------------------------ TK104


def _twice(ends: list[int], T: int, *, same: bool = False) -> tuple[Array, Array]:
    """Observations and rewards where each ending step repeats its observation, reward 0."""
    obses = np.random.default_rng(0).normal(size=(T + 1, 1, 3)).astype(np.float32)
    rews = np.ones(T)
    for t in ends:
        if same:
            obses[t] = obses[ends[0]]
        obses[t + 1] = obses[t]
        rews[t] = 0.0
    return obses, rews


def test_tk104_finds_the_reset_observation_twice_at_every_end() -> None:
    obses, rews = _twice([4, 9, 10], 12)
    [found] = codes(rollout(dones_for([5, 5, 1], 12), obses=obses, rews=rews), "TK104")
    assert (found.env, found.step) == (0, 4)
    assert found.message.startswith("obses[5] repeats obses[4] across an episode end")


@pytest.mark.parametrize(("ends", "hit"), [([4], False), ([4, 9], True)])
def test_tk104_needs_min_boundaries_ends(ends: list[int], hit: bool) -> None:
    assert len(ends) == MIN_BOUNDARIES - (not hit)
    obses, rews = _twice(ends, 12)
    r = rollout(dones_for([5, 5][: len(ends)], 12), obses=obses, rews=rews)
    assert bool(codes(r, "TK104")) is hit


def test_tk104_every_end_one_observation_and_integers_are_not_evidence() -> None:
    dones = dones_for([5, 5, 1], 12)
    obses, rews = _twice([4, 9], 12)  # not step 10: a chance repeat
    assert codes(rollout(dones, obses=obses, rews=rews), "TK104") == []
    obses, rews = _twice([4, 9, 10], 12, same=True)  # a fixed state that repeats by itself
    assert codes(rollout(dones, obses=obses, rews=rews), "TK104") == []
    obses, rews = _twice([4, 9, 10], 12)
    ints = obses.astype(np.int64)
    assert codes(rollout(dones, obses=ints, rews=rews), "TK104") == []


# ------------------------------------------------------------------------------ TK108


def _smooth(resets: list[int], T: int = 18) -> Array:
    """Float observations that move a little each step and jump where a reset lands."""
    t = np.arange(T + 1, dtype=np.float32)
    jumps = sum((t >= r).astype(np.float32) for r in resets)
    return (np.sin(t) * 0.1 + 10.0 * jumps)[:, None, None]


def _phantom(T: int = 18) -> Rollout:
    """Episodes of 5 real steps, each followed by the kept autoreset step (reward 0)."""
    dones = dones_for([6] * (T // 6), T)
    rews = np.ones(T)
    resets = list(range(6, T, 6))
    rews[resets] = 0.0  # the steps leaving rows 6, 12, ... (final observations)
    return rollout(dones, rews=rews, obses=_smooth([r + 1 for r in resets], T))


def test_tk108_finds_the_phantom_step() -> None:
    [found] = codes(_phantom(120), "TK108")
    assert (found.env, found.step) == (0, 6)
    assert found.message.startswith(
        "every step that leaves a row flagged dones = 1 (19 here, 19 in the dataset, where "
        "other steps earn 0 at a rate of 0.036) has reward exactly 0 and ends nothing"
    )
    assert codes(_phantom(120), "TK108", recording={"autoreset_mode": "SAME_STEP"}) == []


def _evidence(k: int, zeros: int, others: int, wins: int = 0, judged: int = 0) -> PhantomEvidence:
    return PhantomEvidence(k, True, zeros, others, wins, judged, frozenset(), frozenset(), (1, 0))


@pytest.mark.parametrize(
    ("k", "others", "hit"),
    [(1, 2996, False), (1, 2997, True), (2, 91, False), (2, 92, True)],
)
def test_tk108_the_chance_of_as_many_zero_rewards(k: int, others: int, hit: bool) -> None:
    # q = 3 / (others + 3): q^k <= 1e-3 from 2997 others (k = 1), from 92 (k = 2)
    assert bool(phantom_findings([("a.npz", _evidence(k, 0, others))])) is hit


@pytest.mark.parametrize(("wins", "hit"), [(1, False), (2, True)])
def test_tk108_the_jumps_must_leave_the_flagged_rows_in_half(wins: int, hit: bool) -> None:
    assert bool(phantom_findings([("a.npz", _evidence(4, 0, 1000, wins, 4))])) is hit


@pytest.mark.parametrize(("k", "hit"), [(MIN_BOUNDARIES - 1, False), (MIN_BOUNDARIES, True)])
def test_tk108_a_fixed_reset_state_after_the_boundary_steps(k: int, hit: bool) -> None:
    e = PhantomEvidence(k, True, 50, 50, 0, 0, frozenset({b"s"}), frozenset({b"a", b"b"}), (1, 0))
    assert bool(phantom_findings([("a.npz", e)])) is hit
    one = PhantomEvidence(k, True, 50, 50, 0, 0, frozenset({b"s"}), frozenset({b"a"}), (1, 0))
    assert phantom_findings([("a.npz", one)]) == []


def test_tk108_a_boundary_step_that_pays_or_ends_is_no_phantom() -> None:
    e = PhantomEvidence(4, False, 0, 1000, 0, 0, frozenset(), frozenset(), (1, 0))
    assert phantom_findings([("a.npz", e), ("b.npz", _evidence(4, 0, 1000))]) == []


def test_tk108_a_real_first_step_that_earns_0_jumps_onto_its_row() -> None:
    """LunarLander: the first step after a reset earns exactly 0 when no engine fires."""
    clean = _phantom(120)
    resets = list(range(6, 120, 6))
    clean = clean.replace(obses=_smooth(resets, 120))  # the jump lands on the flagged rows
    assert codes(clean, "TK108") == []


# ------------------------------------------------------------------------------ TK109


def _jumpy(flags: list[int], resets: list[int], T: int, size: float = 100.0) -> Rollout:
    t = np.arange(T + 1, dtype=np.float32)
    level = sum((t >= r).astype(np.float32) for r in resets)
    obses = (np.sin(t) + size * level)[:, None, None]
    return rollout(np.isin(t, [0, *flags]).astype(float), obses=obses)


def test_tk109_finds_dones_one_row_early_and_passes_them_in_place() -> None:
    resets = list(range(10, 200, 10))
    assert codes(_jumpy(resets, resets, 200), "TK109") == []
    found = codes(_jumpy([r - 1 for r in resets], resets, 200), "TK109")
    assert (found[0].env, found[0].step) == (0, 9)
    assert found[0].message == (
        "the observations jump one row after the row flagged dones = 1 at 19 of 19 episode "
        "starts of the dataset (19 here; this one: row 9): dones stored one row early?"
    )


@pytest.mark.parametrize(
    ("valid", "wins", "mirror", "hit"),
    [
        ((MIN_BOUNDARIES - 1), 1, (0, 0), False),
        (3, 3, (28, 0), True),  # p = 3 / 31: 3 of 3 have a chance under 1e-3
        (2, 2, (28, 0), False),
        (4, 2, (100, 0), False),  # half is not most
        (5, 3, (100, 0), True),
        (3, 3, (26, 0), False),  # p = 3 / 29: just over 1e-3
    ],
)
def test_tk109_thresholds(valid: int, wins: int, mirror: tuple[int, int], hit: bool) -> None:
    jumps = StartJumps({"after": (valid, wins, (1, 0)), "before": (*mirror, None)})
    assert bool(misplaced_starts([("a.npz", jumps)])) is hit


@pytest.mark.parametrize(("size", "win"), [(JUMP_FACTOR, False), (JUMP_FACTOR + 0.5, True)])
def test_tk109_the_jump_factor(size: float, win: bool) -> None:
    T = 12
    obses = np.zeros((T + 1, 1, 1), dtype=np.float32)
    obses[:, 0, 0] = np.arange(T + 1) % 2  # every step moves by 1
    obses[7:] += size - 1.0  # the reset lands on row 7: a jump of `size` steps
    dones = np.isin(np.arange(T + 1), [0, 6]).astype(float)  # flagged one row early
    jumps = start_jumps(rollout(dones, obses=obses))
    assert jumps is not None
    assert jumps.counts["after"][1] == int(win)


# ------------------------------------------------------------------------------ TK114


def test_tk114_final_observations_that_are_the_next_row() -> None:
    T = 30
    dones = dones_for([3] * 10, T)
    r = rollout(dones)
    ends = np.argwhere(dones[1:] == 1)[:, 0]
    same = r.replace(final_obses=r.obses[ends + 1, 0])
    [found] = codes(same, "TK114")
    assert (found.env, found.step) == (0, 2)
    assert found.message.startswith(
        "final_obses equal the next row's observation, the next episode's first, at all 10"
    )
    other = r.replace(final_obses=r.obses[ends, 0] + 1)
    assert codes(other, "TK114") == []


@pytest.mark.parametrize(
    ("ends", "resets", "chance", "hit"),
    [
        (MIN_BOUNDARIES - 1, 2, -9.0, False),
        (MIN_BOUNDARIES, 2, -9.0, True),
        (5, 1, -9.0, False),  # a fixed start state: a task that ends where it starts
        (5, 2, -3.0, True),
        (5, 2, -2.99, False),
    ],
)
def test_tk114_thresholds(ends: int, resets: int, chance: float, hit: bool) -> None:
    keys = frozenset([b"a", b"b"][:resets])
    e = FinalEvidence(ends, True, chance, keys, (0, 0))
    assert bool(final_is_reset([("a.npz", e)])) is hit
    assert final_is_reset([("a.npz", FinalEvidence(ends, False, chance, keys, (0, 0)))]) == []
