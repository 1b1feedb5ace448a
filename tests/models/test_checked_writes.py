"""Every write into a rollout's arrays is checked where it is made, as the constructor checks.

The differential table sends the same bad value through every write path (element, row,
whole array, `put`, in-place arithmetic, a view) and requires the constructor's own message
for the array the write would have made, and the array unchanged. Paths that NumPy refuses
(the arrays are read-only to it) are `test_numpy_paths.py`'s.
"""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit import CheckedArray, ModelOutputs, Rollout
from trajkit.testing import example_rollout

T, B = 4, 2

# (field, position, bad value): dones[2] is 0 in example_rollout, so dones + 2 there is 2.
BAD = [
    ("rews", (1, 0), np.nan),
    ("rews", (3, 1), -np.inf),
    ("obses", (2, 1, 0), np.inf),
    ("states", (4, 0, 1), np.nan),
    ("dones", (2, 1), 2.0),
]


def _rollout() -> Rollout:
    return example_rollout(num_steps=T, num_envs=B)


def _bad_full(r: Rollout, field: str, pos: tuple[int, ...], value: float) -> Any:
    full = np.array(getattr(r, field), dtype=np.float64)
    full[pos] = value
    return full


def _constructor_message(r: Rollout, field: str, full: Any) -> str:
    with pytest.raises(trajkit.RolloutValidationError) as info:
        r.replace(**{field: full})
    return str(info.value).splitlines()[0]


def _paths(
    r: Rollout, field: str, pos: tuple[int, ...], value: float, full: Any
) -> dict[str, Callable[[], None]]:
    array = getattr(r, field)
    t, b = pos[0], pos[1:]
    current = np.asarray(array, dtype=np.float64)

    def element() -> None:
        array[pos] = value

    def row() -> None:
        array[t] = full[t]

    def whole() -> None:
        array[...] = full

    def put() -> None:
        array.put(np.ravel_multi_index(pos, array.shape), value)

    def in_place_add() -> None:
        target = getattr(r, field)
        with np.errstate(invalid="ignore"):
            target += full - current

    def view() -> None:
        step = array[t]
        step[b] = value

    def in_place_row() -> None:
        with np.errstate(invalid="ignore"):
            array[t] += full[t] - current[t]

    return {
        "element": element,
        "row": row,
        "whole": whole,
        "put": put,
        "in_place_add": in_place_add,
        "view": view,
        "in_place_row": in_place_row,
    }


@pytest.mark.parametrize(("field", "pos", "value"), BAD)
@pytest.mark.parametrize(
    "path", ["element", "row", "whole", "put", "in_place_add", "view", "in_place_row"]
)
def test_every_write_path_gives_the_constructors_message_and_changes_nothing(
    field: str, pos: tuple[int, ...], value: float, path: str
) -> None:
    r = _rollout()
    full = _bad_full(r, field, pos, value)
    expected = _constructor_message(r, field, full)
    before = np.asarray(getattr(r, field)).copy()
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _paths(r, field, pos, value, full)[path]()
    np.testing.assert_array_equal(np.asarray(getattr(r, field)), before)
    r.revalidate()


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda r: r.rews.__itruediv__(0), "rews must be finite, got -inf at (t=0, b=0)"),
        (lambda r: r.rews.fill(np.nan), "rews must be finite, got nan at (t=0, b=0)"),
        (lambda r: np.put(r.rews, [5], np.nan), "rews must be finite, got nan at (t=2, b=1)"),
        (lambda r: r.rews.put([5], np.nan), "rews must be finite, got nan at (t=2, b=1)"),
        (lambda r: r.rews.put([-3], np.nan), "rews must be finite, got nan at (t=2, b=1)"),
        (
            lambda r: r.rews.put([13], np.nan, mode="wrap"),
            "rews must be finite, got nan at (t=2, b=1)",
        ),
        (
            lambda r: np.put_along_axis(r.rews, np.array([[1, 0]]), np.nan, axis=0),
            "rews must be finite, got nan at (t=0, b=1)",
        ),
        (
            lambda r: r.rews.__setitem__(([0, 3], 1), np.nan),
            "rews must be finite, got nan at (t=0, b=1)",
        ),
        (
            lambda r: r.rews.T.__setitem__((1, 3), np.nan),
            "rews must be finite, got nan at (t=3, b=1)",
        ),
        (
            lambda r: r.rews.__setitem__((1, 0), 1e300),
            "rews holds 1e+300 at (t=1, b=0), beyond float32's range",
        ),
        (lambda r: r.dones.__setitem__((1, 1), -1), "dones must hold only 0 and 1, got -1.0"),
        (lambda r: r.rews.__setitem__(0, "a"), "rews must be an array, got a str"),
    ],
)
def test_other_write_paths_are_checked(write: Callable[[Rollout], Any], message: str) -> None:
    r = _rollout()
    before = {name: np.asarray(getattr(r, name)).copy() for name in ("rews", "dones")}
    with np.errstate(divide="ignore"), pytest.raises(ValueError, match=re.escape(message)):
        write(r)
    for name, array in before.items():
        np.testing.assert_array_equal(np.asarray(getattr(r, name)), array)


