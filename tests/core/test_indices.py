"""Minibatch indices and gathers: partitions, seeding, the seed's stream, and slow references."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.mutation_report import UNDER_MUTMUT
from trajkit._base.types import AnyArray, IntArray
from trajkit._core.indices import (
    gather,
    gather_sequences,
    minibatch_indices,
    sequence_minibatch_indices,
)
from trajkit._core.minibatch import StreamSeed, obs_tower2_batches, obs_tower2_epochs

Pair = tuple[int, int]


def o2_stream(num_steps: int, num_envs: int, *, seed: StreamSeed = 0) -> Iterator[Any]:
    """The engine's obs-tower2 stream, seeded with NumPy unless told otherwise."""
    return obs_tower2_epochs(num_steps, num_envs, seed)


def o2_batches(
    num_steps: int, num_envs: int, batch_size: int, count: int, *, seed: StreamSeed = 0
) -> Iterator[tuple[IntArray, IntArray]]:
    """The engine's obs-tower2 batches, seeded with NumPy unless told otherwise."""
    return obs_tower2_batches(num_steps, num_envs, batch_size, count, seed)


def all_pairs(num_steps: int, num_envs: int) -> list[Pair]:
    return [(t, b) for t in range(num_steps) for b in range(num_envs)]


def pairs(t_idx: IntArray, b_idx: IntArray) -> list[Pair]:
    return list(zip(t_idx.tolist(), b_idx.tolist(), strict=True))


def flatten(batches: list[tuple[IntArray, IntArray]]) -> list[Pair]:
    return [pair for t_idx, b_idx in batches for pair in pairs(t_idx, b_idx)]


def check_index_arrays(t_idx: IntArray, b_idx: IntArray) -> None:
    assert t_idx.dtype == np.intp
    assert b_idx.dtype == np.intp
    assert t_idx.ndim == b_idx.ndim == 1
    assert t_idx.shape == b_idx.shape


def as_lists(batches: Iterator[tuple[IntArray, IntArray]]) -> list[list[Pair]]:
    return [pairs(t_idx, b_idx) for t_idx, b_idx in batches]


# --- minibatch_indices ---------------------------------------------------------------------


