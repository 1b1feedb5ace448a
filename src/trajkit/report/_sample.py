"""A uniform sample that merges: what the report keeps of values too many to hold.

A file's rewards, its episodes or its actions are sampled where the file is read (in a
worker process); the parent merges the samples in file order. `Sample.merge` keeps the result
a uniform sample without replacement of the union: the number of values taken from each side
is drawn from the hypergeometric distribution (how many of a uniform draw of `size` values from
both populations fall in the first), then that many are drawn from each side's own sample. A
full sample merged with a file's keeps its array and overwrites the rows it lets go, drawn
at random, so that a merge costs a copy, not a shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trajkit._base.types import AnyArray

__all__ = ["Sample"]


@dataclass(frozen=True)
class Sample:
    """A uniform sample without replacement of `population` values (rows of `values`).

    Attributes:
        values: The sampled values, `min(size, population)` rows, in no particular order.
        population: How many values were sampled from.

    Examples:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> a = Sample.of(np.arange(10.0), 4, rng)
        >>> b = Sample.of(np.arange(10.0, 13.0), 4, rng)
        >>> merged = a.merge(b, 4, rng)
        >>> len(merged.values), merged.population
        (4, 13)
    """

    values: AnyArray
    population: int

    @classmethod
    def of(cls, values: AnyArray, size: int, rng: np.random.Generator) -> Sample:
        """A sample of at most `size` rows of `values`, drawn uniformly without replacement.

        Examples:
            >>> import numpy as np
            >>> Sample.of(np.arange(3), 5, np.random.default_rng(0)).values.tolist()
            [0, 1, 2]
        """
        count = len(values)
        if count <= size:
            return cls(np.array(values, copy=True), count)
        rows = np.sort(rng.choice(count, size, replace=False))
        return cls(np.asarray(values)[rows], count)

    def merge(self, other: Sample, size: int, rng: np.random.Generator) -> Sample:
        """A uniform sample of at most `size` rows of both populations together.

        Examples:
            >>> import numpy as np
            >>> rng = np.random.default_rng(1)
            >>> empty = Sample(np.zeros((0, 2)), 0)
            >>> empty.merge(Sample.of(np.ones((3, 2)), 8, rng), 8, rng).values.shape
            (3, 2)
        """
        total = self.population + other.population
        taken = min(size, total)
        if other.population == 0 or self.population == 0:
            mine = taken if other.population == 0 else 0
        else:
            mine = int(rng.hypergeometric(self.population, other.population, taken))
        incoming = _subset(other.values, taken - mine, rng)
        ours = self.values
        if 0 < len(incoming) == len(ours) - mine:  # a full sample: overwrite the rows let go
            out = ours.copy()
            out[rng.choice(len(ours), len(incoming), replace=False)] = incoming
            return Sample(out, total)
        return Sample(np.concatenate([_subset(ours, mine, rng), incoming]), total)


def _subset(values: AnyArray, count: int, rng: np.random.Generator) -> AnyArray:
    """A uniform subset of `count` rows of `values`."""
    if count >= len(values):
        return values
    return values[rng.choice(len(values), count, replace=False)]
