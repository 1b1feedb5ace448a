"""Each field's validator, as `_array_check` and `field_validator` build it from the rule table.

The validators in `FIELD_CHECKS` are built once, when `trajkit` is imported; these tests
build them again and require what the rollout's own validators give: the same stored arrays
(guarded under the field's or the leaf's name, with the field's axes in messages), the same
refusals, `None` only where the field is optional, and a copy only when asked for one.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from trajkit._models.checked import CheckedArray, guard_of
from trajkit._models.guards import FieldGuard
from trajkit._models.rollout_checks import FIELD_CHECKS, _array_check, field_validator
from trajkit._models.rules import FIELD_RULES
from trajkit.testing import example_rollout

ARRAY_FIELDS = [name for name in FIELD_CHECKS if name in FIELD_RULES]
NESTED = [name for name in ARRAY_FIELDS if FIELD_RULES[name].nested]


def _plain(value: Any) -> Any:
    """A field's value as the caller would give it: plain arrays in plain containers."""
    if isinstance(value, dict):
        return {key: _plain(leaf) for key, leaf in value.items()}
    if isinstance(value, tuple | list):
        return type(value)(_plain(leaf) for leaf in value)
    return np.array(value)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, leaf in value.items():
            yield from _leaves(leaf, f"{path}[{key!r}]")
    elif isinstance(value, tuple | list):
        for i, leaf in enumerate(value):
            yield from _leaves(leaf, f"{path}[{i}]")
    else:
        yield path, value


def _value(name: str, nested: bool) -> Any:
    r = example_rollout(num_steps=3, num_envs=2, nested=nested, truncation=True, final_obs=True)
    return _plain(getattr(r, name))


def _same_stored(mine: Any, theirs: Any, name: str) -> None:
    assert [path for path, _ in _leaves(mine)] == [path for path, _ in _leaves(theirs)]
    for (path, a), (_, b) in zip(_leaves(mine), _leaves(theirs), strict=True):
        assert type(a) is type(b) is CheckedArray
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
        ga, gb = guard_of(a), guard_of(b)
        assert isinstance(ga, FieldGuard)
        assert isinstance(gb, FieldGuard)
        assert ga.owner is a.base
        assert gb.owner is b.base
        assert (ga.name, ga.field, ga.axes, ga.rule) == (gb.name, gb.field, gb.axes, gb.rule)
        assert ga.name == f"{name}{path}"
        assert ga.field == name


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", ARRAY_FIELDS)
def test_a_rebuilt_check_stores_what_the_rollouts_check_stores(name: str, nested: bool) -> None:
    check = _array_check(name)
    assert check.__name__ == f"_v_{name}"
    value = _value(name, nested)
    _same_stored(check(value, True), FIELD_CHECKS[name](value, True), name)


@pytest.mark.parametrize("name", ARRAY_FIELDS)
def test_the_axes_of_a_field_are_its_lower_case_symbols(name: str) -> None:
    stored = _array_check(name)(_value(name, False), True)
    _path, leaf = next(_leaves(stored))
    expected = "".join(d[0].lower() for d in FIELD_RULES[name].dims.split() if d != "...")
    guard = guard_of(leaf)
    assert isinstance(guard, FieldGuard)
    assert guard.axes == expected


@pytest.mark.parametrize("name", ARRAY_FIELDS)
def test_a_rebuilt_check_refuses_as_the_rollouts_check(name: str) -> None:
    value = _value(name, False)
    bad = np.array(value, dtype=np.float64)
    bad.reshape(-1)[-1] = np.nan if name != "dones" else 2.0
    with pytest.raises(ValueError, match=name) as theirs:
        FIELD_CHECKS[name](bad, True)
    with pytest.raises(ValueError, match=name) as mine:
        _array_check(name)(bad, True)
    assert str(mine.value) == str(theirs.value)
    assert name in str(mine.value)
    assert "at (" in str(mine.value)


@pytest.mark.parametrize("name", NESTED)
def test_a_rebuilt_check_names_the_bad_leaf(name: str) -> None:
    value = _value(name, True)
    leaves = list(_leaves(value))
    path, leaf = next((p, x) for p, x in leaves if x.dtype.kind == "f")
    leaf.reshape(-1)[0] = np.inf
    with pytest.raises(ValueError, match="must be finite") as theirs:
        FIELD_CHECKS[name](value, True)
    with pytest.raises(ValueError, match="must be finite") as mine:
        _array_check(name)(value, True)
    assert str(mine.value) == str(theirs.value)
    assert str(mine.value).startswith(f"{name}{path} must be finite")


@pytest.mark.parametrize("name", ARRAY_FIELDS)
def test_none_only_where_the_field_is_optional(name: str) -> None:
    check = _array_check(name)
    if FIELD_RULES[name].optional:
        assert check(None, True) is None
    else:
        with pytest.raises(ValueError, match=name):
            check(None, True)


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", ARRAY_FIELDS)
@pytest.mark.parametrize("copy", [False, True])
def test_a_copy_only_when_asked(name: str, nested: bool, copy: bool) -> None:
    value = _value(name, nested)
    stored = _array_check(name)(value, copy)
    for (_, given), (_, kept) in zip(_leaves(value), _leaves(stored), strict=True):
        assert np.shares_memory(given, kept) is (not copy)


def _info(context: Any) -> Any:
    return SimpleNamespace(context=context)


@pytest.mark.parametrize("name", list(FIELD_CHECKS))
@pytest.mark.parametrize(
    ("context", "copy"),
    [({"copy": False}, False), ({"copy": True}, True), ({}, True), (None, True)],
)
def test_the_pydantic_validator_is_told_whether_to_copy(
    name: str, context: Any, copy: bool
) -> None:
    r = example_rollout(num_steps=3, num_envs=2, truncation=True, final_obs=True)
    value = getattr(r, name)
    value = (
        {k: np.array(v) for k, v in value.arrays.items()} if name == "model_outs" else _plain(value)
    )
    stored = field_validator(name).func(value, _info(context))  # type: ignore[call-arg]
    if name in FIELD_RULES:
        _same_stored(stored, FIELD_CHECKS[name](value, copy), name)
        given, kept = next(_leaves(value))[1], next(_leaves(stored))[1]
        assert np.shares_memory(given, kept) is (not copy)
    elif name == "infos":
        assert stored == value
        assert stored is not value
    else:
        assert sorted(stored.arrays) == sorted(value)
        key = sorted(value)[0]
        assert np.shares_memory(stored.arrays[key], value[key]) is (not copy)
