"""The rule table at its boundaries: the fast test's edges, exact integers, positions in messages.

Each test here pins behaviour that a small change to `trajkit._models.rules` (a mutant of
`make mutate`) would break without any other test noticing: the fast test `Rule.passes` must
never pass a value the full check refuses, and must take the collection loop's writes;
positions are named with the axes given; nothing is copied where no conversion is needed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from trajkit._models.rules import (
    FIELD_RULES,
    OUTPUT_RULES,
    Rule,
    check_action_range,
    conform,
    conform_into,
    lossless,
    within_float32,
)

F32 = np.dtype(np.float32)
F32_MAX = float(np.finfo(np.float32).max)
EXACT = 2**24  # every integer up to this magnitude is exact in float32

REWS = FIELD_RULES["rews"]
DONES = FIELD_RULES["dones"]
OBSES = FIELD_RULES["obses"]
ACTIONS = OUTPUT_RULES["actions"]
ANY = OUTPUT_RULES["*"]

# (rule, value, storage dtype, whether the fast test passes it): the writes of a collection
# loop pass it; anything else is left to the full check.
PASSES: list[tuple[Rule, Any, np.dtype[Any], bool]] = [
    (REWS, 0.5, F32, True),
    (REWS, 1e30, F32, True),
    (REWS, F32_MAX, F32, True),
    (REWS, -F32_MAX, F32, True),
    (REWS, 1e39, F32, False),
    (REWS, 3, F32, True),
    (REWS, EXACT, F32, True),
    (REWS, -EXACT, F32, True),
    (REWS, EXACT + 1, F32, False),
    (REWS, -EXACT - 1, F32, False),
    (REWS, 0.5, np.dtype(np.float64), False),
    (DONES, 0, F32, True),
    (DONES, 1, F32, True),
    (DONES, 1.0, F32, True),
    (DONES, 2, F32, False),
    (DONES, 0.5, F32, False),
    (DONES, np.zeros(3, np.float32), F32, False),  # (flags: the full check)
    (REWS, np.array([0.5, -F32_MAX]), F32, True),
    (REWS, np.array([0.5, 1e39]), F32, False),
    (REWS, np.array([0.5, np.nan], np.float32), F32, False),
    (REWS, np.array([0.5, 2.0], np.float32), F32, True),
    (OBSES, np.array([0.5, 1e300]), np.dtype(np.float64), True),
    (OBSES, np.array([0.5, np.inf]), np.dtype(np.float64), False),
    (OBSES, np.array([1, 2], np.uint8), np.dtype(np.uint8), True),
    (ACTIONS, np.array([0, 2], np.int32), np.dtype(np.int32), True),
    (ANY, np.array([np.nan]), np.dtype(np.float64), True),  # (no finite rule)
    (REWS, np.array([EXACT + 1], np.int64), F32, False),  # (would be rounded: full check)
    (REWS, np.array([1], np.int64), F32, False),
    (REWS, [0.5], F32, False),
]


@pytest.mark.parametrize(("rule", "value", "dtype", "fast"), PASSES)
def test_the_fast_test_takes_the_collection_loops_writes(
    rule: Rule, value: Any, dtype: np.dtype[Any], fast: bool
) -> None:
    assert rule.passes(value, dtype) is fast


@pytest.mark.parametrize(("rule", "value", "dtype", "fast"), PASSES)
def test_the_fast_test_never_passes_what_the_full_check_refuses(
    rule: Rule, value: Any, dtype: np.dtype[Any], fast: bool
) -> None:
    if not rule.passes(value, dtype):
        return
    stored = conform_into(rule, dtype, value, "x")
    np.testing.assert_array_equal(stored, np.asarray(value, dtype))


def test_within_float32_is_inclusive_and_true_of_an_empty_array() -> None:
    assert within_float32(np.array([F32_MAX, -F32_MAX]))
    assert not within_float32(np.array([F32_MAX * 1.0000001]))
    assert within_float32(np.empty((0, 3)))
    assert not within_float32(np.array([np.nan]))


def test_the_stored_description_says_dtype_and_trailing_shape() -> None:
    described = {key: rule.stored_description() for key, rule in OUTPUT_RULES.items()}
    assert described == {
        "critic": "float32 with trailing shape ()",
        "log_probs": "float32 with trailing shape ()",
        "actor": "float32 with trailing shape (A,)",
        "actions": "int32 (integer spaces) or float32 (Box)",
        "*": "real with trailing shape (...)",
        "*scalar": "real with trailing shape ()",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: conform(REWS, [[0.0, np.nan]], "rews"),
            "rews must be finite, got nan at (t=0, b=1)",
        ),
        (
            lambda: conform_into(REWS, F32, [[0.0, np.nan]], "rews"),
            "rews must be finite, got nan at (t=0, b=1)",
        ),
        (
            lambda: conform_into(REWS, F32, [0.0, np.nan], "rews", axes="b"),
            "rews must be finite, got nan at (b=1)",
        ),
        (
            lambda: conform_into(OBSES, np.dtype(np.uint8), [0, 300], "obses", axes="b"),
            "obses must fit in uint8 [0, 255], got 300 at (b=1)",
        ),
        (
            lambda: conform_into(DONES, np.dtype(np.int8), [0, 2], "dones", axes="b"),
            "dones must hold only 0 and 1, got 2 at (b=1)",
        ),
        (
            lambda: conform_into(REWS, np.dtype(np.float16), [0.0, 1e5], "rews", axes="b"),
            "rews holds 100000.0 at (b=1), beyond float16's range",
        ),
        (
            lambda: lossless(np.array([0, EXACT + 1], np.int64), F32, "x", axes="b"),
            "x must be exactly representable in float32, got 16777217 at (b=1)",
        ),
        (
            lambda: check_action_range(np.array([0, 3]), 3, "a", axes="b"),
            "a must be in [0, A) with A=3 from model_outs['actor'], got 3 at (b=1)",
        ),
        (
            lambda: conform(ACTIONS, np.array([1, 2**40]), "a", axes="b"),
            "a must fit in int32 [-2147483648, 2147483647], got 1099511627776 at (b=1)",
        ),
        (
            lambda: conform(ACTIONS, [0.5, np.nan], "model_outs['actions']", axes="b"),
            "model_outs['actions'] must be finite, got nan at (b=1)",
        ),
        (
            lambda: conform(OBSES, [0, np.nan], "obses", axes="b"),
            "obses must be finite, got nan at (b=1)",
        ),
        (
            lambda: conform_into(REWS, F32, ["a"], "rews"),
            "rews must hold real numbers, got dtype <U1 (string)",
        ),
        (
            lambda: conform(ACTIONS, ["left"], "model_outs['actions']"),
            "model_outs['actions'] must hold real numbers",
        ),
        (
            lambda: lossless([1], np.dtype(np.complex128), "x"),
            "x cannot be stored as complex128: not a real numeric dtype",
        ),
    ],
)
def test_a_refusal_names_the_field_and_the_position_on_the_axes_given(
    call: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_conform_copies_by_default_and_not_when_asked() -> None:
    rews = np.zeros((2, 3), np.float32)
    assert not np.shares_memory(conform(REWS, rews, "rews"), rews)
    assert np.shares_memory(conform(REWS, rews, "rews", copy=False), rews)
    actions = np.zeros((2, 3), np.int32)
    assert np.shares_memory(conform(ACTIONS, actions, "a", copy=False), actions)
    boxes = np.zeros((2, 3), np.float32)
    assert np.shares_memory(conform(ACTIONS, boxes, "a", copy=False), boxes)


def test_a_value_already_of_the_storage_dtype_is_not_copied() -> None:
    row = np.zeros(4, np.float32)
    assert np.shares_memory(conform_into(REWS, F32, row, "rews"), row)
    assert np.shares_memory(lossless(row, F32, "rews"), row)


def test_min_ndim_overrides_the_rule_for_one_steps_row() -> None:
    assert conform(OUTPUT_RULES["critic"], 0.5, "critic", min_ndim=0).shape == ()
    assert conform(ACTIONS, 2, "a", min_ndim=0).dtype == np.int32  # one env's Discrete action
    assert conform(ACTIONS, 0.5, "a", min_ndim=0).dtype == np.float32  # one env's Box action
    assert conform(OBSES, 3, "obses", min_ndim=0).shape == ()
    for rule in (ACTIONS, OBSES):
        with pytest.raises(ValueError, match=re.escape("x must be an array with at least 1 dim")):
            conform(rule, 2, "x")
    with pytest.raises(ValueError, match="critic"):
        conform(OUTPUT_RULES["critic"], 0.5, "critic")


@pytest.mark.parametrize(
    ("value", "dtype", "shown"),
    [
        (np.array([1, 2**53 + 1], np.int64), np.float64, "9007199254740993 at (t=1)"),
        (np.array([1, 2**63 - 1], np.int64), np.float32, "9223372036854775807 at (t=1)"),
        (np.array([2**64 - 1], np.uint64), np.float32, "18446744073709551615 at (t=0)"),
        (np.array([0, 70000], np.int32), np.float16, "70000 at (t=1)"),
        (np.int64(EXACT + 1), np.float32, "16777217 (it would be rounded)"),
    ],
)
def test_integers_a_float_cannot_hold_are_refused_without_a_warning(
    value: Any, dtype: type, shown: str
) -> None:
    # (pytest turns warnings into errors: an overflow warning would fail this test.)
    with pytest.raises(ValueError, match=re.escape(shown)):
        lossless(value, np.dtype(dtype), "x")


def test_integers_a_float_holds_exactly_pass() -> None:
    assert lossless(np.array([2**53], np.int64), np.dtype(np.float64), "x")[0] == 2**53
    assert lossless(np.array([-128, 127], np.int8), np.dtype(np.float16), "x").tolist() == [
        -128.0,
        127.0,
    ]
    assert lossless(np.array([-2048, 2048], np.int16), np.dtype(np.float16), "x")[1] == 2048
