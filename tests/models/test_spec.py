"""RolloutSpec: built from rollouts, JSON round trips, readable problems, refused specs."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # installed with trajkit[ray], part of dev
import numpy as np
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from trajkit import OutputSpec, RolloutSpec
from trajkit._core.tree import flatten
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts


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
    # A field is flat (obs_shape, obs_dtype) or nested (obs_leaves): the validator picks.
    assert set(schema["required"]) == {"model_outputs"}
    assert {"obs_shape", "obs_dtype", "obs_leaves", "state_shape", "state_leaves"} <= set(
        schema["properties"]
    )
    assert schema["additionalProperties"] is False
    assert "float32" in schema["properties"]["obs_dtype"]["anyOf"][0]["enum"]
    assert "OutputSpec" in schema["$defs"]


# ------------------------------------------------------------------ nested fields, any actions


@settings(max_examples=30)
@given(rollouts(max_steps=3, max_envs=2, nested=True, action_kinds=ACTION_KINDS))
def test_every_nested_rollout_conforms_to_its_own_spec(r: Any) -> None:
    spec = RolloutSpec.from_rollout(r)
    assert spec.check(r) == []
    assert RolloutSpec.model_validate_json(spec.model_dump_json()) == spec
    for name in ("obses", "states"):
        assert [path for path, _ in spec.leaves(name)] == [p for p, _ in flatten(getattr(r, name))]


def test_flat_specs_dump_the_json_they_always_did() -> None:
    data = json.loads(RolloutSpec.from_rollout(example_rollout()).model_dump_json())
    assert "obs_leaves" not in data
    assert "state_leaves" not in data
    assert data["obs_shape"] == [4]


def test_nested_spec_names_leaves_in_order() -> None:
    r = example_rollout(nested=True, action_kind="box", action_shape=(3,))
    spec = RolloutSpec.from_rollout(r)
    assert (spec.obs_shape, spec.obs_dtype, spec.state_shape) == (None, None, None)
    assert spec.obs_leaves is not None
    assert list(spec.obs_leaves) == ["['image']", "['proprio'][0]", "['proprio'][1]['goal']"]
    assert spec.obs_leaves["['image']"] == OutputSpec(shape=(4,), dtype="uint8")
    assert spec.model_outputs["actions"] == OutputSpec(shape=(3,), dtype="float32")
    data = json.loads(spec.model_dump_json())
    assert data["obs_leaves"]["['proprio'][1]['goal']"] == {"shape": [2], "dtype": "float32"}
    assert "obs_shape" not in data
    assert "obs_dtype" not in data


def test_the_json_schema_accepts_dumped_specs_and_one_form_per_field() -> None:
    schema = RolloutSpec.model_json_schema()
    for r in (example_rollout(), example_rollout(nested=True, action_kind="multi_binary")):
        jsonschema.validate(json.loads(RolloutSpec.from_rollout(r).model_dump_json()), schema)
    flat = json.loads(RolloutSpec.from_rollout(example_rollout()).model_dump_json())
    both = {**flat, "obs_leaves": {"['a']": {"shape": [], "dtype": "uint8"}}}
    neither = {k: v for k, v in flat.items() if k != "state_shape"}
    for bad in (both, neither):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_check_names_the_leaf_paths() -> None:
    r = example_rollout(nested=True)
    spec = RolloutSpec.from_rollout(r)
    assert spec.obs_leaves is not None
    leaves = dict(spec.obs_leaves)
    leaves["['image']"] = OutputSpec(shape=(5,), dtype="float32")
    leaves["['depth']"] = OutputSpec(shape=(), dtype="uint8")
    del leaves["['proprio'][0]"]
    changed = spec.model_copy(update={"obs_leaves": leaves})
    assert changed.check(r) == [
        "obses['depth'] is in the spec but missing",
        "obses['proprio'][0] is not in the spec",
        "obses['image']: per-step shape (4,), but the spec says (5,)",
        "obses['image']: dtype uint8, but the spec says float32",
    ]
    flat = RolloutSpec.from_rollout(example_rollout())
    assert flat.check(r)[:2] == [
        "obses is nested (leaves obses['image'], obses['proprio'][0], "
        "obses['proprio'][1]['goal']), but the spec says an array",
        "states is nested (leaves states['h'], states['c']), but the spec says an array",
    ]
    assert spec.check(example_rollout())[0] == (
        "obses is an array, but the spec says nested (leaves obses['image'], "
        "obses['proprio'][0], obses['proprio'][1]['goal'])"
    )
    swapped = r.replace(states={"c": r.states["c"], "h": r.states["h"]})
    assert spec.check(swapped) == [
        "states has its leaves in the order [\"['c']\", \"['h']\"], but the spec says "
        "[\"['h']\", \"['c']\"]"
    ]
    assert spec.compare(RolloutSpec.from_rollout(swapped)) == spec.check(swapped)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"obs_shape": None}, r"give obs_shape and obs_dtype \(flat\) or obs_leaves \(nested\) \["),
        ({"state_shape": None}, r"give state_shape \(flat\) or state_leaves \(nested\) \["),
        (
            {"obs_leaves": {"['a']": {"shape": [], "dtype": "uint8"}}},
            r"give obs_shape and obs_dtype \(flat\) or obs_leaves \(nested\), not both",
        ),
        (
            {
                "obs_shape": None,
                "obs_dtype": None,
                "obs_leaves": {"image": {"shape": [], "dtype": "uint8"}},
            },
            r"obs_leaves must be the leaf paths of a dict/tuple structure: not a path under '': "
            r"'image'",
        ),
        (
            {
                "obs_shape": None,
                "obs_dtype": None,
                "obs_leaves": {"[1]": {"shape": [], "dtype": "uint8"}},
            },
            r"obs_leaves must be the leaf paths of a dict/tuple structure: tuple at 'the root' has "
            r"indices \[1\], expected 0..0",
        ),
        (
            {"state_shape": None, "state_leaves": {"['h']": {"shape": [2], "dtype": "float64"}}},
            r"state_leaves\[\"\['h'\]\"\] must be float32, got float64",
        ),
        (
            {"model_outputs": {"actions": {"shape": [2], "dtype": "float64"}}},
            r"model_outputs\['actions'\] must be int32 \(integer spaces\) or float32 \(Box\) "
            r"\(as Rollout stores it\), got float64 \(2,\)",
        ),
    ],
)
def test_invalid_nested_specs_are_refused(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        RolloutSpec.model_validate(spec_dict(**changes))


def test_actions_of_every_space_have_a_spec() -> None:
    for kind in ACTION_KINDS:
        r = example_rollout(action_kind=kind, action_shape=(2, 2))
        assert RolloutSpec.from_rollout(r).check(r) == []
