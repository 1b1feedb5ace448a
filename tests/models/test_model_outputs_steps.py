"""Steps of model outputs: written whole, built from obs-tower2's list of dicts, placeholders.

A step written into stored outputs (`model_outs[t] = {...}`) must have each key's row shape
and dtype kind (float outputs and integer `actions` convert), and is checked by the key's rule
with the env's position in messages; a row of `None` allocates a key filled in later, as
`int32` for `actions`, only for rows of one value per env, and cannot be written back.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from trajkit import Rollout
from trajkit._models.model_outputs_build import build_outputs, first_step_rows, is_placeholder
from trajkit.testing import example_rollout


def _rollout() -> Rollout:
    r = example_rollout(num_steps=3, num_envs=2)
    outs = {key: np.array(array) for key, array in r.model_outs.arrays.items()}
    outs["lr"] = np.full(4, 0.5, np.float32)  # one value per step
    return r.replace(model_outs=outs)


def _step(r: Rollout, **rows: Any) -> dict[str, Any]:
    step = {key: np.array(value) for key, value in r.model_outs[1].items()}
    step.update(rows)
    return step


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"critic": [1.0, np.nan]}, "model_outs[1]['critic'] must be finite, got nan at (b=1)"),
        (
            {"critic": [1.0, 2.0, 3.0]},
            "model_outs[1]['critic'] has shape (3,), expected (2,) like "
            "model_outs[0]['critic'] (B=2)",
        ),
        (
            {"actor": np.zeros((2, 4))},
            "model_outs[1]['actor'] has shape (2, 4), expected (2, 3) like "
            "model_outs[0]['actor'] (B=2)",
        ),
        (
            {"lr": np.array([1.0])},
            "model_outs[1]['lr'] has shape (1,), expected () like model_outs[0]['lr']",
        ),
        (
            {"lr": np.int32(3)},
            "model_outs[1]['lr'] has dtype int32 (integer), expected the same kind as "
            "model_outs[0]['lr'] (float32, float)",
        ),
        (
            {"actions": [1.5, 2.0]},
            "model_outs[1]['actions'] must be integer-valued, got 1.5 at (b=0)",
        ),
        (
            {"actions": np.array(["a", "b"])},
            "model_outs[1]['actions'] must hold real numbers, got dtype <U1 (string)",
        ),
    ],
)
def test_a_step_written_whole_is_checked_like_step_0(rows: dict[str, Any], message: str) -> None:
    r = _rollout()
    before = {key: np.array(array) for key, array in r.model_outs.arrays.items()}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        r.model_outs[1] = _step(r, **rows)
    for key, array in r.model_outs.arrays.items():
        np.testing.assert_array_equal(array, before[key])


def test_a_step_written_whole_converts_into_the_stored_dtypes() -> None:
    r = _rollout()
    r.model_outs[1] = _step(
        r,
        critic=np.array([1, 2], np.int64),
        log_probs=np.array([-1.0, -2.0], np.float64),
        actions=np.array([1.0, 2.0]),
        lr=np.float64(0.25),
    )
    arrays = r.model_outs.arrays
    assert arrays["critic"][1].tolist() == [1.0, 2.0]
    assert arrays["critic"].dtype == np.float32
    assert arrays["log_probs"][1].tolist() == [-1.0, -2.0]
    assert arrays["actions"][1].tolist() == [1, 2]
    assert arrays["actions"].dtype == np.int32
    assert arrays["lr"][1] == 0.25
    r.model_outs[2] = _step(r, actions=np.array([True, False]))
    assert arrays["actions"][2].tolist() == [1, 0]


@pytest.mark.parametrize(
    ("value", "placeholder"),
    [
        ([None], True),
        ((None, None), True),
        (np.array([None, None]), True),
        ([], False),
        ((), False),
        (np.array([], object), False),
        (np.array([None, 1]), False),
        ([None, 0], False),
        (np.array([0.0, 0.0]), False),
        (None, False),
    ],
)
def test_is_placeholder(value: Any, placeholder: bool) -> None:
    assert is_placeholder(value) is placeholder


def _with_placeholders(key: str, rows: list[Any]) -> Rollout:
    r = example_rollout(num_steps=3, num_envs=2)
    steps = [{k: np.array(v) for k, v in r.model_outs[t].items()} for t in range(4)]
    for step, row in zip(steps, rows, strict=True):
        step[key] = row
    return r.replace(model_outs=steps)


def test_placeholders_allocate_a_key_filled_in_later() -> None:
    r = _with_placeholders("actions", [[None, None]] * 4)
    assert r.model_outs.arrays["actions"].dtype == np.int32
    assert r.model_outs.incomplete() is not None
    r2 = _with_placeholders("critic", [[None, None], [1.0, 2.0], [None, None], [3.0, 4.0]])
    assert r2.model_outs.arrays["critic"].dtype == np.float32
    np.testing.assert_array_equal(r2.model_outs.arrays["critic"], [[0, 0], [1, 2], [0, 0], [3, 4]])
    r2.model_outs[0] = {k: np.array(v) for k, v in r2.model_outs[0].items()} | {
        "critic": [5.0, 6.0]
    }
    np.testing.assert_array_equal(r2.model_outs.arrays["critic"][0], [5.0, 6.0])


def test_a_placeholder_cannot_be_written_back() -> None:
    r = _with_placeholders("critic", [[None, None], [1.0, 2.0], [None, None], [3.0, 4.0]])
    step = {k: np.array(v) for k, v in r.model_outs[1].items()} | {"critic": [None, None]}
    with pytest.raises(
        ValueError,
        match=r"^model_outs\[1\]\['critic'\] must be an array of values, got a row of None$",
    ):
        r.model_outs[1] = step


def test_placeholders_stand_for_one_value_per_env_only() -> None:
    steps = [{"x": np.zeros((2, 2))}, {"x": [None, None]}]
    message = (
        "model_outs[...]['x'] mixes rows of None with rows of shape (2, 2): "
        "None placeholders stand for one value per env"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build_outputs(steps, copy=False)


def test_placeholder_masks_mark_the_rows_of_none() -> None:
    built = build_outputs(
        [{"critic": [None, None] if t != 1 else np.ones(2), "x": np.ones(2)} for t in range(3)],
        copy=False,
    )
    assert built.unset is not None
    assert list(built.unset) == ["critic"]
    assert built.unset["critic"].dtype == np.bool_
    assert built.unset["critic"].tolist() == [[True, True], [False, False], [True, True]]
    assert built.arrays["critic"].tolist() == [[0, 0], [1, 1], [0, 0]]


@pytest.mark.parametrize(
    ("step", "batch", "message"),
    [
        (
            {"critic": np.zeros(3)},
            2,
            "model_outs[0]['critic'] has shape (3,), expected (2, ...) (B=2)",
        ),
        ({"x": np.zeros(3)}, 2, "model_outs[0]['x'] has shape (3,), expected (2, ...) (B=2)"),
        (
            {"critic": np.float32(1)},
            2,
            "model_outs[0]['critic'] must be an array with at least 1 dimension(s), got a scalar",
        ),
        ({1: np.zeros(2)}, 2, "model_outs keys must be strings, got 1"),
        (
            {"actions": [1.5, 2.0], "actor": np.zeros((2, 3))},
            None,
            "model_outs[0]['actions'] must be integer-valued",
        ),
    ],
)
def test_first_step_rows_refuses(step: dict[Any, Any], batch: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        first_step_rows(step, batch)


def test_first_step_rows_converts_by_the_rules() -> None:
    rows = first_step_rows({"lr": np.float64(1), "critic": [1, 2]}, 2)
    assert rows["lr"].shape == ()
    assert rows["critic"].dtype == np.float32
    discrete = first_step_rows({"actions": np.array([1.0, 2.0]), "actor": np.zeros((2, 3))}, 2)
    assert discrete["actions"].dtype == np.int32
    box = first_step_rows({"actions": np.array([1.5, 2.0])}, None)
    assert box["actions"].dtype == np.float32
    assert first_step_rows({"critic": np.zeros(5)}, None)["critic"].shape == (5,)
