"""Tests of `trajkit._core.gae`: references, properties, golden values and argument checks.

Both NumPy code paths (the doubling scan and the loop over time used for wide batches) run every
property test; the numba backend is compared with them in `test_gae_backends.py`.

Tolerances: float32 results are compared with float64 references with `rtol=1e-5` and
`atol=1e-5 * scale`, where `scale` bounds the sum of |delta_t| over a rollout (so it bounds every
advantage). Properties that hold exactly in float32 arithmetic use exact equality.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Literal
from unittest import mock

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajkit._core.gae as gae_module
from tests.core.helpers import (
    GOLDEN_ADVANTAGES,
    GOLDEN_DONES,
    GOLDEN_FINAL_VALUES,
    GOLDEN_RETURNS,
    GOLDEN_REWARDS,
    GOLDEN_TERMINATED,
    GOLDEN_TRUNCATED,
    GOLDEN_VALUES,
    Case,
    binary,
    cases,
    elements,
    reference_gae32,
    reference_gae64,
    run,
)
from trajkit._base.types import Float32Array, Float64Array
from trajkit._core.gae import gae, lambda_returns, normalize_advantages

Path = Literal["scan", "row_loop"]
PATHS: tuple[Path, ...] = ("scan", "row_loop")

# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


def reference_sb3(
    rewards: Float32Array,
    values: Float32Array,
    dones: Float32Array,
    gamma: float,
    lam: float,
    truncated: Float32Array,
    final_values: Float32Array,
) -> Float64Array:
    """stable-baselines3's rule: add gamma * V(final_obs) to a truncated step's reward, then GAE.

    `collect_rollouts` does `rewards[idx] += gamma * terminal_value` when an episode is cut by a
    time limit; `compute_returns_and_advantage` then runs GAE with `next_non_terminal = 1 -
    episode_starts[step + 1]`. Written element by element, as SB3 does per step.
    """
    n_steps, n_envs = rewards.shape
    rews = rewards.astype(np.float64)
    for t in range(n_steps):
        for b in range(n_envs):
            if truncated[t, b]:
                rews[t, b] += gamma * float(final_values[t, b])
    advantages = np.zeros((n_steps, n_envs), dtype=np.float64)
    for b in range(n_envs):
        last_gae_lam = 0.0
        for step in reversed(range(n_steps)):
            next_non_terminal = 1.0 - float(dones[step + 1, b])
            next_values = float(values[step + 1, b])
            delta = rews[step, b] + gamma * next_values * next_non_terminal - float(values[step, b])
            last_gae_lam = delta + gamma * lam * next_non_terminal * last_gae_lam
            advantages[step, b] = last_gae_lam
    return advantages


def monte_carlo_minus_values(
    rewards: Float32Array, values: Float32Array, dones: Float32Array, gamma: float
) -> Float64Array:
    """lam = 1 reference: the discounted return to the episode end (plus bootstrap) minus V_t."""
    n_steps, n_envs = rewards.shape
    out = np.zeros((n_steps, n_envs), dtype=np.float64)
    for b in range(n_envs):
        for t in range(n_steps):
            total, discount, k = 0.0, 1.0, t
            while True:
                total += discount * float(rewards[k, b])
                if dones[k + 1, b]:
                    break  # step k terminated its episode: no bootstrap
                discount *= gamma
                k += 1
                if k == n_steps:
                    total += discount * float(values[n_steps, b])
                    break
            out[t, b] = total - float(values[t, b])
    return out


# --------------------------------------------------------------------------------------------
# Strategies and helpers
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def numpy_path(path: Path) -> Iterator[None]:
    """Force the NumPy backend's scan or its loop over time, whatever the shape."""
    with mock.patch.object(gae_module, "_use_row_loop", return_value=path == "row_loop"):
        yield


def advantages(case: Case, path: Path) -> Float32Array:
    with numpy_path(path):
        return run(case, "numpy")


def assert_close(actual: Float32Array, expected: Float64Array | Float32Array, scale: float) -> None:
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * scale)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(with_truncation=False) | cases(with_truncation=True))
def test_equals_reference_loop(path: Path, case: Case) -> None:
    expected = reference_gae64(
        case.rewards,
        case.values,
        case.dones,
        case.gamma,
        case.lam,
        case.truncated,
        case.final_values,
    )
    assert_close(advantages(case, path), expected, case.scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases())
