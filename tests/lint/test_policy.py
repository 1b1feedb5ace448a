"""TK110: stored log-probabilities against the stored policy outputs, over the dataset."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, lint_rollouts, rollout
from trajkit.lint.policy import (
    LOGP_TOL,
    MIN_FIT,
    MIN_ROWS,
    LogpFit,
    _on_bound,
    gaussian_logp,
    log_softmax,
    logp_fit,
    mismatch_findings,
)


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


_BOX = {"type": "Box", "low": -2.0, "high": 2.0, "shape": [1]}


def _clipped_gaussian() -> tuple[dict[str, Array], Array, int]:
    """A Gaussian policy's outputs whose actions were clipped to `_BOX` after the log-prob was
    taken of the unclipped sample; the sample, and how many actions the clip moved to a bound."""
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(21, 2, 1)) * 1.5
    std = np.full_like(mean, 0.5)
    sample = mean + std * rng.normal(size=mean.shape)
    logp = (-0.5 * ((sample - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))[..., 0]
    outs = {"actions": np.clip(sample, -2.0, 2.0), "mean": mean, "std": std, "log_probs": logp}
    return outs, sample, int((np.abs(outs["actions"]) == 2.0).sum())


def test_tk110_the_unclipped_sample_beside_the_clipped_action() -> None:
    outs, sample, clipped = _clipped_gaussian()
    space = _BOX
    [found] = codes(rollout(np.zeros((21, 2)), outs=outs), "TK110", action_space=space)
    assert f"({clipped} of 42 rows, {clipped} of them with an action on a bound" in found.message
    outs["actions"] = sample
    assert codes(rollout(np.zeros((21, 2)), outs=outs), "TK110", action_space=space) == []


@pytest.mark.parametrize(("fit", "hit"), [(MIN_FIT - 1, False), (MIN_FIT, True)])
def test_tk110_min_fit_rows_confirm_the_formula(fit: int, hit: bool) -> None:
    files = [("a.npz", LogpFit(100, fit, (3, 0), -1.0, -2.0))]  # no decoy to judge by
    assert bool(mismatch_findings(files)) is hit


@pytest.mark.parametrize(("decoys", "hit"), [(76, False), (77, True)])
def test_tk110_decoys_confirm_the_formula(decoys: int, hit: bool) -> None:
    # 3 of 6 rows fit, no decoy of `decoys` does: the chance of 3 fits at 3 / (decoys + 3)
    # is 1.004e-3 at 76, 9.7e-4 at 77
    files = [("a.npz", LogpFit(6, 3, (3, 0), -1.0, -2.0, decoys=(decoys, 0)))]
    assert bool(mismatch_findings(files)) is hit


def test_tk110_decoys_that_fit_as_often_confirm_nothing() -> None:
    """A formula that is not the policy's fits some rows by coincidence, decoys as often."""
    files = [("a.npz", LogpFit(1000, 20, (3, 0), -1.0, -2.0, decoys=(1000, 20)))]
    assert mismatch_findings(files) == []


def test_logp_fit_decoys_of_box_actions_two_rows_away() -> None:
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(5, 1, 1))
    std = np.full_like(mean, 0.5)
    actions = mean + std * rng.normal(size=mean.shape)
    logp = (-0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi))[..., 0]
    outs = {"actions": actions, "mean": mean, "std": std, "log_probs": logp}
    fit = logp_fit(rollout(np.zeros(5), outs=outs), None)
    assert fit is not None
    assert fit.decoys == (6, 0)  # rows 0-2 against rows 2-4, and back


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


# ---------------------------------------------------------- exact values, from mutation runs


def test_log_softmax_of_large_logits_row_by_row() -> None:
    out = log_softmax(np.array([[1000.0, 999.0], [0.0, 1.0]]))
    expected = np.array([[-np.log1p(np.exp(-1.0)), -1 - np.log1p(np.exp(-1.0))]] * 2)
    np.testing.assert_allclose(out, [expected[0], expected[0][::-1]])


def _given(value: Array | None) -> Array:
    assert value is not None
    return value


