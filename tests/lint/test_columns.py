"""TK112 (envs seeded alike, a column copied) and TK115 (rows aliased to one buffer)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import codes, dones_for, lint_rollouts, rollout
from trajkit import Rollout
from trajkit.lint import Finding
from trajkit.lint.columns import (
    MIN_DISAGREE,
    OUTPUT_TOL,
    POLICY_FUNCTIONS,
    Copy,
    Frozen,
    Start,
    _differ,
    _outputs,
    copied_columns,
    copies,
    frozen_columns,
    frozen_findings,
    lockstep_pairs,
    shared_starts,
)

# ------------------------------------------------------------------------ seeded alike


def _starts(aligned: int, *, others: int = 0, same_env: bool = False) -> list[Start]:
    """Two envs whose first `aligned` starts are alike, then `others` starts each, all unlike."""
    starts = []
    for k in range(aligned + others):
        for b in (0, 1):
            key = f"s{k}" if k < aligned else f"s{k}-{b}"
            starts.append(Start("a.npz", b, 10 * k + b, "fixed" if same_env else key))
    return starts


def test_tk112_envs_that_start_alike_in_order() -> None:
    found = shared_starts(_starts(6))
    assert found is not None
    assert (found.path, found.env, found.step) == ("a.npz", 1, 1)
    assert found.message.startswith(
        "envs 0 and 1 start alike: 6 of 6 episode starts repeat another env's start of the "
        "same order"
    )


def test_tk112_a_fixed_reset_is_never_evidence() -> None:
    assert shared_starts(_starts(6, same_env=True)) is None


@pytest.mark.parametrize(("others", "hit"), [(4, False), (5, True)])
def test_tk112_the_chance_of_as_many_aligned_starts(others: int, hit: bool) -> None:
    # 3 aligned starts alike among 3 + others per env; the pairs out of order (all unlike)
    # bound the chance rate p = 3 / (pairs + 3): P(Binomial(3 + others, p) >= 3) falls
    # under 1e-3 from 5 more starts per env (2.3e-4 there, 1.3e-3 with 4).
    assert (shared_starts(_starts(3, others=others)) is not None) is hit


@pytest.mark.parametrize(("others", "hit"), [(2, False), (3, True)])
def test_tk112_three_envs_alike_are_two_coincidences_each(others: int, hit: bool) -> None:
    # 3 envs, their first 2 starts alike, then `others` unlike: 2 repeats per order, each
    # trial at the mean rate 1.5 p (the 3rd env's start may repeat either earlier one).
    # others = 2: p = 3 / 57, P(Bin(8, 0.079) >= 4) = 2.7e-3 (5.4e-4 at p itself);
    # others = 3: p = 3 / 93, P(Bin(10, 0.048) >= 4) under 1e-3.
    starts = [
        Start("a.npz", b, 10 * k + b, f"s{k}" if k < 2 else f"s{k}-{b}")
        for k in range(2 + others)
        for b in (0, 1, 2)
    ]
    assert (shared_starts(starts) is not None) is hit


def test_tk112_starts_joined_across_the_files_of_a_recording() -> None:
    T = 40
    rng = np.random.default_rng(0)
    dones = np.stack([dones_for([4] * 10, T), dones_for([2] + [4] * 9, T)], axis=1)
    obses = rng.normal(size=(T + 1, 2, 3)).astype(np.float32)
    obses[np.arange(2, T, 4), 1] = obses[np.arange(4, T + 1, 4), 0]  # env 0's k-th starts
    r = rollout(dones, obses=obses)
    [found] = codes(r, "TK112")
    # without a recording, the first starts (both on row 0) are not compared
    assert found.message.startswith("envs 0 and 1 start alike: 9 of 9 episode starts repeat")
    rec = {"id": "r", "index": 0, "num_envs": 2, "wrappers": []}
    [declared] = codes(r, "TK112", recording=rec)  # a recording names no normaliser
    assert declared.message.startswith("envs 0 and 1 start alike: 9 of 10 episode starts")
    rec = {"id": "r", "index": 0, "num_envs": 2, "wrappers": ["NormalizeObservation"]}
    assert codes(r, "TK112", recording=rec) == []  # a running normaliser makes starts alike


def test_tk112_starts_on_one_row_share_their_time() -> None:
    """A deterministic env and policy from a fixed start, under a running normaliser the
    recording does not name: every env starts on the same rows, alike, and unlike the
    starts of other times; its envs' rows on one row are alike too."""
    together = [Start("a.npz", b, 10 * k, f"s{k}") for k in range(12) for b in (0, 1)]
    assert shared_starts(together, lockstep=(0, 1000), declared=False) is None  # no recording
    assert shared_starts(together, lockstep=(900, 1000)) is None  # envs in lockstep
    assert shared_starts(together, lockstep=(0, 1)) is None  # one row: a rate of 3/4
    assert shared_starts(together, lockstep=(0, 1000)) is not None