def test_equals_seed_float32_loop(path: Path, case: Case) -> None:
    expected = reference_gae32(case.rewards, case.values, case.dones, case.gamma, case.lam)
    assert_close(advantages(case, path), expected, case.scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(min_t=1), data=st.data())
def test_episode_start_isolates_the_past(path: Path, case: Case, data: st.DataObject) -> None:
    n_steps, n_envs = case.rewards.shape
    t = data.draw(st.integers(1, n_steps), label="t")
    b = data.draw(st.integers(0, n_envs - 1), label="b")
    dones = case.dones.copy()
    dones[t, b] = 1.0
    before = advantages(replace(case, dones=dones), path)
    rewards, values = case.rewards.copy(), case.values.copy()
    rewards[t:, b] = data.draw(hnp.arrays(np.float32, n_steps - t, elements=elements))
    values[t:, b] = data.draw(hnp.arrays(np.float32, n_steps + 1 - t, elements=elements))
    after = advantages(replace(case, rewards=rewards, values=values, dones=dones), path)
    np.testing.assert_array_equal(after[:t, b], before[:t, b])


@pytest.mark.parametrize("path", PATHS)
@given(case=cases())
def test_lambda_zero_is_one_step_td_error(path: Path, case: Case) -> None:
    r = case.rewards.astype(np.float64)
    v = case.values.astype(np.float64)
    d = case.dones.astype(np.float64)
    td_error = r + case.gamma * (1.0 - d[1:]) * v[1:] - v[:-1]
    assert_close(advantages(replace(case, lam=0.0), path), td_error, case.scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases())
def test_lambda_one_is_return_minus_value(path: Path, case: Case) -> None:
    expected = monte_carlo_minus_values(case.rewards, case.values, case.dones, case.gamma)
    assert_close(advantages(replace(case, lam=1.0), path), expected, case.scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(), data=st.data())
def test_linear_in_rewards(path: Path, case: Case, data: st.DataObject) -> None:
    other = data.draw(hnp.arrays(np.float32, case.rewards.shape, elements=elements))
    both = (case.rewards + other).astype(np.float32)
    zeros = np.zeros_like(case.values)
    difference = advantages(replace(case, rewards=both), path).astype(np.float64) - advantages(
        case, path
    )
    expected = advantages(replace(case, rewards=other, values=zeros), path)
    scale = case.scale + float(np.abs(other).sum(axis=0).max(initial=0.0))
    np.testing.assert_allclose(difference, expected, rtol=1e-5, atol=4e-5 * scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(with_truncation=True), data=st.data())
def test_permuting_environments_permutes_the_output(
    path: Path, case: Case, data: st.DataObject
) -> None:
    n_envs = case.rewards.shape[1]
    perm = np.array(data.draw(st.permutations(range(n_envs))), dtype=np.intp)
    assert case.truncated is not None
    assert case.final_values is not None
    permuted = Case(
        case.rewards[:, perm],
        case.values[:, perm],
        case.dones[:, perm],
        case.gamma,
        case.lam,
        case.truncated[:, perm],
        case.final_values[:, perm],
    )
    np.testing.assert_array_equal(advantages(permuted, path), advantages(case, path)[:, perm])


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(min_t=1), data=st.data())
def test_splitting_at_an_episode_start(path: Path, case: Case, data: st.DataObject) -> None:
    n_steps = case.rewards.shape[0]
    t = data.draw(st.integers(0, n_steps), label="t")
    dones = case.dones.copy()
    dones[t] = 1.0  # every environment starts an episode at observation t
    whole = replace(case, dones=dones)
    head = replace(
        whole, rewards=case.rewards[:t], values=case.values[: t + 1], dones=dones[: t + 1]
    )
    tail = replace(whole, rewards=case.rewards[t:], values=case.values[t:], dones=dones[t:])
    joined = np.concatenate([advantages(head, path), advantages(tail, path)])
    np.testing.assert_array_equal(joined, advantages(whole, path))


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(with_truncation=True))
def test_gamma_zero_is_reward_minus_value(path: Path, case: Case) -> None:
    expected = case.rewards - case.values[:-1]
    np.testing.assert_array_equal(advantages(replace(case, gamma=0.0), path), expected)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(min_t=1, with_truncation=True), data=st.data())
