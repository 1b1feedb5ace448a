"""trajkit.testing: `example_rollout`'s data is pinned, and `rollouts()` draws within its bounds.

Tests across the suite (and users' tests) build on `example_rollout(...)`'s exact values and
on the defaults its docstring gives, so its output for a seed is a golden value here; the
Hypothesis strategy `rollouts()` must refuse bounds that make no sense, reach both ends of
the bounds it is given, and draw nothing outside them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings

from trajkit import Rollout
from trajkit.testing import ACTION_KINDS, rollouts
from trajkit.testing import example_rollout as example


def _close(array: Any, expected: Any) -> None:
    np.testing.assert_allclose(np.asarray(array), expected, atol=5e-5)


def test_the_default_example_is_golden() -> None:
    r = example()
    assert (r.num_steps, r.batch_size) == (4, 2)
    assert np.asarray(r.dones).astype(int).tolist() == [[0, 0], [1, 1], [0, 0], [0, 0], [0, 0]]
    _close(r.rews, [[-0.7695, -1.4227], [0.2585, -0.5685], [-1.0298, -1.043], [0.2684, 0.3587]])
    _close(np.asarray(r.obses)[0, 0], [0.6304, 0.5812, 1.2946, -0.7546])
    _close(np.asarray(r.states)[0, 0], [-0.2586, 1.5835])
    arrays = r.model_outs.arrays
    assert list(arrays) == ["critic", "actions", "log_probs", "actor"]
    assert arrays["actions"].tolist() == [[1, 2], [0, 0], [2, 2], [0, 0], [2, 1]]
    _close(arrays["critic"][0], [-1.2591, 1.5139])
    _close(arrays["log_probs"][0], [-0.1503, -0.4503])
    _close(arrays["actor"][0, 0], [-0.6233, 0.0413, -2.325])
    assert r.infos is not None
    assert r.infos[1][0] == {"t": 1, "env": 0}
    assert r.infos[3][1] == {"t": 3, "env": 1}
    assert (r.truncated, r.final_values, r.final_obses) == (None, None, None)


def test_the_example_keeps_float32_and_int32() -> None:
    r = example(truncation=True, final_obs=True, done_prob=0.5)
    for array in (r.obses, r.states, r.rews, r.final_values, r.final_obses):
        assert np.asarray(array).dtype == np.float32
    assert r.model_outs.arrays["actions"].dtype == np.int32
    assert all(a.dtype == np.float32 for k, a in r.model_outs.arrays.items() if k != "actions")
    assert (np.asarray(r.model_outs.arrays["log_probs"]) <= 0).all()


def test_a_truncated_example_is_golden() -> None:
    r = example(num_steps=6, num_envs=3, truncation=True, seed=2, done_prob=0.5)
    assert np.asarray(r.dones).astype(int).tolist() == [
        [1, 1, 0],
        [1, 0, 0],
        [1, 1, 1],
        [0, 0, 1],
        [1, 0, 1],
        [0, 0, 0],
        [1, 1, 1],
    ]
    assert np.asarray(r.truncated).astype(int).tolist() == [
        [1, 0, 0],
        [0, 0, 1],
        [0, 0, 0],
        [1, 0, 0],
        [0, 0, 0],
        [0, 1, 1],
    ]
    _close(np.asarray(r.final_values)[0], [-0.4869, 0.0246, -0.3171])


def test_a_nested_example_is_golden() -> None:
    r = example(nested=True)
    assert isinstance(r.obses, dict)
    image = np.asarray(r.obses["image"])
    assert image.dtype == np.uint8
    assert image[0, 0].tolist() == [202, 106, 220, 212]
    assert isinstance(r.obses["proprio"], tuple)
    assert isinstance(r.states, dict)
    assert sorted(r.states) == ["c", "h"]
    assert all(np.asarray(v).dtype == np.float32 for v in r.states.values())
    finals = example(nested=True, final_obs=True, seed=3, done_prob=0.5).final_obses
    assert isinstance(finals, dict)
    assert np.asarray(finals["image"]).dtype == np.uint8
    assert np.asarray(finals["image"])[0].tolist() == [171, 207, 92, 111]
    flat = example(obs_shape=(2, 2), final_obs=True, seed=3, done_prob=0.5).final_obses
    _close(np.asarray(flat)[0].ravel(), [-0.8138, 1.5049, 0.6576, -0.3051])


@pytest.mark.parametrize(
    ("kind", "dtype", "first", "bounds"),
    [
        ("multi_discrete", np.int32, [2, 2, 2], (0, 2)),
        ("multi_binary", np.int32, [1, 1, 1], (0, 1)),
        ("box", np.float32, [0.3208, -0.8182, 0.7317], None),
    ],
)
def test_the_examples_action_kinds(kind: Any, dtype: Any, first: list[float], bounds: Any) -> None:
    actions = np.asarray(
        example(action_kind=kind, action_shape=(3,), seed=1).model_outs.arrays["actions"]
    )
    assert actions.dtype == dtype
    assert actions.shape == (5, 2, 3)
    _close(actions[0, 0], first)
    if bounds is not None:
        assert (actions.min(), actions.max()) == bounds


@pytest.mark.parametrize(
    ("kwargs", "steps", "envs"),
    [
        ({"min_steps": -1}, "[-1, 8]", "[1, 4]"),
        ({"min_steps": 3, "max_steps": 2}, "[3, 2]", "[1, 4]"),
        ({"min_envs": 0}, "[0, 8]", "[0, 4]"),
        ({"min_envs": 3, "max_envs": 2}, "[0, 8]", "[3, 2]"),
    ],
)
def test_rollouts_refuses_bounds_that_make_no_sense(kwargs: Any, steps: str, envs: str) -> None:
    steps = "[0, 8]" if "min_steps" not in kwargs else steps
    envs = "[1, 4]" if "min_envs" not in kwargs else envs
    message = (
        "need 0 <= min_steps <= max_steps and 1 <= min_envs <= max_envs, got "
        f"steps {steps} and envs {envs}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        rollouts(**kwargs)


@pytest.mark.parametrize("kinds", [[], ["discrete", "other"], ["other"]])
def test_rollouts_refuses_unknown_action_kinds(kinds: Any) -> None:
    message = f"action_kinds must be a non-empty collection of {list(ACTION_KINDS)}, got {kinds}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        rollouts(action_kinds=kinds)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_steps": 0, "max_steps": 0},
        {"min_steps": 3, "max_steps": 3, "min_envs": 1, "max_envs": 1},
        {"min_envs": 2, "max_envs": 2},
        {"action_kinds": list(ACTION_KINDS)},
    ],
)
def test_rollouts_takes_bounds_at_their_limits(kwargs: Any) -> None:
    assert isinstance(find(rollouts(**kwargs), lambda r: True), Rollout)


def _actions_width(r: Rollout) -> int:
    return int(r.model_outs.arrays["actor"].shape[-1])


@pytest.mark.parametrize(
    ("condition", "strategy"),
    [
        (lambda r: r.num_steps == 0, rollouts()),
        (lambda r: r.num_steps == 8, rollouts()),
        (lambda r: r.batch_size == 1, rollouts()),
        (lambda r: r.batch_size == 4, rollouts()),
        (lambda r: _actions_width(r) == 4, rollouts(keys={"actor"})),
        (lambda r: _actions_width(r) == 1, rollouts(keys={"actor"})),
        (lambda r: r.truncated is not None, rollouts()),
        (lambda r: r.truncated is None, rollouts()),
        (lambda r: r.model_outs.keys() == (), rollouts()),
        (lambda r: isinstance(r.obses, dict | tuple), rollouts(nested=None)),
        (lambda r: not isinstance(r.obses, dict | tuple), rollouts(nested=None)),
        (lambda r: r.final_obses is not None, rollouts(final_obs=None)),
        (lambda r: r.final_obses is None, rollouts(final_obs=None)),
    ],
)
def test_rollouts_reaches_the_ends_of_its_bounds(condition: Any, strategy: Any) -> None:
    find(strategy, condition, settings=settings(database=None, max_examples=2000))


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts())
def test_rollouts_defaults(r: Rollout) -> None:
    assert 0 <= r.num_steps <= 8
    assert 1 <= r.batch_size <= 4
    assert not isinstance(r.obses, dict | tuple)
    assert r.final_obses is None
    arrays = r.model_outs.arrays
    if "actor" in arrays:
        assert 1 <= _actions_width(r) <= 4
    if "actions" in arrays:
        assert arrays["actions"].shape == (r.num_steps + 1, r.batch_size)  # discrete only


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(
    rollouts(
        min_steps=2,
        max_steps=3,
        min_envs=2,
        max_envs=3,
        keys={"actor", "critic"},
        truncation=True,
        max_actions=2,
        nested=True,
        final_obs=True,
    )
)
def test_rollouts_keeps_to_its_arguments(r: Rollout) -> None:
    assert 2 <= r.num_steps <= 3
    assert 2 <= r.batch_size <= 3
    assert r.model_outs.keys() == ("critic", "actor")
    assert 1 <= _actions_width(r) <= 2
    assert r.truncated is not None
    assert r.final_values is not None
    assert isinstance(r.obses, dict | tuple)
    assert r.final_obses is not None
