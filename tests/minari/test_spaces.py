"""trajkit.minari's walk of a tree along a Gymnasium space: the names its refusals give.

`along` passes the field's name, the path so far and the words for the space (`which`) down
into every Dict and Tuple, so a refusal deep in a nested space names the leaf and the space
the caller named.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

from gymnasium import spaces

from trajkit._base.types import AnyArray
from trajkit.minari._spaces import along, optional

BOX = spaces.Box(-1.0, 1.0, (2,), np.float32)
NESTED = spaces.Dict({"a": spaces.Tuple((BOX, spaces.Dict({"b": BOX})))})
WHICH = "the observation space"


def _walk(space: Any, tree: Any) -> tuple[Any, list[str]]:
    """`along` with a leaf function that records each leaf's name."""
    names: list[str] = []

    def leaf(_space: Any, array: AnyArray, name: str) -> AnyArray:
        names.append(name)
        return array

    return along(space, tree, "obses", leaf, WHICH), names


def test_each_leaf_is_given_its_name_in_the_trees_shape() -> None:
    x, y = np.zeros(2, np.float32), np.ones(2, np.float32)
    walked, names = _walk(NESTED, {"a": (x, {"b": y})})
    assert names == ["obses['a'][0]", "obses['a'][1]['b']"]
    assert walked["a"][0] is x
    assert walked["a"][1]["b"] is y


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (
            {"a": (np.zeros(2), {"c": np.zeros(2)})},
            "obses['a'][1] have keys ['c'], the observation space ['b']",
        ),
        (
            {"a": (np.zeros(2), np.zeros(2))},
            "obses['a'][1] have keys ndarray, the observation space ['b']",
        ),
        (
            {"a": (np.zeros(2),)},
            "obses['a'] have 1 items; the observation space is a Tuple of 2",
        ),
        ({"a": [np.zeros(2)]}, "obses['a'] have list; the observation space is a Tuple of 2"),
        (
            {"a": (np.zeros(2), {"b": {"c": np.zeros(2)}})},
            f"obses['a'][1]['b'] are nested, but the observation space is {BOX}",
        ),
    ],
)
def test_a_refusal_deep_in_a_nested_space_names_the_leaf_and_the_space(
    tree: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _walk(NESTED, tree)


def test_a_space_trajkit_does_not_store_is_refused_by_name() -> None:
    text = spaces.Text(5)
    message = (
        f"obses['a']: the observation space {text} is not one trajkit stores (Box, Discrete, "
        "MultiDiscrete, MultiBinary, and Dict and Tuple of them)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _walk(spaces.Dict({"a": text}), {"a": np.zeros(2)})


def test_a_missing_library_names_the_extra_that_installs_it() -> None:
    message = "trajkit.minari needs no_such_module; install it with: pip install 'trajkit[minari]'"
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        optional("no_such_module.spaces")
