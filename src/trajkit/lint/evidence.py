"""How inferring checks weigh their evidence: the chance of what they saw, were it no bug.

A check that infers a property from the data (a cut time limit, envs seeded alike, a copied
column, frozen rows, a phantom step, confused observations) counts the independent places
that show it, estimates from the same data how often such a place happens by chance, and
reports only when the chance of seeing as many is at most `CHANCE`. Rates are estimated
from counts with `rate_bound`, an upper bound (the rule of three when nothing was seen),
so that a few observations never make a chance look small.
"""

from __future__ import annotations

import math

__all__ = ["CHANCE", "binomial_tail", "rate_bound"]

CHANCE = 1e-3
"""The largest chance, were the data correct, of the evidence an inferring check reports."""


def rate_bound(events: int, trials: int) -> float:
    """An upper bound of a rate seen `events` times in `trials`: `(events + 3) / (trials + 3)`.

    Examples:
        >>> rate_bound(0, 0), rate_bound(0, 297), rate_bound(50, 97)
        (1.0, 0.01, 0.53)
    """
    return min(1.0, (events + 3) / (trials + 3))


def binomial_tail(trials: int, p: float, at_least: int) -> float:
    """P(Binomial(trials, p) >= at_least), summed in log space.

    Examples:
        >>> round(binomial_tail(5, 0.2, 5), 5), binomial_tail(3, 0.5, 0)
        (0.00032, 1.0)
        >>> binomial_tail(10**6, 1e-6, 40) < 1e-40
        True
    """
    if at_least <= 0:
        return 1.0
    if at_least > trials or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for k in range(at_least, trials + 1):
        term = math.exp(
            math.lgamma(trials + 1)
            - math.lgamma(k + 1)
            - math.lgamma(trials - k + 1)
            + k * log_p
            + (trials - k) * log_q
        )
        total += term
        if k > trials * p and term < total * 1e-12:  # the rest is smaller still
            break
    return min(total, 1.0)
