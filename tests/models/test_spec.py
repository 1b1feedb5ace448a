"""RolloutSpec: built from rollouts, JSON round trips, readable problems, refused specs."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from trajkit import OutputSpec, RolloutSpec
from trajkit.testing import example_rollout, rollouts


def spec_dict(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "obs_shape": [84, 84, 4],
        "obs_dtype": "uint8",
        "state_shape": [0],
        "model_outputs": {
            "critic": {"shape": [], "dtype": "float32"},
            "actions": {"shape": [], "dtype": "int32"},
            "actor": {"shape": [6], "dtype": "float32"},
            "features": {"shape": [2, 3], "dtype": "float16"},
        },
    }
    base.update(changes)
    return base


@settings(max_examples=40)
@given(rollouts(max_steps=4, max_envs=3))
def test_every_rollout_conforms_to_its_own_spec(r: Any) -> None:
    spec = RolloutSpec.from_rollout(r)
    assert spec.check(r) == []
    assert spec.compare(spec, num_steps=r.num_steps, num_envs=r.batch_size) == []
    assert RolloutSpec.model_validate_json(spec.model_dump_json()) == spec
    assert list(spec.model_outputs) == list(r.model_outs.keys())
    assert spec.has_truncation == (r.truncated is not None)


def test_from_rollout_records_per_step_shapes_and_canonical_dtypes() -> None:
    r = example_rollout(num_steps=5, num_envs=3, obs_shape=(2, 7), num_actions=4, truncation=True)
    r = r.replace(obses=r.obses.astype(">f8"))
    spec = RolloutSpec.from_rollout(r)
    assert spec.obs_shape == (2, 7)
    assert spec.obs_dtype == "float64"  # the name, whatever the byte order
    assert spec.state_shape == (2,)
    assert spec.state_dtype == "float32"
    assert spec.model_outputs["actor"] == OutputSpec(shape=(4,), dtype="float32")
    assert spec.model_outputs["actions"] == OutputSpec(shape=(), dtype="int32")
    assert spec.has_truncation is True
    assert (spec.min_steps, spec.max_steps, spec.min_envs, spec.max_envs) == (None,) * 4


def test_a_hand_written_spec_file_loads() -> None:
    spec = RolloutSpec.model_validate_json(json.dumps(spec_dict(min_steps=1, max_envs=64)))
    assert spec.obs_shape == (84, 84, 4)
    assert spec.model_outputs["features"].shape == (2, 3)
    assert spec.has_truncation is False  # the default


def test_check_reports_every_difference_readably() -> None:
    r = example_rollout(num_steps=4, num_envs=2, obs_shape=(3,), truncation=True)
    spec = RolloutSpec.model_validate(
        spec_dict(
            obs_shape=[5],
            state_shape=[1],
            min_steps=8,
            max_envs=1,
            model_outputs={
                "critic": {"shape": [], "dtype": "float32"},
                "actor": {"shape": [6], "dtype": "float32"},
                "values2": {"shape": [], "dtype": "float32"},
            },
        )
    )
    assert spec.check(r) == [
        "obses: per-step shape (3,), but the spec says obs_shape (5,)",
        "obses: dtype float32, but the spec says obs_dtype uint8",
        "states: per-step shape (2,), but the spec says state_shape (1,)",
        "model_outs['actor']: trailing shape (3,), but the spec says (6,)",
        "model_outs: key 'values2' is in the spec but missing",
        "model_outs: key 'actions' is not in the spec",
        "model_outs: key 'log_probs' is not in the spec",
        "truncated/final_values are present, but the spec says has_truncation=false",
        "T=4 is below the spec's min_steps=8",
        "B=2 is above the spec's max_envs=1",
    ]


def test_dtype_of_unknown_model_outputs_is_checked() -> None:
    r = example_rollout(keys=("critic",))
    r = r.replace(model_outs={**r.model_outs.arrays, "mask": np.zeros((5, 2), np.uint8)})
    spec = RolloutSpec.from_rollout(r)
    other = r.replace(model_outs={**r.model_outs.arrays, "mask": np.zeros((5, 2), bool)})
    assert spec.check(other) == ["model_outs['mask']: dtype bool, but the spec says uint8"]


def test_missing_truncation_and_bounds() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    spec = RolloutSpec.from_rollout(r).model_copy(
        update={"has_truncation": True, "max_steps": 3, "min_envs": 3}
    )
    assert spec.check(r) == [
        "truncated/final_values are missing, but the spec says has_truncation=true",
        "T=4 is above the spec's max_steps=3",
        "B=2 is below the spec's min_envs=3",
    ]


def test_check_describes_dtypes_no_spec_can_hold() -> None:
    r = example_rollout()
    r = r.replace(obses=r.obses.astype(np.longdouble))
    spec = RolloutSpec.from_rollout(example_rollout())
    problems = spec.check(r)
    assert len(problems) == 1
    assert problems[0].startswith("obses: dtype float")
    if np.dtype(np.longdouble).itemsize > 8:
        with pytest.raises(ValidationError):
            RolloutSpec.from_rollout(r)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"obs_dtype": "object"}, "obs_dtype"),
        ({"obs_dtype": "f4"}, "obs_dtype"),
        ({"obs_dtype": "float128"}, "obs_dtype"),
        ({"obs_dtype": "complex64"}, "obs_dtype"),
        ({"state_dtype": "float64"}, "state_dtype"),
        ({"obs_shape": [-1]}, "obs_shape"),
        ({"obs_shape": [1] * 31}, "obs_shape"),
        ({"min_steps": -1}, "min_steps"),
        ({"min_envs": 0}, "min_envs"),
        ({"min_steps": 5, "max_steps": 4}, "min_steps=5 is greater than max_steps=4"),
        ({"unknown": 1}, "unknown"),
        ({"model_outputs": {"critic": {"shape": [1], "dtype": "float32"}}}, "critic"),
        ({"model_outputs": {"actions": {"shape": [], "dtype": "int64"}}}, "actions"),
        ({"model_outputs": {"actor": {"shape": [], "dtype": "float32"}}}, r"\(A,\)"),
        ({"model_outputs": {"x": {"shape": [], "dtype": "float32", "y": 1}}}, "y"),
    ],
)
def test_invalid_specs_are_refused(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        RolloutSpec.model_validate(spec_dict(**changes))


def test_specs_are_frozen() -> None:
    spec = RolloutSpec.model_validate(spec_dict())
    with pytest.raises(ValidationError):
        spec.obs_dtype = "float32"  # type: ignore[misc]


def test_json_schema_is_json_and_describes_the_fields() -> None:
    schema = RolloutSpec.model_json_schema()
    json.dumps(schema)
    assert set(schema["required"]) == {"obs_shape", "obs_dtype", "state_shape", "model_outputs"}
    assert schema["additionalProperties"] is False
    assert "float32" in schema["properties"]["obs_dtype"]["enum"]
    assert "OutputSpec" in schema["$defs"]
