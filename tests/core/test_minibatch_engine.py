"""The minibatch engine against a slow reference sampler: partitions, seeds, buffers, plans.

`reference` is the scheme `MinibatchPlan` documents, written with Python lists one item at a
time and the same generator calls (a permutation of the parts per epoch, one of each
buffer's items). The engine (`trajkit._core.minibatch.sample`) must give the same
minibatches, item for item, for any sizes, plan and seed.
"""

from __future__ import annotations

import gc
import weakref
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajkit import MinibatchPlan
from trajkit._base.rng import as_generator
from trajkit._base.types import IntArray
from trajkit._core.minibatch import ArraysTable, Part, Table, sample

Item = tuple[int, int]  # (part, row)


class Items(Table):
    """Part `part` of `rows` items; a minibatch is the `(part, row)` of each of its items."""

    def __init__(self, part: int, rows: int, log: list[tuple[str, int]] | None = None) -> None:
        super().__init__(rows, finish=self.pairs)
        self.part, self.log = part, log

    def take(self, rows: IntArray) -> dict[str, Any]:
        if self.log is not None:
            self.log.append(("take", self.part))
        return {"part": np.full(len(rows), self.part), "row": np.array(rows)}

    @staticmethod
    def pairs(taken: dict[str, Any]) -> list[Item]:
        return list(zip(taken["part"].tolist(), taken["row"].tolist(), strict=True))


def reference(plan: MinibatchPlan, sizes: list[int]) -> list[list[Item]]:
    """The documented scheme, one item at a time."""
    rng = as_generator(plan.seed) if plan.shuffle else None

    def order(n: int) -> list[int]:
        return list(range(n)) if rng is None else rng.permutation(n).tolist()

    size, per, batches = plan.minibatch_size, plan.files_per_buffer, []
    for _ in range(plan.epochs):
        files, left = order(len(sizes)), list[Item]()
        for start in range(0, len(files), per):
            buffer = left + [(p, r) for p in files[start : start + per] for r in range(sizes[p])]
            items = [buffer[i] for i in order(len(buffer))]
            full = len(items) - len(items) % size
            batches += [items[at : at + size] for at in range(0, full, size)]
            left = items[full:]
        if left and not plan.drop_last:
            batches.append(left)
    return batches


def loaders(sizes: list[int], log: list[tuple[str, int]] | None = None) -> list[Part]:
    def load(part: int) -> Table:
        if log is not None:
            log.append(("load", part))
        return Items(part, sizes[part], log)

    return [partial(load, part) for part in range(len(sizes))]


plans = st.builds(
    MinibatchPlan,
    minibatch_size=st.integers(1, 15),
    epochs=st.integers(0, 3),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    shuffle=st.booleans(),
    files_per_buffer=st.integers(1, 5),
)
part_sizes = st.lists(st.integers(0, 12), max_size=6)


@given(plan=plans, sizes=part_sizes)
def test_the_engine_draws_what_the_reference_draws(plan: MinibatchPlan, sizes: list[int]) -> None:
    assert list(sample(plan, loaders(sizes))) == reference(plan, sizes)