def test_truncating_an_episode_adds_the_discounted_bootstrap(
    path: Path, case: Case, data: st.DataObject
) -> None:
    assert case.truncated is not None
    assert case.final_values is not None
    n_steps, n_envs = case.rewards.shape
    t = data.draw(st.integers(0, n_steps - 1), label="t")
    b = data.draw(st.integers(0, n_envs - 1), label="b")
    dones = case.dones.copy()
    dones[t + 1, b] = 1.0  # step t ends its episode ...
    terminated = case.truncated.copy()
    terminated[t, b] = 0.0  # ... by termination
    truncated = terminated.copy()
    truncated[t, b] = 1.0  # ... or by a time limit
    final_value = data.draw(elements, label="final_value")
    final_values = case.final_values.copy()
    final_values[t, b] = final_value
    a_term = advantages(
        replace(case, dones=dones, truncated=terminated, final_values=final_values), path
    )
    a_trunc = advantages(
        replace(case, dones=dones, truncated=truncated, final_values=final_values), path
    )

    expected = np.zeros((n_steps, n_envs), dtype=np.float64)
    k = t
    while True:  # back to the first step of the episode
        expected[k, b] = case.gamma * final_value * (case.gamma * case.lam) ** (t - k)
        if k == 0 or dones[k, b]:
            break
        k -= 1
    difference = a_trunc.astype(np.float64) - a_term
    scale = case.scale + abs(final_value)
    np.testing.assert_allclose(difference, expected, rtol=1e-5, atol=4e-5 * scale)
    untouched = expected == 0
    untouched[:k, b] = True
    untouched[t + 1 :, b] = True
    np.testing.assert_array_equal(a_trunc[untouched], a_term[untouched])


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(with_truncation=True))
def test_matches_stable_baselines3_rule(path: Path, case: Case) -> None:
    assert case.truncated is not None
    assert case.final_values is not None
    expected = reference_sb3(
        case.rewards,
        case.values,
        case.dones,
        case.gamma,
        case.lam,
        case.truncated,
        case.final_values,
    )
    assert_close(advantages(case, path), expected, case.scale)


@pytest.mark.parametrize("path", PATHS)
@given(case=cases(), data=st.data())
def test_first_done_row_is_never_read(path: Path, case: Case, data: st.DataObject) -> None:
    dones = case.dones.copy()
    dones[0] = data.draw(hnp.arrays(np.float32, dones.shape[1], elements=binary))
    np.testing.assert_array_equal(
        advantages(replace(case, dones=dones), path), advantages(case, path)
    )


# --------------------------------------------------------------------------------------------
# Long horizons in float32
# --------------------------------------------------------------------------------------------

LONG_T = 16384
LONG_TOLERANCE = 1e-5
"""The NumPy backend stays within LONG_TOLERANCE * (1 + max|A|) of float64 (as documented)."""


def long_inputs(
    n_envs: int, done_rate: float, seed: int
) -> tuple[Float32Array, Float32Array, Float32Array]:
    rng = np.random.default_rng(seed)
    rewards = rng.standard_normal((LONG_T, n_envs)).astype(np.float32)
    values = (3.0 * rng.standard_normal((LONG_T + 1, n_envs))).astype(np.float32)
    dones = (rng.random((LONG_T + 1, n_envs)) < done_rate).astype(np.float32)
    return rewards, values, dones


@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (1.0, 0.94)])
@pytest.mark.parametrize("done_rate", [0.0, 0.01])
def test_float32_stays_accurate_on_long_horizons(
    n_envs: int, gamma: float, lam: float, done_rate: float
) -> None:
    rewards, values, dones = long_inputs(n_envs, done_rate, seed=n_envs)
    expected = reference_gae64(rewards, values, dones, gamma, lam)
    tolerance = LONG_TOLERANCE * (1.0 + float(np.abs(expected).max()))
    for path in PATHS:
        with numpy_path(path):
            actual = gae(rewards, values, dones, gamma, lam, backend="numpy")
        assert np.isfinite(actual).all()
        assert float(np.abs(actual - expected).max()) <= tolerance, path


