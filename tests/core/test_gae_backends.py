"""Tests of GAE backend selection and of the numba backend against the NumPy one."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajkit
import trajkit._core.gae as gae_module
from tests.core.helpers import (
    GOLDEN_ADVANTAGES,
    GOLDEN_DONES,
    GOLDEN_FINAL_VALUES,
    GOLDEN_REWARDS,
    GOLDEN_TRUNCATED,
    GOLDEN_VALUES,
    Case,
    cases,
    reference_gae32,
    reference_gae64,
    run,
)
from trajkit._base.types import Float32Array
from trajkit._core.gae import gae, gae_backend, lambda_returns
from trajkit.testing import example_rollout

needs_numba = pytest.mark.skipif(not gae_module._numba_available(), reason="numba not installed")

ENV = gae_module.BACKEND_ENV_VAR

BENCH_SHAPES = {"narrow": (2048, 8), "medium": (256, 64), "wide": (128, 4096), "long": (16384, 1)}


def bench_inputs(n_steps: int, n_envs: int) -> tuple[Float32Array, Float32Array, Float32Array]:
    rng = np.random.default_rng(n_steps + n_envs)
    rewards = rng.standard_normal((n_steps, n_envs)).astype(np.float32)
    values = rng.standard_normal((n_steps + 1, n_envs)).astype(np.float32)
    dones = (rng.random((n_steps + 1, n_envs)) < 0.01).astype(np.float32)
    return rewards, values, dones


# --------------------------------------------------------------------------------------------
# numba agrees with numpy and with the references
# --------------------------------------------------------------------------------------------


@needs_numba
@given(case=cases(with_truncation=False) | cases(with_truncation=True))
def test_numba_equals_numpy(case: Case) -> None:
    fast = run(case, "numba")
    slow = run(case, "numpy")
    assert fast.dtype == np.float32
    assert fast.shape == slow.shape
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=2e-5 * case.scale)


@needs_numba
@given(case=cases(with_truncation=True))
def test_numba_equals_float64_reference(case: Case) -> None:
    expected = reference_gae64(
        case.rewards,
        case.values,
        case.dones,
        case.gamma,
        case.lam,
        case.truncated,
        case.final_values,
    )
    np.testing.assert_allclose(run(case, "numba"), expected, rtol=1e-5, atol=1e-5 * case.scale)


@needs_numba
@given(case=cases(), data=st.data())
def test_numba_first_done_row_is_never_read(case: Case, data: st.DataObject) -> None:
    dones = case.dones.copy()
    dones[0] = data.draw(hnp.arrays(np.float32, dones.shape[1], elements=st.sampled_from([0, 1])))
    np.testing.assert_array_equal(run(replace(case, dones=dones), "numba"), run(case, "numba"))


@needs_numba
@pytest.mark.parametrize("shape", BENCH_SHAPES.values(), ids=BENCH_SHAPES.keys())
def test_backends_agree_on_benchmark_shapes(shape: tuple[int, int]) -> None:
    rewards, values, dones = bench_inputs(*shape)
    fast = gae(rewards, values, dones, 0.99, 0.95, backend="numba")
    slow = gae(rewards, values, dones, 0.99, 0.95, backend="numpy")
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-4)
    if shape[0] <= 2048:  # the float32 seed loop is slow on the long shape
        seed = reference_gae32(rewards, values, dones, 0.99, 0.95)
        np.testing.assert_allclose(fast, seed, rtol=1e-6, atol=1e-6)


@needs_numba
def test_numba_long_horizon_is_accurate() -> None:
    rng = np.random.default_rng(7)
    rewards = rng.standard_normal((16384, 2)).astype(np.float32)
    values = (3.0 * rng.standard_normal((16385, 2))).astype(np.float32)
    dones = np.zeros((16385, 2), dtype=np.float32)
    for gamma, lam in [(1.0, 1.0), (0.99, 0.95)]:
        expected = reference_gae64(rewards, values, dones, gamma, lam)
        actual = gae(rewards, values, dones, gamma, lam, backend="numba")
        assert np.isfinite(actual).all()
        # a sequential float32 loop: looser than the NumPy scan's 1e-5
        assert float(np.abs(actual - expected).max()) <= 1e-4 * (1 + float(np.abs(expected).max()))


@needs_numba
def test_numba_golden_and_lambda_returns() -> None:
    kwargs = {"truncated": GOLDEN_TRUNCATED, "final_values": GOLDEN_FINAL_VALUES}
    adv = gae(GOLDEN_REWARDS, GOLDEN_VALUES, GOLDEN_DONES, 0.5, 0.5, backend="numba", **kwargs)
    np.testing.assert_array_equal(adv, GOLDEN_ADVANTAGES)
    returns = lambda_returns(
        GOLDEN_REWARDS, GOLDEN_VALUES, GOLDEN_DONES, 0.5, 0.5, backend="numba", **kwargs
    )
    np.testing.assert_array_equal(returns, GOLDEN_ADVANTAGES + GOLDEN_VALUES[:-1])


@pytest.mark.parametrize("backend", [pytest.param("numba", marks=needs_numba), "numpy"])
def test_read_only_inputs_are_accepted(backend: str) -> None:
    # `trajkit.load(path, mmap=True)` hands out read-only memory maps.
    rewards, values, dones = bench_inputs(64, 3)
    truncated = np.zeros_like(rewards)
    final_values = np.ones_like(rewards)
    for array in (rewards, values, dones, truncated, final_values):
        array.flags.writeable = False
    out = gae(
        rewards,
        values,
        dones,
        0.99,
        0.95,
        truncated=truncated,
        final_values=final_values,
        backend=backend,  # type: ignore[arg-type]
    )
    expected = gae(rewards.copy(), values.copy(), dones.copy(), 0.99, 0.95, backend="numpy")
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@needs_numba
@pytest.mark.parametrize("n_envs", [1, 3])
def test_numba_zero_steps(n_envs: int) -> None:
    out = gae(
        np.zeros((0, n_envs)),
        np.zeros((1, n_envs)),
        np.zeros((1, n_envs)),
        0.9,
        0.9,
        backend="numba",
    )
    assert out.shape == (0, n_envs)
    assert out.dtype == np.float32


@needs_numba
def test_numba_backend_checks_arguments_too() -> None:
    truncated = np.zeros((3, 2))
    truncated[0, 0] = 1.0
    with pytest.raises(ValueError, match=r"truncated\[0, 0\] is 1 but dones\[1, 0\] is 0"):
        gae(
            np.zeros((3, 2)),
            np.zeros((4, 2)),
            np.zeros((4, 2)),
            0.9,
            0.9,
            truncated=truncated,
            final_values=np.zeros((3, 2)),
            backend="numba",
        )


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("shape", [(3, 2), (64, 4096)])  # the scan and the loop over time
def test_the_first_unended_truncation_in_row_order_is_named(
    backend: str, shape: tuple[int, int]
) -> None:
    n_steps, n_envs = shape
    dones = np.zeros((n_steps + 1, n_envs))
    dones[2:, :] = 1.0
    truncated = np.zeros(shape)
    truncated[2, 1] = truncated[2, 0] = 1.0  # ended: dones[3] = 1
    truncated[1, 1] = truncated[0, 1] = truncated[1, 0] = 1.0  # unended; [0, 1] comes first
    with pytest.raises(ValueError, match=r"^truncated\[0, 1\] is 1 but dones\[1, 1\] is 0"):
        gae(
            np.zeros(shape),
            np.zeros((n_steps + 1, n_envs)),
            dones,
            0.9,
            0.9,
            truncated=truncated,
            final_values=np.zeros(shape),
            backend=backend,  # type: ignore[arg-type]
        )


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("shape", [(16, 4), (64, 4096), (2048, 1)])
def test_sparse_truncation_equals_its_dense_rule(backend: str, shape: tuple[int, int]) -> None:
    # delta gains gamma * final_values exactly where truncated: compare with that rule applied
    # by hand to rewards (the bootstrap is linear in delta, so both give the same advantages).
    rewards, values, dones = bench_inputs(*shape)
    rng = np.random.default_rng(1)
    truncated = ((rng.random(shape) < 0.5) & (dones[1:] != 0)).astype(np.float32)
    final_values = np.where(truncated != 0, rng.standard_normal(shape), np.nan).astype(np.float32)
    got = gae(
        rewards,
        values,
        dones,
        0.99,
        0.95,
        truncated=truncated,
        final_values=final_values,
        backend=backend,  # type: ignore[arg-type]
    )
    boot = np.where(truncated != 0, final_values * np.float32(0.99), np.float32(0.0))
    want = gae(
        (rewards - values[:-1]) + boot + values[:-1],
        values,
        dones,
        0.99,
        0.95,
        backend=backend,  # type: ignore[arg-type]
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isfinite(got).all()  # NaN final values of untruncated steps are never read


# --------------------------------------------------------------------------------------------
# Backend selection
# --------------------------------------------------------------------------------------------


def _fail(*args: object) -> Float32Array:
    raise AssertionError("this backend must not be used")


SMALL = (np.ones((2, 1)), np.zeros((3, 1)), np.zeros((3, 1)), 0.5, 1.0)


@needs_numba
def test_default_backend_is_numba_when_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert gae_backend() == "numba"
    monkeypatch.setattr(gae_module, "_gae_numpy", _fail)
    np.testing.assert_array_equal(gae(*SMALL), [[1.5], [1.0]])


def test_default_backend_is_numpy_without_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(gae_module, "_numba_available", lambda: False)
    assert gae_backend() == "numpy"
    monkeypatch.setattr(gae_module, "_gae_numba", _fail)
    np.testing.assert_array_equal(gae(*SMALL), [[1.5], [1.0]])


@needs_numba
@pytest.mark.parametrize(
    ("value", "expected"),
    [("numpy", "numpy"), ("numba", "numba"), (" NumPy ", "numpy"), ("", "numba")],
)
def test_env_var_selects_the_backend(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv(ENV, value)
    assert gae_backend() == expected
    monkeypatch.setattr(gae_module, "_gae_numpy" if expected == "numba" else "_gae_numba", _fail)
    np.testing.assert_array_equal(gae(*SMALL), [[1.5], [1.0]])
    np.testing.assert_array_equal(lambda_returns(*SMALL), [[1.5], [1.0]])


@needs_numba
def test_env_var_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "numpy")
    assert gae_backend() == "numpy"
    monkeypatch.setenv(ENV, "numba")
    assert gae_backend() == "numba"


@pytest.mark.parametrize("value", ["torch", "jax", "numpy,numba"])
def test_env_var_rejects_unknown_values(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=rf"TRAJKIT_BACKEND must be one of .*got '{value}'"):
        gae_backend()
    with pytest.raises(ValueError, match=r"TRAJKIT_BACKEND must be one of"):
        gae(*SMALL)


@needs_numba
def test_backend_argument_overrides_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "not-a-backend")  # not even read when backend= is given
    with monkeypatch.context() as patch:
        patch.setattr(gae_module, "_gae_numba", _fail)
        np.testing.assert_array_equal(gae(*SMALL, backend="numpy"), [[1.5], [1.0]])
    monkeypatch.setenv(ENV, "numpy")
    monkeypatch.setattr(gae_module, "_gae_numpy", _fail)
    np.testing.assert_array_equal(gae(*SMALL, backend="numba"), [[1.5], [1.0]])


def test_forcing_numba_without_numba_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gae_module, "_numba_available", lambda: False)
    monkeypatch.setenv(ENV, "numba")
    with pytest.raises(ValueError, match=r"TRAJKIT_BACKEND selects 'numba' but numba cannot be"):
        gae_backend()
    monkeypatch.delenv(ENV)
    with pytest.raises(ValueError, match=r"backend selects 'numba' but numba cannot be imported"):
        gae(*SMALL, backend="numba")


@needs_numba
def test_numba_availability_is_cached() -> None:
    gae_module._numba_available()
    before = gae_module._numba_available.cache_info().hits
    assert gae_module._numba_available() is True
    assert gae_module._numba_available.cache_info().hits == before + 1


def test_importing_trajkit_does_not_import_numba() -> None:
    code = (
        "import sys, trajkit, trajkit._core.gae\n"
        "assert sys.modules.get('numba') is None, 'numba imported'\n"
        "assert 'trajkit._core._numba_gae' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@needs_numba
def test_a_preferred_backend_holds_within_its_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with gae_module.preferring("numpy"):
        assert gae_backend() == "numpy"
        with monkeypatch.context() as patch:
            patch.setattr(gae_module, "_gae_numba", _fail)
            np.testing.assert_array_equal(gae(*SMALL), [[1.5], [1.0]])
        monkeypatch.setenv(ENV, "numba")  # the environment variable still wins
        assert gae_backend() == "numba"
        monkeypatch.delenv(ENV)
        assert gae(*SMALL, backend="numba").shape == (2, 1)  # and so does the argument
    assert gae_backend() == "numba"


def test_trajkit_info_computes_its_advantages_without_numba(tmp_path: Path) -> None:
    """One file's advantages: numba's import and kernels would cost more than NumPy takes."""
    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(num_steps=8, num_envs=2), path)
    code = (
        "import sys\n"
        "from trajkit.cli import main\n"
        f"assert main(['info', {str(path)!r}]) == 0\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)


# --------------------------------------------------------------------------------------------
# The two numba loops: row by row, and env by env for one or two envs
# --------------------------------------------------------------------------------------------


@needs_numba
@given(case=cases(with_truncation=False) | cases(with_truncation=True), data=st.data())
def test_the_loop_env_by_env_gives_the_same_bits_and_the_same_first_bad_step(
    case: Case, data: st.DataObject
) -> None:
    from trajkit._core import _numba_gae

    truncated = case.truncated
    if truncated is not None and truncated.size and data.draw(st.booleans()):
        truncated = data.draw(  # any flags: some may sit on steps that do not end an episode
            hnp.arrays(np.float32, truncated.shape, elements=st.sampled_from([0.0, 1.0]))
        )
    flags = (
        (truncated, case.final_values, True)
        if truncated is not None and case.final_values is not None
        else (gae_module._NO_FLAGS, gae_module._NO_FLAGS, False)
    )
    args = (case.rewards, case.values, case.dones, flags[0], flags[1])
    rows, bad_rows = _numba_gae.compiled_kernel(_numba_gae.gae_loop)(
        *args, case.gamma, case.lam, flags[2]
    )
    envs, bad_envs = _numba_gae.compiled_kernel(_numba_gae.gae_loop_by_env)(
        *args, case.gamma, case.lam, flags[2]
    )
    assert bad_envs == bad_rows
    if bad_rows < 0:
        np.testing.assert_array_equal(envs.view(np.uint32), rows.view(np.uint32))


@needs_numba
@pytest.mark.parametrize("n_envs", [1, 2, 3])
def test_one_or_two_envs_run_env_by_env(n_envs: int) -> None:
    """Just below and above `BY_ENV_MAX`; each loop is the same Python function compiled."""
    from trajkit._core import _numba_gae

    assert _numba_gae.BY_ENV_MAX == 2
    expected = _numba_gae.gae_loop_by_env if n_envs <= 2 else _numba_gae.gae_loop
    assert _numba_gae.kernel_for(n_envs) is _numba_gae.compiled_kernel(expected)
    assert _numba_gae.kernel_for(n_envs).py_func is expected  # type: ignore[attr-defined]