def test_tk112_envs_alike_on_every_row_are_weighed_as_starts_out_of_order() -> None:
    """No row where two envs come to one observation by themselves (they are alike on
    every row): where the recording names no normaliser, only alike seeds keep envs whose
    starts vary in lockstep, and their starts on one row count as those out of order."""
    together = [Start("a.npz", b, 10 * k, f"s{k}") for k in range(12) for b in (0, 1)]
    found = shared_starts(together, lockstep=(0, 0))
    assert found is not None
    assert found.message.startswith("envs 0 and 1 start alike: 12 of 12 episode starts")
    fixed = [Start("a.npz", b, 10 * k, "s") for k in range(12) for b in (0, 1)]
    assert shared_starts(fixed, lockstep=(0, 0)) is None  # a fixed start: alike by itself
    apart = [Start("a.npz", b, 10 * k + b, f"s{k}") for k in range(12) for b in (0, 1)]
    assert shared_starts(apart, lockstep=(900, 1000), declared=False) is not None


def test_lockstep_pairs_leave_out_the_rows_where_an_env_starts() -> None:
    obses = np.array([[0.0, 1, 2], [0, 1, 2], [1, 1, 2], [1, 1, 2], [3, 1, 3]])[..., None]
    dones = np.array([[1.0, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1]])
    # row 1: from unlike rows, none alike (3 pairs); row 2: envs 0 and 1 come alike (3
    # pairs); row 3: envs 0 and 1 were alike already (2 pairs judged, none alike); row 4:
    # env 2 starts, envs 0 and 1 were alike (nothing judged)
    assert lockstep_pairs(rollout(dones, obses=obses)) == (1, 8)


# ------------------------------------------------------------------------ copied column


def test_tk112_a_column_copied_into_another() -> None:
    r = rollout(np.zeros((13, 3)))
    r.obses[:, 2] = r.obses[:, 0]
    [found] = codes(r, "TK112")
    assert (found.env, found.step) == (2, 0)
    assert found.message.startswith(
        "envs 0 and 2 have the same observations on every row, through 12 distinct changes"
    )


def test_tk112_envs_doing_the_same_thing_are_a_deterministic_env() -> None:
    r = rollout(np.zeros((13, 2)))
    for field in (r.obses, r.rews, r.model_outs.arrays["critic"]):
        field[:, 1] = field[:, 0]
    assert codes(r, "TK112") == []


@pytest.mark.parametrize(("changes", "hit"), [(6, False), (7, True)])
def test_tk112_the_chance_of_as_many_distinct_changes(changes: int, hit: bool) -> None:
    # n distinct changes, none repeated: p = 3 / (n + 3); p^n <= 1e-3 from n = 7.
    runs = tuple(bytes([i]) for i in range(changes + 1))
    assert bool(copied_columns([("a.npz", (Copy((0, 1), runs),))])) is hit


def test_tk112_a_cycle_through_a_few_values_counts_once() -> None:
    runs = tuple(bytes([i % 3]) for i in range(40))
    assert copied_columns([("a.npz", (Copy((0, 1), runs),))]) == []


# ------------------------------------------------------------------------------ TK115