def test_a_refused_in_place_division_leaves_the_array_and_the_field() -> None:
    r = _rollout()
    rews = r.rews
    with np.errstate(divide="ignore"), pytest.raises(ValueError, match="rews must be finite"):
        r.rews /= 0
    assert r.rews is rews


def test_nested_leaves_are_checked_with_the_leaf_name() -> None:
    obses = {"pos": np.zeros((T + 1, B, 3), np.float32), "img": np.zeros((T + 1, B, 2), np.uint8)}
    r = _rollout().replace(obses=obses)
    r.obses["pos"][1, 0] = [1.0, 2.0, 3.0]
    r.obses["img"][2] += 7
    assert r.obses["img"].dtype == np.uint8
    assert int(r.obses["img"][2, 1, 0]) == 7
    with pytest.raises(
        ValueError, match=re.escape("obses['pos'] must be finite, got nan at (t=3, b=1, 2)")
    ):
        r.obses["pos"][3, 1, 2] = np.nan
    with pytest.raises(
        ValueError,
        match=re.escape("obses['img'] must fit in uint8 [0, 255], got 300 at (t=1, b=0, 1)"),
    ):
        r.obses["img"][1, 0, 1] = 300
    with pytest.raises(
        ValueError, match=re.escape("obses['img'] must be integer-valued, got 1.5 at (t=0, b=0, 0)")
    ):
        r.obses["img"][0] = 1.5
    assert int(np.asarray(r.obses["img"]).sum()) == 7 * B * 2


def test_valid_writes_keep_values_and_dtypes() -> None:
    r = _rollout()
    r.rews[1, 0] = 3  # an int into float32
    r.rews[2] = np.array([0.5, 0.25])  # float64 into float32
    r.dones[3] = [True, False]
    r.dones[4, 1] = 1
    r.states[0, 0] = 7.0
    r.rews -= np.ones((T, B)) * 0.5
    assert r.rews.dtype == np.float32
    assert r.dones.dtype == np.float32
    assert r.rews[1, 0] == 2.5
    assert r.rews[2].tolist() == [0.0, -0.25]
    assert r.dones[3].tolist() == [1.0, 0.0]
    assert r.dones[4, 1] == 1.0
    assert r.states[0, 0].tolist() == [7.0, 7.0]
    r.revalidate()


def test_results_of_arithmetic_copies_and_selections_are_plain_arrays() -> None:
    r = _rollout()
    assert isinstance(r.rews, CheckedArray)
    for result in (
        r.rews * 2,
        r.rews - r.rews,
        np.asarray(r.rews),
        r.rews.copy(),
        np.array(r.rews),
        np.exp(r.rews),
    ):
        assert type(result) is np.ndarray
    for selection in (r.rews[[0, 1]], r.rews[r.rews > 0]):  # copies: the caller's, unchecked
        selection[0] = np.nan
    r.revalidate()
    assert type(r.rews.sum()) is np.float32
    plain = r.rews.copy()
    plain[0, 0] = np.nan  # the caller's own array: unchecked
    assert repr(r.rews).startswith("array(")


def test_the_storage_writes_unchecked_and_revalidate_finds_it() -> None:
    r = _rollout()
    storage: Any = r.dones.base
    storage[2, 0] = 5
    with pytest.raises(
        trajkit.RolloutValidationError,
        match=re.escape("dones must hold only 0 and 1, got 5.0 at (t=2, b=0)"),
    ):
        r.revalidate()


def test_model_copy_validates_its_update() -> None:
    r = _rollout()
    with pytest.raises(
        trajkit.RolloutValidationError,
        match=re.escape("rews must be finite, got nan at (t=0, b=0)"),
    ):
        r.model_copy(update={"rews": np.full((T, B), np.nan)})
    with pytest.raises(
        trajkit.RolloutValidationError, match=re.escape("obses has shape (4, 2, 4), expected")
    ):
        r.model_copy(update={"obses": r.obses[:-1]})
    with pytest.raises(TypeError, match=r"model_copy\(\) got unknown field\(s\) \['reward'\]"):
        r.model_copy(update={"reward": 1})
    shallow = r.model_copy(update={"rews": np.zeros((T, B))})
    assert np.shares_memory(shallow.obses, r.obses)
    assert float(shallow.rews.sum()) == 0.0
    deep = r.model_copy(deep=True)
    assert deep == r
    assert not np.shares_memory(deep.obses, r.obses)