@given(
    num_steps=st.integers(0, 12),
    num_envs=st.integers(1, 5),
    minibatch_size=st.integers(1, 30),
    epochs=st.integers(0, 3),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_minibatch_indices_partition_each_epoch(
    num_steps: int, num_envs: int, minibatch_size: int, epochs: int, drop_last: bool, seed: int
) -> None:
    n = num_steps * num_envs
    if drop_last and 0 < n < minibatch_size:  # would yield nothing: refused (see below)
        with pytest.raises(ValueError, match="drop_last=True would yield no minibatch"):
            minibatch_indices(num_steps, num_envs, minibatch_size, drop_last=True, seed=seed)
        return
    batches = list(
        minibatch_indices(
            num_steps, num_envs, minibatch_size, epochs=epochs, drop_last=drop_last, seed=seed
        )
    )
    full, rest = divmod(n, minibatch_size)
    per_epoch = full + (1 if rest and not drop_last else 0)
    assert len(batches) == per_epoch * epochs
    expected_sizes = [minibatch_size] * full + ([rest] if rest and not drop_last else [])
    for epoch in range(epochs):
        epoch_batches = batches[epoch * per_epoch : (epoch + 1) * per_epoch]
        for t_idx, b_idx in epoch_batches:
            check_index_arrays(t_idx, b_idx)
        assert [len(t_idx) for t_idx, _ in epoch_batches] == expected_sizes
        entries = flatten(epoch_batches)
        assert len(set(entries)) == len(entries)  # no (t, b) twice in an epoch
        assert set(entries) <= set(all_pairs(num_steps, num_envs))
        if not drop_last:
            assert sorted(entries) == all_pairs(num_steps, num_envs)


def test_minibatch_indices_sizes_keep_last_and_drop_last() -> None:
    keep = list(minibatch_indices(5, 2, 4, epochs=2, seed=0))
    assert [len(t) for t, _ in keep] == [4, 4, 2, 4, 4, 2]
    drop = list(minibatch_indices(5, 2, 4, epochs=2, drop_last=True, seed=0))
    assert [len(t) for t, _ in drop] == [4, 4, 4, 4]
    exact = list(minibatch_indices(4, 2, 4, drop_last=True, seed=0))
    assert [len(t) for t, _ in exact] == [4, 4]
    with pytest.raises(
        ValueError,
        match=r"minibatch_size=4 is larger than the 3 entries available \(T\*B=3\), so "
        r"drop_last=True would yield no minibatch at all: use minibatch_size <= 3, or "
        r"drop_last=False",
    ):
        minibatch_indices(1, 3, 4, drop_last=True, seed=0)
    assert list(minibatch_indices(0, 3, 4, drop_last=True, seed=0)) == []
    [(t_idx, b_idx)] = minibatch_indices(1, 3, 4, seed=0)
    assert sorted(pairs(t_idx, b_idx)) == [(0, 0), (0, 1), (0, 2)]


def test_minibatch_indices_same_permutation_cut_both_ways() -> None:
    keep = flatten(list(minibatch_indices(5, 2, 4, epochs=2, seed=3)))
    drop = flatten(list(minibatch_indices(5, 2, 4, epochs=2, drop_last=True, seed=3)))
    assert drop == keep[:8] + keep[10:18]


def test_minibatch_indices_edge_cases() -> None:
    assert list(minibatch_indices(0, 4, 3, epochs=3, seed=0)) == []
    assert list(minibatch_indices(5, 2, 3, epochs=0, seed=0)) == []
    [(t_idx, b_idx)] = minibatch_indices(6, 1, 10, seed=0)
    assert b_idx.tolist() == [0] * 6
    assert sorted(t_idx.tolist()) == list(range(6))


def test_minibatch_indices_seeding() -> None:
    def run(seed: int | np.random.Generator | None) -> list[list[Pair]]:
        return as_lists(minibatch_indices(8, 4, 5, epochs=2, seed=seed))

    assert run(0) == run(0)
    assert run(0) != run(1)
    assert run(None) != run(None)
    gen = np.random.default_rng(0)
    first, second = run(gen), run(gen)
    assert first != second  # the Generator advanced
    assert first == run(np.random.default_rng(0))


def test_minibatch_indices_epochs_differ() -> None:
    batches = list(minibatch_indices(8, 4, 32, epochs=2, seed=0))
    assert pairs(*batches[0]) != pairs(*batches[1])


SizeCall = Callable[[], object]

SIZE_ERRORS: list[tuple[SizeCall, str]] = [
    (lambda: minibatch_indices(4, 2, 0), r"minibatch_size must be >= 1, got 0"),
    (lambda: minibatch_indices(4, 2, -3), r"minibatch_size must be >= 1, got -3"),
    (lambda: minibatch_indices(4, 0, 2), r"num_envs must be >= 1, got 0"),
    (lambda: minibatch_indices(-1, 2, 2), r"num_steps must be >= 0, got -1"),
    (lambda: minibatch_indices(4, 2, 2, epochs=-1), r"epochs must be >= 0, got -1"),
    (lambda: minibatch_indices(4, 2, True), r"minibatch_size must be an integer >= 1, got True"),
    (lambda: minibatch_indices(4, False, 2), r"num_envs must be an integer >= 1, got False"),
    (lambda: minibatch_indices(4.0, 2, 2), r"num_steps must be an integer >= 0, got 4\.0"),  # type: ignore[arg-type]
    (lambda: minibatch_indices(4, 2, "2"), r"minibatch_size must be an integer >= 1, got '2'"),  # type: ignore[arg-type]
    (lambda: o2_stream(0, 3), r"entries\(\) needs at least one entry.*num_steps=0"),
    (lambda: o2_stream(3, 0), r"num_envs must be >= 1, got 0"),
    (lambda: o2_batches(2, 2, 0, 1), r"batch_size must be >= 1, got 0"),
    (lambda: o2_batches(2, 2, 1, -1), r"count must be >= 0, got -1"),
    (lambda: o2_batches(2, 2, 1, True), r"count must be an integer >= 0, got True"),
    (lambda: o2_batches(0, 2, 1, 1), r"cannot draw 1 batches from an empty rollout"),
    (lambda: o2_batches(2, 0, 1, 0), r"num_envs must be >= 1, got 0"),
    (lambda: sequence_minibatch_indices(0, 1), r"num_envs must be >= 1, got 0"),
    (lambda: sequence_minibatch_indices(4, 0), r"envs_per_batch must be >= 1, got 0"),
    (lambda: sequence_minibatch_indices(4, 2, epochs=-2), r"epochs must be >= 0, got -2"),
    (lambda: sequence_minibatch_indices(4, 2.5), r"envs_per_batch must be an integer"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "message"), SIZE_ERRORS)
def test_size_arguments_rejected_at_the_call(call: SizeCall, message: str) -> None:
    # No next(): generators must validate when called, not when first iterated.
    with pytest.raises(ValueError, match=message):
        call()


def test_bad_seed_type() -> None:
    with pytest.raises(TypeError, match="seed must be"):
        minibatch_indices(2, 2, 2, seed=1.5)  # type: ignore[arg-type]


# --- obs-tower2's stream (Rollout.entries and Rollout.batches) -----------------------------


def test_obs_tower2_stream_yields_permutations_forever() -> None:
    stream = o2_stream(3, 4, seed=0)
    epochs = [pairs(*next(stream)) for _ in range(5)]
    for epoch in epochs:
        assert sorted(epoch) == all_pairs(3, 4)
    assert len({tuple(epoch) for epoch in epochs}) > 1
    t_idx, b_idx = next(stream)
    check_index_arrays(t_idx, b_idx)
    assert [pairs(*e) for e in itertools.islice(o2_stream(3, 4, seed=0), 5)] == epochs


@given(
    num_steps=st.integers(0, 6),
    num_envs=st.integers(1, 4),
    batch_size=st.integers(1, 40),
    count=st.integers(0, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_obs_tower2_batches_is_the_seed_stream(
    num_steps: int, num_envs: int, batch_size: int, count: int, seed: int
) -> None:
    n = num_steps * num_envs
    if n == 0 and count > 0:
        count = 0
    batches = list(o2_batches(num_steps, num_envs, batch_size, count, seed=seed))
    assert len(batches) == count
    for t_idx, b_idx in batches:
        check_index_arrays(t_idx, b_idx)
        assert len(t_idx) == batch_size
    stream = flatten(batches)
    everything = all_pairs(num_steps, num_envs)
    for start in range(0, len(stream), max(n, 1)):
        run = stream[start : start + n]
        if len(run) == n:
            assert sorted(run) == everything
        else:  # the unfinished last epoch: distinct entries
            assert len(set(run)) == len(run)
    # The same entries, in the same order, as the endless stream of whole epochs.
    if count:
        epochs = o2_stream(num_steps, num_envs, seed=seed)
        whole: list[Pair] = []
        while len(whole) < len(stream):
            whole += pairs(*next(epochs))
        assert whole[: len(stream)] == stream


def test_obs_tower2_batches_span_epoch_boundaries() -> None:
    batches = as_lists(o2_batches(2, 3, 4, 3, seed=0))
    stream = [pair for batch in batches for pair in batch]
    assert sorted(stream[:6]) == all_pairs(2, 3)
    assert sorted(stream[6:12]) == all_pairs(2, 3)
    # The second batch holds the end of epoch 1 and the start of epoch 2.
    assert batches[1][:2] == stream[4:6]
    assert batches[1][2:] == stream[6:8]


def test_obs_tower2_batches_larger_than_an_epoch() -> None:
    [batch] = as_lists(o2_batches(2, 2, 10, 1, seed=0))
    assert len(batch) == 10
    assert sorted(batch[:4]) == sorted(batch[4:8]) == all_pairs(2, 2)
    assert len(set(batch[8:])) == 2


def test_obs_tower2_batches_count_zero() -> None:
    assert list(o2_batches(3, 2, 4, 0, seed=0)) == []
    assert list(o2_batches(0, 2, 4, 0, seed=0)) == []


def test_obs_tower2_batches_seeding() -> None:
    def run(seed: int | np.random.Generator) -> list[list[Pair]]:
        return as_lists(o2_batches(4, 3, 5, 6, seed=seed))

    assert run(0) == run(0)
    assert run(0) != run(1)
    gen = np.random.default_rng(0)
    first, second = run(gen), run(gen)
    assert first != second
    assert first == run(np.random.default_rng(0))


def test_obs_tower2_batches_draw_epochs_lazily() -> None:
    # Two batches use up exactly one epoch: the Generator is left where one epoch leaves it.
    gen, ref = np.random.default_rng(0), np.random.default_rng(0)
    assert len(list(o2_batches(4, 2, 4, 2, seed=gen))) == 2
    next(o2_stream(4, 2, seed=ref))
    assert gen.bit_generator.state == ref.bit_generator.state
    gen.permutation(8)
    assert gen.bit_generator.state != ref.bit_generator.state


# --- gather ---------------------------------------------------------------------------------

DTYPES = [np.uint8, np.float32, np.int32]
LAYOUTS = ["contiguous", "transposed", "sliced_rows", "strided_envs", "fortran", "reversed"]


def make_array(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: type[Any], layout: str
) -> AnyArray:
    """An array of `shape` and `dtype`, laid out in memory as `layout` says."""
    values = rng.integers(0, 100, size=shape).astype(dtype)
    if layout == "transposed":  # stored [B, T, ...]
        out = np.ascontiguousarray(np.swapaxes(values, 0, 1)).swapaxes(0, 1)
    elif layout == "sliced_rows":  # obses[:-1] of a [T+2, B, ...] array
        big = np.concatenate([values, values[:1]], axis=0) if shape[0] else values
        out = big[: shape[0]]
    elif layout == "strided_envs":  # every other env column of a wider array
        big = np.repeat(values, 2, axis=1)
        out = big[:, ::2]
    elif layout == "fortran":
        out = np.asfortranarray(values)
    elif layout == "reversed":  # negative strides on both leading axes
        out = np.ascontiguousarray(values[::-1, ::-1])[::-1, ::-1]
    else:
        out = values
    np.testing.assert_array_equal(out, values)
    return out


def reference_gather(arr: AnyArray, t_idx: IntArray, b_idx: IntArray) -> AnyArray:
    """The seed's way: one `arr[t, b]` per entry."""
    items = [arr[t, b] for t, b in zip(t_idx.tolist(), b_idx.tolist(), strict=True)]
    if not items:
        return np.empty((0, *arr.shape[2:]), dtype=arr.dtype)
    return np.array(items, dtype=arr.dtype)


@given(
    num_steps=st.integers(0, 6),
    num_envs=st.integers(1, 4),
    trailing=st.lists(st.integers(1, 3), max_size=2).map(tuple),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(LAYOUTS),
    index_dtype=st.sampled_from([np.intp, np.int32, np.int64, np.uint16]),
    num_entries=st.integers(0, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_gather_equals_reference(
    num_steps: int,
    num_envs: int,
    trailing: tuple[int, ...],
    dtype: type[Any],
    layout: str,
    index_dtype: type[Any],
    num_entries: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    arrays = {
        "obses": make_array(rng, (num_steps + 1, num_envs, *trailing), dtype, layout),
        "rews": make_array(rng, (num_steps, num_envs), np.float32, layout),
        "acts": make_array(rng, (num_steps, num_envs, *trailing), np.int32, "contiguous"),
    }
    if num_steps == 0:
        num_entries = 0
    t_idx = rng.integers(0, max(num_steps, 1), size=num_entries).astype(index_dtype)
    b_idx = rng.integers(0, num_envs, size=num_entries).astype(index_dtype)
    before = {name: arr.copy() for name, arr in arrays.items()}
    out = gather(arrays, t_idx, b_idx)
    assert list(out) == list(arrays)
    for name, arr in arrays.items():
        expected = reference_gather(arr, t_idx.astype(np.intp), b_idx.astype(np.intp))
        assert out[name].dtype == arr.dtype
        assert out[name].shape == (num_entries, *arr.shape[2:])
        np.testing.assert_array_equal(out[name], expected)
        assert not np.shares_memory(out[name], arr)
        np.testing.assert_array_equal(arr, before[name])


def test_gather_uses_model_output_rows() -> None:
    obses = np.arange(4 * 2 * 3, dtype=np.uint8).reshape(4, 2, 3)
    out = gather({"obses": obses[:-1]}, np.array([2, 0, 1]), np.array([1, 1, 0]))
    np.testing.assert_array_equal(out["obses"], np.stack([obses[2, 1], obses[0, 1], obses[1, 0]]))


def test_gather_with_minibatch_indices_covers_everything() -> None:
    rews = np.arange(15, dtype=np.float32).reshape(5, 3)
    got = np.concatenate(
        [gather({"r": rews}, t, b)["r"] for t, b in minibatch_indices(5, 3, 4, seed=0)]
    )
    assert sorted(got.tolist()) == list(range(15))


def test_gather_empty_mapping_and_empty_indices() -> None:
    empty = np.array([], dtype=np.intp)
    assert gather({}, np.array([0]), np.array([0])) == {}
    out = gather({"x": np.zeros((2, 3, 4), np.float32)}, empty, empty)
    assert out["x"].shape == (0, 4)


RANGE_ARRAYS: dict[str, AnyArray] = {
    "obses": np.zeros((4, 2, 3), np.uint8),
    "rews": np.zeros((3, 2), np.float32),
}

GATHER_ERRORS: list[tuple[Any, Any, str]] = [
    (np.array([0, 1]), np.array([0]), "t_idx and b_idx must have the same length, got 2 and 1"),
    (np.array([[0]]), np.array([0]), "t_idx must be 1-D, got shape (1, 1)"),
    (np.array([0]), np.int64(0), "b_idx must be 1-D, got shape ()"),
    (np.array([0.0]), np.array([0]), "t_idx must be an integer array, got dtype float64"),
    (np.array([0]), np.array([True]), "b_idx must be an integer array, got dtype bool"),
    (
        np.array([0, 3]),
        np.array([0, 1]),
        "t_idx 3 is out of range for array 'rews' of shape (3, 2) (axis 0 has size 3)",
    ),
    (
        np.array([0, 4]),
        np.array([0, 1]),
        "t_idx 4 is out of range for array 'obses' of shape (4, 2, 3) (axis 0 has size 4)",
    ),
    (
        np.array([-1, 0]),
        np.array([0, 1]),
        "t_idx -1 is out of range for array 'obses' of shape (4, 2, 3) (axis 0 has size 4)",
    ),
    (
        np.array([0, 1]),
        np.array([2, 0]),
        "b_idx 2 is out of range for array 'obses' of shape (4, 2, 3) (axis 1 has size 2)",
    ),
    (
        np.array([0, 1], np.int32),
        np.array([0, -2], np.int32),
        "b_idx -2 is out of range for array 'obses' of shape (4, 2, 3) (axis 1 has size 2)",
    ),
    (
        np.array([7], np.uint8),
        np.array([0], np.uint8),
        "t_idx 7 is out of range for array 'obses'",
    ),
]


@pytest.mark.parametrize(("t_idx", "b_idx", "message"), GATHER_ERRORS)
def test_gather_rejects_bad_indices(t_idx: Any, b_idx: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        gather(RANGE_ARRAYS, t_idx, b_idx)


def test_gather_rejects_arrays_without_env_axis() -> None:
    with pytest.raises(ValueError, match=re.escape("array 'v' must have leading dims [T, B, ...]")):
        gather({"v": np.zeros(3)}, np.array([0]), np.array([0]))


# --- sequence minibatches -------------------------------------------------------------------


@given(
    num_envs=st.integers(1, 12),
    envs_per_batch=st.integers(1, 14),
    epochs=st.integers(0, 3),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_sequence_minibatch_indices_partition_envs(
    num_envs: int, envs_per_batch: int, epochs: int, drop_last: bool, seed: int
) -> None:
    if drop_last and num_envs < envs_per_batch:
        with pytest.raises(ValueError, match=r"envs_per_batch=\d+ is larger than .*\(B="):
            sequence_minibatch_indices(num_envs, envs_per_batch, drop_last=True, seed=seed)
        return
    batches = list(
        sequence_minibatch_indices(
            num_envs, envs_per_batch, epochs=epochs, drop_last=drop_last, seed=seed
        )
    )
    full, rest = divmod(num_envs, envs_per_batch)
    sizes = [envs_per_batch] * full + ([rest] if rest and not drop_last else [])
    assert [len(b) for b in batches] == sizes * epochs
    for epoch in range(epochs):
        chunk = batches[epoch * len(sizes) : (epoch + 1) * len(sizes)]
        envs = [int(b) for b_idx in chunk for b in b_idx]
        assert all(b_idx.dtype == np.intp and b_idx.ndim == 1 for b_idx in chunk)
        assert len(set(envs)) == len(envs)
        if not drop_last:
            assert sorted(envs) == list(range(num_envs))


def test_sequence_minibatch_indices_seeding() -> None:
    def run(seed: int | np.random.Generator) -> list[list[int]]:
        return [b.tolist() for b in sequence_minibatch_indices(16, 4, epochs=2, seed=seed)]

    assert run(0) == run(0)
    assert run(0) != run(1)
    gen = np.random.default_rng(2)
    assert run(gen) != run(gen)


@given(
    num_steps=st.integers(0, 5),
    num_envs=st.integers(1, 5),
    trailing=st.lists(st.integers(1, 3), max_size=2).map(tuple),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(LAYOUTS),
    data=st.data(),
)
def test_gather_sequences_equals_column_indexing(
    num_steps: int,
    num_envs: int,
    trailing: tuple[int, ...],
    dtype: type[Any],
    layout: str,
    data: st.DataObject,
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    arrays = {
        "obses": make_array(rng, (num_steps + 1, num_envs, *trailing), dtype, layout),
        "rews": make_array(rng, (num_steps, num_envs), np.float32, layout),
    }
    b_idx = np.array(
        data.draw(st.lists(st.integers(0, num_envs - 1), max_size=num_envs)), dtype=np.intp
    )
    out = gather_sequences(arrays, b_idx)
    assert list(out) == list(arrays)
    for name, arr in arrays.items():
        np.testing.assert_array_equal(out[name], arr[:, b_idx])
        assert out[name].shape == (arr.shape[0], len(b_idx), *arr.shape[2:])
        assert out[name].dtype == arr.dtype
        assert not np.shares_memory(out[name], arr)


def test_gather_sequences_with_sequence_minibatches() -> None:
    dones = np.arange(12, dtype=np.float32).reshape(3, 4)
    columns = [
        gather_sequences({"d": dones}, b)["d"] for b in sequence_minibatch_indices(4, 3, seed=0)
    ]
    assert [c.shape for c in columns] == [(3, 3), (3, 1)]
    got = np.concatenate(columns, axis=1)
    assert sorted(map(tuple, got.T.tolist())) == sorted(map(tuple, dones.T.tolist()))


@pytest.mark.parametrize(
    ("b_idx", "message"),
    [
        (np.array([0, 2]), "b_idx 2 is out of range for array 'obses' of shape (4, 2, 3)"),
        (np.array([-1]), "b_idx -1 is out of range for array 'obses'"),
        (np.array([[0]]), "b_idx must be 1-D, got shape (1, 1)"),
        (np.array([0.5]), "b_idx must be an integer array, got dtype float64"),
    ],
)
def test_gather_sequences_rejects_bad_indices(b_idx: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        gather_sequences(RANGE_ARRAYS, b_idx)


def test_gather_into_buffers_gives_the_same_arrays_in_place() -> None:
    rng = np.random.default_rng(3)
    arrays: dict[str, AnyArray] = {
        "obses": rng.integers(0, 255, size=(9, 4, 3, 2), dtype=np.uint8),
        "rews": rng.normal(size=(8, 4)).astype(np.float32),
        "strided": rng.normal(size=(4, 9)).astype(np.float32).T,  # the fancy-indexing path
    }
    t_idx, b_idx = np.array([0, 7, 3, 3, 5]), np.array([1, 3, 0, 2, 2])
    fresh = gather(arrays, t_idx, b_idx)
    out = {name: np.empty_like(value) for name, value in fresh.items()}
    into = gather(arrays, t_idx, b_idx, out=out)
    for name, value in fresh.items():
        assert into[name] is out[name]
        np.testing.assert_array_equal(into[name], value)


def test_gather_refuses_mismatched_buffers() -> None:
    arrays = {"rews": np.zeros((8, 4), np.float32)}
    t_idx, b_idx = np.array([0, 1]), np.array([1, 3])
    with pytest.raises(ValueError, match=r"out must have the same names as arrays: got \['r'\]"):
        gather(arrays, t_idx, b_idx, out={"r": np.empty(2, np.float32)})
    message = r"out\['rews'\] must be a writable C-contiguous float32 array of shape \(2,\), got"
    with pytest.raises(ValueError, match=message + r" float64\[2\]"):
        gather(arrays, t_idx, b_idx, out={"rews": np.empty(2)})
    with pytest.raises(ValueError, match=message + r" float32\[3\]"):
        gather(arrays, t_idx, b_idx, out={"rews": np.empty(3, np.float32)})
    frozen = np.empty(2, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=message):
        gather(arrays, t_idx, b_idx, out={"rews": frozen})


# --- deprecated aliases ----------------------------------------------------------------------


def test_index_stream_and_index_batches_are_deprecated_aliases() -> None:
    import trajkit

    removed = r"is deprecated and will be removed in trajkit 0\.3\.0: use"
    message = rf"trajkit\.index_stream {removed} Rollout\.entries"
    with pytest.warns(DeprecationWarning, match=message):
        epochs = trajkit.index_stream(3, 2, seed=5)
    assert pairs(*next(epochs)) == pairs(*next(o2_stream(3, 2, seed=5)))
    message = rf"trajkit\.index_batches {removed} Rollout\.batches"
    with pytest.warns(DeprecationWarning, match=message):
        got = as_lists(trajkit.index_batches(3, 2, 4, 5, seed=5))
    assert got == as_lists(o2_batches(3, 2, 4, 5, seed=5))
    # Their messages still name them, and they check at the call.
    with (
        pytest.warns(DeprecationWarning, match="index_stream"),
        pytest.raises(ValueError, match=r"index_stream needs at least one entry"),
    ):
        trajkit.index_stream(0, 3)
    with (
        pytest.warns(DeprecationWarning, match="index_batches"),
        pytest.raises(ValueError, match=r"index_batches cannot draw 1 batches from an empty"),
    ):
        trajkit.index_batches(0, 2, 1, 1)


def test_a_deprecation_warning_points_at_the_callers_line() -> None:
    import trajkit

    with pytest.warns(DeprecationWarning, match="index_stream") as caught:
        trajkit.index_stream(3, 2, seed=5)
    if not UNDER_MUTMUT:  # its trampoline's frames lie between the caller and the warning
        assert caught[0].filename == __file__
