"""Nested observations/states and actions of every Gymnasium space, through the whole Rollout.

Reference loops gather leaf by leaf and entry by entry; every new validation rule pins its
message.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.helpers import python_calls_to_build
from trajkit import (
    FIELD_DIMS,
    MODEL_OUTPUT_DIMS,
    Rollout,
    minibatch_indices,
    sequence_minibatch_indices,
)
from trajkit._core import fused
from trajkit._core.tree import flatten, format_path
from trajkit._models import arrays
from trajkit._models import rollout_checks as rollout_module
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts

T, B = 4, 3


def _kwargs(r: Rollout, **changes: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "states": r.states,
        "obses": r.obses,
        "rews": r.rews,
        "dones": r.dones,
        "infos": None,
        "model_outs": dict(r.model_outs.arrays),
    }
    kw.update(changes)
    return kw


def test_dimension_tables_declare_nested_fields_and_any_action_shape() -> None:
    assert FIELD_DIMS["obses"] == "T+1 B ..."
    assert FIELD_DIMS["states"] == "T+1 B ..."
    assert MODEL_OUTPUT_DIMS["actions"] == "T+1 B ..."


def test_nested_obses_keep_structure_order_and_dtypes() -> None:
    image = np.zeros((T + 1, B, 2, 2), np.uint8)
    pos = np.ones((T + 1, B, 3), np.float64)
    flag = [[1] * B] * (T + 1)  # a nested list is a leaf, converted to an array
    r = Rollout(
        **_kwargs(
            example_rollout(T, B),
            obses=OrderedDict(pos=pos, rest=(image, {"flag": flag})),
            states={"h": np.zeros((T + 1, B, 2), np.float64)},
        )
    )
    assert type(r.obses) is dict
    assert list(r.obses) == ["pos", "rest"]
    assert type(r.obses["rest"]) is tuple
    assert r.obses["pos"].dtype == np.float64  # obses leaves keep any real dtype
    assert r.obses["rest"][0].dtype == np.uint8
    assert r.obses["rest"][1]["flag"].shape == (T + 1, B)
    assert r.states["h"].dtype == np.float32  # states leaves are float32, as flat states
    assert r.obses["pos"] is not pos  # copied by default
    shared = Rollout(**_kwargs(r, obses={"pos": pos}), copy=False)
    assert np.shares_memory(shared.obses["pos"], pos)


def test_flat_rollouts_are_unchanged() -> None:
    r = example_rollout(T, B)
    assert isinstance(r.obses, np.ndarray)
    assert isinstance(r.states, np.ndarray)
    assert r.actions().dtype == np.int32


@pytest.mark.parametrize("kind", ACTION_KINDS)
def test_actions_of_every_space(kind: str) -> None:
    r = example_rollout(T, B, action_kind=kind, action_shape=(2, 3))  # type: ignore[arg-type]
    actions = r.actions()
    if kind == "discrete":
        assert actions.shape == (T + 1, B)
    else:
        assert actions.shape == (T + 1, B, 2, 3)
    assert actions.dtype == (np.float32 if kind == "box" else np.int32)
    assert actions is not r.model_outs.arrays["actions"]  # a new array, as the seed's
    if kind == "multi_binary":
        assert set(np.unique(actions).tolist()) <= {0, 1}


def test_float64_box_actions_become_float32_and_int64_multi_discrete_int32() -> None:
    base = example_rollout(T, B, keys={"critic"})
    box = np.linspace(-1, 1, (T + 1) * B * 2).reshape(T + 1, B, 2)
    r = Rollout(**_kwargs(base, model_outs={"actions": box}))
    assert r.model_outs.arrays["actions"].dtype == np.float32
    assert r.actions().dtype == np.float32
    md = np.arange((T + 1) * B * 2, dtype=np.int64).reshape(T + 1, B, 2)
    r = Rollout(**_kwargs(base, model_outs={"actions": md, "actor": np.zeros((T + 1, B, 3))}))
    assert r.actions().dtype == np.int32  # no range check: the logits are not per component
    assert int(r.actions().max()) == md.max()


def _bad_obs_leaf_shape(r: Rollout) -> dict[str, Any]:
    return {"obses": {"image": r.obses, "pos": (np.zeros((T, B)),)}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _bad_obs_leaf_shape,
            r"obses\['pos'\]\[0\] has shape \(4, 3\), expected \(T\+1, B, \.\.\.\) = \(5, 3, "
            r"\.\.\.\); T=4 from dones, obses\['image'\]",
        ),
        (
            lambda r: {"obses": {"image": np.full((T + 1, B), "a")}},
            r"obses\['image'\] must hold real numbers, got dtype <U1 \(string\)",
        ),
        (
            lambda r: {"obses": (r.obses, {"goal": np.zeros((T + 1, 1))})},
            r"obses\[1\]\['goal'\] has shape \(5, 1\), expected \(T\+1, B, \.\.\.\) = \(5, 3, "
            r"\.\.\.\); B=3 from",
        ),
        (
            lambda r: {"obses": {"image": np.zeros(T + 1)}},
            r"obses\['image'\] must have at least 2 dimensions \(T\+1, B, \.\.\.\), got 1",
        ),
        (
            lambda r: {"states": {"h": r.states, "c": np.zeros(T + 1)}},
            r"states\['c'\] must be an array with at least 2 dimension\(s\), got 1 dimension",
        ),
        (
            lambda r: {"states": (np.zeros((T + 1, B + 1, 2)),)},
            r"states\[0\] has shape \(5, 4, 2\), expected \(T\+1, B, \.\.\.\) = \(5, 3, \.\.\.\)",
        ),
        (lambda r: {"obses": {}}, r"obses is an empty mapping: it holds no arrays"),
        (lambda r: {"states": ()}, r"states is an empty tuple: it holds no arrays"),
        (lambda r: {"obses": {0: r.obses}}, r"obses must have str keys, got key 0 \(int\)"),
    ],
)
def test_nested_fields_are_validated_per_leaf(change: Any, message: str) -> None:
    r = example_rollout(T, B)
    with pytest.raises(ValueError, match=message):
        Rollout(**_kwargs(r, **change(r)))


def test_box_actions_must_be_finite() -> None:
    actions = np.zeros((T + 1, B, 2), np.float32)
    actions[2, 1, 1] = np.inf
    with pytest.raises(
        ValueError, match=r"model_outs\['actions'\] must be finite, got inf at \(t=2, b=1, 1\)"
    ):
        Rollout(**_kwargs(example_rollout(T, B), model_outs={"actions": actions}))


def test_float_actions_beside_logits_are_discrete_and_must_be_integers() -> None:
    outs = dict(example_rollout(T, B).model_outs.arrays)
    outs["actions"] = outs["actions"].astype(np.float64)
    r = Rollout(**_kwargs(example_rollout(T, B), model_outs=outs))
    assert r.actions().dtype == np.int32
    outs["actions"][1, 2] = 0.5
    with pytest.raises(ValueError, match=r"model_outs\['actions'\] must be integer-valued"):
        Rollout(**_kwargs(example_rollout(T, B), model_outs=outs))


def test_discrete_range_check_only_for_discrete_actions() -> None:
    outs = dict(example_rollout(T, B, num_actions=3).model_outs.arrays)
    outs["actions"] = np.full((T + 1, B), 3, np.int32)
    with pytest.raises(ValueError, match=r"must be in \[0, A\) with A=3 from"):
        Rollout(**_kwargs(example_rollout(T, B), model_outs=outs))
    outs["actions"] = np.full((T + 1, B, 2), 7, np.int32)  # MultiDiscrete: not indices of actor
    Rollout(**_kwargs(example_rollout(T, B), model_outs=outs))


def test_a_failed_nested_assignment_loses_nothing() -> None:
    r = example_rollout(T, B, nested=True)
    before = r.copy()
    with pytest.raises(ValueError, match=r"obses\['image'\] has shape"):
        r.obses = {"image": np.zeros((T, B))}
    assert r == before
    r.obses = {"image": np.zeros((T + 1, B))}  # a whole new structure is fine
    assert list(r.obses) == ["image"]


def test_equality_copy_replace_and_repr_with_nested_fields() -> None:
    r = example_rollout(T, B, nested=True, action_kind="box")
    r2 = r.copy()
    assert r2 == r
    assert r2.obses["image"] is not r.obses["image"]
    r2.obses["proprio"][1]["goal"][0, 0, 0] += 1
    assert r2 != r
    assert r.replace(obses=r.obses["image"]) != r  # flat vs nested
    reordered = {"proprio": r.obses["proprio"], "image": r.obses["image"]}
    assert r.replace(obses=reordered) != r  # key order is part of the structure
    as_int = {**r.obses, "image": r.obses["image"].astype(np.int16)}
    assert r.replace(obses=as_int) != r  # dtypes are compared per leaf
    assert repr(r) == (
        "Rollout(T=4, B=3, obses={'image': uint8[5, 3, 4], 'proprio': (float32[5, 3, 3], "
        "{'goal': float32[5, 3, 2]})}, states={'h': float32[5, 3, 2], 'c': float32[5, 3, 2]}, "
        "model_outs=[critic, actions, log_probs, actor])"
    )


def _reference_minibatch(r: Rollout, entries: list[tuple[int, int]]) -> dict[str, Any]:
    """Gather every leaf entry by entry, with Python loops."""
    out: dict[str, Any] = {}
    for name in ("obses", "states"):
        for path, leaf in flatten(getattr(r, name)):
            out[format_path(name, path)] = np.stack([leaf[t, b] for t, b in entries])
    return out


def _with_critic(r: Rollout) -> Rollout:
    """Minibatches need a critic (for advantages and returns): add one where it is missing."""
    if "critic" in r.model_outs.arrays:
        return r
    critic = np.zeros((r.num_steps + 1, r.batch_size), np.float32)
    return r.replace(model_outs={**r.model_outs.arrays, "critic": critic})


@given(rollouts(min_steps=1, max_steps=5, nested=True), st.integers(1, 6), st.integers(0, 9))
def test_nested_minibatches_equal_a_reference_loop(r: Rollout, size: int, seed: int) -> None:
    r = _with_critic(r)
    batches = list(r.minibatches(size, gamma=0.9, lam=0.8, seed=seed))
    indices = list(minibatch_indices(r.num_steps, r.batch_size, size, seed=seed))
    assert len(batches) == len(indices)
    for mb, (t_idx, b_idx) in zip(batches, indices, strict=True):
        expected = _reference_minibatch(r, list(zip(t_idx.tolist(), b_idx.tolist(), strict=True)))
        for name in ("obses", "states"):
            got = flatten(mb[name])
            assert [p for p, _ in got] == [p for p, _ in flatten(getattr(r, name))]
            for path, leaf in got:
                want = expected[format_path(name, path)]
                assert leaf.dtype == want.dtype
                np.testing.assert_array_equal(leaf, want)


@given(rollouts(max_steps=5, nested=True), st.integers(1, 4), st.integers(0, 9))
def test_nested_sequence_minibatches_equal_a_reference_loop(
    r: Rollout, envs: int, seed: int
) -> None:
    r = _with_critic(r)
    batches = list(r.sequence_minibatches(envs, gamma=0.9, lam=0.8, seed=seed))
    indices = list(sequence_minibatch_indices(r.batch_size, envs, seed=seed))
    assert len(batches) == len(indices)
    T_ = r.num_steps
    for mb, b_idx in zip(batches, indices, strict=True):
        for name in ("obses", "states"):
            got = dict(flatten(mb[name]))
            for path, leaf in flatten(getattr(r, name)):
                want = np.stack([leaf[:T_, b] for b in b_idx.tolist()], axis=1)
                np.testing.assert_array_equal(got[path], want)


@given(rollouts(max_steps=5, nested=None, action_kinds=ACTION_KINDS))
def test_strategies_generate_valid_rollouts_of_every_kind(r: Rollout) -> None:
    assert r == r.copy()
    for name in ("obses", "states"):
        for _, leaf in flatten(getattr(r, name)):
            assert leaf.shape[:2] == (r.num_steps + 1, r.batch_size)
    if "actions" in r.model_outs.arrays:
        assert r.actions().dtype in (np.int32, np.float32)
    stats = r.episode_stats()  # unaffected by nesting
    assert stats.episodes == int(r.dones[1:].sum())


def _calls_to_build_nested(num_steps: int, num_envs: int) -> int:
    shape = (num_steps + 1, num_envs)
    fields: dict[str, Any] = {
        "states": {"h": np.zeros((*shape, 2)), "c": (np.zeros((*shape, 2)),)},
        "obses": {"image": np.zeros((*shape, 3), np.uint8), "pos": (np.zeros(shape),)},
        "rews": np.zeros((num_steps, num_envs), np.float32),
        "dones": np.zeros(shape, np.float32),
        "infos": None,  # infos are Python objects: one per (t, b) by nature
        "model_outs": {"actions": np.zeros((*shape, 2)), "critic": np.zeros(shape)},
    }
    return python_calls_to_build(fields)


def test_nested_validation_does_not_loop_over_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    # Per-leaf work only: the same number of calls for 16 elements per leaf as for 65,536
    # (with the block-by-block copy of arrays over a MiB switched off, for an exact count).
    monkeypatch.setattr(arrays, "_FUSED_BYTES", 1 << 62)
    monkeypatch.setattr(fused, "MIN_BYTES", 1 << 62)
    # A fresh cache of agreed shapes: one that fills up is cleared, a call of its own.
    monkeypatch.setattr(rollout_module, "_AGREED_SHAPES", {})
    _calls_to_build_nested(1, 1)
    assert _calls_to_build_nested(8, 2) == _calls_to_build_nested(1024, 64)


def test_bool_multi_binary_actions_become_int32() -> None:
    flags = np.zeros((T + 1, B, 5), bool)
    flags[1, 2, 3] = True
    r = Rollout(**_kwargs(example_rollout(T, B, keys={"critic"}), model_outs={"actions": flags}))
    assert r.actions().dtype == np.int32
    assert int(r.actions()[1, 2, 3]) == 1
    assert int(r.actions().sum()) == 1


def test_a_tuple_of_per_step_arrays_gets_a_hint() -> None:
    r = example_rollout(T, B)
    with pytest.raises(
        ValueError,
        match=r"obses is a tuple of 5 arrays, read as a Gymnasium Tuple observation with 5 "
        r"parts; to pass one array per timestep, stack them: np\.stack\(obses\)",
    ):
        r.replace(obses=tuple(r.obses))
