"""The recorder's time-major log and its per-env position lookup, against plain Python models."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("gymnasium")

from trajkit.gym._log import Log, positions, rows_and_steps


@given(st.lists(st.tuples(st.integers(1, 90), st.integers(0, 90)), min_size=1, max_size=8))
def test_the_log_keeps_what_was_appended_and_not_dropped(plan: list[tuple[int, int]]) -> None:
    log = Log({"flag": np.bool_})
    names = ["x", "flag"]
    model: list[tuple[float, bool]] = []  # the live entries
    written = 0
    for appends, drops in plan:
        for _ in range(appends):
            log.append(names, [np.full(3, written, np.float32), np.array([written % 3])])
            model.append((float(written), bool(written % 3)))
            written += 1
        drops = min(drops, log.size - 1)
        log.drop(drops)
        del model[:drops]
        fields = log.fields()
        assert log.size == len(model)
        assert fields["x"][:, 0].tolist() == [x for x, _ in model]
        assert fields["flag"].dtype == np.bool_
        assert fields["flag"][:, 0].tolist() == [flag for _, flag in model]
        live = log.arrays["x"][log.start : log.end]
        np.testing.assert_array_equal(live, fields["x"])


@given(
    st.integers(1, 6).flatmap(
        lambda b: st.lists(st.lists(st.booleans(), min_size=b, max_size=b), min_size=1)
    ),
    st.integers(0, 5),
)
def test_positions_are_each_columns_first_true_entries(rows: list[list[bool]], count: int) -> None:
    mask = np.array(rows, dtype=bool)
    # Every column holds at least `count` of them.
    mask = np.concatenate([np.ones((count, mask.shape[1]), bool), mask])
    expected = np.array(
        [np.flatnonzero(mask[:, b])[:count] for b in range(mask.shape[1])], dtype=np.int64
    ).T.reshape(count, mask.shape[1])
    got = positions(mask, count)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


@given(
    st.integers(1, 5).flatmap(
        lambda b: st.tuples(
            st.lists(st.lists(st.booleans(), min_size=b, max_size=b), min_size=1, max_size=40),
            st.lists(st.booleans(), min_size=b, max_size=b),
        )
    ),
    st.booleans(),
)
def test_rows_and_steps_follow_the_step_by_step_recurrence(
    case: tuple[list[list[bool]], list[bool]], next_step: bool
) -> None:
    rows, pending = case
    ended = np.array(rows, dtype=bool)
    # The recurrence as the vector env runs it, one entry at a time.
    expected_new, expected_real = [], []
    has_row = np.array(pending, dtype=bool)
    for flags in ended:
        expected_real.append(has_row)
        has_row = ~(flags & has_row) if next_step else np.ones_like(flags)
        expected_new.append(has_row)
    new, real = rows_and_steps(ended, np.array(pending, dtype=bool), next_step)
    assert new.dtype == real.dtype == np.bool_
    np.testing.assert_array_equal(new, np.array(expected_new))
    np.testing.assert_array_equal(real, np.array(expected_real))


def test_rows_and_steps_golden_column() -> None:
    # One env under NEXT_STEP, worked by hand: an ending real step shows the final
    # observation (no row), the phantom reset after it shows a row and is not real, even if
    # its flags say ended (a second ending in a row).
    ended = np.array([[0], [1], [0], [1], [1], [1], [0]], dtype=bool)
    new, real = rows_and_steps(ended, np.array([True]), next_step=True)
    assert new[:, 0].tolist() == [True, False, True, False, True, False, True]
    assert real[:, 0].tolist() == [True, True, False, True, False, True, False]


def test_a_column_filled_later_grows_and_moves_with_the_log() -> None:
    log = Log({"later": np.int64})
    for i in range(3):
        log.append(["x"], [np.full(2, i, np.float32)])
    column = log.column("later", (2,))
    assert column.dtype == np.int64
    column[log.start : log.end] = np.arange(3)[:, None]
    log.drop(1)
    for i in range(3, 200):  # room is made (moves to the front, then larger arrays) many times
        log.append(["x"], [np.full(2, i, np.float32)])
    fields = log.fields()
    assert log.column("later", (2,)) is log.arrays["later"]
    assert fields["later"][:2, 0].tolist() == [1, 2]
    assert fields["x"][:2, 0].tolist() == [1.0, 2.0]
