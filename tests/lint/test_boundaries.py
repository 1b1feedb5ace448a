"""TK104, TK108, TK109 and TK114: the rows and steps around episode boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, lint_rollouts, rollout
from trajkit import Rollout
from trajkit.lint import boundaries
from trajkit.lint.boundaries import (
    JUMP_FACTOR,
    MIN_BOUNDARIES,
    FinalEvidence,
    PhantomEvidence,
    StartJumps,
    final_evidence,
    final_is_reset,
    misplaced_starts,
    phantom_evidence,
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
    obses, rews = _twice(ends, 40)
    r = rollout(dones_for([5, 5][: len(ends)], 40), obses=obses, rews=rews)
    assert bool(codes(r, "TK104")) is hit


@pytest.mark.parametrize(("T", "hit"), [(17, False), (18, True)])
def test_tk104_the_chance_of_as_many_repeats(T: int, hit: bool) -> None:
    # 2 repeats among T + 1 rows: p = (2 + 3) / (T (T + 1) / 2 + 3), p^2 <= 1e-3 from T = 18
    # (the 171 pairs of 19 rows: 8.3e-4; 1.03e-3 with the 153 of 18)
    obses, rews = _twice([4, 9], T)
    r = rollout(dones_for([5, 5], T), obses=obses, rews=rews)
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
    """k silent boundary steps, each from another observation."""
    rows = frozenset(bytes([i]) for i in range(k))
    return PhantomEvidence(k, True, zeros, others, wins, judged, frozenset(), rows, (1, 0))


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


def _fixed(k: int, alike: float, at: frozenset[bytes] = frozenset({b"a", b"b"})) -> PhantomEvidence:
    """k silent boundary steps (0-reward steps common: q says nothing) onto one state."""
    return PhantomEvidence(k, True, 50, 50, 0, 0, frozenset({b"s"}), at, (1, 0), alike)


@pytest.mark.parametrize(("k", "hit"), [(MIN_BOUNDARIES - 1, False), (MIN_BOUNDARIES, True)])
def test_tk108_a_fixed_reset_state_after_the_boundary_steps(k: int, hit: bool) -> None:
    assert bool(phantom_findings([("a.npz", _fixed(k, -4.0))])) is hit
    assert phantom_findings([("a.npz", _fixed(k, -4.0, at=frozenset({b"a"})))]) == []


@pytest.mark.parametrize(("alike", "hit"), [(-1.4, False), (-1.6, True)])
def test_tk108_a_fixed_reset_state_weighed_against_alike_rows(alike: float, hit: bool) -> None:
    # 3 boundary steps onto one state: 2 coincidences at the rate rows are alike, p^2 <= 1e-3
    # from log10 p = -1.5 (a coarse observation repeats by itself: rows alike 1 in 25 are no
    # evidence, 1 in 40 are)
    assert bool(phantom_findings([("a.npz", _fixed(3, alike))])) is hit


def test_tk108_the_rate_of_alike_rows_per_file() -> None:
    obses = np.array([0.0, 1, 0, 1, 2])[:, None, None]  # pairs alike: (0, 2), (1, 3) of 10
    r = rollout(dones_for([2, 2], 4), obses=obses)
    evidence = phantom_evidence(r)
    assert evidence is not None
    assert evidence.alike == pytest.approx(np.log10(5 / 13))


def test_tk108_steps_from_one_state_are_one_piece_of_evidence() -> None:
    """A fixed start whose first step earns 0 (a sparse reward far from it): every boundary
    step leaves the same observation, and earns alike."""
    one = PhantomEvidence(40, True, 500, 1000, 0, 0, frozenset(), frozenset({b"s"}), (1, 0))
    assert phantom_findings([("a.npz", one)]) == []
    assert phantom_findings([("a.npz", _evidence(40, 500, 1000))]) != []  # 40 states: q^40


def test_tk108_a_boundary_step_that_pays_or_ends_is_no_phantom() -> None:
    e = PhantomEvidence(4, False, 0, 1000, 0, 0, frozenset(), frozenset(), (1, 0))
    assert phantom_findings([("a.npz", e), ("b.npz", _evidence(4, 0, 1000))]) == []


def test_tk108_a_real_first_step_that_earns_0_jumps_onto_its_row() -> None:
    """LunarLander: the first step after a reset earns exactly 0 when no engine fires."""
    clean = _phantom(120)
    resets = list(range(6, 120, 6))
    clean = clean.replace(obses=_smooth(resets, 120))  # the jump lands on the flagged rows
    assert codes(clean, "TK108") == []


def _longer(lengths: list[int], *, cut: bool = True, first: float = 0.0) -> Rollout:
    """Episodes of `lengths` from row 0 (the last ends on the last step), each truncated
    on its last step (with `cut`), each first step earning `first`, the others 1."""
    T = sum(lengths)
    truncated = np.zeros(T)
    rews = np.ones(T)
    row = 0
    for length in lengths:
        rews[row] = first
        truncated[row + length - 1] = float(cut)
        row += length
    dones = dones_for(lengths, T)
    dones[T] = 1
    return rollout(dones, rews=rews, truncated=truncated)


def test_tk108_an_episode_one_step_past_the_time_limit_truncated() -> None:
    rec = {"max_episode_steps": 4, "autoreset_mode": "NEXT_STEP"}
    [found] = codes(_longer([4, 5, 5]), "TK108", recording=rec)
    assert (found.code, found.env, found.step) == ("TK108", 0, 4)
    assert found.message == (
        "2 episode(s) run one step more than the recording's time limit and are truncated on "
        "their last step, their first step earning exactly 0: the time limit cut them a step "
        "earlier, so the first step, from the row flagged dones = 1, is NEXT_STEP's autoreset "
        "step from the final to the reset observation: a loop that keeps every env.step of a "
        "NEXT_STEP vector env? drop the step after each episode end (RolloutRecorder does)"
    )


@pytest.mark.parametrize(
    ("limit", "hit"),
    [(3, False), (4, True), (5, False)],  # episodes of 5 steps: L + 1 only for L = 4
)
def test_tk108_one_step_past_the_limit_exactly(limit: int, hit: bool) -> None:
    rec = {"max_episode_steps": limit}
    assert bool(codes(_longer([3, 5, 2]), "TK108", recording=rec)) is hit


def test_tk108_one_step_past_the_limit_needs_the_cut_and_the_0() -> None:
    rec = {"max_episode_steps": 4}
    assert codes(_longer([5, 5], cut=False), "TK108", recording=rec) == []
    assert codes(_longer([5, 5], first=1.0), "TK108", recording=rec) == []
    assert codes(_longer([5, 5]), "TK108") == []  # no recorded limit
    assert codes(_longer([5, 5]), "TK108", max_episode_steps=4) == []  # the recording's
    same = {"max_episode_steps": 4, "autoreset_mode": "SAME_STEP"}
    assert codes(_longer([5, 5]), "TK108", recording=same) == []


def test_tk108_one_step_past_the_limit_in_one_file_of_many() -> None:
    rec = {"max_episode_steps": 4}
    clean = _longer([4, 4], first=1.0)
    found = lint_rollouts([clean, _longer([5, 5])], "TK108", [rec, rec])
    assert [(f.path, f.env, f.step) for f in found] == [("r1.npz", 0, 0)]


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


# ---------------------------------------------------------- exact values, from mutation runs


def _reference_jumps(r: Rollout) -> Array | None:
    """A slow reference of `_jumps`: per step, the largest float change in median steps."""
    T, B = r.num_steps, r.batch_size
    boundary = [[1 <= t < T and r.dones[t, b] == 1 for b in range(B)] for t in range(T)]
    inside = [
        [not boundary[t][b] and not (t + 1 < T and boundary[t + 1][b]) for b in range(B)]
        for t in range(T)
    ]
    leaves = list(r.obses.values()) if isinstance(r.obses, dict) else [r.obses]
    leaves = [leaf.reshape(T + 1, B, -1) for leaf in leaves if leaf.dtype.kind == "f"]
    if not leaves or not any(any(row) for row in inside):
        return None
    out = np.zeros((T, B))
    for leaf in leaves:
        for f in range(leaf.shape[2]):
            changes = [
                abs(float(leaf[t + 1, b, f]) - float(leaf[t, b, f]))
                for t in range(T)
                for b in range(B)
            ]
            typical = float(
                np.median([changes[t * B + b] for t in range(T) for b in range(B) if inside[t][b]])
            )
            for t in range(T):
                for b in range(B):
                    c = changes[t * B + b]
                    out[t, b] = max(out[t, b], c / typical if typical > 0 else 0.0)
    return out


def test_jumps_against_a_slow_reference() -> None:
    rng = np.random.default_rng(3)
    T, B = 12, 2
    dones = np.stack([dones_for([4, 5], T), dones_for([6], T)], axis=1)
    obses = {
        "a": rng.normal(size=(T + 1, B, 2, 2)),
        "b": np.repeat(rng.normal(size=(T + 1, B, 1)) * 100, 2, axis=2),
        "c": np.zeros((T + 1, B, 1)),  # never changes: no scale
        "i": rng.integers(0, 5, size=(T + 1, B)),
    }
    obses["c"][7, 1, 0] = 1.0
    r = rollout(dones, obses=obses)
    expected = _reference_jumps(r)
    assert expected is not None
    jumps = boundaries._jumps(r)
    assert jumps is not None
    np.testing.assert_allclose(jumps, expected)
    no_inside = rollout(np.ones(3), obses=np.zeros((3, 1, 1)))
    assert boundaries._jumps(no_inside) is None
    assert boundaries._jumps(rollout(dones_for([4], 8), obses=np.zeros((9, 1), np.int64))) is None


def test_row_keys_join_every_leaf_of_the_row() -> None:
    obses = {"x": np.arange(4.0)[:, None, None], "y": np.arange(10, 14)[:, None]}
    r = rollout(np.array([1.0, 0, 1, 0]), obses=obses)
    mask = np.array([[False], [True], [False]])
    x = np.ascontiguousarray(np.array([2.0]))
    assert boundaries._row_keys(r, mask, 1) == [x.tobytes() + np.int64(12).tobytes()]
    assert boundaries._row_keys(r, mask, 0)[0].endswith(np.int64(11).tobytes())
    assert boundaries._two([b"a", b"a", b"b", b"c"]) == frozenset({b"a", b"b"})


def test_phantom_evidence_counts_row_0_of_a_continuing_file() -> None:
    r = _phantom(18)
    first = phantom_evidence(r, {"index": 0})
    later = phantom_evidence(r, {"index": 1})
    assert first is not None
    assert later is not None
    assert (first.steps, later.steps, first.first, later.first) == (2, 3, (6, 0), (0, 0))
    assert first.after == frozenset(boundaries._row_keys(r, boundaries.boundary_rows(r), 1))
    keys = boundaries._row_keys(r, boundaries.boundary_rows(r), 0)
    assert first.at == frozenset(boundaries._digest(key) for key in keys)
    assert phantom_evidence(r, {"autoreset_mode": "DISABLED"}) is None
    assert phantom_evidence(r, {"autoreset_mode": "NEXT_STEP"}) == first
    none = phantom_evidence(rollout(dones_for([18], 18)))
    assert none is not None
    assert (none.steps, none.first) == (0, None)


def test_jump_wins_counts_steps_from_row_1() -> None:
    obses = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 13.0])[:, None, None]  # jump at step 2
    r = rollout(np.array([1.0, 0, 1, 0, 0, 0, 0]), obses=obses)
    steps = boundaries.boundary_rows(r)  # row 2 flagged: step 2 leaves it, step 1 enters it
    assert boundaries._jump_wins(r, steps) == (1, 1)
    row1 = rollout(np.array([1.0, 1, 0, 0, 0, 0, 0]), obses=obses)  # steps 0 and 1 move 1
    assert boundaries._jump_wins(row1, boundaries.boundary_rows(row1)) == (0, 0)
    level = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])[:, None, None]  # equal jumps: a tie,
    flat = rollout(np.array([1.0, 0, 1, 0, 0, 0, 0]), obses=level)  # which tells nothing
    assert boundaries._jump_wins(flat, boundaries.boundary_rows(flat)) == (0, 0)
    slower = np.array([0.0, 1.0, 3.0, 4.0, 5.0, 6.0, 7.0])[:, None, None]  # onto the row: 2
    on = rollout(np.array([1.0, 0, 1, 0, 0, 0, 0]), obses=slower)
    assert boundaries._jump_wins(on, boundaries.boundary_rows(on)) == (0, 1)
    ints = rollout(np.array([1.0, 0, 1, 0]), obses=np.zeros((4, 1), np.int64))
    assert boundaries._jump_wins(ints, boundaries.boundary_rows(ints)) == (0, 0)


def test_phantom_findings_name_each_file() -> None:
    e = _evidence(2, 0, 10**5)
    found = phantom_findings(
        [
            ("a.npz", e),
            ("b.npz", PhantomEvidence(0, True, 0, 5, 0, 0, frozenset(), frozenset(), None)),
        ]
    )
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK108", "a.npz", 0, 1)]
    assert found[0].message == (
        "every step that leaves a row flagged dones = 1 (2 here, 2 in the dataset, where other "
        "steps earn 0 at a rate of 3e-05) has reward exactly 0 and ends nothing, as NEXT_STEP's "
        "autoreset step from the final to the reset observation: a loop that keeps every "
        "env.step of a NEXT_STEP vector env? drop the step after each episode end "
        "(RolloutRecorder does)"
    )
    assert phantom_findings([("a.npz", _evidence(4, 0, 10**5, 2, 5))]) == []  # 2 of 5 jump


def test_start_jumps_counts_each_direction() -> None:
    T = 10
    t = np.arange(T + 1, dtype=np.float64)
    r = rollout(np.isin(t, [0, 1, 2, 9]).astype(float), obses=np.sin(t)[:, None, None])
    jumps = start_jumps(r)
    assert jumps is not None
    # boundaries at rows 1, 2 and 9: after, row s: step s (all valid); before: step s - 2
    # (row 1's is step -1: not valid)
    assert jumps.counts["after"][0] == 3
    assert jumps.counts["before"][0] == 2
    assert start_jumps(rollout(dones_for([T], T), obses=np.sin(t)[:, None, None])) is None
    flat = rollout(np.isin(t, [0, 5]).astype(float), obses=(t % 2)[:, None, None])
    jumps = start_jumps(flat)
    assert jumps is not None
    assert jumps.counts == {"after": (1, 0, None), "before": (1, 0, None)}


@pytest.mark.parametrize(
    ("valid", "wins", "hit"),
    [(1, 1, False), (2, 2, True), (4, 2, False), (5, 2, False), (5, 3, True)],
)
def test_tk109_counts_with_a_rare_mirror(valid: int, wins: int, hit: bool) -> None:
    jumps = StartJumps({"after": (valid, wins, (1, 0)), "before": (10**6, 0, None)})
    assert bool(misplaced_starts([("a.npz", jumps)])) is hit


def test_tk109_messages_and_every_file() -> None:
    quiet = StartJumps({"after": (0, 0, None), "before": (0, 0, None)})
    late = StartJumps({"before": (12, 12, (5, 1)), "after": (10**6, 0, None)})
    found = misplaced_starts([("a.npz", quiet), ("b.npz", late)])
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK109", "b.npz", 1, 5)]
    assert found[0].message == (
        "the observations jump one row before the row flagged dones = 1 at 12 of 12 episode "
        "starts of the dataset (12 here; this one: row 5): dones stored one row late?"
    )


def test_tk104_message_and_every_leaf() -> None:
    obses, rews = _twice([4, 9, 10], 12)
    r = rollout(dones_for([5, 5, 1], 12), obses=obses, rews=rews)
    [found] = codes(r, "TK104")
    assert (found.code, found.path) == ("TK104", "r0.npz")
    assert found.message == (
        "obses[5] repeats obses[4] across an episode end with reward 0 (3 steps in 1 env): the "
        "reset observation stored twice, as the last of an episode and the first of the next?"
    )
    paid = rollout(dones_for([5, 5, 1], 12), obses=obses, rews=np.ones(12))
    assert codes(paid, "TK104") == []
    other = {"x": obses, "y": np.arange(13, dtype=np.float32)[:, None]}  # y always moves
    assert codes(rollout(dones_for([5, 5, 1], 12), obses=other, rews=rews), "TK104") == []
    moving_x = {"x": np.random.default_rng(9).normal(size=(13, 1, 3)), "y": obses[:, :, 0]}
    assert codes(rollout(dones_for([5, 5, 1], 12), obses=moving_x, rews=rews), "TK104") == []


def test_final_evidence_exact_chance_and_leaves() -> None:
    T = 6
    dones = dones_for([3], T)
    obses = {"x": np.array([0, 1, 2, 3, 3, 5, 6.0])[:, None], "y": np.arange(7.0)[:, None]}
    r = rollout(dones, obses=obses, final_obses={"x": np.array([3.0]), "y": np.array([3.0])})
    e = final_evidence(r)
    assert e is not None
    # 7 rows, one pair alike (rows 3 and 4 differ in y: none alike): rate (0 + 3) / (21 + 3)
    assert (e.ends, e.same, e.first) == (1, True, (2, 0))
    assert e.chance == pytest.approx(np.log10(3 / 24))
    half = rollout(dones, obses=obses, final_obses={"x": np.array([3.0]), "y": np.array([9.0])})
    assert final_evidence(half).same is False  # type: ignore[union-attr]
    alike = {"x": np.zeros((7, 1)), "y": np.zeros((7, 1))}
    e = final_evidence(
        rollout(dones, obses=alike, final_obses={"x": np.zeros(1), "y": np.zeros(1)})
    )
    assert e is not None
    assert e.chance == pytest.approx(np.log10(1.0))  # every row alike: (21 + 3) / (21 + 3)
    assert final_evidence(rollout(dones_for([], T))) is None


def test_tk114_message_and_every_file() -> None:
    e = FinalEvidence(3, True, -4.0, frozenset({b"a", b"b"}), (2, 1))
    found = final_is_reset([("a.npz", e)])
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK114", "a.npz", 1, 2)]
    assert found[0].message == (
        "final_obses equal the next row's observation, the next episode's first, at all 3 "
        "episode ends of the dataset (3 here; this one: step 2): the observation after the "
        "autoreset stored as the final one, or the final one stored as the next row?"
    )
    assert final_is_reset([]) == []


def test_tk108_a_file_with_phantom_steps_is_left_out_of_tk102_and_tk109() -> None:
    """The phantom's reward 0 and the jump onto the flagged row are the phantom's, not a
    shifted reward (TK102) nor a misplaced start (TK109)."""
    assert [f.code for f in codes(_phantom(120), "TK1")] == ["TK108"]
