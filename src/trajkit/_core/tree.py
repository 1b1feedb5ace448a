"""Nested structures of arrays (Gymnasium `Dict` and `Tuple` spaces): flatten, rebuild, map.

A *tree* is a leaf, a `dict` with `str` keys whose values are trees, or a `tuple` of trees.
Every other object is a leaf (usually an ndarray). A leaf's *path* is the tuple of keys and
indices that reaches it from the root, e.g. `("image",)` or `(1, "pos")`, rendered as
`obses['image']` or `obses[1]['pos']` in messages.

Order is stable: dicts in insertion order, tuples by index, depth first. `flatten` and
`unflatten` are inverses, so any per-leaf work is "flatten, work on the list, rebuild". Every
function here visits each container and leaf once and never looks inside a leaf, so the cost is
per leaf, never per element.

`normalize` turns what users pass (any `Mapping`, a `tuple` or `namedtuple`) into the canonical
`dict`/`tuple` form. A `list` is a leaf, not a container: nested lists are how arrays are
written by hand (`obses=[[0, 1], [2, 3]]`), and Gymnasium's `Tuple` space samples tuples.

Examples:
    >>> obs = {"image": np.zeros((3, 2, 4)), "pos": (np.ones((3, 2)), np.ones((3, 2, 2)))}
    >>> [(format_path("obses", p), leaf.shape) for p, leaf in flatten(obs)]
    [("obses['image']", (3, 2, 4)), ("obses['pos'][0]", (3, 2)), ("obses['pos'][1]", (3, 2, 2))]
    >>> map_leaves(lambda a: a.shape[-1], obs)
    {'image': 4, 'pos': (2, 2)}
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np  # noqa: F401  (used by the doctests)

__all__ = [
    "Path",
    "PathKey",
    "Tree",
    "TreePath",
    "fields_rebuilder",
    "flatten",
    "flatten_fields",
    "format_path",
    "get_leaf",
    "is_leaf",
    "leaves",
    "map_leaves",
    "map_with_path",
    "normalize",
    "parse_path",
    "paths",
    "structure_of",
    "unflatten",
    "unflatten_paths",
]


PathKey: TypeAlias = "str | int"
"""One step of a path: a dict key (`str`) or a tuple index (`int`)."""

TreePath: TypeAlias = "tuple[str | int, ...]"
"""The keys and indices from the root to a leaf; `()` is the root itself (a bare leaf)."""
Path: TypeAlias = TreePath
"""The former name of `TreePath` (not `pathlib.Path`), until the integrations use `TreePath`."""

Tree: TypeAlias = Any
"""A leaf, a `dict[str, Tree]` or a `tuple[Tree, ...]`.