def test_gaussian_logp_from_log_std_and_a_shared_std() -> None:
    actions = np.array([[[0.5, -1.0]], [[0.0, 2.0]]])
    mean = np.zeros_like(actions)
    std = np.array([0.5, 2.0])  # one per feature, shared by every row
    expected = (-0.5 * (actions / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(_given(gaussian_logp({"mean": mean, "std": std}, actions)), expected)
    with_log = {"mean": mean, "log_std": np.log(np.broadcast_to(std, actions.shape))}
    np.testing.assert_allclose(_given(gaussian_logp(with_log, actions)), expected)
    both = {"mean": mean, "std": np.broadcast_to(std, actions.shape), "log_std": np.zeros(2)}
    np.testing.assert_allclose(_given(gaussian_logp(both, actions)), expected)  # std wins
    assert gaussian_logp({"std": std}, actions) is None
    assert gaussian_logp({"mean": mean}, actions) is None
    assert gaussian_logp({"mean": mean, "std": np.ones(3)}, actions) is None


def test_gaussian_logp_of_a_zero_std_warns_nothing() -> None:
    outs = {"mean": np.zeros((1, 1, 1)), "std": np.zeros((1, 1, 1))}
    out = gaussian_logp(outs, np.zeros((1, 1, 1)))
    assert out is not None
    assert np.isnan(out).all() or np.isinf(out).all()


def test_logp_fit_fields() -> None:
    outs = _discrete(3, B=2)
    fit = logp_fit(rollout(np.zeros((4, 2)), outs=outs), None)
    assert fit == LogpFit(8, 8, None, order=fit.order, decoys=(16, 0))  # type: ignore[union-attr]
    assert fit is not None
    assert [fit.order[b][b] for b in range(2)] == [4, 4]
    outs["log_probs"][2, 1] -= 1.0
    fit = logp_fit(rollout(np.zeros((4, 2)), outs=outs), None)
    assert fit is not None
    assert (fit.rows, fit.fit, fit.first, fit.on_bound) == (8, 7, (2, 1), None)
    assert fit.stored == pytest.approx(float(outs["log_probs"][2, 1]))
    assert fit.again == pytest.approx(float(outs["log_probs"][2, 1]) + 1.0)
    no_outputs = {"actions": np.zeros((4, 2), np.int64), "log_probs": np.zeros((4, 2))}
    assert logp_fit(rollout(np.zeros((4, 2)), outs=no_outputs), None) is None


def test_on_bound_counts_rows_with_a_feature_on_a_bound() -> None:
    actions = np.array([[[2.0, 0.0], [0.0, 0.0]], [[0.5, -2.0], [2.0, 2.0]]])  # [R=2, B=2, 2]
    hit = _on_bound(actions, {"type": "Box", "low": -2.0, "high": 2.0, "shape": [2]})
    assert hit is not None
    assert hit.tolist() == [[True, False], [True, True]]
    assert _on_bound(actions, {"type": "Discrete", "n": 2}) is None
    assert _on_bound(actions, None) is None
    listed = _on_bound(actions, {"type": "Box", "low": [-2.0, -1.0], "high": 2.0, "shape": [2]})
    assert listed is not None
    assert listed.tolist() == [[True, False], [False, True]]  # a listed low is not read


def test_tk110_messages_name_the_place_and_the_reason() -> None:
    fit = LogpFit(10, 8, (3, 1), -1.5, -2.5, on_bound=2)
    [found] = mismatch_findings([("a.npz", fit)])
    assert (found.code, found.path, found.env, found.step) == ("TK110", "a.npz", 1, 3)
    assert found.message == (
        "log_probs[3, 1] = -1.5, but the stored policy outputs give -2.5 for actions[3, 1] (2 "
        "of 10 rows, 2 of them with an action on a bound of the space (the log-probability of "
        "the unclipped sample beside the clipped action?); 8 of 10 rows of the dataset fit)"
    )
    order = ((0, 5), (5, 0))
    swapped = LogpFit(10, 0, (2, 1), order=order)
    founds = mismatch_findings([("a.npz", LogpFit(10, 0, None, order=order)), ("b.npz", swapped)])
    assert [(f.code, f.path, f.env, f.step) for f in founds] == [("TK110", "b.npz", 1, 2)]
    assert founds[0].message == (
        "log_probs of env 0 fit the policy outputs of env 1 on 10 rows of the dataset, and "
        "their own on 0: log_probs stored in another env order than the actions?"
    )
    assert mismatch_findings([]) == []


def test_tk110_the_action_space_of_the_recording() -> None:
    """The recording's action space, where no option names one, tells the clipped actions."""
    outs, _, clipped = _clipped_gaussian()
    r = rollout(np.zeros((21, 2)), outs=outs)
    recording = {"id": "a", "index": 0, "num_envs": 2, "action_space": _BOX}
    [found] = codes(r, "TK110", recording=recording)
    assert f"({clipped} of 42 rows, {clipped} of them with an action on a bound" in found.message
    [unbounded] = codes(r, "TK110")  # no space: a mismatch, the bounds unknown
    assert "on a bound" not in unbounded.message
