"""TK110: stored log-probabilities against the stored policy outputs, over the dataset."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, lint_rollouts, rollout
from trajkit.lint.policy import LOGP_TOL, MIN_FIT, MIN_ROWS, LogpFit, log_softmax, mismatch_findings


def _discrete(T: int, B: int = 2, seed: int = 0) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    actor = rng.normal(size=(T + 1, B, 3))
    actions = rng.integers(0, 3, size=(T + 1, B))
    logp = np.take_along_axis(log_softmax(actor), actions[..., None], -1)[..., 0]
    return {"actor": actor, "actions": actions, "log_probs": logp}


def test_tk110_a_row_that_does_not_fit_and_a_policy_of_another_formula() -> None:
    outs = _discrete(20)
    assert codes(rollout(np.zeros((21, 2)), outs=outs), "TK110") == []
    outs["log_probs"][4, 1] -= 0.5
    [found] = codes(rollout(np.zeros((21, 2)), outs=outs), "TK110")
    assert (found.env, found.step) == (1, 4)
    assert found.message.startswith("log_probs[4, 1] = ")
    assert found.message.endswith("(1 of 42 rows; 41 of 42 rows of the dataset fit)")
    outs["log_probs"] = outs["log_probs"] / 2 - 0.1  # tempered logits: no row fits
    assert codes(rollout(np.zeros((21, 2)), outs=outs), "TK110") == []


def test_tk110_one_file_of_another_policy_among_files_that_fit() -> None:
    good = rollout(np.zeros((9, 2)), outs=_discrete(8, seed=1))
    stale = _discrete(8, seed=2)
    stale["log_probs"] = stale["log_probs"] - 0.3
    found = lint_rollouts([good, rollout(np.zeros((9, 2)), outs=stale)], "TK110")
    assert [(f.path, f.env, f.step) for f in found] == [("r1.npz", 0, 0)]


def test_tk110_log_probs_in_another_env_order() -> None:
    outs = _discrete(6, B=3)
    outs["log_probs"] = np.roll(outs["log_probs"], 1, axis=1)
    [found] = codes(rollout(np.zeros((7, 3)), outs=outs), "TK110")
    assert found.message.startswith("log_probs of env 0 fit the policy outputs of env 2 on 7 rows")


def test_tk110_the_unclipped_sample_beside_the_clipped_action() -> None:
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(21, 2, 1)) * 1.5
    std = np.full_like(mean, 0.5)
    sample = mean + std * rng.normal(size=mean.shape)
    logp = (-0.5 * ((sample - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))[..., 0]
    outs = {"actions": np.clip(sample, -2.0, 2.0), "mean": mean, "std": std, "log_probs": logp}
    space = {"type": "Box", "low": -2.0, "high": 2.0, "shape": [1]}
    clipped = int((np.abs(outs["actions"]) == 2.0).sum())
    [found] = codes(rollout(np.zeros((21, 2)), outs=outs), "TK110", action_space=space)
    assert f"({clipped} of 42 rows, {clipped} of them with an action on a bound" in found.message
    outs["actions"] = sample
    assert codes(rollout(np.zeros((21, 2)), outs=outs), "TK110", action_space=space) == []


@pytest.mark.parametrize(("fit", "hit"), [(MIN_FIT - 1, False), (MIN_FIT, True)])
def test_tk110_min_fit_rows_confirm_the_formula(fit: int, hit: bool) -> None:
    files = [("a.npz", LogpFit(100, fit, (3, 0), -1.0, -2.0))]
    assert bool(mismatch_findings(files)) is hit


@pytest.mark.parametrize(("rows", "hit"), [(MIN_ROWS - 1, False), (MIN_ROWS, True)])
def test_tk110_min_rows_for_another_env_order(rows: int, hit: bool) -> None:
    order = ((0, rows), (rows, 0))
    files = [("a.npz", LogpFit(2 * rows, 0, (0, 0), order=order))]
    assert bool(mismatch_findings(files)) is hit


@pytest.mark.parametrize(
    ("own", "other", "hit"),
    [(5, 5, False), (4, 5, True), (4, 4, False)],  # of 10 rows
)
def test_tk110_another_env_order_needs_half_theirs_and_less_than_half_own(
    own: int, other: int, hit: bool
) -> None:
    order = ((own, other), (0, 10))
    files = [("a.npz", LogpFit(20, own + 10, (0, 0), order=order))]
    found = mismatch_findings(files)
    assert any("another env order" in f.message for f in found) is hit


@pytest.mark.parametrize(("offset", "fits"), [(LOGP_TOL * 0.99, True), (LOGP_TOL * 1.01, False)])
def test_tk110_the_tolerance_is_relative(offset: float, fits: bool) -> None:
    outs = _discrete(20)
    outs["log_probs"][5, 0] += offset * (1 + abs(outs["log_probs"][5, 0]))
    found = codes(rollout(np.zeros((21, 2)), outs=outs), "TK110")
    assert (found == []) is fits