def test_tiny_discount_weights_do_not_slow_or_break_the_scan() -> None:
    # gamma * lam = 1/16: weights fall below 2**-80 within a few dozen steps; the scan stops early.
    rewards, values, dones = long_inputs(2, 0.0, seed=5)
    expected = reference_gae64(rewards[:512], values[:513], dones[:513], 0.5, 0.125)
    actual = gae(rewards[:512], values[:513], dones[:513], 0.5, 0.125, backend="numpy")
    assert_close(actual, expected, 1.0 + float(np.abs(expected).max()))


# --------------------------------------------------------------------------------------------
# Golden values, worked by hand
# --------------------------------------------------------------------------------------------

# The GOLDEN_ arrays and their working: tests/core/helpers.py (test_gae_backends.py uses them).


@pytest.mark.parametrize("path", PATHS)
def test_golden_with_reset_and_truncation(path: Path) -> None:
    with numpy_path(path):
        adv = gae(
            GOLDEN_REWARDS,
            GOLDEN_VALUES,
            GOLDEN_DONES,
            0.5,
            0.5,
            truncated=GOLDEN_TRUNCATED,
            final_values=GOLDEN_FINAL_VALUES,  # NaN where not truncated: never read
            backend="numpy",
        )
        terminated = gae(GOLDEN_REWARDS, GOLDEN_VALUES, GOLDEN_DONES, 0.5, 0.5, backend="numpy")
    np.testing.assert_array_equal(adv, GOLDEN_ADVANTAGES)
    np.testing.assert_array_equal(terminated, GOLDEN_TERMINATED)


def test_golden_lambda_returns() -> None:
    returns = lambda_returns(
        GOLDEN_REWARDS,
        GOLDEN_VALUES,
        GOLDEN_DONES,
        0.5,
        0.5,
        truncated=GOLDEN_TRUNCATED,
        final_values=GOLDEN_FINAL_VALUES,
        backend="numpy",
    )
    np.testing.assert_array_equal(returns, GOLDEN_RETURNS)
    assert returns.dtype == np.float32


def test_golden_single_env_by_hand() -> None:
    # gamma = 0.9, lam = 0.5, no dones: delta = [1 + 0.9*2 - 1, 0 + 0.9*3 - 2] = [1.8, 0.7]
    # A_1 = 0.7, A_0 = 1.8 + 0.45*0.7 = 2.115
    adv = gae([[1.0], [0.0]], [[1.0], [2.0], [3.0]], np.zeros((3, 1)), 0.9, 0.5, backend="numpy")
    np.testing.assert_allclose(adv, [[2.115], [0.7]], rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Inputs, outputs and shapes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_envs", [1, 3])
def test_zero_steps_gives_an_empty_result(n_envs: int) -> None:
    out = gae(np.zeros((0, n_envs)), np.zeros((1, n_envs)), np.zeros((1, n_envs)), 0.99, 0.95)
    assert out.shape == (0, n_envs)
    assert out.dtype == np.float32


def test_zero_environments_gives_an_empty_result() -> None:
    out = gae(np.zeros((4, 0)), np.zeros((5, 0)), np.zeros((5, 0)), 0.99, 0.95, backend="numpy")
    assert out.shape == (4, 0)


def test_accepts_lists_bools_ints_float64_and_strided_views() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.standard_normal((6, 3)).astype(np.float32)
    values = rng.standard_normal((7, 3)).astype(np.float32)
    dones = (rng.random((7, 3)) < 0.3).astype(np.float32)
    expected = gae(rewards, values, dones, 0.9, 0.8, backend="numpy")
    variants = [
        (rewards.tolist(), values.tolist(), dones.astype(bool).tolist()),
        (rewards.astype(np.float64), values.astype(np.float64), dones.astype(np.int64)),
        (np.asfortranarray(rewards), np.asfortranarray(values), dones.astype(bool)),
        (
            np.repeat(rewards, 2, axis=1)[:, ::2],
            np.repeat(values, 2, axis=1)[:, ::2],
            np.repeat(dones, 2, axis=1)[:, ::2],
        ),
    ]
    for r, v, d in variants:
        np.testing.assert_array_equal(gae(r, v, d, 0.9, 0.8, backend="numpy"), expected)


def test_wide_batches_use_the_loop_and_match_the_reference() -> None:
    rng = np.random.default_rng(1)
    rewards = rng.standard_normal((70, 2100)).astype(np.float32)
    values = rng.standard_normal((71, 2100)).astype(np.float32)
    dones = (rng.random((71, 2100)) < 0.05).astype(np.float32)
    assert gae_module._use_row_loop(70, 2100)
    assert not gae_module._use_row_loop(1024, 256)  # the scan is about 3x faster there
    expected = reference_gae64(rewards, values, dones, 0.99, 0.95)
    assert_close(gae(rewards, values, dones, 0.99, 0.95, backend="numpy"), expected, 100.0)


def test_does_not_modify_or_alias_its_inputs() -> None:
    rewards = np.ones((4, 2), dtype=np.float32)
    values = np.ones((5, 2), dtype=np.float32)
    dones = np.zeros((5, 2), dtype=np.float32)
    copies = [rewards.copy(), values.copy(), dones.copy()]
    out = gae(rewards, values, dones, 0.9, 0.9, backend="numpy")
    returns = lambda_returns(rewards, values, dones, 0.9, 0.9, backend="numpy")
    for original, copy in zip([rewards, values, dones], copies, strict=True):
        np.testing.assert_array_equal(original, copy)
        assert not np.shares_memory(out, original)
        assert not np.shares_memory(returns, original)


# --------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------


def _call(**overrides: object) -> Float32Array:
    kwargs: dict[str, object] = {
        "rewards": np.zeros((3, 2)),
        "values": np.zeros((4, 2)),
        "dones": np.zeros((4, 2)),
        "gamma": 0.99,
        "lam": 0.95,
    }
    kwargs.update(overrides)
    return gae(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["gamma", "lam"])
@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf, -math.inf])
def test_rejects_discounts_outside_the_unit_interval(name: str, bad: float) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be a finite number in \[0, 1\], got "):
        _call(**{name: bad})


