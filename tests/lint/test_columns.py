"""TK112 (envs seeded alike, a column copied) and TK115 (rows aliased to one buffer)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import codes, dones_for, lint_rollouts, rollout
from trajkit.lint import Finding
from trajkit.lint.columns import Copy, Frozen, Start, copied_columns, frozen_findings, shared_starts

# ------------------------------------------------------------------------ seeded alike


def _starts(aligned: int, *, others: int = 0, same_env: bool = False) -> list[Start]:
    """Two envs whose first `aligned` starts are alike, then `others` starts each, all unlike."""
    starts = []
    for k in range(aligned + others):
        for b in (0, 1):
            key = f"s{k}" if k < aligned else f"s{k}-{b}"
            starts.append(Start("a.npz", b, 10 * k, "fixed" if same_env else key))
    return starts


def test_tk112_envs_that_start_alike_in_order() -> None:
    found = shared_starts(_starts(6))
    assert found is not None
    assert (found.path, found.env, found.step) == ("a.npz", 1, 0)
    assert found.message.startswith("envs 0 and 1 start 6 of 6 episodes alike, in order")


def test_tk112_a_fixed_reset_is_never_evidence() -> None:
    assert shared_starts(_starts(6, same_env=True)) is None


@pytest.mark.parametrize(("others", "hit"), [(4, False), (5, True)])
def test_tk112_the_chance_of_as_many_aligned_starts(others: int, hit: bool) -> None:
    # 3 aligned starts alike among 3 + others per env; the pairs out of order (all unlike)
    # bound the chance rate p = 3 / (pairs + 3): P(Binomial(3 + others, p) >= 3) falls
    # under 1e-3 from 5 more starts per env (2.3e-4 there, 1.3e-3 with 4).
    assert (shared_starts(_starts(3, others=others)) is not None) is hit


def test_tk112_starts_joined_across_the_files_of_a_recording() -> None:
    T = 40
    rng = np.random.default_rng(0)
    dones = np.stack([dones_for([4] * 10, T)] * 2, axis=1)
    obses = rng.normal(size=(T + 1, 2, 3)).astype(np.float32)
    starts = np.arange(0, T, 4)
    obses[starts, 1] = obses[starts, 0]  # every start of env 1 is env 0's
    r = rollout(dones, obses=obses)
    [found] = codes(r, "TK112")
    assert found.message.startswith("envs 0 and 1 start 10 of 10 episodes alike, in order")
    rec = {"id": "r", "index": 0, "num_envs": 2, "wrappers": ["NormalizeObservation"]}
    assert codes(r, "TK112", recording=rec) == []  # a running normaliser makes starts alike


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
    # T * B = 1 unchanged step, q = (0 + 3) / (steps + 3) over the dataset (the frozen
    # file's own step counted): q <= 1e-3 from 2997 steps.
    files = [("a.npz", 100, Frozen((), steps - 1, 0)), ("b.npz", 1, Frozen((0,), 1, 0))]
    assert bool(frozen_findings(files)) is hit
