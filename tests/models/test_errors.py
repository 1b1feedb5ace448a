"""Validation errors read as trajkit's sentences: no pydantic noise, still pydantic's type."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import trajkit
from trajkit.testing import example_rollout

NOISE = ("Value error,", "validation error for", "input_value", "errors.pydantic.dev", "[type=")


def _refusal(action: str) -> trajkit.RolloutValidationError:
    r = example_rollout(num_steps=4, num_envs=2)
    bad = np.ones((5, 2))

    def construct() -> None:
        trajkit.Rollout(r.states, r.obses, bad, r.dones, None, r.model_outs)

    def assign() -> None:
        r.rews = bad

    def replace() -> None:
        r.replace(rews=bad)

    def revalidate() -> None:
        storage: Any = r.rews.base  # the storage: a documented way out, unchecked
        storage[1, 0] = np.inf
        r.revalidate()

    actions = {"construct": construct, "assign": assign, "replace": replace}
    with pytest.raises(trajkit.RolloutValidationError) as info:
        actions.get(action, revalidate)()
    return info.value


@pytest.mark.parametrize("action", ["construct", "assign", "replace", "revalidate"])
def test_the_first_line_is_the_field_the_problem_and_what_was_expected(action: str) -> None:
    err = _refusal(action)
    first = str(err).splitlines()[0]
    if action == "revalidate":
        assert first == "rews must be finite, got inf at (t=1, b=0)"
    else:
        assert first.startswith("rews has shape (5, 2), expected (T, B) = (4, 2); T=4 from dones")
    for noise in NOISE:
        assert noise not in str(err)
        assert noise not in repr(err)


def test_it_stays_a_pydantic_validation_error_and_a_value_error() -> None:
    err = _refusal("assign")
    assert isinstance(err, ValidationError)
    assert isinstance(err, ValueError)
    assert err.title == "Rollout"
    assert err.error_count() == 1
    (error,) = err.errors()
    assert error["type"] == "value_error"
    assert error["msg"].startswith("rews has shape (5, 2)")
    assert "url" in error
    assert "url" not in err.errors(include_url=False)[0]


def test_tracebacks_name_the_public_class() -> None:
    assert trajkit.RolloutValidationError.__module__ == "trajkit"
    assert repr(_refusal("replace")).startswith('RolloutValidationError("rews has shape')


def test_several_problems_give_one_line_each() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    with pytest.raises(trajkit.RolloutValidationError) as info:
        trajkit.Rollout(
            r.states,
            r.obses,
            np.ones((5, 2)),
            r.dones,
            None,
            r.model_outs,
            truncated=np.zeros((4, 2)),
        )
    lines = str(info.value).splitlines()
    assert lines[0].startswith("rews has shape (5, 2)")
    assert lines[1] == "truncated was given without final_values: give both or neither"


def test_a_field_rule_is_prefixed_by_its_field_only_when_the_message_does_not_name_it() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    with pytest.raises(trajkit.RolloutValidationError) as info:
        r.dones = np.full((5, 2), 0.5)
    assert str(info.value).startswith("dones must")