def _aliased(T: int = 8, B: int = 2) -> list[Finding]:
    moving = [rollout(dones_for([5, 5], T).repeat(B).reshape(T + 1, B), seed=s) for s in (1, 2)]
    frozen = rollout(dones_for([5, 5], T).repeat(B).reshape(T + 1, B), seed=3)
    frozen.obses[:] = frozen.obses[-1]
    return lint_rollouts([*moving, frozen], "TK115")


def test_tk115_a_file_whose_rows_are_one_buffer() -> None:
    [found] = _aliased()
    assert (found.path, found.env, found.step) == ("r2.npz", 0, 0)
    assert found.message.startswith("every env keeps one observation on all 9 rows")


def test_tk115_one_env_that_stays_put_is_not_a_buffer() -> None:
    r = rollout(np.stack([dones_for([5, 5], 8)] * 2, axis=1))
    r.obses[:, 1] = r.obses[0, 1]
    assert lint_rollouts([rollout(np.zeros((9, 2)), seed=5), r], "TK115") == []


def test_tk115_a_frozen_file_without_an_episode_start_is_not_judged() -> None:
    r = rollout(np.zeros((9, 2)))
    r.obses[:] = r.obses[-1]
    assert lint_rollouts([rollout(np.zeros((9, 2)), seed=5), r], "TK115") == []


@pytest.mark.parametrize(("steps", "hit"), [(2996, False), (2997, True)])
def test_tk115_the_chance_of_as_many_unchanged_steps(steps: int, hit: bool) -> None:
    # T * B = 1 unchanged step, q = (0 + 3) / (steps + 3) over the other files (the frozen
    # file is the one judged): q <= 1e-3 from 2997 steps.
    files = [("a.npz", 100, Frozen((), steps, 0)), ("b.npz", 1, Frozen((0,), 1, 1))]
    assert bool(frozen_findings(files)) is hit


@pytest.mark.parametrize(("pairs", "hit"), [(13, False), (14, True)])
def test_tk115_observations_that_stay_put_in_runs(pairs: int, hit: bool) -> None:
    # Elsewhere 10**5 steps, some kept: `pairs` kept steps followed by another step, none
    # kept again: q = 3 / (pairs + 3), and q^4 (4 frozen steps) <= 1e-3 from 14 pairs
    # (9.7e-4; 1.2e-3 at 13). The rate per step alone would be 3e-5.
    other = Frozen((), 10**5, pairs, again=(pairs, 0))
    files = [("a.npz", 100, other), ("b.npz", 4, Frozen((0,), 4, 4))]
    assert bool(frozen_findings(files)) is hit
    stuck = Frozen((), 10**5, 40, again=(40, 30))  # kept observations mostly kept again
    assert frozen_findings([("a.npz", 100, stuck), ("b.npz", 4, Frozen((0,), 4, 4))]) == []


# ---------------------------------------------------------- exact values, from mutation runs


def test_tk112_starts_of_three_envs_and_of_unequal_counts() -> None:
    starts = [Start("a.npz", b, 10 * k + b, f"s{k}") for k in range(8) for b in (0, 1, 2)]
    starts.append(Start("b.npz", 0, 3, "extra"))  # env 0 starts once more
    found = shared_starts(starts)
    assert found is not None
    assert (found.code, found.path, found.env, found.step) == ("TK112", "a.npz", 1, 1)
    # 3 envs alike at each of 8 orders: 2 coincidences each (not 3 pairs)
    assert found.message.startswith("envs 0 and 1 start alike: 16 of 16 episode starts repeat")
    other = [Start("a.npz", 0, 0, "x"), *[Start("b.npz", b, 5, f"y{b}") for b in (0, 1)]]
    aligned = [Start("a.npz", 0, 0, "x"), Start("b.npz", 1, 2, "x")]
    found = shared_starts(other + aligned + [Start("c.npz", b, 9, f"z{b}") for b in (0, 1)] * 6)
    assert shared_starts([Start("a.npz", 0, 0, "x")]) is None


