"""The helpers behind checked writes: bounds that prove an in-place result finite, row blocks,
and the arrays that belong to no rollout.

A large in-place operation (from `_LARGE_BYTES`) is stored without a checking pass where
`proven_finite` proves its result finite, or checked block by block where `blockwise` allows
it; each decision is pinned here just below and just above its threshold, and the large paths
are run end to end on a rollout's field. Fancy-indexed selections are `CheckedArray`s of no
rollout: they write, resize and restore as plain arrays.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from trajkit import CheckedArray, RolloutValidationError
from trajkit._models import checked as checked_module
from trajkit._models.checked import (
    blockwise,
    compute,
    guard_of,
    is_region,
    proven_finite,
    row_blocks,
)
from trajkit.testing import example_rollout

LARGE = checked_module._LARGE_BYTES
BLOCK = checked_module._BLOCK_BYTES
CHUNK = checked_module._CHUNK
F32_MAX = float(np.finfo(np.float32).max)
LIMIT = F32_MAX / 4  # what a proven result's bound may reach


def _large(value: float = 1.0, extra: int = 0, dtype: Any = np.float32) -> Any:
    """A C-contiguous array of exactly `_LARGE_BYTES` (plus `extra` elements)."""
    return np.full(LARGE // np.dtype(dtype).itemsize + extra, value, dtype)


def _one(value: float, extra: int = 0) -> Any:
    """A large float32 array of zeros but one element: its magnitude bound is 1.04 * value."""
    array = _large(0.0, extra)
    array[-1] = value
    return array


# ------------------------------------------------------------------------------ magnitude


def _magnitude(array: Any) -> float:
    result: float = checked_module._magnitude(array)
    return result


@pytest.mark.parametrize("size", [1, 5, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3])
@pytest.mark.parametrize("where", [0, -1])
def test_the_magnitude_bounds_the_largest_element_within_4_percent(size: int, where: int) -> None:
    array = np.full(size, 0.5, np.float32)
    array[where] = -3.0
    norm = math.sqrt(float(np.sum(array.astype(np.float64) ** 2)))
    assert 3.0 <= _magnitude(array) <= 1.04 * norm * (1 + 1e-6)
    assert _magnitude(array) >= 1.04 * norm * (1 - 1e-6)


def test_the_magnitude_of_zeros_is_zero() -> None:
    assert _magnitude(np.zeros((3, 4), np.float64)) == 0.0


@pytest.mark.parametrize(
    "array",
    [
        np.ones(4, np.int32),
        np.ones((4, 4), np.float32)[:, ::2],
        np.ones((3, 4), np.float32, order="F"),
        np.array([1.0, np.nan], np.float32),
        np.array([1.0, np.inf], np.float64),
        np.array([1e30, 1e30], np.float32),  # its squares overflow float32: no warning either
    ],
    ids=["integer", "strided", "fortran", "nan", "inf", "overflow"],
)
def test_an_array_it_cannot_bound_has_an_infinite_magnitude(array: Any) -> None:
    assert _magnitude(array) == math.inf


# ---------------------------------------------------------------------------- proven_finite


def test_nothing_is_proven_below_the_large_size_or_for_other_ufuncs_and_dtypes() -> None:
    assert proven_finite(np.add, _large(), 1.0)
    assert not proven_finite(np.add, _large()[1:], 1.0)  # one element under the size
    assert not proven_finite(np.maximum, _large(), 1.0)
    assert not proven_finite(np.add, _large(1, dtype=np.int32), 1)
    assert proven_finite(np.add, _large(dtype=np.float64), 1.0)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.true_divide])
@pytest.mark.parametrize("operand", [2, 2.0, np.float32(2.0), np.array(2.0), True])
def test_a_number_operand_is_bounded_by_its_value(ufunc: np.ufunc, operand: Any) -> None:
    assert proven_finite(ufunc, _large(), operand)


@pytest.mark.parametrize("operand", [[2.0], (2.0, 2.0), [[1.0]]])
def test_an_operand_that_is_not_a_number_or_an_array_is_not_proven(operand: Any) -> None:
    assert not proven_finite(np.add, _large(), operand)


def test_a_float_array_operand_is_bounded_by_its_magnitude_but_not_for_a_quotient() -> None:
    array = _large()
    assert proven_finite(np.add, array, _large(3.0))
    assert proven_finite(np.multiply, array, np.ones(array.shape[-1:], np.float64))
    assert not proven_finite(np.true_divide, array, _large(3.0))
    assert not proven_finite(np.add, array, _large(3, dtype=np.int32))
    assert not proven_finite(np.add, array, np.array([1.0, np.inf], np.float32))


def test_a_quotient_by_zero_is_not_proven() -> None:
    assert not proven_finite(np.true_divide, _large(), 0.0)
    assert not proven_finite(np.add, _large(), math.inf)


def test_a_sum_is_proven_up_to_a_quarter_of_the_dtypes_range() -> None:
    assert proven_finite(np.add, _large(0.0), LIMIT)  # 0 + LIMIT: exactly at the limit
    assert not proven_finite(np.add, _large(0.0), LIMIT * (1 + 1e-9))
    assert not proven_finite(np.subtract, _large(0.0), -LIMIT * (1 + 1e-9))


# (float32 squares overflow from about 1.8e19: a magnitude of 1.04e18 is one it can bound)
MINE = 1.04e18


def test_a_product_is_proven_up_to_a_quarter_of_the_dtypes_range() -> None:
    assert proven_finite(np.multiply, _one(1e18), 0.98 * LIMIT / MINE)
    assert not proven_finite(np.multiply, _one(1e18), 1.02 * LIMIT / MINE)
    assert not proven_finite(np.multiply, _one(1e18), -1.02 * LIMIT / MINE)


def test_a_quotient_is_proven_up_to_a_quarter_of_the_dtypes_range() -> None:
    assert proven_finite(np.true_divide, _one(1e18), MINE / (0.98 * LIMIT))
    assert not proven_finite(np.true_divide, _one(1e18), MINE / (1.02 * LIMIT))
    assert not proven_finite(np.true_divide, _one(1e18), -MINE / (1.02 * LIMIT))
    assert proven_finite(np.true_divide, _one(1e18), np.array(MINE / (0.98 * LIMIT)))


# -------------------------------------------------------------------------------- blockwise


def test_blockwise_from_the_large_size_for_elementwise_ufuncs() -> None:
    assert blockwise(np.add, _large(), 1.0)
    assert not blockwise(np.add, _large()[1:], 1.0)  # one element under the size
    assert not blockwise(np.matmul, _large().reshape(512, -1), 1.0)  # (a signature)
    big = np.zeros((), dtype=np.dtype((np.void, LARGE)))  # 0-d, yet large
    assert not blockwise(np.add, big, 1.0)


@pytest.mark.parametrize("operand", [1, 1.5, True, np.float32(2.0), np.int8(1)])
def test_blockwise_for_a_number(operand: Any) -> None:
    assert blockwise(np.add, _large().reshape(512, -1), operand)


def test_blockwise_for_an_array_that_broadcasts_without_sharing_memory() -> None:
    array = _large().reshape(512, -1)
    assert blockwise(np.add, array, np.ones(array.shape[1], np.float32))  # a row
    assert blockwise(np.add, array, np.ones((512, 1), np.float32))  # a column
    assert blockwise(np.add, array, array.copy())
    assert not blockwise(np.add, array, np.ones((2, *array.shape), np.float32))  # more dims
    row = _large().reshape(1, -1)
    assert not blockwise(np.add, row, np.ones((4, 1), np.float32))  # broadcasts larger
    assert not blockwise(np.add, array, array)  # itself
    assert not blockwise(np.add, array, array[::-1])  # its memory, reversed
    assert not blockwise(np.add, array, [1.0])  # not an array


# ------------------------------------------------------------------------------- row_blocks


@pytest.mark.parametrize(
    ("array", "operand"),
    [
        (np.arange(24, dtype=np.float32).reshape(6, 4), 2.0),
        (np.arange(24, dtype=np.float32).reshape(6, 4), np.arange(24.0).reshape(6, 4)),
        (np.arange(24, dtype=np.float32).reshape(6, 4), np.arange(4.0)),
        (np.arange(24, dtype=np.float32).reshape(6, 4), np.arange(6.0).reshape(6, 1)),
        (np.arange(4, dtype=np.float32).reshape(1, 4), np.arange(4.0).reshape(1, 4)),
        (np.arange(BLOCK + 5, dtype=np.uint8), np.uint8(3)),
        (np.ones((3, BLOCK // 8 + 1)), np.arange(3.0).reshape(3, 1)),
    ],
    ids=["number", "same shape", "row", "column", "one row", "bytes", "rows over a block"],
)
def test_row_blocks_give_the_result_in_rows_of_one_block(array: Any, operand: Any) -> None:
    blocks = [block.copy() for block in row_blocks(np.multiply, array, operand)]
    result = np.concatenate(blocks)
    expected = np.multiply(array, operand, dtype=array.dtype, casting="same_kind")
    np.testing.assert_array_equal(result, expected)
    assert result.dtype == array.dtype
    rows = max(1, BLOCK // array[0].nbytes)
    assert [len(block) for block in blocks[:-1]] == [rows] * (len(blocks) - 1)
    assert 0 < len(blocks[-1]) <= rows


def test_row_blocks_of_one_byte_rows_hold_a_block_of_bytes() -> None:
    blocks = [len(b) for b in row_blocks(np.add, np.zeros(2 * BLOCK + 1, np.uint8), 1)]
    assert blocks == [BLOCK, BLOCK, 1]


# ------------------------------------------------------------- large in-place operations


def _big_rollout(**kwargs: Any) -> Any:
    """A rollout whose `rews` and `dones` are just over `_LARGE_BYTES`."""
    return example_rollout(num_steps=512, num_envs=520, num_actions=2, obs_shape=(1,), **kwargs)


@pytest.mark.parametrize("operand", [2.0, "row"])
def test_a_large_in_place_operation_is_stored(operand: Any) -> None:
    r = _big_rollout()
    before = np.array(r.rews)
    if operand == "row":
        operand = np.linspace(-1, 1, before.shape[1], dtype=np.float32)
    r.rews *= operand
    np.testing.assert_array_equal(r.rews, before * np.float32(operand))
    r.rews += operand
    r.rews -= 1e30
    r.rews /= 1e-8
    assert np.isfinite(r.rews).all()
    assert r.rews.base is not None
    assert not r.rews.flags.writeable


@pytest.mark.parametrize(
    ("op", "operand", "message"),
    [
        ("mul", 1e38, "rews must be finite, got inf at"),
        ("truediv", 1e-38, "rews must be finite, got "),
        ("add", np.float32(np.nan), "rews must be finite, got nan at"),
        ("mul", "nan row", "rews must be finite, got nan at"),
    ],
)
def test_a_large_in_place_operation_that_overflows_is_refused(
    op: str, operand: Any, message: str
) -> None:
    r = _big_rollout()
    r.rews[...] = 1e37
    before = np.array(r.rews)
    if operand == "nan row":
        operand = np.ones(before.shape[1], np.float32)
        operand[7] = np.nan
    with pytest.raises(ValueError, match=message), np.errstate(all="ignore"):
        getattr(r.rews, f"__i{op}__")(operand)
    np.testing.assert_array_equal(r.rews, before)


def test_a_large_in_place_operation_on_flags_is_checked() -> None:
    r = _big_rollout()
    before = np.array(r.dones)
    with pytest.raises(ValueError, match=r"^dones must hold only 0 and 1, got 2\.0 at"):
        r.dones *= 2
    r.dones *= 1
    np.testing.assert_array_equal(r.dones, before)
    with pytest.raises(ValueError, match=r"^dones must hold only 0 and 1, got 2\.0 at"):
        r.dones += np.float32(1)
    np.testing.assert_array_equal(r.dones, before)


def test_a_large_in_place_operation_is_checked_across_fields() -> None:
    r = _big_rollout(truncation=True)
    assert r.truncated is not None
    assert r.truncated.any()
    before = np.array(r.dones)
    with pytest.raises((ValueError, RolloutValidationError), match="truncated"):
        r.dones *= 0
    np.testing.assert_array_equal(r.dones, before)


# ------------------------------------------------------- arrays that belong to no rollout


def _state(array: Any) -> Any:
    """What `array.__setstate__` takes to become `array` (from its pickle)."""
    return array.__reduce__()[2]


def _selection() -> CheckedArray:
    selection = example_rollout(num_steps=4, num_envs=2).rews[[0, 2]]
    assert type(selection) is CheckedArray
    assert guard_of(selection) is None
    return selection


def test_a_selection_puts_resizes_and_restores_as_a_plain_array() -> None:
    x = _selection()
    x.put([0, 3], [np.nan, 5.0])
    assert np.isnan(x[0, 0])
    assert x[1, 1] == 5.0
    x.put([1], 7.0, mode="wrap")
    assert x[0, 1] == 7.0
    with pytest.raises(ValueError, match="does not own its data"):  # as NumPy's own
        x.resize(2)
    own = CheckedArray((2, 3))  # (a checked array that owns its memory, of no rollout)
    own[...] = np.arange(6.0).reshape(2, 3)
    own.resize(4, refcheck=False)
    np.testing.assert_array_equal(own, [0.0, 1.0, 2.0, 3.0])
    own.resize((1, 2), refcheck=False)
    assert own.shape == (1, 2)
    own.__setstate__(_state(np.arange(3.0)))
    np.testing.assert_array_equal(own, [0.0, 1.0, 2.0])


@pytest.mark.parametrize("op", ["iadd", "isub", "imul", "itruediv", "ipow"])
def test_a_selection_computes_in_place_unchecked(op: str) -> None:
    x = _selection()
    expected = getattr(np.array(x), f"__{op}__")(np.float32(2.0))
    assert getattr(x, f"__{op}__")(np.float32(2.0)) is x
    np.testing.assert_array_equal(x, expected)
    x += np.inf  # no rollout: no check
    assert np.isinf(x).all()


def test_the_in_place_operator_factory() -> None:
    operator = checked_module._in_place(np.add, np.ndarray.__iadd__)
    assert operator.__name__ == "__iadd__"
    x = _selection()
    assert operator(x, 1.0) is x
    r = example_rollout(num_steps=4, num_envs=2)
    before = np.array(r.rews)
    assert operator(r.rews, np.float32(1.0)) is r.rews
    np.testing.assert_array_equal(r.rews, before + np.float32(1.0))
    with pytest.raises(ValueError, match=r"^rews must be finite, got nan at \(t=0, b=0\)$"):
        operator(r.rews, np.nan)
    np.testing.assert_array_equal(r.rews, before + np.float32(1.0))


def test_a_rollouts_array_refuses_resize_and_setstate_by_name() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    with pytest.raises(ValueError, match=r"^rews cannot be resized: .* makes a resized copy$"):
        r.rews[1:].resize(2)
    with pytest.raises(ValueError, match=r"^dones cannot be restored in place: it is a rollout"):
        r.dones.__setstate__(_state(np.arange(3.0)))


def test_compute_casts_as_the_in_place_operator_does() -> None:
    result = compute(np.add, np.arange(3, dtype=np.float32), 1.5)
    assert result.dtype == np.float32
    assert result.tolist() == [1.5, 2.5, 3.5]
    with pytest.raises(TypeError):  # same_kind: a float cannot go into an integer array
        compute(np.add, np.arange(3, dtype=np.int32), 1.5)


def test_is_region_compares_memory_addresses() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    handle = r.rews.base
    assert handle is not None
    assert is_region(handle, 1, r.rews[1])
    assert not is_region(handle, 1, r.rews[2])  # same shape and strides, other memory
    assert not is_region(handle, 0, r.rews[1])
    assert not is_region(handle, 1, np.array(r.rews[1]))  # not a rollout's array
