"""Issue 42's defects, one test each: no path leaves a `Rollout` holding what its constructor
refuses, except the documented ways out, which `revalidate()` and every writer catch.

The NumPy API as a whole is covered by `test_numpy_paths.py` (a table generated from NumPy),
the writers and readers by `tests/io/test_writers_readers.py`; this file pins each defect the issue
names, as a user met it.
"""

from __future__ import annotations

import copy
import json
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit import CheckedArray, Rollout, RolloutValidationError
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout

T, B = 6, 3


def _way_out(array: Any) -> Any:
    """The documented way out: the writable storage behind a rollout's array (`.base`)."""
    base = array.base
    assert type(base) is np.ndarray
    assert base.flags.writeable
    return base


def _first_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    return str(error.value).splitlines()[0]


def _constructor_message(r: Rollout, **fields: Any) -> str:
    with pytest.raises(RolloutValidationError) as info:
        r.replace(**fields)
    return _first_line(info)


# ---------------------------------------------------------------- model outputs re-checked

CRITIC_NAN = "model_outs['critic'] must be finite, got nan at (t=2, b=1)"


def _broken_critic() -> Rollout:
    r = example_rollout(num_steps=T, num_envs=B)
    _way_out(r.model_outs.arrays["critic"])[2, 1] = np.nan
    return r


def test_revalidate_checks_the_model_outputs() -> None:
    with pytest.raises(RolloutValidationError, match=re.escape(CRITIC_NAN)):
        _broken_critic().revalidate()


def test_the_constructor_given_model_outputs_applies_their_rules() -> None:
    r = _broken_critic()
    fields = {name: getattr(r, name) for name in ("states", "obses", "rews", "dones")}
    for copy_arrays in (True, False):
        with pytest.raises(RolloutValidationError, match=re.escape(CRITIC_NAN)):
            Rollout(**fields, infos=None, model_outs=r.model_outs, copy=copy_arrays)
    with pytest.raises(ValueError, match=re.escape(CRITIC_NAN)):
        trajkit.ModelOutputs(r.model_outs)


@pytest.mark.parametrize(
    "duplicate",
    [Rollout.copy, copy.copy, copy.deepcopy, lambda r: r.replace(rews=r.rews)],
    ids=["copy", "copy.copy", "deepcopy", "replace"],
)
def test_copies_and_replace_refuse_broken_model_outputs(
    duplicate: Callable[[Rollout], Rollout],
) -> None:
    with pytest.raises(RolloutValidationError, match=re.escape(CRITIC_NAN)):
        duplicate(_broken_critic())


def _write_npz(r: Rollout, folder: Path) -> Path:
    trajkit.save(r, folder / "r.npz")
    return folder / "r.npz"


def _write_dataset(r: Rollout, folder: Path) -> Path:
    ds = Dataset.create(folder / "ds", trajkit.RolloutSpec.from_rollout(example_rollout()))
    ds.append(r)
    return folder / "ds"


def _write_parquet(r: Rollout, folder: Path) -> Path:
    import trajkit.arrow

    trajkit.arrow.write_parquet(r, folder / "r.parquet")
    return folder / "r.parquet"


@pytest.mark.parametrize("write", [_write_npz, _write_dataset, _write_parquet])
def test_writers_refuse_broken_model_outputs_and_write_nothing(
    write: Callable[[Rollout, Path], Path], tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=re.escape(CRITIC_NAN)):
        write(_broken_critic(), tmp_path)
    assert not list(tmp_path.rglob("*.npz"))
    assert not list(tmp_path.rglob("*.parquet"))


def test_to_minari_refuses_broken_model_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minari")
    import trajkit.minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    r = example_rollout(num_steps=T, num_envs=B)
    _way_out(r.model_outs.arrays["actions"])[1, 1] = 99  # out of [0, A) of the logits
    with pytest.raises(ValueError, match=re.escape("model_outs['actions'] must be in [0, A)")):
        trajkit.minari.to_minari(r, "trajkit/broken-v0")
    assert not any(p.name.startswith("broken") for p in tmp_path.rglob("*"))


# ------------------------------------------------------------------ rules across fields


def _with_finals() -> Rollout:
    r = example_rollout(num_steps=T, num_envs=B, final_obs=True, done_prob=0.3, seed=3)
    assert r.final_obses is not None
    assert 0 < int(r.dones[1:].sum()) < T * B
    return r


def test_a_new_episode_end_without_its_final_observation_is_refused() -> None:
    r = _with_finals()
    t, b = (int(i) for i in np.argwhere(r.dones[1:] == 0)[0])
    would_be = np.array(r.dones)
    would_be[t + 1, b] = 1
    expected = _constructor_message(r, dones=would_be)
    assert expected.startswith("final_obses has ")
    before = np.array(r.dones)
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        r.dones[t + 1, b] = 1
    np.testing.assert_array_equal(r.dones, before)
    r.revalidate()
    assert r.next_obses().shape == r.obses[1:].shape