def test_tk112_seeded_alike_message() -> None:
    starts = [Start(f"{'ab'[k % 2]}.npz", b, 2 * k + b, f"s{k}") for k in range(6) for b in (0, 1)]
    found = shared_starts(starts)
    assert found is not None
    assert found.message == (
        "envs 0 and 1 start alike: 6 of 6 episode starts repeat another env's start of the "
        "same order (a.npz row 0 and a.npz row 1), where two starts out of order are alike "
        "0.048 of the time: every env seeded alike (envs.reset(seed=[seed] * B))?"
    )
    apart = [Start("a.npz", 0, 4 + k, f"s{k}") for k in range(6)]
    apart += [Start("b.npz", 1, 7 + k, f"s{k}") for k in range(6)]
    found = shared_starts(apart)
    assert found is not None
    assert "(a.npz row 4 and b.npz row 7)" in found.message
    assert (found.path, found.env, found.step) == ("b.npz", 1, 7)


def test_copies_of_two_envs_and_their_runs() -> None:
    obses = {"x": np.array([0.0, 0, 1, 1, 0, 2])[:, None, None].repeat(2, 1), "y": np.zeros((6, 2))}
    r = rollout(np.zeros((6, 2)), obses=obses)
    [copy] = copies(r)
    assert copy.envs == (0, 1)
    assert len(copy.runs) == 4  # 0, 1, 0, 2: runs of equal rows
    assert copy.runs[0] == copy.runs[2] != copy.runs[1]
    other = {"x": obses["x"].copy(), "y": np.zeros((6, 2))}
    other["y"][3, 1] = 1.0  # another leaf differs
    assert copies(rollout(np.zeros((6, 2)), obses=other)) == ()


def test_tk112_copied_columns_every_pair_and_message() -> None:
    short = Copy((0, 1), (b"a", b"b"))
    long = Copy((0, 2), tuple(bytes([i]) for i in range(9)))
    found = copied_columns([("a.npz", (short, long)), ("b.npz", (short,))])
    assert [(f.code, f.path, f.env, f.step) for f in found] == [("TK112", "a.npz", 2, 0)]
    assert found[0].message == (
        "envs 0 and 2 have the same observations on every row, through 8 distinct changes of "
        "value in the dataset, and differ in their actions, rewards or dones: one column "
        "copied into another (obs[0] stored for every env)?"
    )


def test_frozen_columns_counts_unchanged_steps_and_a_start_on_row_1() -> None:
    x = np.array([0.0, 1.0, 0.0, 0.0])[:, None, None]
    r = rollout(np.array([1.0, 0, 0, 0]), obses={"x": x, "y": np.zeros((4, 1))})
    assert frozen_columns(r) == Frozen((), 3, 1)  # only the step from row 2 to row 3 keeps it
    still = rollout(
        np.array([1.0, 1, 0, 0]), obses={"x": np.zeros((4, 1, 1)), "y": np.zeros((4, 1))}
    )
    assert frozen_columns(still) == Frozen((0,), 3, 3, again=(2, 2))  # a start at row 1


def test_tk115_message() -> None:
    files = [("a.npz", 100, Frozen((), 10**5, 0)), ("b.npz", 4, Frozen((0, 1), 8, 8))]
    [found] = frozen_findings(files)
    assert found.message == (
        "every env keeps one observation on all 5 rows, across an episode start, where a step "
        "keeps it 3e-05 of the time in the other files: rows appended from one reused buffer "
        "(copy the observation before storing it)?"
    )


# ------------------------------------------------- the policy's outputs against its inputs


def _copied(disagree_rows: list[int], *, states: bool = False) -> Rollout:
    """Env 1's observations copied from env 0's (random), its critic its own on some rows."""
    r = rollout(np.zeros((9, 2)), seed=4)
    r.obses[:, 1] = r.obses[:, 0]
    critic = r.model_outs.arrays["critic"]
    critic[:] = np.arange(9)[:, None]
    critic[disagree_rows, 1] += 1.0
    if states:
        return r.replace(states=np.stack([np.zeros((9, 1)), np.ones((9, 1))], axis=1))
    return r


def test_copies_count_rows_whose_outputs_their_equal_inputs_do_not_give() -> None:
    [copy] = copies(_copied([2, 5, 7]))
    assert copy.disagree == 3
    [other] = copies(_copied([2, 5, 7], states=True))  # other recurrent states: no evidence
    assert other.disagree == 0


