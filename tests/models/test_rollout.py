"""The validated Rollout model: the seed's API, its results, and every validation rule."""

from __future__ import annotations

import copy
import random
import re
import sys
from collections.abc import Callable
from itertools import islice
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.models.helpers import python_calls_to_build
from tests.models.reference import as_seed_model_outs, gae_loop, stack_key
from trajkit import ModelOutputs, Rollout
from trajkit._core import fused, tree
from trajkit._models import arrays
from trajkit._models import rollout_checks as rollout_module
from trajkit.testing import example_rollout, rollouts

T, B, A = 5, 3, 4


def valid_kwargs() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    dones = np.zeros((T + 1, B), np.float32)
    dones[3, 1] = 1
    return {
        "states": rng.normal(size=(T + 1, B, 2)),
        "obses": rng.integers(0, 255, size=(T + 1, B, 6), dtype=np.uint8),
        "rews": rng.normal(size=(T, B)),
        "dones": dones,
        "infos": [[{"t": t} for _ in range(B)] for t in range(T)],
        "model_outs": [
            {
                "critic": rng.normal(size=B),
                "actions": rng.integers(0, A, size=B),
                "log_probs": -rng.random(B),
                "actor": rng.normal(size=(B, A)),
            }
            for _ in range(T + 1)
        ],
    }


def make(**changes: Any) -> Rollout:
    kwargs = valid_kwargs()
    kwargs.update(changes)
    return Rollout(**kwargs)


# ------------------------------------------------------------------ construction


def test_positional_and_keyword_construction_agree() -> None:
    kw = valid_kwargs()
    positional = Rollout(
        kw["states"], kw["obses"], kw["rews"], kw["dones"], kw["infos"], kw["model_outs"]
    )
    assert positional == Rollout(**kw)


def test_shapes_that_agreed_before_are_checked_again_when_any_field_differs() -> None:
    # Agreeing shapes are remembered (training loops repeat them); every other combination,
    # and the same shapes with one field changed, is bound and judged afresh.
    kw = valid_kwargs()
    good = Rollout(**kw)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"rews has shape \(4, 3\), expected \(T, B\)"):
            make(rews=np.zeros((T - 1, B)))
        assert Rollout(**kw) == good
    with pytest.raises(ValueError, match="truncated was given without final_values"):
        make(truncated=np.zeros((T, B)))


# A subclass is always validated by pydantic, never by `Rollout`'s direct path.
_ThroughPydantic: type[Rollout] = type("_ThroughPydantic", (Rollout,), {})


def _input_forms(r: Rollout, form: int) -> dict[str, Any]:
    """`r`'s fields as a user may pass them: stacked or seed-list outputs, float64, bools."""
    outs: Any = dict(r.model_outs.arrays) if form % 2 else as_seed_model_outs(r)
    kwargs: dict[str, Any] = {
        "states": r.states,
        "obses": r.obses,
        "rews": r.rews.astype(np.float64) if form % 3 == 0 else r.rews,
        "dones": r.dones.astype(bool) if form % 4 == 1 else r.dones,
        "infos": r.infos if form % 5 else None,
        "model_outs": outs,
    }
    if r.truncated is not None:
        kwargs["truncated"], kwargs["final_values"] = r.truncated, r.final_values
    return kwargs


@given(
    rollouts(
        nested=None,
        truncation=None,
        action_kinds=("discrete", "multi_discrete", "multi_binary", "box"),
    ),
    st.integers(0, 59),
    st.booleans(),
)
def test_direct_validation_stores_what_pydantic_stores(r: Rollout, form: int, copy: bool) -> None:
    kwargs = _input_forms(r, form)
    direct = Rollout(**kwargs, copy=copy)
    through = _ThroughPydantic(**kwargs, copy=copy)
    assert direct == through
    assert sorted(direct.__dict__) == sorted(through.__dict__)
    for name in ("rews", "dones", "truncated", "final_values"):
        a, b = getattr(direct, name), getattr(through, name)
        assert (a is None and b is None) or a.dtype == b.dtype
    assert direct.model_fields_set == through.model_fields_set
    assert direct.__pydantic_extra__ is None
    assert direct.__pydantic_private__ is None
    if copy:
        leaves = [leaf for _, leaf in _tree_leaves(kwargs)]
        stored = [leaf for _, leaf in _tree_leaves(direct.__dict__)]
        assert not any(np.shares_memory(x, y) for x in leaves for y in stored)
    direct.revalidate()
    assert direct == through


