"""Tree helpers: flatten/unflatten are inverses, paths render and parse back, errors name paths."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajkit._core.tree import (
    flatten,
    format_path,
    get_leaf,
    is_leaf,
    leaves,
    map_leaves,
    map_with_path,
    normalize,
    parse_path,
    paths,
    unflatten,
    unflatten_paths,
)

keys = st.text(min_size=0, max_size=5)
trees: st.SearchStrategy[Any] = st.recursive(
    st.integers(),
    lambda children: st.one_of(
        st.dictionaries(keys, children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3).map(tuple),
    ),
    max_leaves=10,
)


def reference_flatten(tree: Any, path: tuple[str | int, ...] = ()) -> list[Any]:
    if isinstance(tree, dict):
        return [pair for k in tree for pair in reference_flatten(tree[k], (*path, k))]
    if isinstance(tree, tuple):
        return [pair for i, v in enumerate(tree) for pair in reference_flatten(v, (*path, i))]
    return [(path, tree)]


@given(trees)
def test_flatten_matches_a_reference_walk(tree: Any) -> None:
    assert flatten(tree) == reference_flatten(tree)


@given(trees)
def test_unflatten_inverts_flatten(tree: Any) -> None:
    rebuilt = unflatten(tree, leaves(tree))
    assert rebuilt == tree
    assert flatten(rebuilt) == flatten(tree)  # order kept too


@given(trees)
def test_unflatten_paths_inverts_flatten(tree: Any) -> None:
    assert flatten(unflatten_paths(flatten(tree))) == flatten(tree)


@given(trees)
def test_map_leaves_keeps_structure(tree: Any) -> None:
    mapped = map_leaves(lambda x: x + 1, tree)
    assert paths(mapped) == paths(tree)
    assert leaves(mapped) == [x + 1 for x in leaves(tree)]
    assert map_with_path(lambda p, x: get_leaf(tree, p), tree) == tree


@given(st.lists(st.one_of(st.integers(0, 99), st.text(max_size=6)), max_size=4))
def test_parse_path_inverts_format_path(path: list[str | int]) -> None:
    assert parse_path(format_path("obses", path), "obses") == tuple(path)


def test_paths_render_as_python_subscripts() -> None:
    assert format_path("obses", ("image",)) == "obses['image']"
    assert format_path("obses", (1, "pos")) == "obses[1]['pos']"
    assert format_path("states", ()) == "states"


def test_normalize_makes_dicts_and_tuples() -> None:
    point = namedtuple("point", ["x", "y"])
    tree = normalize(OrderedDict(b=point(1, 2), a={"c": [3, 4]}))
    assert type(tree) is dict
    assert list(tree) == ["b", "a"]
    assert type(tree["b"]) is tuple
    assert tree["a"]["c"] == [3, 4]  # a list is a leaf
    leaf = np.zeros(3)
    assert normalize(leaf) is leaf


def test_leaves_are_everything_but_dicts_and_tuples() -> None:
    assert is_leaf(np.zeros(2))
    assert is_leaf([1, 2])
    assert not is_leaf({"a": 1})
    assert not is_leaf((1,))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"pos": {1: 0}}, r"^obses\['pos'\] must have str keys, got key 1 \(int\)$"),
        ({"pos": {}}, r"^obses\['pos'\] is an empty mapping: it holds no arrays$"),
        ((np.zeros(1), ()), r"^obses\[1\] is an empty tuple: it holds no arrays$"),
    ],
)
def test_normalize_refuses(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize(value, "obses")


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([], r"^no leaves to build a tree from$"),
        ([(("a",), 1), (("a", "b"), 2)], r"^path \"\['a'\]\" is both a leaf and a container$"),
        ([((0,), 1), ((2,), 2)], r"^tuple at 'the root' has indices \[0, 2\], expected 0..1$"),
        ([((0,), 1), (("a",), 2)], r"^'the root' mixes keys and indices$"),
    ],
)
def test_unflatten_paths_refuses(pairs: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        unflatten_paths(pairs)


@pytest.mark.parametrize("count", [1, 3])
def test_unflatten_refuses_the_wrong_number_of_leaves(count: int) -> None:
    with pytest.raises(ValueError, match=rf"^structure has 2 leaves, got {count}$"):
        unflatten((0, 0), list(range(count)))


def test_get_leaf_refuses_missing_paths() -> None:
    with pytest.raises(KeyError):
        get_leaf({"a": (1,)}, ("a", 1))
    with pytest.raises(KeyError):
        get_leaf({"a": (1,)}, (0,))


def test_parse_path_refuses_other_text() -> None:
    with pytest.raises(ValueError, match=r"^not a path under 'obses': 'states\[0\]'$"):
        parse_path("states[0]", "obses")
    with pytest.raises(ValueError, match=r"^not a path under 'obses': 'obses\[x\]'$"):
        parse_path("obses[x]", "obses")


def test_paths_lists_leaf_paths() -> None:
    assert paths(np.zeros(1)) == [()]
    assert paths({"a": (1, 2)}) == [("a", 0), ("a", 1)]