@given(plan=plans, sizes=part_sizes)
def test_every_item_once_per_epoch_and_every_minibatch_full_but_the_last(
    plan: MinibatchPlan, sizes: list[int]
) -> None:
    n, size = sum(sizes), plan.minibatch_size
    batches = list(sample(plan, loaders(sizes)))
    last = [] if plan.drop_last or n % size == 0 else [n % size]
    per_epoch = [size] * (n // size) + last
    assert [len(b) for b in batches] == per_epoch * plan.epochs
    everything = sorted((p, r) for p, count in enumerate(sizes) for r in range(count))
    for epoch in range(plan.epochs):
        items = [item for b in batches[epoch * len(per_epoch) :][: len(per_epoch)] for item in b]
        assert len(set(items)) == len(items)  # never twice in an epoch
        assert set(items) <= set(everything)
        assert len(items) == n - (n % size if plan.drop_last else 0)  # only the last dropped


def arrays_loaders(sizes: list[int]) -> list[Part]:
    """The same parts as arrays in memory (joined into one array each per buffer)."""

    def load(part: int) -> Table:
        taken = {"part": np.full(sizes[part], part), "row": np.arange(sizes[part])}
        return ArraysTable(taken, sizes[part], finish=Items.pairs)

    return [partial(load, part) for part in range(len(sizes))]


@given(plan=plans, sizes=part_sizes)
def test_parts_of_arrays_are_drawn_as_the_reference_draws(
    plan: MinibatchPlan, sizes: list[int]
) -> None:
    assert list(sample(plan, arrays_loaders(sizes))) == reference(plan, sizes)


@given(plan=plans, size=st.integers(0, 40))
def test_one_part_in_memory_is_drawn_as_one_of_files(plan: MinibatchPlan, size: int) -> None:
    if plan.drop_last and 0 < size < plan.minibatch_size:  # refused: see below
        return
    assert list(sample(plan, [Items(0, size)])) == list(sample(plan, loaders([size])))


def test_in_order_without_shuffling() -> None:
    plan = MinibatchPlan(4, epochs=2, shuffle=False, files_per_buffer=2)
    batches = list(sample(plan, loaders([3, 2, 4])))
    items = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert batches == [items[:4], items[4:8], items[8:]] * 2


def test_an_int_seed_reproduces_and_a_generator_advances() -> None:
    def draw(seed: int | np.random.Generator) -> list[list[Item]]:
        return list(
            sample(MinibatchPlan(3, epochs=2, seed=seed, files_per_buffer=2), loaders([4, 5, 3]))
        )

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    gen = np.random.default_rng(1)
    first, second = draw(gen), draw(gen)
    assert first != second
    replay = np.random.default_rng(1)
    assert [draw(replay), draw(replay)] == [first, second]


def test_without_a_seed_each_draw_is_fresh() -> None:
    def draw() -> list[list[Item]]:
        return list(sample(MinibatchPlan(8, epochs=3), [Items(0, 64)]))

    assert draw() != draw()


def test_nothing_is_drawn_until_the_first_minibatch() -> None:
    gen = np.random.default_rng(3)
    state = gen.bit_generator.state
    log: list[tuple[str, int]] = []
    batches = sample(MinibatchPlan(2, seed=gen), loaders([3, 3], log))
    assert gen.bit_generator.state == state
    assert log == []
    next(batches)
    assert log[0][0] == "load"


@given(plan=plans, sizes=part_sizes)
def test_a_part_is_loaded_once_per_epoch_and_read_only_in_its_buffer(
    plan: MinibatchPlan, sizes: list[int]
) -> None:
    log: list[tuple[str, int]] = []
    list(sample(plan, loaders(sizes, log)))
    loads = [part for event, part in log if event == "load"]
    assert sorted(loads) == sorted(list(range(len(sizes))) * plan.epochs)
    per, loaded, buffer_of = plan.files_per_buffer, 0, {}
    for event, part in log:
        if event == "load":
            loaded = 0 if loaded == len(sizes) else loaded  # a new epoch
            buffer_of[part] = loaded // per
            loaded += 1
        else:  # read while its buffer is the one drawn from (what is carried over is copied)
            assert buffer_of[part] == (loaded - 1) // per


def test_a_buffers_tables_are_let_go_before_the_next_buffer_is_loaded() -> None:
    alive: list[weakref.ref[Table]] = []
    peak = 0

    def load(part: int) -> Table:
        nonlocal peak
        gc.collect()
        peak = max(peak, sum(ref() is not None for ref in alive))
        table = Items(part, 5)
        alive.append(weakref.ref(table))
        return table

    parts: list[Part] = [partial(load, part) for part in range(9)]
    # Minibatches of 4 from buffers of 2 files of 5: 2 rows carry over each time, as copies.
    batches = list(sample(MinibatchPlan(4, epochs=2, seed=0, files_per_buffer=2), parts))
    assert sum(map(len, batches)) == 90
    assert peak <= 2  # the buffer being drawn, never an earlier one


def test_empty_sources_and_zero_epochs_yield_nothing() -> None:
    assert list(sample(MinibatchPlan(3), [])) == []
    assert list(sample(MinibatchPlan(3, epochs=0), [Items(0, 9)])) == []
    assert list(sample(MinibatchPlan(3, drop_last=True), [Items(0, 0)])) == []


@pytest.mark.parametrize("count", [0, 1, 8, 9, 10])
def test_drop_last_with_a_minibatch_larger_than_the_source_is_refused_at_the_call(
    count: int,
) -> None:
    plan = MinibatchPlan(9, drop_last=True)
    expected = [9] if count >= 9 else []
    if 0 < count < 9:  # nothing could be drawn
        message = rf"minibatch_size=9 is larger than the {count} entries available \(N={count}\)"
        with pytest.raises(ValueError, match=message):
            sample(plan, [Items(0, count)])
    else:
        assert [len(b) for b in sample(plan, [Items(0, count)])] == expected
    # Files are not counted before they are loaded: they yield nothing instead.
    assert [len(b) for b in sample(plan, loaders([count]))] == expected


def test_the_refusal_names_the_size_argument_and_counts_every_part() -> None:
    message = r"envs_per_batch=9 is larger than the 4 entries available \(N=4\)"
    with pytest.raises(ValueError, match=message):
        sample(MinibatchPlan(9, drop_last=True), [Items(0, 2), Items(1, 2)], name="envs_per_batch")


# ---------------------------------------------------------------------------- the plan itself

PLAN_ERRORS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"minibatch_size": 0}, ValueError, "minibatch_size must be >= 1, got 0"),
    ({"minibatch_size": True}, ValueError, "minibatch_size must be an integer >= 1, got True"),
    ({"minibatch_size": 2.0}, ValueError, r"minibatch_size must be an integer >= 1, got 2\.0"),
    ({"epochs": -1}, ValueError, "epochs must be >= 0, got -1"),
    ({"files_per_buffer": 0}, ValueError, "files_per_buffer must be >= 1, got 0"),
    (
        {"normalize_advantages": "batch"},
        ValueError,
        "normalize_advantages must be None, 'rollout' or 'minibatch', got 'batch'",
    ),
    ({"seed": 1.5}, TypeError, "seed must be an int, a numpy.random.Generator or None, got float"),
]


@pytest.mark.parametrize(("change", "error", "message"), PLAN_ERRORS)
def test_a_plan_refuses_a_bad_value_naming_it(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        MinibatchPlan(**{"minibatch_size": 4, **change})


def test_the_smallest_values_are_accepted_and_a_plan_is_frozen() -> None:
    plan = MinibatchPlan(1, epochs=0, files_per_buffer=1, seed=np.int64(3), drop_last=1)  # type: ignore[arg-type]
    assert (plan.minibatch_size, plan.epochs, plan.files_per_buffer) == (1, 0, 1)
    assert plan.drop_last is True
    assert type(plan.minibatch_size) is int
    assert MinibatchPlan(np.int32(5)).minibatch_size == 5  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        plan.epochs = 2  # type: ignore[misc]
    defaults = MinibatchPlan(8)
    assert (defaults.epochs, defaults.drop_last, defaults.seed, defaults.shuffle) == (
        1,
        False,
        None,
        True,
    )
    assert (defaults.files_per_buffer, defaults.normalize_advantages) == (4, None)
