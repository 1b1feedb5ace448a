"""The arithmetic of evidence: the rate bound and the binomial tail, against slow references."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajkit.lint.evidence import CHANCE, binomial_tail, rate_bound


def _tail(n: int, p: float, k: int) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


@given(st.integers(0, 60), st.floats(0.0, 1.0), st.integers(-2, 62))
def test_binomial_tail_is_the_sum_of_the_pmf(n: int, p: float, k: int) -> None:
    assert binomial_tail(n, p, k) == pytest.approx(min(_tail(n, p, k), 1.0), rel=1e-9, abs=1e-12)


@given(st.integers(0, 200), st.floats(0.0, 1.0), st.integers(1, 200))
def test_binomial_tail_is_a_probability(n: int, p: float, k: int) -> None:
    assert 0.0 <= binomial_tail(n, p, k) <= 1.0


def test_binomial_tail_at_the_edges() -> None:
    assert binomial_tail(5, 1.0, 3) == 1.0  # every trial succeeds
    assert binomial_tail(5, 0.0, 1) == 0.0
    assert binomial_tail(5, 0.5, 6) == 0.0  # more than the trials
    assert binomial_tail(5, 0.5, 0) == 1.0


def test_the_rate_bound_adds_three_to_both_counts() -> None:
    assert rate_bound(0, 297) == 0.01  # the rule of three when nothing was seen
    assert rate_bound(1, 297) == pytest.approx(4 / 300)
    assert rate_bound(0, 0) == 1.0
    assert rate_bound(5, 1) == 1.0  # never above 1


def test_the_chance_is_one_in_a_thousand() -> None:
    assert CHANCE == 1e-3