def _tree_leaves(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every array among the rollout fields (the model-output arrays included)."""
    found: list[tuple[str, Any]] = []

    def visit(path: str, value: Any) -> None:
        if isinstance(value, np.ndarray):
            found.append((path, value))
        elif isinstance(value, ModelOutputs):
            visit(path, dict(value.arrays))
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(f"{path}[{key!r}]", item)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                visit(f"{path}[{i}]", item)

    for name, value in fields.items():
        if name != "infos":
            visit(name, value)
    return found


def test_only_refused_input_goes_through_pydantic() -> None:
    # Valid input is validated directly; refused input again by pydantic, whose error names
    # every problem (as test_several_problems_are_reported_together pins).
    seen: list[str] = []

    def spy(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            seen.append(getattr(arg, "__name__", ""))

    kw = valid_kwargs()
    sys.setprofile(spy)
    try:
        Rollout(**kw)
    finally:
        sys.setprofile(None)
    assert "validate_python" not in seen
    kw["rews"] = np.full((T, B), np.nan)
    sys.setprofile(spy)
    try:
        with pytest.raises(ValidationError, match="rews must be finite"):
            Rollout(**kw)
    finally:
        sys.setprofile(None)
    assert "validate_python" in seen


def _stacked_inputs(r: Rollout, seed: int) -> dict[str, Any]:
    """`r`'s structure with new values: stacked outputs, no infos (a training loop's buffers)."""
    rng = np.random.default_rng(seed)

    def renewed(array: Any) -> Any:
        if array.dtype.kind == "f":
            return rng.normal(size=array.shape).astype(array.dtype)
        return rng.permutation(array.reshape(-1)).reshape(array.shape)  # same values, moved

    kwargs: dict[str, Any] = {
        "states": tree.map_leaves(renewed, r.states),
        "obses": tree.map_leaves(renewed, r.obses),
        "rews": renewed(r.rews),
        "dones": r.dones.copy(),
        "infos": None,
        "model_outs": {key: renewed(a) for key, a in r.model_outs.arrays.items()},
    }
    if "actor" in kwargs["model_outs"] and "actions" in kwargs["model_outs"]:
        kwargs["model_outs"]["actions"] = r.model_outs.arrays["actions"].copy()
    if r.truncated is not None:
        kwargs["truncated"], kwargs["final_values"] = r.truncated, renewed(r.final_values)
    return kwargs


def _equal_to_pydantic(r: Rollout, kwargs: dict[str, Any]) -> None:
    through = _ThroughPydantic(**kwargs)
    assert r == through
    assert list(r.__dict__) == list(through.__dict__)
    assert r.model_fields_set == through.model_fields_set
    leaves = [leaf for _, leaf in _tree_leaves(kwargs)]
    assert not any(np.shares_memory(x, y) for x in leaves for _, y in _tree_leaves(r.__dict__))


@given(
    rollouts(
        min_steps=1,
        truncation=None,
        action_kinds=("discrete", "multi_discrete", "multi_binary", "box"),
        nested=None,
    ),
    st.integers(0, 2**32 - 1),
)
def test_a_structure_seen_before_gives_what_pydantic_gives(r: Rollout, seed: int) -> None:
    # A training loop constructs rollouts of one structure again and again, with new values.
    first = _stacked_inputs(r, seed)
    _equal_to_pydantic(Rollout(**first), first)
    again = _stacked_inputs(r, seed + 1)
    _equal_to_pydantic(Rollout(**again), again)


def _large_inputs(T: int = 2048, B: int = 16) -> dict[str, Any]:
    """Fields of 128 KiB and more: the compiled kernels copy and check them, where on."""
    rng = np.random.default_rng(3)
    dones = (rng.random((T + 1, B)) < 0.01).astype(np.float32)
    return {
        "states": np.zeros((T + 1, B, 0), np.float32),
        "obses": rng.normal(size=(T + 1, B, 3)).astype(np.float32),
        "rews": rng.normal(size=(T, B)),  # float64: cast while copied
        "dones": dones,
        "infos": None,
        "model_outs": {
            "critic": rng.normal(size=(T + 1, B)).astype(np.float32),
            "actor": rng.normal(size=(T + 1, B, 4)).astype(np.float32),
            "actions": rng.integers(0, 4, size=(T + 1, B)),
        },
    }


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_large_fields_refuse_what_validation_refuses(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    if backend == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("TRAJKIT_BACKEND", backend)
    kw = _large_inputs()
    _equal_to_pydantic(Rollout(**kw), kw)
    bad: list[tuple[str, Any, str]] = [
        ("rews", (5, 7), "rews must be finite, got nan at (t=5, b=7)"),
        ("dones", (9, 2), "dones must hold only 0 and 1, got nan at (t=9, b=2)"),
        ("critic", (2047, 15), "model_outs['critic'] must be finite, got nan at (t=2047, b=15)"),
    ]
    for name, where, message in bad:
        broken = _large_inputs()
        arrays = broken["model_outs"] if name == "critic" else broken
        arrays[name] = arrays[name].copy()
        arrays[name][where] = np.nan
        with pytest.raises(ValidationError, match=re.escape(message)):
            Rollout(**broken)
    T, B = 2048, 16
    cut = {**kw, "truncated": np.zeros((T, B)), "final_values": np.zeros((T, B))}
    _equal_to_pydantic(Rollout(**cut), cut)
    cut["truncated"] = cut["truncated"].copy()
    cut["truncated"][6, 3] = 1  # dones[7, 3] is 0: the rule across fields refuses it
    with pytest.raises(ValidationError, match=re.escape("truncated[6, 3] is 1 but dones[7, 3]")):
        Rollout(**cut)
    broken = _large_inputs()
    broken["model_outs"]["actions"][3, 1] = 4
    with pytest.raises(ValidationError, match=re.escape("got 4 at (t=3, b=1)")):
        Rollout(**broken)
    _equal_to_pydantic(Rollout(**kw), kw)


def test_dtypes_and_shapes_follow_the_seed() -> None:
    r = make()
    assert r.states.dtype == np.float32
    assert r.obses.dtype == np.uint8  # np.array(obses) keeps the dtype
    assert r.rews.dtype == np.float32
    assert r.dones.dtype == np.float32
    assert (r.num_steps, r.batch_size) == (T, B)
    assert r.value_predictions().shape == (T + 1, B)
    assert r.value_predictions().dtype == np.float32
    assert r.actions().dtype == np.int32
    assert r.log_probs().dtype == np.float32
    assert r.logits().shape == (T + 1, B, A)
    assert r.logits().dtype == np.float32
    assert r.advantages(0.99, 0.95).shape == (T, B)
    assert r.advantages(0.99, 0.95).dtype == np.float32


def test_nested_lists_and_bool_dones() -> None:
    kw = valid_kwargs()
    r = Rollout(
        states=kw["states"].tolist(),
        obses=kw["obses"].tolist(),
        rews=kw["rews"].tolist(),
        dones=(kw["dones"] == 1).tolist(),
        infos=kw["infos"],
        model_outs=[{k: v.tolist() for k, v in m.items()} for m in kw["model_outs"]],
    )
    assert r.dones.dtype == np.float32
    assert r.dones[3, 1] == 1.0
    np.testing.assert_allclose(r.rews, kw["rews"].astype(np.float32))


def test_stacked_model_outs_equal_list_form() -> None:
    kw = valid_kwargs()
    stacked = {k: np.stack([m[k] for m in kw["model_outs"]]) for k in kw["model_outs"][0]}
    assert make(model_outs=stacked) == make()


def test_model_outs_behave_like_the_seeds_list() -> None:
    kw = valid_kwargs()
    r = make()
    assert len(r.model_outs) == T + 1
    for t in range(T + 1):
        np.testing.assert_allclose(r.model_outs[t]["critic"], kw["model_outs"][t]["critic"], 1e-6)
        assert set(r.model_outs[t]) == {"critic", "actions", "log_probs", "actor"}
    assert r.model_outs[-1]["actions"].tolist() == kw["model_outs"][-1]["actions"].tolist()
    assert len(r.model_outs[1:3]) == 2
    with pytest.raises(IndexError):
        r.model_outs[T + 1]


def test_accessors_do_not_restack_storage() -> None:
    r = make()
    assert isinstance(r.model_outs, ModelOutputs)
    assert r.model_outs.arrays["critic"].shape == (T + 1, B)
    # Accessors return fresh arrays, like the seed's np.array(...) calls.
    v = r.value_predictions()
    v[0, 0] = 123.0
    assert r.value_predictions()[0, 0] != 123.0


def test_zero_steps() -> None:
    r = Rollout(
        states=np.zeros((1, 2, 3)),
        obses=np.zeros((1, 2)),
        rews=[],
        dones=[[1, 0]],
        infos=[],
        model_outs=[{"critic": [0.5, 0.5]}],
    )
    assert (r.num_steps, r.batch_size) == (0, 2)
    assert r.rews.shape == (0, 2)
    assert r.advantages(0.9, 0.9).shape == (0, 2)
    assert list(r.batches(3, 0)) == []
    with pytest.raises(ValueError, match="T"):
        next(r.entries(seed=0))


def test_one_env() -> None:
    r = example_rollout(num_steps=6, num_envs=1)
    assert r.batch_size == 1
    assert r.advantages(0.99, 0.95).shape == (6, 1)


def test_actions_only_model_outs_for_demonstrations() -> None:
    r = make(model_outs=[{"actions": [0, 1, 2]} for _ in range(T + 1)])
    assert r.actions().shape == (T + 1, B)
    with pytest.raises(KeyError, match=re.escape("needs model_outs['critic']")) as info:
        r.value_predictions()
    assert "['actions']" in str(info.value)
    with pytest.raises(KeyError, match="advantages"):
        r.advantages(0.99, 0.95)


def test_infos_none_gives_empty_dicts() -> None:
    r = make(infos=None)
    assert r.infos == [[{} for _ in range(B)] for _ in range(T)]


def test_infos_rows_are_new_lists_and_mappings_become_dicts() -> None:
    from types import MappingProxyType

    given = [[{"lives": t}, {}, {"x": 1}] for t in range(T)]
    given[1][2] = MappingProxyType({"x": 1})  # type: ignore[call-overload]
    r = make(infos=given)
    assert r.infos == [[{"lives": t}, {}, {"x": 1}] for t in range(T)]
    assert all(type(item) is dict for row in r.infos for item in row)
    assert r.infos[0] is not given[0]
    assert r.infos[0][0] is given[0][0]  # the seed keeps the caller's dicts too
    given[0].append({})  # the caller's lists stay theirs
    assert len(r.infos[0]) == B


def test_states_may_be_empty_per_env() -> None:
    r = make(states=np.zeros((T + 1, B, 0)))
    assert r.states.shape == (T + 1, B, 0)


def test_empty_model_outs_take_t_plus_one_rows() -> None:
    r = make(model_outs={})
    assert len(r.model_outs) == T + 1
    assert r.model_outs.keys() == ()


# --------------------------------------------------------- differential vs reference


@given(rollouts(), st.floats(0, 1), st.floats(0, 1))
def test_methods_equal_the_reference(r: Rollout, gamma: float, lam: float) -> None:
    seed_outs = as_seed_model_outs(r)
    assert len(seed_outs) == r.num_steps + 1
    keys = r.model_outs.keys()
    if "critic" in keys:
        values = stack_key(seed_outs, "critic", np.float32)
        np.testing.assert_array_equal(r.value_predictions(), values)
        expected = gae_loop(r.rews, values, r.dones, gamma, lam, r.truncated, r.final_values)
        scale = 1 + np.abs(expected).max(initial=0)
        np.testing.assert_allclose(r.advantages(gamma, lam), expected, atol=1e-4 * scale)
        np.testing.assert_allclose(r.returns(gamma, lam), expected + values[:-1], atol=2e-4 * scale)
    if "actions" in keys:
        np.testing.assert_array_equal(r.actions(), stack_key(seed_outs, "actions", np.int32))
    if "log_probs" in keys:
        np.testing.assert_array_equal(r.log_probs(), stack_key(seed_outs, "log_probs", np.float32))
    if "actor" in keys:
        np.testing.assert_array_equal(r.logits(), stack_key(seed_outs, "actor", np.float32))


@given(rollouts(min_steps=1), st.integers(1, 7), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_batches_are_cut_from_permutations(
    r: Rollout, batch_size: int, count: int, seed: int
) -> None:
    batches = list(r.batches(batch_size, count, seed=seed))
    assert len(batches) == count
    assert all(len(b) == batch_size for b in batches)
    flat = [entry for batch in batches for entry in batch]
    n = r.num_steps * r.batch_size
    everything = sorted((t, b) for t in range(r.num_steps) for b in range(r.batch_size))
    for start in range(0, len(flat) - n + 1, n):
        assert sorted(flat[start : start + n]) == everything
    assert all(type(t) is int and type(b) is int for t, b in flat)
    assert batches == list(r.batches(batch_size, count, seed=seed))


@given(rollouts(min_steps=1, max_steps=4), st.integers(0, 100))
def test_entries_runs_are_permutations(r: Rollout, seed: int) -> None:
    n = r.num_steps * r.batch_size
    stream = list(islice(r.entries(seed=seed), 3 * n))
    everything = sorted((t, b) for t in range(r.num_steps) for b in range(r.batch_size))
    for k in range(3):
        assert sorted(stream[k * n : (k + 1) * n]) == everything


def test_seeded_shuffling_never_touches_global_random_state() -> None:
    # Without a seed, batches() and entries() draw from `random` as the seed did: see
    # tests/models/test_obstower2_patterns.py.
    r = example_rollout(num_steps=8, num_envs=4)
    py_state, np_state = random.getstate(), np.random.get_state()  # noqa: NPY002
    list(r.batches(5, 10, seed=1))
    list(islice(r.entries(seed=2), 100))
    list(r.minibatches(7, gamma=0.9, lam=0.9))
    assert random.getstate() == py_state
    now = np.random.get_state()  # noqa: NPY002
    assert all(np.array_equal(a, b) for a, b in zip(np_state, now, strict=True))


def test_generator_seed_advances() -> None:
    r = example_rollout(num_steps=8, num_envs=4)
    g = np.random.default_rng(0)
    first = list(r.batches(8, 2, seed=g))
    second = list(r.batches(8, 2, seed=g))
    assert first != second
    assert first == list(r.batches(8, 2, seed=np.random.default_rng(0)))


# ------------------------------------------------------------- seed idioms still work


def test_copy_then_scale_rewards() -> None:
    r = make()
    r2 = r.copy()
    r2.rews = r2.rews * 0.5
    np.testing.assert_allclose(r2.rews, r.rews * 0.5)


def test_copy_is_independent() -> None:
    r = make()
    r2 = r.copy()
    r2.rews[0] -= 1.0
    r2.obses[0] = 0
    r2.model_outs[0]["critic"][0] = 99.0
    r2.infos[0][0]["t"] = "changed"
    assert r == make()
    assert r2 != r


def test_editing_in_place() -> None:
    r = make()
    before = r.rews.copy()
    r.rews[2] -= 0.25
    np.testing.assert_allclose(r.rews[2], before[2] - 0.25)
    r.model_outs[1]["critic"] = np.ones(B)
    assert r.value_predictions()[1].tolist() == [1.0] * B


def test_value_targets_idiom() -> None:
    r = make()
    targets = r.advantages(0.99, 0.95) + r.value_predictions()[:-1]
    assert targets.shape == (T, B)
    assert targets.dtype == np.float32


def test_gathering_with_the_seeds_list_comprehension() -> None:
    r = make()
    adv = r.advantages(0.99, 0.95)
    for batch in r.batches(4, 3, seed=0):
        gathered = np.array([adv[t, b] for t, b in batch])
        assert gathered.shape == (4,)
        obs = np.array([r.obses[t, b] for t, b in batch])
        assert obs.shape == (4, 6)


def test_replace_returns_validated_independent_copy() -> None:
    r = make()
    r2 = r.replace(rews=np.zeros((T, B)))
    assert float(np.abs(r2.rews).sum()) == 0.0
    assert float(np.abs(r.rews).sum()) > 0.0
    r2.infos[0][0]["t"] = "x"
    assert r.infos[0][0]["t"] == 0
    with pytest.raises(ValidationError, match="rews has shape"):
        r.replace(rews=np.zeros((T + 1, B)))
    with pytest.raises(TypeError, match="unknown field"):
        r.replace(reward=1)  # type: ignore[call-arg]  # the typo type checkers catch too


def test_failed_assignment_leaves_the_rollout_unchanged() -> None:
    r = make()
    before = r.rews
    with pytest.raises(ValidationError, match="rews has shape"):
        r.rews = np.zeros((T + 1, B), np.float32)
    assert r.rews is before
    with pytest.raises(ValidationError, match="dones must hold only 0 and 1"):
        r.dones = np.full((T + 1, B), 2.0, np.float32)
    assert r == make()


def test_assignment_of_a_valid_field() -> None:
    r = make()
    # Typed code would use replace(); at runtime any accepted form may be assigned.
    setattr(r, "model_outs", [{"critic": np.zeros(B)} for _ in range(T + 1)])  # noqa: B010
    assert r.model_outs.keys() == ("critic",)


def test_equality_and_repr() -> None:
    r = make()
    assert r == make()
    assert r != make(rews=np.zeros((T, B)))
    assert r != "not a rollout"
    text = repr(r)
    assert text.startswith(f"Rollout(T={T}, B={B}, obses=uint8[{T + 1}, {B}, 6]")
    assert "critic" in text
    assert len(text) < 300


def test_equality_holds_for_nan_and_byte_order() -> None:
    """Issue 12: a rollout with NaN in a custom output was unequal to itself, and a
    big-endian rollout unequal to its saved and loaded (little-endian) copy. (Observations and
    states may no longer hold NaN: issue 25.)"""
    obses = np.random.default_rng(1).normal(size=(T + 1, B, 2))
    extra = np.zeros((T + 1, B), np.float64)
    extra[0, 0] = np.nan
    r = make(obses=obses.astype(">f8"), model_outs={"extra": extra})
    assert r == r
    assert r == r.copy()
    little = r.replace(obses=obses.astype("<f8"))
    assert r == little
    assert r.model_outs == little.model_outs
    moved = obses.copy()
    moved[2, 1, 1] += 1.0  # another value: not equal
    assert r != r.replace(obses=moved)
    assert r != r.replace(obses=obses.astype(np.float32))  # another dtype: not equal
    assert r != r.replace(model_outs={"extra": np.zeros((T + 1, B), np.float64)})


def test_masked_arrays_are_refused() -> None:
    """Issue 12: a numpy.ma array's mask was silently dropped."""
    masked = np.ma.masked_less(valid_kwargs()["obses"], 10)
    with pytest.raises(ValidationError, match=r"obses is a masked array \(numpy.ma\), whose mask"):
        make(obses=masked)
    rews = np.ma.array(np.zeros((T, B)), mask=np.eye(T, B, dtype=bool))
    with pytest.raises(ValidationError, match=r"rews is a masked array .* x\.filled\(fill_value\)"):
        make(rews=rews)
    with pytest.raises(ValidationError, match=r"model_outs\['extra'\] is a masked array"):
        make(model_outs={"extra": np.ma.zeros((T + 1, B))})
    assert make(obses=masked.filled(0)).obses.dtype == np.uint8