def test_gamma_error_message_names_the_value() -> None:
    with pytest.raises(ValueError, match=r"^gamma must be a finite number in \[0, 1\], got 1\.5$"):
        _call(gamma=1.5)


@pytest.mark.parametrize("bad", ["0.9", None, True, [0.9], np.array([0.9]), 0.9j])
def test_rejects_non_numeric_discounts(bad: object) -> None:
    with pytest.raises(TypeError, match=r"lam must be a finite number in \[0, 1\], got "):
        _call(lam=bad)


def test_accepts_numpy_scalars_0d_arrays_and_ints_as_discounts() -> None:
    expected = _call(gamma=0.5, lam=1.0)
    for gamma, lam in [(np.float32(0.5), 1), (np.array(0.5), np.int64(1)), (0.5, np.array(1))]:
        np.testing.assert_array_equal(_call(gamma=gamma, lam=lam), expected)


def test_rejects_rewards_that_are_not_2d() -> None:
    with pytest.raises(ValueError, match=r"rewards must be a 2-D array \[T, B\], got shape \(3,\)"):
        _call(rewards=np.zeros(3))


@pytest.mark.parametrize("name", ["values", "dones"])
def test_rejects_observation_arrays_of_the_wrong_shape(name: str) -> None:
    with pytest.raises(
        ValueError, match=rf"{name} must have shape \[T \+ 1, B\] = \(4, 2\), got \(3, 2\)"
    ):
        _call(**{name: np.zeros((3, 2))})


def test_rejects_values_with_another_batch_size() -> None:
    with pytest.raises(ValueError, match=r"values must have shape .* = \(4, 2\), got \(4, 3\)"):
        _call(values=np.zeros((4, 3)))


@pytest.mark.parametrize("name", ["truncated", "final_values"])
def test_rejects_step_arrays_of_the_wrong_shape(name: str) -> None:
    arrays = {"truncated": np.zeros((3, 2)), "final_values": np.zeros((3, 2))}
    arrays[name] = np.zeros((4, 2))
    with pytest.raises(
        ValueError, match=rf"{name} must have shape \[T, B\] = \(3, 2\), got \(4, 2\)"
    ):
        _call(**arrays)


@pytest.mark.parametrize("given_name", ["truncated", "final_values"])
def test_truncation_arrays_come_together(given_name: str) -> None:
    with pytest.raises(ValueError, match=r"truncated and final_values must be given together"):
        _call(**{given_name: np.zeros((3, 2))})


def test_truncated_step_must_end_its_episode() -> None:
    truncated = np.zeros((3, 2))
    truncated[1, 1] = 1.0
    with pytest.raises(ValueError, match=r"truncated\[1, 1\] is 1 but dones\[2, 1\] is 0"):
        _call(truncated=truncated, final_values=np.zeros((3, 2)))


