"""The one-pass copy-and-check kernels against NumPy's separate cast and checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajkit
from trajkit._core import _numba_checks, fused, gae
from trajkit.testing import example_rollout

SPECIAL = [0.0, -0.0, 1.0, 0.5, -1.0, np.nan, np.inf, -np.inf, 3.5e38, 1e300, 1e-45]


@st.composite
def values(draw: st.DrawFn, size: int) -> np.ndarray[Any, Any]:
    """Zeros and ones, with a few special values at drawn places, as float32 or float64."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    array = np.random.default_rng(seed).integers(0, 2, size).astype(np.float64)
    for _ in range(draw(st.integers(0, 3))):
        array[draw(st.integers(0, size - 1))] = draw(st.sampled_from(SPECIAL))
    with np.errstate(over="ignore"):
        return array.astype(dtype)


def reference(array: np.ndarray[Any, Any], rule: fused.Rule) -> tuple[Any, bool]:
    with np.errstate(over="ignore"):
        cast = array.astype(np.float32)
    if rule == "finite":
        return cast, bool(np.isfinite(cast).all())
    return cast, bool(((cast == 0) | (cast == 1)).all())


@given(values(size=40), st.sampled_from(["finite", "binary"]))
def test_the_python_kernels_are_the_numpy_checks(array: Any, rule: fused.Rule) -> None:
    expected, ok = reference(array, rule)
    out = np.empty(array.size, np.float32)
    kernel = _numba_checks.cast_finite if rule == "finite" else _numba_checks.cast_binary
    with np.errstate(all="ignore"):  # uncompiled, inf - inf warns
        assert kernel(array, out) == ok
        np.testing.assert_array_equal(out, expected)
        if array.dtype == np.float32:
            test = _numba_checks.is_finite if rule == "finite" else _numba_checks.is_binary
            assert test(array) == ok


@given(values(size=fused.MIN_BYTES // 4 + 3), st.sampled_from(["finite", "binary"]))
def test_the_compiled_kernels_are_the_numpy_checks(array: Any, rule: fused.Rule) -> None:
    pytest.importorskip("numba")
    array = array.reshape(-1, 1)
    expected, ok = reference(array, rule)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRAJKIT_BACKEND", "numba")
        kernel = fused.cast_kernel(array, rule)
        as_is = np.isfinite(array) if rule == "finite" else (array == 0) | (array == 1)
        array.flags.writeable = False
        passed_as_is = fused.passes(array, rule)
    assert kernel is not None  # float32 and float64 sources are both taken
    out, passed = fused.cast_with(kernel, array)
    assert passed == ok
    np.testing.assert_array_equal(out, expected)
    assert out.shape == array.shape
    assert out.dtype == np.float32
    # The check alone, of the values as they are (float64 ones are not cast first), also of
    # read-only arrays (memory maps of loaded files).
    assert passed_as_is == bool(as_is.all())


def test_kernels_apply_only_to_large_contiguous_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba")
    monkeypatch.setenv("TRAJKIT_BACKEND", "numba")
    big = np.zeros(fused.MIN_BYTES // 4, np.float32)
    assert fused.passes(big, "finite") is True
    assert fused.passes(big[: big.size // 2], "finite") is None  # small
    assert fused.passes(big.reshape(-1, 2)[:, 0], "finite") is None  # not contiguous
    assert fused.passes(np.zeros(big.size, np.int32), "finite") is None  # not a float
    assert fused.passes(big.astype(">f4"), "finite") is None  # not native
    monkeypatch.setenv("TRAJKIT_BACKEND", "numpy")
    assert fused.passes(big, "finite") is None
    assert fused.cast_kernel(big, "binary") is None
    monkeypatch.setenv("TRAJKIT_BACKEND", "fortran")  # a misspelt backend: NumPy, no error
    assert fused.passes(big, "finite") is None


def test_without_numba_no_kernel_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if numba were not installed: the callers use NumPy, and nothing imports numba.
    monkeypatch.delenv("TRAJKIT_BACKEND", raising=False)
    monkeypatch.setattr(gae, "_numba_available", lambda: False)
    big = np.zeros(fused.MIN_BYTES // 4, np.float32)
    assert fused.passes(big, "finite") is None
    assert fused.cast_kernel(big.astype(np.float64), "finite") is None


def test_kernels_that_cannot_compile_fall_back_to_numpy_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> None:
        raise RuntimeError("cannot cache function: no locator available")

    monkeypatch.setenv("TRAJKIT_BACKEND", "numba")
    pytest.importorskip("numba")
    monkeypatch.setattr(_numba_checks, "compiled_kernels", broken)
    fused._compiled.cache_clear()
    try:
        big = np.zeros(fused.MIN_BYTES // 4, np.float32)
        with pytest.warns(RuntimeWarning, match="rollouts are checked with NumPy instead"):
            assert fused.passes(big, "finite") is None
        assert fused.cast_kernel(big, "binary") is None  # no second warning
    finally:
        fused._compiled.cache_clear()


def test_a_rollout_reads_the_backend_once_and_only_for_large_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trajkit import Rollout

    reads: list[bool] = []
    real_read = fused._kernels_on

    def counted() -> bool:
        reads.append(real_read())
        return reads[-1]

    monkeypatch.setattr(fused, "_kernels_on", counted)

    def build(T: int) -> None:
        Rollout(
            np.zeros((T + 1, 8, 0)),
            np.zeros((T + 1, 8), np.float32),
            np.zeros((T, 8)),  # float64: cast, by a kernel when large
            np.zeros((T + 1, 8)),
            None,
            {"critic": np.zeros((T + 1, 8)), "log_probs": np.zeros((T + 1, 8))},
        )

    build(4)
    assert reads == []  # nothing large enough: the environment is not read
    build(4096)  # four fields of 256 KiB
    assert len(reads) == 1
    fused.passes(np.zeros(fused.MIN_BYTES // 4, np.float32), "finite")  # outside a rollout
    assert len(reads) == 2


def test_a_scope_decides_once_and_closing_it_restores_the_one_around_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = iter([True, False, True, False])
    monkeypatch.setattr(fused, "_kernels_on", lambda: next(answers))
    outer = fused.open_scope()
    assert fused.kernels_enabled() is True  # asked once ...
    assert fused.kernels_enabled() is True  # ... then remembered
    inner = fused.open_scope()
    assert fused.kernels_enabled() is False  # a scope of its own decides again
    fused.close_scope(inner)
    assert fused.kernels_enabled() is True  # the outer scope's decision, not asked again
    fused.close_scope(outer)
    assert fused.kernels_enabled() is True  # outside any scope: asked every time
    assert fused.kernels_enabled() is False


def test_checking_does_not_import_numba_unless_it_is_imported_or_asked_for(
    tmp_path: Path,
) -> None:
    """Importing numba costs about 0.6 s, which checks of small files never repay."""
    pytest.importorskip("numba")
    script = (
        "import sys, numpy as np, trajkit\n"
        "from trajkit._core import fused\n"
        "big = np.ones(1 << 20, np.float32)\n"
        "trajkit.load(sys.argv[1])\n"
        "print(fused.cast_kernel(big, 'finite') is None, 'numba' in sys.modules)\n"
        "import numba\n"
        "print(fused.cast_kernel(big, 'finite') is None)\n"
    )
    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(num_steps=64, num_envs=4), path)
    env = {k: v for k, v in os.environ.items() if k != "TRAJKIT_BACKEND"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]
    asked = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        env={**env, "TRAJKIT_BACKEND": "numba"},
    )
    assert asked.stdout.split() == ["False", "True", "False"], asked.stderr
