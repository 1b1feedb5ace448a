"""`positions_in`: which elements of a rollout's array a write through any view of it reaches.

Messages name the position a refused write would have filled (`at (t=2, b=1)`), whatever
view it went through. The reference: the same view operations applied to an array of the
owner's C-order positions. Memory the owner does not hold, and strides that are not whole
elements, give `None` (no position is named).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajkit._models.checked import positions_in

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("slice"), st.integers(0, 2), st.integers(-3, 3), st.integers(-2, 2)),
        st.tuples(st.just("transpose")),
        st.tuples(st.just("index"), st.integers(0, 3)),
    ),
    max_size=4,
)


def _apply(array: Any, ops: list[tuple[Any, ...]]) -> Any:
    for op in ops:
        if op[0] == "transpose":
            array = array.T
        elif array.ndim == 0:
            break
        elif op[0] == "index":
            array = array[op[1] % array.shape[0], ...] if array.shape[0] else array
        else:
            _, start, stop, step = op
            array = array[slice(start, stop if stop else None, step or 1)]
    return array


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    order=st.sampled_from("CF"),
    parent=st.booleans(),
    ops=_OPS,
    pick=st.integers(0, 100),
)
def test_the_positions_a_view_writes_are_those_of_the_same_view_of_the_positions(
    shape: list[int], order: str, parent: bool, ops: list[tuple[Any, ...]], pick: int
) -> None:
    owner = np.zeros(shape, np.float32, order=order)  # type: ignore[call-overload]
    if parent:  # an owner that is itself a strided view of larger memory
        big = np.zeros([2 * n for n in shape], np.float32)
        owner = big[tuple(slice(None, None, 2) for _ in shape)][::-1]
    ids = np.arange(owner.size).reshape(owner.shape)
    target, expected = _apply(owner, ops), _apply(ids, ops)
    if target.size == 0:
        assert positions_in(owner, target, ...) is None
        return
    for index in (..., (), _an_index(target, pick)):
        found = positions_in(owner, target, index)
        assert found is not None
        assert found.dtype == np.intp
        np.testing.assert_array_equal(found, expected[index])


def _an_index(target: Any, pick: int) -> Any:
    if target.ndim == 0:
        return ()
    first = pick % target.shape[0]
    return (first, *(slice(None) for _ in range(target.ndim - 1)))


@pytest.mark.parametrize(
    ("owner", "target", "index", "expected"),
    [
        (np.zeros((3, 4)), lambda o: o[1:], (1, slice(0, 2)), [8, 9]),
        (np.zeros((3, 4)), lambda o: o[::-1, ::-2], (0, 0), 11),
        (np.zeros((3, 4)), lambda o: o.T[::-1], (0, slice(None)), [3, 7, 11]),
        (np.asfortranarray(np.zeros((3, 4))), lambda o: o.T, (1, 2), 9),
        (np.zeros((1, 1)), lambda o: o, (0, 0), 0),
        (np.zeros(5)[::-1], lambda o: o[1:3], slice(None), [1, 2]),
    ],
)
def test_positions_golden(owner: Any, target: Any, index: Any, expected: Any) -> None:
    found = positions_in(owner, target(owner), index)
    assert found is not None
    assert found.tolist() == expected


@pytest.mark.parametrize(
    ("owner", "target"),
    [
        (np.zeros((3, 4)), lambda o: np.zeros((3, 4))),  # other memory
        (np.zeros((3, 4))[1:], lambda o: o.base),  # more than the owner
        (np.zeros((3, 4))[:, 1:3], lambda o: o.base[:, 0]),  # beside it
        (np.zeros((3, 4)), lambda o: o.view(np.float32)),  # another item size
        (np.zeros((3, 4), np.float32), lambda o: o.view(np.uint8)[:, 1:5].view(np.float32)),
        (np.zeros((0, 4)), lambda o: o),  # empty
        (np.zeros((3, 4)), lambda o: o[:0]),
    ],
    ids=["other", "more", "beside", "itemsize", "unaligned", "empty owner", "empty target"],
)
def test_no_positions_where_the_memory_is_not_the_owners(owner: Any, target: Any) -> None:
    assert positions_in(owner, target(owner), ...) is None