def test_clearing_the_end_of_a_truncated_step_is_refused() -> None:
    r = example_rollout(num_steps=T, num_envs=B, truncation=True, done_prob=0.4, seed=1)
    assert r.truncated is not None
    assert r.truncated.any()
    expected = _constructor_message(r, dones=np.zeros((T + 1, B)))
    assert "a truncated step must end its episode" in expected
    before = np.array(r.dones)
    for write in (
        lambda: r.dones.__setitem__(..., 0),
        lambda: r.dones.fill(0),
        lambda: r.dones.__imul__(0),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            write()
        np.testing.assert_array_equal(r.dones, before)
    r.revalidate()


def test_a_truncation_without_an_episode_end_is_refused() -> None:
    r = example_rollout(num_steps=T, num_envs=B, truncation=True, done_prob=0.4, seed=1)
    assert r.truncated is not None
    t, b = (int(i) for i in np.argwhere(r.dones[1:] == 0)[0])
    would_be = np.array(r.truncated)
    would_be[t, b] = 1
    expected = _constructor_message(r, truncated=would_be)
    assert expected.startswith(f"truncated[{t}, {b}] is 1 but dones[{t + 1}, {b}] is 0")
    before = np.array(r.truncated)
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        r.truncated[t, b] = 1
    np.testing.assert_array_equal(r.truncated, before)
    r.revalidate()
    r.advantages(0.99, 0.95)


# ------------------------------------------------------------------- paths around the guard


def test_a_view_of_another_dtype_cannot_store_a_nan() -> None:
    r = example_rollout(num_steps=T, num_envs=B)
    before = np.array(r.rews)
    with pytest.raises(ValueError, match=r"rews"):
        r.rews.view(np.int32)[0, 0] = 0x7FC00000
    np.testing.assert_array_equal(r.rews, before)
    r.revalidate()


@pytest.mark.parametrize(
    "write",
    [
        lambda r: np.dot(np.full((T, T), np.nan, np.float32), r.rews.copy(), out=r.rews),
        lambda r: np.einsum("ij->ij", np.full((T, B), np.nan, np.float32), out=r.rews),
        lambda r: np.concatenate([np.full((T, B), np.nan, np.float32)], out=r.rews),
        lambda r: np.stack(list(np.full((T, B), np.nan, np.float32)), out=r.rews),
        lambda r: np.take(np.full((T, B), np.nan, np.float32), range(T), axis=0, out=r.rews),
        lambda r: np.copyto(dst=r.rews, src=np.full((T, B), np.nan)),
        lambda r: np.negative(np.full((T, B), np.nan, np.float32), r.rews),
        lambda r: r.rews.byteswap(inplace=True),
        lambda r: r.rews.setfield(np.float32(np.nan), np.float32),
        lambda r: r.rews.sort(axis=0),
        lambda r: setattr(r.rews, "shape", (T * B,)),
        lambda r: setattr(r.rews, "dtype", np.int32),
        lambda r: r.rews.resize((T * B,)),
    ],
    ids=[
        "dot",
        "einsum",
        "concatenate",
        "stack",
        "take",
        "copyto(dst=)",
        "ufunc positional out",
        "byteswap",
        "setfield",
        "sort",
        "shape",
        "dtype",
        "resize",
    ],
)
def test_paths_the_docs_did_not_name_fail_loudly(write: Callable[[Rollout], Any]) -> None:
    r = example_rollout(num_steps=T, num_envs=B)
    r.rews[0] = [3.0, 1.0, 2.0]  # unsorted, so that a sort would change something
    before = np.array(r.rews)
    with pytest.raises((ValueError, TypeError, AttributeError)):
        write(r)
    assert r.rews.shape == (T, B)
    assert r.rews.dtype == np.float32
    np.testing.assert_array_equal(r.rews, before)
    r.revalidate()


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (lambda r: r.infos[0].append({}), TypeError, "T rows of B entries, fixed"),
        (lambda r: r.infos[1].pop(), TypeError, "T rows of B entries, fixed"),
        (lambda r: r.infos[0].__setitem__(slice(0, 1), []), TypeError, "fixed"),
        (lambda r: r.infos.append([{}] * B), TypeError, "T rows of B entries, fixed"),
        (lambda r: r.infos.__delitem__(0), TypeError, "T rows of B entries, fixed"),
        (lambda r: r.infos[0].__setitem__(1, 1), ValueError, "infos[t][1] must be a mapping"),
        (lambda r: r.infos.__setitem__(2, [{}]), ValueError, "infos[2] has 1 entries, expected B"),
    ],
    ids=["row.append", "row.pop", "row[:1] =", "infos.append", "del infos[t]", "row[b] = 1", "row"],
)
def test_infos_keep_t_rows_of_b_mappings(
    change: Callable[[Rollout], Any], error: type[Exception], words: str
) -> None:
    for r in (example_rollout(num_steps=T, num_envs=B), example_rollout().replace(infos=None)):
        before = [list(row) for row in r.infos]
        with pytest.raises(error, match=re.escape(words)):
            change(r)
        assert r.infos == before
        r.revalidate()
    r.infos[0][0]["lives"] = 3  # the dicts are the caller's JSON values: free to change
    r.infos[1][0] = {"lives": 2}  # and an entry may be replaced by a mapping
    r.infos[2] = [{"x": 1}] * r.batch_size
    r.revalidate()


