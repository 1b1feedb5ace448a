"""Minari's libraries, imported lazily, and a tree walked along a Gymnasium space (both ways)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree

__all__ = ["along", "optional"]


def optional(name: str) -> Any:
    """Module `name` of Minari or Gymnasium, or an `ImportError` naming `trajkit[minari]`."""
    return require(name, "minari", "trajkit.minari")


def along(
    space: Any,
    tree: Any,
    what: str,
    leaf: Callable[[Any, AnyArray, str], AnyArray],
    which: str = "the space",
    path: _tree.Path = (),
) -> Any:
    """`leaf(space, array, name)` of each array of `tree` and its space, in the tree's shape.

    Dict and Tuple spaces give dicts and tuples; `tree` must have their keys or length, and
    each array a Box, Discrete, MultiDiscrete or MultiBinary space. `which` names the space
    in messages (`the space`, `the observation space`).
    """
    spaces = optional("gymnasium.spaces")
    name = _tree.format_path(what, path)
    if isinstance(space, spaces.Dict):
        if not isinstance(tree, dict) or set(tree) != set(space.spaces):
            got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
            raise ValueError(f"{name} have keys {got}, {which} {sorted(space.spaces)}")
        return {k: along(sub, tree[k], what, leaf, which, (*path, k)) for k, sub in space.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(tree, tuple) or len(tree) != len(space.spaces):
            got = f"{len(tree)} items" if isinstance(tree, tuple) else type(tree).__name__
            raise ValueError(f"{name} have {got}; {which} is a Tuple of {len(space.spaces)}")
        return tuple(along(s, tree[i], what, leaf, which, (*path, i)) for i, s in enumerate(space))
    if isinstance(tree, dict | tuple):
        raise ValueError(f"{name} are nested, but {which} is {space}")
    if not isinstance(
        space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary
    ):
        raise ValueError(
            f"{name}: {which} {space} is not one trajkit stores (Box, Discrete, "
            "MultiDiscrete, MultiBinary, and Dict and Tuple of them)"
        )
    return leaf(space, tree, name)