Typed as `Any`: NumPy arrays are not distinguishable from containers by a static type checker
in a useful way, and callers know which leaves they hold.
"""


def is_leaf(value: object) -> bool:
    """Whether `value` is a leaf: anything but a `dict` or a `tuple`.

    Examples:
        >>> is_leaf(np.zeros(3)), is_leaf([1, 2]), is_leaf({"a": 1}), is_leaf((1,))
        (True, True, False, False)
    """
    return not isinstance(value, dict | tuple)


def normalize(value: Any, name: str = "value") -> Tree:
    """Turn user input into the canonical tree form: `dict` for mappings, `tuple` for tuples.

    Any `Mapping` becomes a `dict` (insertion order kept); a `tuple`, `namedtuple` included,
    becomes a plain `tuple`; everything else, lists included, is a leaf and is returned as it
    is. A bare leaf comes back unchanged (the same object), so the flat case costs nothing.

    Args:
        value: A leaf or a nested mapping/tuple structure.
        name: The field name to put in messages.

    Returns:
        The same structure built from `dict` and `tuple` only.

    Raises:
        ValueError: If a mapping has a key that is not a `str`, or a mapping or tuple is empty
            (a structure with no leaves binds no dimensions). The message names the path.

    Examples:
        >>> from collections import OrderedDict
        >>> normalize(OrderedDict(b=(1, 2), a=[3]))
        {'b': (1, 2), 'a': [3]}
        >>> normalize({"pos": {1: 0}}, "obses")
        Traceback (most recent call last):
        ...
        ValueError: obses['pos'] must have str keys, got key 1 (int)
    """
    return _normalize(value, name, ())


def _normalize(value: Any, name: str, path: TreePath) -> Tree:
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"{format_path(name, path)} is an empty mapping: it holds no arrays")
        out: dict[str, Tree] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(
                    f"{format_path(name, path)} must have str keys, "
                    f"got key {key!r} ({type(key).__name__})"
                )
            out[key] = _normalize(item, name, (*path, key))
        return out
    if isinstance(value, tuple):
        if not value:
            raise ValueError(f"{format_path(name, path)} is an empty tuple: it holds no arrays")
        return tuple(_normalize(item, name, (*path, i)) for i, item in enumerate(value))
    return value


def _walk(tree: Tree, path: TreePath, out: list[tuple[TreePath, Any]]) -> None:
    if isinstance(tree, dict):
        for key, item in tree.items():
            _walk(item, (*path, key), out)
    elif isinstance(tree, tuple):
        for i, item in enumerate(tree):
            _walk(item, (*path, i), out)
    else:
        out.append((path, tree))


def flatten(tree: Tree) -> list[tuple[TreePath, Any]]:
    """The `(path, leaf)` pairs of `tree`, depth first, dicts in insertion order.

    A bare leaf gives `[((), leaf)]`.

    Examples:
        >>> flatten({"a": 1, "b": (2, {"c": 3})})
        [(('a',), 1), (('b', 0), 2), (('b', 1, 'c'), 3)]
        >>> flatten(np.int8(5))
        [((), np.int8(5))]
    """
    out: list[tuple[TreePath, Any]] = []
    _walk(tree, (), out)
    return out


def leaves(tree: Tree) -> list[Any]:
    """The leaves of `tree` in `flatten` order.

    Examples:
        >>> leaves({"a": 1, "b": (2, 3)})
        [1, 2, 3]
    """
    return [leaf for _, leaf in flatten(tree)]


def paths(tree: Tree) -> list[TreePath]:
    """The leaf paths of `tree` in `flatten` order.

    Examples:
        >>> paths({"a": 1, "b": (2, 3)})
        [('a',), ('b', 0), ('b', 1)]
    """
    return [path for path, _ in flatten(tree)]


def unflatten(structure: Tree, new_leaves: Iterable[Any]) -> Tree:
    """Rebuild the structure of `structure` with `new_leaves` in `flatten` order.

    Args:
        structure: A tree whose containers are copied; its leaves are ignored.
        new_leaves: Exactly as many leaves as `structure` has.

    Returns:
        A new tree of `dict`s and `tuple`s (or the single leaf, for a bare leaf).

    Raises:
        ValueError: If the number of leaves differs.

    Examples:
        >>> unflatten({"a": 0, "b": (0, 0)}, [1, 2, 3])
        {'a': 1, 'b': (2, 3)}
        >>> unflatten({"a": 0}, [1, 2])
        Traceback (most recent call last):
        ...
        ValueError: structure has 1 leaves, got 2
    """
    items = list(new_leaves)
    it = iter(items)
    try:
        out = _rebuild(structure, it)
    except StopIteration:
        out = it  # too few leaves
    if out is it or next(it, it) is not it:
        raise ValueError(f"structure has {len(flatten(structure))} leaves, got {len(items)}")
    return out


def _rebuild(structure: Tree, it: Iterator[Any]) -> Tree:
    if isinstance(structure, dict):
        return {key: _rebuild(item, it) for key, item in structure.items()}
    if isinstance(structure, tuple):
        return tuple([_rebuild(item, it) for item in structure])  # a list: StopIteration stays
    return next(it)


def map_leaves(fn: Callable[[Any], Any], tree: Tree) -> Tree:
    """Apply `fn` to every leaf, keeping the structure.

    Examples:
        >>> map_leaves(lambda x: x * 10, {"a": 1, "b": (2, 3)})
        {'a': 10, 'b': (20, 30)}
        >>> map_leaves(lambda x: x + 1, 1)
        2
    """
    if isinstance(tree, dict):
        return {key: map_leaves(fn, item) for key, item in tree.items()}
    if isinstance(tree, tuple):
        return tuple([map_leaves(fn, item) for item in tree])
    return fn(tree)


def map_with_path(fn: Callable[[TreePath, Any], Any], tree: Tree) -> Tree:
    """Apply `fn(path, leaf)` to every leaf, keeping the structure.

    Useful to validate leaves with messages that name them.

    Examples:
        >>> map_with_path(lambda p, x: format_path("obses", p), {"a": 1, "b": (2,)})
        {'a': "obses['a']", 'b': ("obses['b'][0]",)}
    """
    return _map_with_path(fn, tree, ())


def _map_with_path(fn: Callable[[TreePath, Any], Any], tree: Tree, path: TreePath) -> Tree:
    if isinstance(tree, dict):
        return {key: _map_with_path(fn, item, (*path, key)) for key, item in tree.items()}
    if isinstance(tree, tuple):
        return tuple([_map_with_path(fn, item, (*path, i)) for i, item in enumerate(tree)])
    return fn(path, tree)


def get_leaf(tree: Tree, path: TreePath) -> Any:
    """The leaf (or subtree) of `tree` at `path`.

    Raises:
        KeyError: If `path` does not exist in `tree`.

    Examples:
        >>> get_leaf({"a": (1, {"b": 2})}, ("a", 1, "b"))
        2
    """
    node = tree
    for key in path:
        in_dict = isinstance(node, dict) and isinstance(key, str) and key in node
        in_tuple = isinstance(node, tuple) and isinstance(key, int) and 0 <= key < len(node)
        if not (in_dict or in_tuple):
            raise KeyError(path)
        node = node[key]
    return node


def structure_of(tree: Tree) -> Tree:
    """The structure alone, every leaf replaced by `None`: what `unflatten` needs, no arrays.

    Examples:
        >>> structure_of({"a": np.zeros(2), "b": (np.zeros(1),)})
        {'a': None, 'b': (None,)}
    """
    return map_leaves(lambda _: None, tree)


def unflatten_paths(pairs: Iterable[tuple[TreePath, Any]]) -> Tree:
    """Build a tree from `(path, leaf)` pairs, as `flatten` returns them.

    `str` keys make dicts (in first-seen order), `int` keys make tuples (the indices of each
    tuple must be exactly 0..n-1). Useful where leaves come from storage by path, e.g. the
    members of a file.

    Raises:
        ValueError: If the paths do not describe a tree: a leaf and a container at one path, a
            container mixing keys and indices, missing tuple indices, or no pairs at all.

    Examples:
        >>> unflatten_paths([(("b", 1), 2), (("a",), 0), (("b", 0), 1)])
        {'b': (1, 2), 'a': 0}
        >>> unflatten_paths([((), 7)])
        7
    """
    items = list(pairs)
    if not items:
        raise ValueError("no leaves to build a tree from")
    return _from_pairs(items, ())


def _from_pairs(items: list[tuple[TreePath, Any]], prefix: TreePath) -> Tree:
    depth = len(prefix)
    if any(len(path) == depth for path, _ in items):
        if len(items) != 1:
            raise ValueError(f"path {format_path('', prefix)!r} is both a leaf and a container")
        return items[0][1]
    groups: dict[str | int, list[tuple[TreePath, Any]]] = {}
    for path, leaf in items:
        groups.setdefault(path[depth], []).append((path, leaf))
    keys = list(groups)
    if all(isinstance(k, str) for k in keys):
        return {k: _from_pairs(groups[k], (*prefix, k)) for k in keys}
    indices = [k for k in keys if isinstance(k, int) and not isinstance(k, bool)]
    if len(indices) == len(keys):
        if sorted(indices) != list(range(len(indices))):
            raise ValueError(
                f"tuple at {format_path('', prefix) or 'the root'!r} has indices "
                f"{sorted(indices)}, expected 0..{len(indices) - 1}"
            )
        return tuple(_from_pairs(groups[i], (*prefix, i)) for i in range(len(indices)))
    raise ValueError(f"{format_path('', prefix) or 'the root'!r} mixes keys and indices")


def format_path(name: str, path: Sequence[str | int]) -> str:
    """Render a path after a field name: `obses['image']`, `obses[1]['pos']`.

    Keys are written with `repr`, so any string key round-trips through `parse_path`.

    Examples:
        >>> format_path("obses", ("image",))
        "obses['image']"
        >>> format_path("obses", (1, "pos"))
        "obses[1]['pos']"
        >>> format_path("obses", ())
        'obses'
    """
    return name + "".join(f"[{key!r}]" for key in path)


_STEP = re.compile(r"\[(\d+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


def parse_path(text: str, name: str = "") -> TreePath:
    """Parse what `format_path` wrote back into a path.

    Args:
        text: E.g. `"obses[1]['pos']"`.
        name: The field name expected in front (`""` for none).

    Returns:
        The path, e.g. `(1, 'pos')`.

    Raises:
        ValueError: If `text` is not `name` followed by `[index]` / `['key']` steps.

    Examples:
        >>> parse_path("obses[1]['pos']", "obses")
        (1, 'pos')
        >>> parse_path(format_path("", ("it's", 0)))
        ("it's", 0)
        >>> parse_path("obses.pos", "obses")
        Traceback (most recent call last):
        ...
        ValueError: not a path under 'obses': 'obses.pos'
    """
    if len(text) <= 256:  # files of one structure repeat their paths: remember short ones
        return _parse_path_cached(text, name)
    return _parse_path(text, name)


def _parse_path(text: str, name: str) -> TreePath:
    if not text.startswith(name):
        raise ValueError(f"not a path under {name!r}: {text!r}")
    rest = text[len(name) :]
    out: list[str | int] = []
    pos = 0
    while pos < len(rest):
        match = _STEP.match(rest, pos)
        if match is None:
            raise ValueError(f"not a path under {name!r}: {text!r}")
        token = match.group(1)
        out.append(int(token) if token[0].isdigit() else ast.literal_eval(token))
        pos = match.end()
    return tuple(out)


_parse_path_cached = functools.lru_cache(maxsize=256)(_parse_path)


def flatten_fields(fields: Mapping[str, Tree]) -> dict[str, Any]:
    """Flatten named trees into one dict keyed by rendered path: `{"obses['image']": leaf}`.

    A field that is a bare leaf keeps its name as key, so flat data passes through unchanged.
    This lets code written for a dict of arrays (e.g. `trajkit.gather`) work on nested fields;
    `fields_rebuilder` puts the structure back.

    Raises:
        ValueError: If two leaves render to the same key (a field literally named like the
            path of another field's leaf).

    Examples:
        >>> flatten_fields({"obses": {"image": 1, "pos": (2,)}, "rews": 3})
        {"obses['image']": 1, "obses['pos'][0]": 2, 'rews': 3}
    """
    flat: dict[str, Any] = {}
    for name, tree in fields.items():
        for path, leaf in flatten(tree):
            key = format_path(name, path)
            if key in flat:
                raise ValueError(f"two arrays are both named {key!r}")
            flat[key] = leaf
    return flat


def fields_rebuilder(
    structure: Mapping[str, Tree],
) -> Callable[[Mapping[str, Any]], dict[str, Tree]]:
    """The inverse of `flatten_fields` for one structure, with the keys worked out once.

    For rebuilding many batches of the same fields (one per minibatch, say).

    Examples:
        >>> rebuild = fields_rebuilder({"obses": {"a": 0, "b": (0,)}, "rews": 0})
        >>> rebuild({"obses['a']": 1, "obses['b'][0]": 2, "rews": 3})
        {'obses': {'a': 1, 'b': (2,)}, 'rews': 3}
    """
    plan = [
        (name, None if is_leaf(tree) else tree, [format_path(name, p) for p in paths(tree)])
        for name, tree in structure.items()
    ]

    def rebuild(flat: Mapping[str, Any]) -> dict[str, Tree]:
        out: dict[str, Tree] = {}
        for name, tree, keys in plan:
            if tree is None:
                out[name] = flat[name]
            else:
                out[name] = _rebuild(tree, iter([flat[key] for key in keys]))
        return out

    return rebuild
