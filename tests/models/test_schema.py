"""Each field's facts live in one declaration: the tables elsewhere are derived from it."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from tests.mutation_report import UNDER_MUTMUT
from trajkit import ModelOutputs
from trajkit._base.deprecation import REMOVAL, deprecated
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._models import spec
from trajkit._models.rules import (
    FIELD_RULES,
    FLOAT32_OUTPUTS,
    PER_ENV_SCALAR_OUTPUTS,
    all_finite,
    check_action_range,
    lossless,
    within_float32,
)
from trajkit.testing import example_rollout


def test_derived_tables_follow_the_rules() -> None:
    assert FLOAT32_OUTPUTS == ("critic", "log_probs", "actor")
    assert PER_ENV_SCALAR_OUTPUTS == ("critic", "log_probs")
    assert spec._KNOWN_OUTPUTS == {
        "critic": (("float32",), 0, "float32 with trailing shape ()"),
        "log_probs": (("float32",), 0, "float32 with trailing shape ()"),
        "actor": (("float32",), 1, "float32 with trailing shape (A,)"),
        "actions": (("int32", "float32"), None, "int32 (integer spaces) or float32 (Box)"),
    }
    assert {name: rule.file_dtype for name, rule in FIELD_RULES.items()} == {
        "states": "float32",
        "obses": None,
        "rews": "float32",
        "dones": "float32",
        "truncated": "float32",
        "final_values": "float32",
        "final_obses": None,
    }


def test_arrow_types_follow_the_rules() -> None:
    assert {name: rule.arrow_type for name, rule in FIELD_RULES.items()} == {
        "states": "float32",
        "obses": None,
        "rews": "float32",
        "dones": "bool",
        "truncated": "bool",
        "final_values": "float32",
        "final_obses": None,
    }


def test_file_members_take_their_dtype_from_the_rules() -> None:
    r = example_rollout(num_steps=3, num_envs=2, truncation=True)
    members = {m.name: m.dtype for m in RolloutFileMetadata.from_rollout(r).arrays()}
    for field in ("rews", "dones", "truncated", "final_values"):
        assert members[f"{field}.npy"] == FIELD_RULES[field].file_dtype


@pytest.mark.parametrize(
    ("actions", "num_actions", "axes", "message"),
    [
        (np.array([[0, 2], [1, 3]]), 3, "tb", "got 3 at (t=1, b=1)"),
        (np.array([0, -1]), 2, "b", "got -1 at (b=1)"),
        (np.array(5), 5, "", "got 5"),
    ],
)
def test_the_action_range_rule(
    actions: np.ndarray, num_actions: int, axes: str, message: str
) -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"x must be in [0, A) with A={num_actions} from model_outs['actor'], {message}"
        )
        + "$",
    ):
        check_action_range(actions, num_actions, "x", axes)
    check_action_range(np.clip(actions, 0, num_actions - 1), num_actions, "x", axes)


def test_every_door_refuses_out_of_range_actions_with_the_one_message() -> None:
    r = example_rollout(num_steps=3, num_envs=2, num_actions=3)
    expected = "must be in [0, A) with A=3 from model_outs['actor'], got 3"
    with pytest.raises(ValueError, match=re.escape(expected)):
        r.model_outs[1]["actions"][0] = 3
    with pytest.raises(ValueError, match=re.escape(expected)):
        r.model_outs[1]["actions"] = [0, 3]
    bad = np.array(r.model_outs.arrays["actions"])
    bad[2, 1] = 3
    arrays = {**r.model_outs.arrays, "actions": bad}
    with pytest.raises(ValueError, match=re.escape(expected + " at (t=2, b=1)")):
        r.replace(model_outs=arrays)


def test_fast_tests_agree_with_the_full_checks() -> None:
    f32 = np.dtype(np.float32)
    assert all_finite(np.array([1.0, -2.0]))
    with np.errstate(invalid="ignore"):  # (inf - inf warns: the sum is the fast test)
        assert not all_finite(np.array([np.inf, -np.inf]))
    with np.errstate(all="raise"):  # the writes' fast test never warns
        assert not FIELD_RULES["rews"].passes(np.array([np.inf, -np.inf], np.float32), f32)
    assert not all_finite(np.array([np.nan]))
    assert within_float32(np.array([3.4e38]))
    assert not within_float32(np.array([3.5e38]))
    assert not within_float32(np.array([np.nan]))
    rews = FIELD_RULES["rews"]
    assert rews.passes(2**24, f32)
    assert not rews.passes(2**24 + 1, f32)  # the full check decides (and refuses)
    assert not rews.passes(np.array([1.0, np.inf]), f32)
    assert not FIELD_RULES["dones"].passes(np.array([0.0, 1.0]), f32)  # arrays: full check


@pytest.mark.parametrize(
    ("value", "dtype", "exact"),
    [
        (2**24, np.float32, True),
        (-(2**24), np.float32, True),
        (2**24 + 1, np.float32, False),
        (-(2**24) - 1, np.float32, False),
        (2**53, np.float64, True),
        (2**53 + 1, np.float64, False),
        (-(2**53) - 1, np.float64, False),
    ],
)
def test_lossless_int_to_float_precision_boundaries(value: int, dtype: type, exact: bool) -> None:
    array = np.array([0, value], np.int64)
    if exact:
        assert lossless(array, np.dtype(dtype), "x").tolist() == [0.0, float(value)]
    else:
        with pytest.raises(
            ValueError,
            match=re.escape(
                f"x must be exactly representable in {np.dtype(dtype)}, got {value} at (t=1)"
            ),
        ):
            lossless(array, np.dtype(dtype), "x")


def test_a_write_beyond_float32_precision_is_refused() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    r.rews[0, 0] = 2**24
    assert r.rews[0, 0] == 2**24
    with pytest.raises(
        ValueError, match=re.escape("rews must be exactly representable in float32, got 16777217")
    ):
        r.rews[0, 1] = 2**24 + 1


def test_indexing_model_outputs_by_key_says_what_to_write() -> None:
    outs = ModelOutputs({"actions": np.zeros((3, 2), np.int32)})
    with pytest.raises(
        TypeError,
        match=re.escape(
            "model_outs['actions']: model_outs is a sequence of T+1 steps, indexed by step "
            "(keys: ['actions']); use model_outs[t]['actions'] for step t's [B, ...] row, or "
            "model_outs.arrays['actions'] for the stacked [T+1, B, ...] array"
        ),
    ):
        outs["actions"]  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=re.escape("(no key 'critic'; keys: ['actions'])")):
        outs["critic"]  # type: ignore[call-overload]


def test_one_deprecation_helper() -> None:
    def old_api() -> int:
        deprecated("trajkit.old_api", "trajkit.new_api")
        return 1

    with pytest.warns(
        DeprecationWarning,
        match=re.escape(
            f"trajkit.old_api is deprecated and will be removed in trajkit {REMOVAL}: "
            "use trajkit.new_api"
        ),
    ) as caught:
        assert old_api() == 1
    if not UNDER_MUTMUT:  # its trampoline's frames lie between the caller and the warning
        assert caught[0].filename == __file__  # the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DeprecationWarning):
            deprecated("a", "b", removal="9.9")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            [[1, 2**40]],
            "must fit in int32 [-2147483648, 2147483647], got 1099511627776 at (t=0, b=1)",
        ),
        ([[1.5]], "must be integer-valued, got 1.5 at (t=0, b=0)"),
        ([[np.nan]], "must be finite, got nan at (t=0, b=0)"),
    ],
)
def test_one_integer_conversion_for_the_constructor_and_lossless(
    value: list[list[float]], message: str
) -> None:
    from trajkit._models.arrays import as_int32

    for convert in (
        lambda: as_int32(np.array(value), "a", copy=True),
        lambda: lossless(np.array(value), np.dtype(np.int32), "a"),
    ):
        with pytest.raises(ValueError, match=re.escape(f"a {message}") + "$"):
            convert()


def test_one_overflow_check_for_every_float_dtype() -> None:
    expected = "x holds 1e+300 at (t=1), beyond float32's range (+-3.403e+38): stored as float32"
    with pytest.raises(ValueError, match=re.escape(expected)):
        lossless(np.array([0.0, 1e300]), np.dtype(np.float32), "x")
    with pytest.raises(ValueError, match=re.escape("x holds 1e+300 at (t=1), beyond float16's")):
        lossless(np.array([0.0, 1e300]), np.dtype(np.float16), "x")
    from trajkit._models.arrays import as_float32

    with pytest.raises(ValueError, match=re.escape(expected)):
        as_float32(np.array([0.0, 1e300]), "x", copy=True, axes="t")