def test_model_construct_is_the_constructor() -> None:
    r = _rollout()
    fields = {name: getattr(r, name) for name in ("states", "obses", "dones", "model_outs")}
    with pytest.raises(
        trajkit.RolloutValidationError,
        match=re.escape("rews must be finite, got nan at (t=1, b=0)"),
    ):
        Rollout.model_construct(
            rews=np.where(np.eye(T, B, k=-1) > 0, np.nan, 0.0), infos=None, **fields
        )
    built = Rollout.model_construct(rews=np.zeros((T, B)), infos=None, **fields)
    with pytest.raises(ValueError, match="rews must be finite"):
        built.rews[0, 0] = np.nan


@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r)), Rollout.copy],
    ids=["copy", "deepcopy", "pickle", "Rollout.copy"],
)
def test_copies_stay_checked(duplicate: Callable[[Rollout], Rollout]) -> None:
    r = _rollout()
    other = duplicate(r)
    assert other == r
    with pytest.raises(ValueError, match=re.escape("rews must be finite, got nan at (t=1, b=1)")):
        other.rews[1, 1] = np.nan
    with pytest.raises(ValueError, match="obses must be finite"):
        other.obses[0, 0, 0] = np.inf


@pytest.mark.parametrize(
    ("key", "pos", "value", "message"),
    [
        ("critic", (1, 0), np.nan, "model_outs['critic'] must be finite, got nan at (t=1, b=0)"),
        (
            "actions",
            (2, 1),
            7,
            "model_outs['actions'] must be in [0, A) with A=3 from model_outs['actor'], "
            "got 7 at (t=2, b=1)",
        ),
        (
            "actor",
            (0, 1, 2),
            np.inf,
            "model_outs['actor'] must be finite, got inf at (t=0, b=1, a=2)",
        ),
        ("log_probs", (3, 0), 1e300, "model_outs['log_probs'] holds 1e+300 at (t=3, b=0)"),
    ],
)
def test_writes_through_model_outs_arrays_are_checked_as_construction(
    key: str, pos: tuple[int, ...], value: float, message: str
) -> None:
    r = _rollout()
    arrays = {k: np.array(a) for k, a in r.model_outs.arrays.items()}
    bad = {k: a.astype(np.float64) if k == key else a for k, a in arrays.items()}
    bad[key][pos] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        r.replace(model_outs=bad)  # the constructor
    for write in (
        lambda: r.model_outs.arrays[key].__setitem__(pos, value),
        lambda: r.model_outs.arrays[key][pos[0]].__setitem__(pos[1:], value),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            write()
    for k, a in arrays.items():
        np.testing.assert_array_equal(np.asarray(r.model_outs.arrays[k]), a)
    r.model_outs.arrays[key][pos] = 1  # valid: stored, in the storage's dtype
    assert r.model_outs[pos[0]][key][pos[1:]] == 1
    assert r.model_outs.arrays[key].dtype == arrays[key].dtype
    r.revalidate()


def test_writes_through_arrays_fill_placeholders() -> None:
    outs = ModelOutputs([{"actions": [None, None]}] * 3)
    outs.arrays["actions"][...] = 1
    assert outs.incomplete() is None


def test_arrays_kept_as_given_are_checked_too() -> None:
    # copy=False keeps a Fortran-ordered array: positions are told from its own layout.
    r = _rollout()
    rews = np.asfortranarray(np.zeros((T, B), np.float32))
    kept = r.replace(rews=rews)
    shared = Rollout(
        **{name: getattr(kept, name) for name in ("states", "obses", "dones", "model_outs")},
        rews=rews,
        infos=None,
        copy=False,
    )
    assert np.shares_memory(shared.rews, rews)
    with pytest.raises(ValueError, match=r"^rews must be finite, got nan at \(t=1, b=1\)$"):
        shared.rews[1, 1] = np.nan
    with pytest.raises(ValueError, match=r"^rews must be finite, got inf at \(t=0, b=0\)$"):
        shared.rews.T[0, ::-1] += np.array([0, 0, 0, np.inf])
    assert np.isfinite(rews).all()
    shared.rews[1, 1] = 2.0
    assert rews[1, 1] == 2.0


def test_model_outputs_kept_as_given_write_into_their_own_memory() -> None:
    critic = np.asfortranarray(np.zeros((T + 1, B), np.float32))
    r = _rollout()
    shared = Rollout(
        **{name: getattr(r, name) for name in ("states", "obses", "rews", "dones")},
        infos=None,
        model_outs={"critic": critic},
        copy=False,
    )
    shared.model_outs.arrays["critic"][2, 1] = 4.0
    assert critic[2, 1] == 4.0
    with pytest.raises(
        ValueError, match=re.escape("model_outs['critic'] must be finite, got nan at (t=3, b=0)")
    ):
        shared.model_outs.arrays["critic"].T[0, 3] = np.nan
    assert np.isfinite(critic).all()
