"""`Rollout.final_obses`: the true final observation of each episode end, and `next_obses()`."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from trajkit import FIELD_DIMS, Rollout, RolloutFields, RolloutSpec, RolloutValidationError
from trajkit._core import tree
from trajkit.testing import example_rollout


def test_next_obses_holds_the_final_observation_exactly_at_ends() -> None:
    r = example_rollout(num_steps=12, num_envs=3, done_prob=0.3)
    ends = r.dones[1:] == 1
    assert ends.any()
    assert (~ends).any()
    f = example_rollout(num_steps=12, num_envs=3, done_prob=0.3, final_obs=True)
    nxt = f.next_obses()
    assert isinstance(nxt, np.ndarray)
    assert isinstance(r.obses, np.ndarray)
    assert nxt.shape == r.obses[1:].shape
    assert nxt.dtype == r.obses.dtype
    np.testing.assert_array_equal(nxt[~ends], r.obses[1:][~ends])
    np.testing.assert_array_equal(nxt[ends], f.final_obses)  # in np.nonzero's order
    nxt[0] = -1.0  # a new array: the rollout is unchanged
    assert not (f.obses[1] == -1.0).all()


def test_without_final_obses_next_obses_is_the_next_row() -> None:
    r = example_rollout(num_steps=6, num_envs=2)
    assert r.final_obses is None
    np.testing.assert_array_equal(r.next_obses(), r.obses[1:])


def test_nested_final_obses_follow_the_leaves_of_obses() -> None:
    f = example_rollout(num_steps=10, num_envs=2, nested=True, done_prob=0.3, final_obs=True)
    ends = f.dones[1:] == 1
    for (path, leaf), (_, nxt), (_, final) in zip(
        tree.flatten(f.obses),
        tree.flatten(f.next_obses()),
        tree.flatten(f.final_obses),
        strict=True,
    ):
        assert nxt.dtype == leaf.dtype, path
        np.testing.assert_array_equal(nxt[ends], final)
        np.testing.assert_array_equal(nxt[~ends], leaf[1:][~ends])


def test_final_obses_take_part_in_equality_copy_replace_and_repr() -> None:
    r = example_rollout(num_steps=8, num_envs=2, done_prob=0.3)
    f = example_rollout(num_steps=8, num_envs=2, done_prob=0.3, final_obs=True)
    assert f != r
    assert f == f.copy()
    assert f.copy().final_obses is not f.final_obses
    assert f.replace(final_obses=None) == r
    assert "final_obses=yes" in repr(f)
    assert "final_obses" not in repr(r)
    fields: RolloutFields = {"final_obses": f.final_obses}
    assert r.replace(**fields) == f
    assert FIELD_DIMS["final_obses"] == "E ..."


def test_no_ends_take_an_empty_final_obses() -> None:
    r = example_rollout(num_steps=5, num_envs=2, done_prob=0.0)
    f = r.replace(final_obses=np.zeros((0, 4), np.float32))
    np.testing.assert_array_equal(f.next_obses(), r.obses[1:])


def _refusal(r: Rollout, final: Any) -> str:
    with pytest.raises(RolloutValidationError) as info:
        r.replace(final_obses=final)
    return str(info.value)


def test_every_final_obses_rule_is_pinned() -> None:
    r = example_rollout(num_steps=8, num_envs=2, done_prob=0.3)
    E = int((r.dones[1:] == 1).sum())
    assert E > 0
    good = np.zeros((E, 4), np.float32)
    assert re.search(
        re.escape(f"final_obses has {E + 1} entries (shape ({E + 1}, 4)), expected E={E}: ")
        + re.escape("one per episode end, the (t, b) with dones[t+1] = 1, in the order of ")
        + re.escape("np.nonzero(dones[1:] == 1)"),
        _refusal(r, np.zeros((E + 1, 4), np.float32)),
    )
    assert "final_obses has per-step shape (5,), expected (4,) as obses" in _refusal(
        r, np.zeros((E, 5), np.float32)
    )
    assert (
        "final_obses has dtype float64, expected float32 as obses; convert it with "
        ".astype(np.float32)" in _refusal(r, good.astype(np.float64))
    )
    assert (
        "final_obses must have the structure of obses: obses is an array, final_obses is "
        "nested (leaves ['a'])" in _refusal(r, {"a": good})
    )
    bad = good.copy()
    bad[E - 1, 2] = np.inf
    assert f"final_obses must be finite, got inf at (e={E - 1}, 2)" in _refusal(r, bad)
    assert "final_obses must hold real numbers" in _refusal(r, np.array([["a"] * 4] * E))


def test_nested_refusals_name_the_leaf() -> None:
    r = example_rollout(num_steps=10, num_envs=2, nested=True, done_prob=0.3)
    f = example_rollout(num_steps=10, num_envs=2, nested=True, done_prob=0.3, final_obs=True)
    assert f.final_obses is not None
    finals = tree.map_leaves(lambda leaf: leaf, f.final_obses)
    finals["image"] = finals["image"].astype(np.int16)
    assert "final_obses['image'] has dtype int16, expected uint8 as obses['image']" in (
        _refusal(r, finals)
    )
    finals = dict(f.final_obses)
    del finals["image"]
    assert "final_obses must have the structure of obses: obses is nested (leaves ['image'], " in (
        _refusal(r, finals)
    )


def test_changing_dones_under_final_obses_is_refused() -> None:
    f = example_rollout(num_steps=8, num_envs=2, done_prob=0.3, final_obs=True)
    before = f.dones.copy()
    dones = f.dones.copy()
    dones[-1, 0] = 1 - dones[-1, 0]  # one more or one fewer end
    with pytest.raises(RolloutValidationError, match="expected E="):
        f.replace(dones=dones)
    with pytest.raises(RolloutValidationError, match="expected E="):
        f.dones = dones
    np.testing.assert_array_equal(f.dones, before)  # a refused assignment changes nothing


def test_the_spec_says_whether_final_obses_are_present() -> None:
    r = example_rollout(num_steps=8, num_envs=2, done_prob=0.3)
    f = example_rollout(num_steps=8, num_envs=2, done_prob=0.3, final_obs=True)
    spec, fspec = RolloutSpec.from_rollout(r), RolloutSpec.from_rollout(f)
    assert not spec.has_final_obses
    assert fspec.has_final_obses
    assert "has_final_obses" not in spec.model_dump_json()  # specs without it dump as before
    assert '"has_final_obses":true' in fspec.model_dump_json()
    assert RolloutSpec.model_validate_json(fspec.model_dump_json()) == fspec
    assert spec.check(f) == [
        "final_obses is present, but the spec says has_final_obses=false (drop it with "
        "rollout.replace(final_obses=None))"
    ]
    assert fspec.check(r) == ["final_obses is missing, but the spec says has_final_obses=true"]