# ---------------------------------------------------------------------- copies are plain


@pytest.mark.parametrize(
    "duplicate",
    [
        lambda a: a.astype(np.float32),
        lambda a: a.astype(np.float64),
        np.copy,
        copy.copy,
        copy.deepcopy,
        lambda a: a.copy(),
        lambda a: a * 2,
        lambda a: a[[0, 2]] * 1,
    ],
    ids=["astype", "astype64", "np.copy", "copy.copy", "deepcopy", "copy", "arithmetic", "sel*1"],
)
def test_copies_are_plain_arrays(duplicate: Callable[[Any], Any]) -> None:
    r = example_rollout(num_steps=T, num_envs=B)
    result = duplicate(r.rews)
    assert type(result) is np.ndarray
    assert not np.shares_memory(result, r.rews)
    result[0] = np.nan  # the caller's own array
    r.revalidate()


def test_a_fancy_indexed_selection_is_the_callers_own_copy() -> None:
    r = example_rollout(num_steps=T, num_envs=B)
    selection = r.rews[[0, 2]]
    assert selection.flags.writeable
    assert not np.shares_memory(selection, r.rews)
    selection[0] = np.nan  # unchecked: it is not the rollout's
    selection += 1
    r.revalidate()


# ------------------------------------------------------------------------ what reads cost


def test_reads_and_arithmetic_run_no_python_hook() -> None:
    # A Python `__array_ufunc__`, `__array_function__` or `__array_finalize__` costs
    # microseconds on every operation, reads included; the guard has none.
    for hook in ("__array_ufunc__", "__array_function__", "__array_finalize__"):
        assert getattr(CheckedArray, hook) is getattr(np.ndarray, hook), hook


def test_an_in_place_op_on_a_large_field_makes_no_full_temporary_copy() -> None:
    obses = np.zeros((1025, 64, 32), np.float32)  # 8.4 MB
    big: Any = Rollout(
        states=np.zeros((1025, 64, 0)),
        obses=obses,
        rews=np.zeros((1024, 64)),
        dones=np.zeros((1025, 64)),
        infos=None,
        model_outs={},
    )
    big.obses += 1.0  # warm: anything allocated once
    tracemalloc.start()
    try:
        big.obses += 1.0
        big.obses *= np.float32(0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * obses.nbytes
    assert float(big.obses[0, 0, 0]) == 1.0
    refused = re.escape("obses must be finite, got inf at (t=0, b=0, 0)")
    with np.errstate(divide="ignore"), pytest.raises(ValueError, match=refused):
        big.obses /= 0.0  # (checked block by block: refused before anything is stored)
    assert float(big.obses.max()) == 1.0


# ------------------------------------------------------------------ pydantic's own doors


def test_model_validate_raises_rollout_validation_error() -> None:
    r = example_rollout(num_steps=T, num_envs=B)
    data = {name: getattr(r, name) for name in ("states", "obses", "dones", "model_outs")}
    data.update(infos=None, rews=np.full((T + 1, B), 0.5))
    with pytest.raises(RolloutValidationError, match=r"^rews has shape \(7, 3\), expected"):
        Rollout.model_validate(data)
    payload = {
        "states": np.zeros((T + 1, B, 1)).tolist(),
        "obses": np.zeros((T + 1, B)).tolist(),
        "rews": np.zeros((T, B)).tolist(),
        "dones": np.full((T + 1, B), 2.0).tolist(),
        "infos": None,
        "model_outs": {},
    }
    with pytest.raises(
        RolloutValidationError, match=r"^dones must hold only 0 and 1, got 2.0 at \(t=0, b=0\)"
    ):
        Rollout.model_validate_json(json.dumps(payload))
    payload["dones"] = np.zeros((T + 1, B)).tolist()
    assert Rollout.model_validate_json(json.dumps(payload)).num_steps == T


def test_a_rollout_whose_model_outputs_were_read_is_freed_without_the_cycle_collector(
    tmp_path: Path,
) -> None:
    """The arrays' guards hold the model outputs weakly: no cycle keeps a file mapped."""
    import gc
    import weakref

    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(num_steps=8), path)
    r = trajkit.load(path, mmap=True)
    critic = r.model_outs.arrays["critic"]
    gone = weakref.ref(r.model_outs)
    gc.disable()
    try:
        del r
        assert gone() is None  # freed at once, though one of its arrays is still held
        assert critic.shape == (9, 2)
    finally:
        gc.enable()


def test_an_output_array_kept_after_its_rollout_is_still_checked_by_its_own_rule() -> None:
    import gc

    r = example_rollout(num_steps=4)
    critic = r.model_outs.arrays["critic"]
    del r
    gc.collect()
    critic[1, 0] = 2.5
    assert float(critic[1, 0]) == 2.5
    with pytest.raises(ValueError, match=r"model_outs\['critic'\] must be finite, got nan"):
        critic[0, 0] = np.nan