def test_rejects_non_numeric_arrays() -> None:
    with pytest.raises(ValueError, match=r"rewards must be a numeric array"):
        _call(rewards=[["a", "b"]])


@pytest.mark.parametrize("bad", ["torch", "NUMPY", ""])
def test_rejects_unknown_backends(bad: str) -> None:
    with pytest.raises(ValueError, match=r"backend must be one of \('numpy', 'numba'\), got "):
        _call(backend=bad)


# --------------------------------------------------------------------------------------------
# lambda_returns and normalize_advantages
# --------------------------------------------------------------------------------------------


@given(case=cases(with_truncation=True))
def test_lambda_returns_are_advantages_plus_values(case: Case) -> None:
    returns = lambda_returns(
        case.rewards,
        case.values,
        case.dones,
        case.gamma,
        case.lam,
        truncated=case.truncated,
        final_values=case.final_values,
        backend="numpy",
    )
    expected = advantages(case, "scan") + case.values[:-1]
    np.testing.assert_array_equal(returns, expected)
    assert returns.dtype == np.float32


def test_lambda_returns_with_lambda_one_are_discounted_returns() -> None:
    rewards = np.array([[1.0], [2.0], [3.0]])
    values = np.array([[5.0], [6.0], [7.0], [10.0]])
    out = lambda_returns(rewards, values, np.zeros((4, 1)), 0.5, 1.0, backend="numpy")
    # G_2 = 3 + 0.5*10 = 8, G_1 = 2 + 0.5*8 = 6, G_0 = 1 + 0.5*6 = 4
    np.testing.assert_allclose(out, [[4.0], [6.0], [8.0]], rtol=1e-6)


def test_lambda_returns_validate_like_gae() -> None:
    with pytest.raises(ValueError, match=r"gamma must be a finite number in \[0, 1\], got 2\.0"):
        lambda_returns(np.zeros((1, 1)), np.zeros((2, 1)), np.zeros((2, 1)), 2.0, 0.9)


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8),
        elements=st.floats(-1e3, 1e3, width=32),
    )
)
def test_normalize_gives_zero_mean_unit_std(adv: Float32Array) -> None:
    out = normalize_advantages(adv)
    assert out.dtype == np.float32
    assert out.shape == adv.shape
    a = adv.astype(np.float64)
    expected = (a - a.mean()) / (a.std() + 1e-8)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    if a.std() > 1e-3:
        assert abs(float(out.astype(np.float64).mean())) < 1e-5
        assert abs(float(out.astype(np.float64).std()) - 1.0) < 1e-4


def test_normalize_uses_all_elements_not_columns() -> None:
    out = normalize_advantages(np.array([[0.0, 10.0], [2.0, 12.0]]))
    np.testing.assert_allclose(out.mean(), 0.0, atol=1e-6)
    assert out[0, 0] < out[1, 0] < out[0, 1] < out[1, 1]


@pytest.mark.parametrize("shape", [(0,), (0, 4), (3, 0)])
def test_normalize_empty(shape: tuple[int, ...]) -> None:
    out = normalize_advantages(np.zeros(shape, dtype=np.float64))
    assert out.shape == shape
    assert out.dtype == np.float32


def test_normalize_constant_input_gives_zeros() -> None:
    np.testing.assert_array_equal(normalize_advantages(np.full((2, 3), 7.0)), np.zeros((2, 3)))
    np.testing.assert_array_equal(normalize_advantages([5.0], eps=0.0), [0.0])


def test_normalize_eps() -> None:
    out = normalize_advantages([0.0, 2.0], eps=1.0)
    np.testing.assert_allclose(out, [-0.5, 0.5], rtol=1e-6)


@pytest.mark.parametrize("bad", [-1e-8, math.nan, math.inf])
def test_normalize_rejects_bad_eps(bad: float) -> None:
    with pytest.raises(ValueError, match=r"eps must be a finite number >= 0, got "):
        normalize_advantages([1.0, 2.0], eps=bad)


def test_normalize_rejects_non_numeric_eps() -> None:
    with pytest.raises(TypeError, match=r"eps must be a finite number >= 0, got str"):
        normalize_advantages([1.0, 2.0], eps="1e-8")  # type: ignore[arg-type]