@pytest.mark.parametrize(("rows", "hit"), [([4], False), ([4, 6], True)])
def test_tk112_a_copy_whose_policy_saw_other_observations(rows: list[int], hit: bool) -> None:
    # two runs only (no chance evidence): the outputs decide, from MIN_DISAGREE = 2 rows
    runs = (b"a", b"b")
    found = copied_columns([("a.npz", (Copy((0, 1), runs, disagree=len(rows)),))])
    assert bool(found) is hit
    assert MIN_DISAGREE == 2
    if hit:
        assert found[0].message == (
            "envs 0 and 1 have the same observations on every row, where the policy's outputs "
            "differ on 2 of their rows, and differ in their actions, rewards or dones: one "
            "column copied into another (obs[0] stored for every env)?"
        )


def test_tk112_a_copy_with_disagreeing_outputs_end_to_end() -> None:
    obses = np.zeros((9, 2, 1), np.float32)
    obses[:, :, 0] = np.array([0, 0, 1, 1, 0, 0, 1, 1, 0])[:, None]  # a coarse column, copied
    r = _copied([3, 6]).replace(obses=obses)
    [found] = codes(r, "TK112")
    assert (found.env, found.step) == (1, 0)
    assert "the policy's outputs differ on 2 of their rows" in found.message
    assert codes(_copied([]).replace(obses=obses), "TK112") == []  # a coincidence, as far as seen


@pytest.mark.parametrize(("offset", "differ"), [(0.9, False), (1.1, True)])
def test_outputs_differ_beyond_the_tolerance(offset: float, differ: bool) -> None:
    x = np.array([[2.0]])
    y = x + offset * OUTPUT_TOL * (1 + 2.0)
    assert bool(_differ(x, y)[0]) is differ


def test_outputs_are_the_policy_functions_of_each_place() -> None:
    r = rollout(np.zeros((3, 2)), outs={"critic": np.ones((3, 2)), "actions": np.zeros((3, 2))})
    out = _outputs(r)
    assert out is not None
    assert out.shape == (3, 2, 1)  # actions are sampled: not a function of the inputs
    assert _outputs(rollout(np.zeros((3, 2)), outs={"actions": np.zeros((3, 2))})) is None
    assert POLICY_FUNCTIONS == ("actor", "critic", "mean", "std")


def test_frozen_columns_count_steps_whose_outputs_move_while_the_inputs_stay() -> None:
    r = rollout(np.array([1.0, 0, 1, 0, 0]))
    r.obses[:] = r.obses[-1]
    r.model_outs.arrays["critic"][:, 0] = [0.0, 1.0, 1.0, 2.0, 2.0]
    assert frozen_columns(r) == Frozen((0,), 4, 4, 2, (3, 3))


@pytest.mark.parametrize(("disagree", "hit"), [(1, False), (2, True)])
def test_tk115_a_frozen_file_whose_policy_saw_other_observations(disagree: int, hit: bool) -> None:
    # the dataset's steps keep the observation often (q = 0.5): the chance says nothing
    files = [("a.npz", 100, Frozen((), 200, 100)), ("b.npz", 4, Frozen((0, 1), 8, 8, disagree))]
    found = frozen_findings(files)
    assert bool(found) is hit
    if hit:
        assert found[0].message == (
            "every env keeps one observation on all 5 rows, across an episode start, while the "
            "policy's outputs change on 2 of its steps: rows appended from one reused buffer "
            "(copy the observation before storing it)?"
        )


def test_tk112_a_copied_column_under_a_running_normaliser_needs_its_outputs() -> None:
    """A recording that names an observation normaliser: equal observations move together
    by design, so only disagreeing policy outputs could tell a copy."""
    r = rollout(np.zeros((13, 3)))
    r.obses[:, 2] = r.obses[:, 0]
    rec = {"id": "a", "index": 0, "num_envs": 3, "wrappers": ["NormalizeObservation"]}
    assert codes(r, "TK112", recording=rec) == []
    assert [f.code for f in codes(r, "TK112", recording={**rec, "wrappers": []})] == ["TK112"]