def test_values_beyond_float32_are_refused_not_made_infinite() -> None:
    """Issue 12: float64 1e39 in states silently became inf when stored as float32."""
    states = valid_kwargs()["states"]
    states[3, 2, 1] = 1e39
    with pytest.raises(
        ValidationError,
        match=r"states holds 1e\+39 at \(t=3, b=2, 1\), beyond float32's range \(\+-3.403e\+38\)",
    ):
        make(states=states)
    states[3, 2, 1] = -np.inf  # infinite already: refused, as every non-finite state is
    message = r"states must be finite, got -inf at \(t=3, b=2, 1\)"
    with pytest.raises(ValidationError, match=message):
        make(states=states)
    states[3, 2, 1] = 3e38  # within range
    assert make(states=states).states[3, 2, 1] == np.float32(3e38)
    with pytest.raises(ValidationError, match=r"model_outs\['critic'\] holds -1e\+300"):
        make(model_outs={"critic": np.full((T + 1, B), -1e300)})


def test_deepcopy_and_pickle_free_copy() -> None:
    r = make()
    assert copy.deepcopy(r) == r


# ------------------------------------------------------------------ argument checks


@pytest.mark.parametrize(
    ("gamma", "lam", "message"),
    [
        (1.5, 0.9, "gamma must be a finite number in [0, 1], got 1.5"),
        (-0.1, 0.9, "gamma must be a finite number in [0, 1], got -0.1"),
        (0.9, float("nan"), "lam must be a finite number in [0, 1], got nan"),
        (float("inf"), 0.9, "gamma must be a finite number in [0, 1], got inf"),
    ],
)
def test_advantages_arguments(gamma: float, lam: float, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make().advantages(gamma, lam)


@pytest.mark.parametrize(
    ("batch_size", "count", "message"),
    [(0, 1, "batch_size must be"), (-2, 1, "batch_size must be"), (4, -1, "count must be")],
)
def test_batches_arguments(batch_size: int, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        next(make().batches(batch_size, count))


# --------------------------------------------------------------- invalid input table


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(kw: dict[str, Any]) -> None:
        target = kw
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _call(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def change(kw: dict[str, Any]) -> None:
        fn(kw)

    return change


def _nan_at(field: str, t: int, b: int) -> Callable[[dict[str, Any]], None]:
    def change(kw: dict[str, Any]) -> None:
        array = np.array(kw[field], dtype=np.float64)
        array[t, b] = np.nan
        kw[field] = array

    return change


def _stack(kw: dict[str, Any], key: str) -> np.ndarray[Any, Any]:
    return np.stack([m[key] for m in kw["model_outs"]])


def _with_stacked(key: str, edit: Callable[[np.ndarray[Any, Any]], Any]) -> Any:
    def change(kw: dict[str, Any]) -> None:
        outs = {k: _stack(kw, k) for k in kw["model_outs"][0]}
        outs[key] = edit(outs[key])
        kw["model_outs"] = outs

    return change


def _inf_critic(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a = a.copy()
    a[4, 2] = np.inf
    return a


def _bad_action(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a = a.copy()
    a[2, 1] = A
    return a


def _neg_action(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a = a.copy()
    a[0, 0] = -1
    return a


def _frac_action(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a = a.astype(float)
    a[1, 2] = 1.5
    return a


def _truncation(truncated: Any, final_values: Any) -> Callable[[dict[str, Any]], None]:
    def change(kw: dict[str, Any]) -> None:
        kw["truncated"] = truncated
        kw["final_values"] = final_values

    return change


_TRUNC_OK = np.zeros((T, B))
_TRUNC_NO_DONE = np.zeros((T, B))
_TRUNC_NO_DONE[0, 0] = 1

INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "rews one row too many",
        _set(("rews",), np.zeros((T + 1, B))),
        "rews has shape (6, 3), expected (T, B) = (5, 3); T=5 from dones, obses, states",
    ),
    (
        "obses one row short",
        _set(("obses",), np.zeros((T, B, 6))),
        "obses has shape (5, 3, 6), expected (T+1, B, ...) = (6, 3, ...)",
    ),
    (
        "dones wrong batch size",
        _set(("dones",), np.zeros((T + 1, B + 1))),
        "dones has shape (6, 4), expected (T+1, B) = (6, 3); B=3 from obses, states",
    ),
    (
        "rews not 2-D",
        _set(("rews",), np.zeros((T, B, 1))),
        "rews must have exactly 2 dimensions (T, B), got 3 (shape (5, 3, 1))",
    ),
    (
        "states 1-D",
        _set(("states",), np.zeros(T + 1)),
        "states must be an array with at least 2 dimension(s), got 1 dimension(s)",
    ),
    (
        "dones not binary",
        _set(("dones", 2, 1), 0.5),
        "dones must hold only 0 and 1, got 0.5 at (t=2, b=1)",
    ),
    ("nan reward", _nan_at("rews", 3, 2), "rews must be finite, got nan at (t=3, b=2)"),
    (
        "inf critic",
        _with_stacked("critic", _inf_critic),
        "model_outs['critic'] must be finite, got inf at (t=4, b=2)",
    ),
    (
        "nan log_prob at one step",
        _set(("model_outs", 2, "log_probs"), np.array([0.0, np.nan, 0.0])),
        "model_outs['log_probs'] must be finite, got nan at (t=2, b=1)",
    ),
    (
        "nan logits",
        _set(("model_outs", 1, "actor"), np.full((B, A), np.nan)),
        "model_outs['actor'] must be finite, got nan at (t=1, b=0, a=0)",
    ),
    (
        "model_outs keys differ",
        _call(lambda kw: kw["model_outs"][3].pop("critic")),
        "model_outs[3] has keys ['actions', 'actor', 'log_probs'], expected "
        "['actions', 'actor', 'critic', 'log_probs'] (the keys of model_outs[0])",
    ),
    (
        "model_outs wrong batch at one step",
        _set(("model_outs", 3, "critic"), np.zeros(B + 1)),
        "model_outs[3]['critic'] has shape (4,), expected (3,) like model_outs[0]['critic']",
    ),
    (
        "model_outs wrong batch everywhere",
        _with_stacked("critic", lambda a: np.zeros((T + 1, B + 2))),
        "model_outs['critic'] has shape (6, 5), expected (T+1, B) = (6, 3); B=3",
    ),
    (
        "model_outs one timestep short",
        _call(lambda kw: kw["model_outs"].pop()),
        "model_outs['critic'] has shape (5, 3), expected (T+1, B) = (6, 3)",
    ),
    (
        "model_outs dtype kind changes",
        _set(("model_outs", 2, "actions"), np.zeros(B)),
        "model_outs[2]['actions'] has dtype float64 (float), expected the same kind as "
        "model_outs[0]['actions']",
    ),
    (
        "action out of range",
        _with_stacked("actions", _bad_action),
        "model_outs['actions'] must be in [0, A) with A=4 from model_outs['actor'], got 4 at "
        "(t=2, b=1)",
    ),
    (
        "negative action",
        _with_stacked("actions", _neg_action),
        "model_outs['actions'] must be in [0, A) with A=4 from model_outs['actor'], got -1",
    ),
    (
        "fractional action",
        _with_stacked("actions", _frac_action),
        "model_outs['actions'] must be integer-valued, got 1.5 at (t=1, b=2)",
    ),
    (
        "critic with a trailing dim",
        _with_stacked("critic", lambda a: a[..., None]),
        "model_outs['critic'] must have exactly 2 dimensions (T+1, B), got 3",
    ),
    (
        "actor without the action dim",
        _with_stacked("actor", lambda a: a[..., 0]),
        "model_outs['actor'] must have exactly 3 dimensions (T+1, B, A), got 2",
    ),
    (
        "model_outs a string",
        _set(("model_outs",), "critic"),
        "model_outs must be a list of T+1 mappings",
    ),
    (
        "model_outs step not a mapping",
        _set(("model_outs", 2), [1, 2, 3]),
        "model_outs[2] must be a mapping of key -> array, got list",
    ),
    (
        "model_outs scalar values",
        _set(("model_outs",), [{"critic": 0.0}] * (T + 1)),
        "model_outs[0]['critic'] must be an array with at least 1 dimension(s), got a scalar",
    ),
    (
        "model_outs non-string key",
        _set(("model_outs",), [{0: np.zeros(B)}] * (T + 1)),
        "model_outs keys must be strings, got 0",
    ),
    (
        "object model output",
        _set(("model_outs",), {"extra": np.empty((T + 1, B), dtype=object)}),
        "model_outs['extra'] must hold real numbers, got dtype object",
    ),
    (
        "infos one row short",
        _call(lambda kw: kw["infos"].pop()),
        "infos has shape (4, 3), expected (T, B) = (5, 3)",
    ),
    (
        "infos row wrong width",
        _call(lambda kw: kw["infos"][2].append({})),
        "infos[2] has 4 entries, expected B=3",
    ),
    (
        "infos entry not a mapping",
        _set(("infos", 1, 2), 7),
        "infos[1][2] must be a mapping, got int",
    ),
    ("infos a mapping", _set(("infos",), {"a": 1}), "infos must be a list of T rows of B mappings"),
    (
        "ragged rewards",
        _set(("rews",), [[0.0, 1.0, 2.0]] * (T - 1) + [[0.0]]),
        "rews must be a rectangular numeric array (ragged nested lists are refused)",
    ),
    ("string rewards", _set(("rews",), "high"), "rews must be an array, got a str 'high'"),
    (
        "strings in obses",
        _set(("obses",), np.full((T + 1, B), "x")),
        "obses must hold real numbers, got dtype <U1 (string)",
    ),
    (
        "object obses",
        _set(("obses",), np.empty((T + 1, B), dtype=object)),
        "obses must hold real numbers, got dtype object (object)",
    ),
    (
        "scalar rewards",
        _set(("rews",), 1.0),
        "rews must be an array with at least 1 dimension(s), got a scalar",
    ),
    (
        "scalar dones",
        _set(("dones",), 0),
        "dones must be an array with at least 1 dimension(s), got a scalar",
    ),
    (
        "no observations",
        _set(("obses",), np.zeros((0, B))),
        "obses has shape (0, 3), expected (T+1, B, ...) = (6, 3, ...)",
    ),
    (
        "truncated without final_values",
        _truncation(_TRUNC_OK, None),
        "truncated was given without final_values: give both or neither",
    ),
    (
        "final_values without truncated",
        _truncation(None, np.zeros((T, B))),
        "final_values was given without truncated: give both or neither",
    ),
    (
        "truncated where the episode goes on",
        _truncation(_TRUNC_NO_DONE, np.zeros((T, B))),
        "truncated[0, 0] is 1 but dones[1, 0] is 0: a truncated step must end its episode",
    ),
    (
        "truncated wrong shape",
        _truncation(np.zeros((T + 1, B)), np.zeros((T, B))),
        "truncated has shape (6, 3), expected (T, B) = (5, 3)",
    ),
    (
        "final_values nan",
        _truncation(_TRUNC_OK, np.full((T, B), np.nan)),
        "final_values must be finite, got nan at (t=0, b=0)",
    ),
    (
        "truncated not binary",
        _truncation(np.full((T, B), 3.0), np.zeros((T, B))),
        "truncated must hold only 0 and 1, got 3.0 at (t=0, b=0)",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_inputs_are_refused(change: Callable[[dict[str, Any]], None], message: str) -> None:
    kw = valid_kwargs()
    change(kw)
    with pytest.raises(ValidationError, match=re.escape(message)):
        Rollout(**kw)


def test_several_problems_are_reported_together() -> None:
    with pytest.raises(ValidationError) as info:
        make(rews=np.zeros((T + 1, B)), obses=np.zeros((T + 2, B)))
    text = str(info.value)
    assert "rews has shape (6, 3)" in text
    assert "obses has shape (7, 3)" in text


def test_validation_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="rews"):
        make(rews="bad")


def test_no_observations_at_all_is_refused() -> None:
    empty: dict[str, Any] = {"model_outs": {}, "infos": None}
    with pytest.raises(ValidationError, match=re.escape("needs at least one observation")) as info:
        Rollout(np.zeros((0, 2, 1)), np.zeros((0, 2)), np.zeros((0, 2)), np.zeros((0, 2)), **empty)
    assert "T=-1" not in str(info.value)
    assert "dones has 0" in str(info.value)


def test_batch_size_zero_is_refused() -> None:
    with pytest.raises(ValidationError, match=re.escape("B >= 1")):
        Rollout(np.zeros((2, 0, 1)), np.zeros((2, 0)), np.zeros((1, 0)), np.zeros((2, 0)), [[]], {})


# ------------------------------------------------------------------ cost of validation


def _python_calls_to_build(num_steps: int, num_envs: int) -> int:
    """Count the function calls made while validating a rollout of array inputs."""
    rng = np.random.default_rng(0)
    shape = (num_steps + 1, num_envs)
    fields: dict[str, Any] = {
        "states": np.zeros((*shape, 2), np.float32),
        "obses": np.zeros((*shape, 3), np.uint8),
        "rews": rng.normal(size=(num_steps, num_envs)).astype(np.float32),
        "dones": rng.random(shape) < 0.1,
        "infos": None,
        "model_outs": {
            "critic": np.zeros(shape, np.float32),
            "log_probs": np.zeros(shape, np.float32),
            "actor": np.zeros((*shape, 4), np.float32),
            "actions": np.zeros(shape, np.int32),
        },
        "truncated": np.zeros((num_steps, num_envs), np.float32),
        "final_values": np.zeros((num_steps, num_envs), np.float32),
    }
    return python_calls_to_build(fields)


def test_validation_does_not_loop_over_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same number of Python calls for 16 elements as for 65,536: validation is a fixed
    # number of vectorised NumPy operations per field, not a loop over timesteps or envs.
    # (Arrays over a MiB are copied and checked in 256 KiB blocks: a loop over blocks, which
    # is switched off here so that the count is exact; so are the compiled one-pass kernels,
    # which take arrays from 64 KiB.)
    monkeypatch.setattr(arrays, "_FUSED_BYTES", 1 << 62)
    monkeypatch.setattr(fused, "MIN_BYTES", 1 << 62)
    # Fresh caches: one that fills up is cleared, a call of its own, whenever that happens.
    monkeypatch.setattr(rollout_module, "_AGREED_SHAPES", {})
    _python_calls_to_build(1, 1)  # warm caches (e.g. abc's subclass checks) first
    assert _python_calls_to_build(8, 2) == _python_calls_to_build(1024, 64)


def _bare(T: int, B: int) -> Rollout:
    """A rollout with nothing but the fields it must have: cheap at any size."""
    return Rollout(
        np.zeros((T + 1, B, 0), np.float32),
        np.zeros((T + 1, B), np.uint8),
        np.zeros((T, B), np.float32),
        np.zeros((T + 1, B), np.float32),
        None,
        {},
    )


@pytest.fixture(params=["numpy", "numba"])
def checks_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Large fields checked by NumPy (block by block) and by the compiled one-pass kernels."""
    if request.param == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("TRAJKIT_BACKEND", request.param)
    return str(request.param)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.usefixtures("checks_backend")
def test_large_fields_are_copied_and_checked_block_by_block_with_the_same_result(
    dtype: type[np.floating[Any]],
) -> None:
    # 3 MiB of rewards: copied in one pass by a compiled kernel, or in 256 KiB blocks, each
    # checked while it is in the cache; a failed check names the first bad position.
    T, B = 3072, 256
    r = _bare(T, B)
    rews = np.random.default_rng(0).normal(size=(T, B)).astype(dtype)
    assert rews.nbytes >= arrays._FUSED_BYTES
    built = r.replace(rews=rews)
    np.testing.assert_array_equal(built.rews, rews.astype(np.float32))
    assert built.rews.dtype == np.float32
    assert not np.shares_memory(built.rews, rews)
    rews[2900, 17] = np.nan  # in the twelfth block: the message names the exact position
    with pytest.raises(ValueError, match=r"rews must be finite, got nan at \(t=2900, b=17\)"):
        r.replace(rews=rews)
    with pytest.raises(ValueError, match=r"rews must be finite, got nan at \(t=2900, b=17\)"):
        Rollout(r.states, r.obses, rews, r.dones, None, r.model_outs, copy=False)


@pytest.mark.usefixtures("checks_backend")
def test_the_block_check_sees_through_overflowing_squares() -> None:
    # 3e19 squared overflows float32, yet the values are finite: they must be accepted.
    T, B = 2048, 256
    r = _bare(T, B)
    rews = np.full((T, B), 3e19, np.float32)
    np.testing.assert_array_equal(r.replace(rews=rews).rews, rews)
    rews[-1, -1] = -np.inf
    with pytest.raises(ValueError, match=r"rews must be finite, got -inf at \(t=2047, b=255\)"):
        r.replace(rews=rews)


@pytest.mark.usefixtures("checks_backend")
def test_large_float64_fields_beyond_float32_range_are_refused() -> None:
    T, B = 1024, 64  # 512 KiB of float64 values
    r = _bare(T, B)
    rews = np.zeros((T, B))
    rews[700, 3] = 1e300
    message = r"rews holds 1e\+300 at \(t=700, b=3\), beyond float32's range"
    with pytest.raises(ValueError, match=message):
        r.replace(rews=rews)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.usefixtures("checks_backend")
def test_large_flags_are_checked_for_zeros_and_ones(dtype: type[np.floating[Any]]) -> None:
    T, B = 1024, 64
    r = _bare(T, B)
    dones = np.zeros((T + 1, B), dtype)
    dones[::7] = 1
    assert r.replace(dones=dones).dones.sum() == dones.sum()
    truncated = np.zeros((T, B), dtype)
    for copying in (True, False):
        built = Rollout(
            r.states,
            r.obses,
            r.rews,
            dones,
            None,
            {},
            truncated=truncated,
            final_values=truncated,
            copy=copying,
        )
        assert built.dones.dtype == np.float32
    dones[1000, 60] = 0.5
    with pytest.raises(
        ValueError, match=r"dones must hold only 0 and 1, got 0.5 at \(t=1000, b=60\)"
    ):
        r.replace(dones=dones)
    with pytest.raises(
        ValueError, match=r"dones must hold only 0 and 1, got 0.5 at \(t=1000, b=60\)"
    ):
        Rollout(r.states, r.obses, r.rews, dones, None, {}, copy=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
@pytest.mark.parametrize("flat", [0, (1 << 16) - 1, 1 << 16, -1], ids=["first", "b0", "b1", "last"])
def test_large_flags_are_checked_a_block_at_a_time(
    monkeypatch: pytest.MonkeyPatch, dtype: type[np.number[Any]], flat: int
) -> None:
    # Without the compiled kernels, flags of `_FUSED_BYTES` or more are compared a block at
    # a time (no boolean arrays as large); the first bad value is then named as before.
    monkeypatch.setenv("TRAJKIT_BACKEND", "numpy")
    blocks: list[bool] = []  # what each block-wise check answered
    real = arrays._binary

    def spy(flat: Any) -> bool:
        blocks.append(real(flat))
        return blocks[-1]

    monkeypatch.setattr(arrays, "_binary", spy)
    T, B = 4096, 512  # [T+1, B]: 2 MiB of uint8, over a block of any of these dtypes
    dones = np.zeros((T + 1, B), dtype)
    dones[::5] = 1
    assert dones.nbytes >= arrays._FUSED_BYTES
    arrays.check_binary(dones, "dones")
    assert blocks == [True]
    dones.flat[flat] = 2
    t, b = divmod(flat % dones.size, B)
    with pytest.raises(
        ValueError, match=rf"^dones must hold only 0 and 1, got 2\S* at \(t={t}, b={b}\)$"
    ):
        arrays.check_binary(dones, "dones")
    assert blocks == [True, False]
    arrays.check_binary(np.zeros(arrays._FUSED_BYTES - 1, np.uint8), "dones")  # at once
    arrays.check_binary(np.zeros((T + 1, B), dtype).T, "dones")  # not C-contiguous: at once
    assert blocks == [True, False]
    arrays.check_binary(np.zeros(arrays._FUSED_BYTES, np.uint8), "dones")
    assert blocks == [True, False, True]
