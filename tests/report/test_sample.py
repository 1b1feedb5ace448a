"""The mergeable uniform sample: sizes, membership, and uniformity whatever the split."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from trajkit.report._sample import Sample


def _merged(parts: list[np.ndarray], size: int, seed: int) -> Sample:
    rng = np.random.default_rng(seed)
    total: Sample | None = None
    for part in parts:
        one = Sample.of(part, size, rng)
        total = one if total is None else total.merge(one, size, rng)
    assert total is not None
    return total


@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=8),
    st.integers(1, 20),
    st.integers(0, 2**32 - 1),
)
def test_a_merged_sample_is_a_subset_of_the_right_size(
    sizes: list[int], size: int, seed: int
) -> None:
    start = np.cumsum([0, *sizes])
    parts = [np.arange(a, b) for a, b in itertools.pairwise(start)]
    merged = _merged(parts, size, seed)
    population = int(start[-1])
    assert merged.population == population
    assert len(merged.values) == min(size, population)
    assert len(set(merged.values.tolist())) == len(merged.values)  # without replacement
    assert set(merged.values.tolist()) <= set(range(population))


def test_every_value_is_equally_likely_whatever_the_split() -> None:
    """Each of 40 values, split unevenly into files, is kept about 10/40 of the time."""
    parts = [np.arange(0, 3), np.arange(3, 25), np.arange(25, 26), np.arange(26, 40)]
    runs = 4000
    kept = np.zeros(40)
    for seed in range(runs):
        kept[_merged(parts, 10, seed).values] += 1
    expected = runs * 10 / 40
    # Binomial(4000, 1/4): standard deviation about 27; 5 of them is a 1-in-a-million miss.
    assert np.abs(kept - expected).max() < 5 * np.sqrt(runs * 0.25 * 0.75)


def test_rows_stay_rows() -> None:
    rng = np.random.default_rng(0)
    rows = np.arange(20.0).reshape(10, 2)
    sample = Sample.of(rows, 4, rng).merge(Sample.of(rows + 100, 4, rng), 4, rng)
    assert sample.values.shape == (4, 2)
    assert np.all(sample.values[:, 1] == sample.values[:, 0] + 1)


def test_a_sample_smaller_than_its_size_is_the_values_themselves() -> None:
    values = np.array([3.0, 1.0, 2.0])
    sample = Sample.of(values, 3, np.random.default_rng(0))
    assert sample.values.tolist() == [3.0, 1.0, 2.0]
    values[0] = 9.0
    assert sample.values[0] == 3.0  # a copy: a memory-mapped file can be let go
    assert len(Sample.of(values, 2, np.random.default_rng(0)).values) == 2
