"""Gymnasium's vector infos, split per env: masks, nested dicts, JSON values, reported returns.

The recorder's tests run real envs, whose infos hold few shapes; here each rule of the split
is pinned on hand-made vector infos: a `_key` mask drops the key for the envs it is false
for, an array of length B is per env (anything else is the same for every env), values
become JSON's (recursively, object arrays too), SAME_STEP's `final_info` is merged for the
envs its mask names, and `episode["r"]` is read only where it is B numbers.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from trajkit.gym._infos import episode_returns, keeps_infos, step_info

B = 3


def _info(infos: dict[str, Any], b: int, keys: frozenset[str] | None = None) -> dict[str, Any]:
    info = step_info(infos, b, B, keys)
    assert json.loads(json.dumps(info)) == info  # JSON's values only
    return info


def test_a_mask_drops_its_key_for_the_envs_it_is_false_for() -> None:
    infos = {"x": np.array([1.0, 2.0, 3.0]), "_x": np.array([True, False, True]), "y": 5}
    assert [_info(infos, b) for b in range(B)] == [{"x": 1.0, "y": 5}, {"y": 5}, {"x": 3.0, "y": 5}]


def test_a_key_that_starts_with_an_underscore_is_kept_when_nothing_masks_it() -> None:
    infos = {"_private": np.array([1, 2, 3]), "_x": np.array([True, True, False])}
    assert _info(infos, 2) == {"_private": 3, "_x": False}


def test_per_env_values_are_split_and_the_rest_is_shared() -> None:
    infos = {
        "array": np.array([[1, 2], [3, 4], [5, 6]], np.int64),
        "list": ["a", "b", "c"],
        "tuple": (1.5, 2.5, 3.5),
        "short": np.array([1, 2]),  # not one per env: the same for each
        "scalar": np.float32(0.5),
        "zero_d": np.array(7),
        "long_list": [1, 2, 3, 4],
    }
    assert _info(infos, 1) == {
        "array": [3, 4],
        "list": "b",
        "tuple": 2.5,
        "short": [1, 2],
        "scalar": 0.5,
        "zero_d": 7,
        "long_list": [1, 2, 3, 4],
    }


def test_values_become_json_recursively() -> None:
    objects = np.empty(2, dtype=object)
    objects[:] = [np.int64(4), {"k": np.float64(1.5)}]
    infos = {
        "nested": {
            "a": np.array([1, 2, 3]),
            "_a": np.array([False, True, True]),
            "b": {3: np.int8(2)},
        },
        "objects": objects,
        "pairs": [(np.int32(1), np.bool_(True))],
    }
    assert _info(infos, 0) == {
        "nested": {"b": {"3": 2}},
        "objects": [4, {"k": 1.5}],
        "pairs": [[1, True]],
    }
    assert _info(infos, 2)["nested"]["a"] == 3


def test_final_info_is_merged_for_the_envs_its_mask_names() -> None:
    infos = {
        "x": np.array([1, 2, 3]),
        "final_obs": np.zeros((B, 2)),
        "_final_obs": np.array([False, True, False]),
        "final_info": {"x": np.array([10, 20, 30]), "ended": np.array([0, 1, 0])},
        "_final_info": np.array([False, True, False]),
    }
    assert _info(infos, 0) == {"x": 1}
    assert _info(infos, 1) == {"x": 20, "ended": 1}
    assert _info(infos, 1, frozenset({"ended"})) == {"ended": 1}
    assert step_info(infos, 1, B, frozenset()) == {}
    without_mask = {key: value for key, value in infos.items() if key != "_final_info"}
    assert _info(without_mask, 1) == {"x": 2}


@pytest.mark.parametrize(
    ("infos", "keys", "kept"),
    [
        ({}, None, False),
        ({"x": 1}, None, True),
        ({"x": 1}, frozenset(), False),
        ({"x": 1}, frozenset({"y"}), True),
        ({"final_obs": 1, "_final_obs": 1}, None, False),
        ({"final_info": {}, "_final_info": 1}, None, False),
        ({"final_info": {"a": 1}, "_final_info": 1}, None, True),
        ({"_x": 1}, None, True),  # no key `x`: not a mask
        ({"_final_obs": 1}, None, True),
        ({"x": 1, "_x": 1, "final_obs": 1}, None, True),
    ],
)
def test_keeps_infos(infos: dict[str, Any], keys: frozenset[str] | None, kept: bool) -> None:
    assert keeps_infos(infos, keys) is kept


def _episode(r: Any, **more: Any) -> dict[str, Any]:
    return {"episode": {"r": r, "l": np.array([1, 2, 3])}, **more}


@pytest.mark.parametrize(
    ("infos", "returns"),
    [
        (_episode(np.array([1.0, 2.0, 3.0])), {0: 1.0, 1: 2.0, 2: 3.0}),
        (_episode(np.array([1, 2, 3]), _episode=np.array([False, True, True])), {1: 2.0, 2: 3.0}),
        (_episode([True, False, True], _episode=[True, False, False]), {0: 1.0}),
        (_episode(np.array([1.0, 2.0])), {}),  # not one per env
        (_episode(np.array(["a", "b", "c"])), {}),
        (_episode(np.array([1.0, 2.0, 3.0]), _episode=np.array([True, False])), {}),
        ({"episode": {"l": np.array([1, 2, 3])}}, {}),
        ({"episode": [1.0, 2.0, 3.0]}, {}),
        ({}, {}),
    ],
)
def test_episode_returns(infos: dict[str, Any], returns: dict[int, float]) -> None:
    assert episode_returns(infos, B) == returns
    assert all(type(value) is float for value in episode_returns(infos, B).values())


def test_returns_in_final_info_win() -> None:
    infos = {
        **_episode(np.array([1.0, 2.0, 3.0]), _episode=np.array([True, True, False])),
        "final_info": _episode(np.array([7.0, 8.0, 9.0]), _episode=np.array([False, True, True])),
    }
    assert episode_returns(infos, B) == {0: 1.0, 1: 8.0, 2: 9.0}


def test_a_bad_source_is_skipped_not_the_next() -> None:
    infos = {
        **_episode(np.array([1.0, 2.0])),  # unusable
        "final_info": _episode(np.array([7.0, 8.0, 9.0]), _episode=np.array([False, True, False])),
    }
    assert episode_returns(infos, B) == {1: 8.0}
    infos = {"episode": "none", "final_info": _episode(np.array([7.0, 8.0, 9.0]))}
    assert episode_returns(infos, B) == {0: 7.0, 1: 8.0, 2: 9.0}
