"""Statistics over many rollout files, gathered file by file and merged in order.

`Moments` and `DatasetStats` merge, so the statistics of a folder stream file by file, in any
number of processes or Ray tasks (`stats_chunk` is the per-chunk work of `Dataset.stats` and
`trajkit.ray.stats`), with the same result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import ArrayLike
from trajkit._io.filecheck import FileCheck, matching_spec
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import file_size, local_copy, mappable, naming
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

if TYPE_CHECKING:
    from trajkit._io.discovery import Found

__all__ = ["DatasetStats", "Moments", "file_stats", "stats_chunk"]


@dataclass(frozen=True)
class Moments:
    """Count, mean, population standard deviation, min and max of a set of values.

    Mergeable: `Moments.of(a).merge(Moments.of(b))` equals `Moments.of(concatenate(a, b))`
    up to rounding (Chan, Golub and LeVeque's pairwise update of the mean and the sum of
    squared deviations), so statistics over many files stream file by file. Without values,
    every statistic is NaN.

    Attributes:
        count: The number of values.
        mean: Their mean.
        std: Their population standard deviation (`ddof=0`, as `numpy.std`).
        min: The smallest value.
        max: The largest value.

    Examples:
        >>> m = Moments.of([1.0, 2.0]).merge(Moments.of([3.0, 4.0]))
        >>> m.count, m.mean, round(m.std, 6), m.min, m.max
        (4, 2.5, 1.118034, 1.0, 4.0)
    """

    count: int = 0
    mean: float = math.nan
    std: float = math.nan
    min: float = math.nan
    max: float = math.nan

    @classmethod
    def of(cls, values: ArrayLike) -> Moments:
        """The moments of `values` (any shape; computed in float64).

        Examples:
            >>> Moments.of([])
            Moments(count=0, mean=nan, std=nan, min=nan, max=nan)
        """
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size == 0:
            return cls()
        return cls(int(v.size), float(v.mean()), float(v.std()), float(v.min()), float(v.max()))

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of values together.

        Examples:
            >>> Moments().merge(Moments.of([2.0])).mean
            2.0
        """
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        m2 = (
            self.std**2 * self.count
            + other.std**2 * other.count
            + delta**2 * self.count * other.count / n
        )
        return Moments(
            count=n,
            mean=self.mean + delta * other.count / n,
            std=math.sqrt(max(m2, 0.0) / n),
            min=min(self.min, other.min),
            max=max(self.max, other.max),
        )


@dataclass(frozen=True)
class DatasetStats:
    """Episode statistics of many rollout files, gathered file by file.

    An episode *ends* where `dones[t+1] = 1`; a *complete* episode starts and ends inside one
    file (see [`trajkit.episode_stats`][trajkit.episode_stats]): `returns` and `lengths`
    describe the complete episodes only.

    Attributes:
        files: The number of files.
        nbytes: Their total size in bytes.
        steps: The number of environment steps, the sum of T·B over the files.
        terminations: Episode ends that were terminations.
        truncations: Episode ends that were time-limit truncations.
        returns: The undiscounted returns of the complete episodes.
        lengths: Their lengths in steps.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=2)
        >>> stats = DatasetStats.of(r).merge(DatasetStats.of(r))
        >>> stats.files, stats.steps, stats.episodes == 2 * r.episode_stats().episodes
        (2, 32, True)
    """

    files: int = 0
    nbytes: int = 0
    steps: int = 0
    terminations: int = 0
    truncations: int = 0
    returns: Moments = field(default_factory=Moments)
    lengths: Moments = field(default_factory=Moments)

    @property
    def episodes(self) -> int:
        """The number of episode ends: terminations plus truncations.

        Examples:
            >>> DatasetStats(terminations=3, truncations=1).episodes
            4
        """
        return self.terminations + self.truncations

    @classmethod
    def of(cls, rollout: Rollout, nbytes: int = 0) -> DatasetStats:
        """The statistics of one rollout (one file of `nbytes` bytes).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> DatasetStats.of(example_rollout(num_steps=4, num_envs=3)).steps
            12
        """
        episodes = rollout.episode_stats()
        return cls(
            files=1,
            nbytes=nbytes,
            steps=rollout.num_steps * rollout.batch_size,
            terminations=episodes.terminations,
            truncations=episodes.truncations,
            returns=Moments.of(episodes.returns),
            lengths=Moments.of(episodes.lengths),
        )

    def merge(self, other: DatasetStats) -> DatasetStats:
        """The statistics of both sets of files together.

        Examples:
            >>> DatasetStats(files=1, steps=4).merge(DatasetStats(files=2, steps=6)).steps
            10
        """
        return DatasetStats(
            files=self.files + other.files,
            nbytes=self.nbytes + other.nbytes,
            steps=self.steps + other.steps,
            terminations=self.terminations + other.terminations,
            truncations=self.truncations + other.truncations,
            returns=self.returns.merge(other.returns),
            lengths=self.lengths.merge(other.lengths),
        )


def file_stats(
    path: str, *, spec: RolloutSpec | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> DatasetStats:
    """The `DatasetStats` of one file (loaded memory-mapped).

    Raises:
        RolloutFileError: If the file is refused, or does not conform to `spec`.
    """
    with local_copy(path, max_bytes) as local, naming(path):
        rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
        return DatasetStats.of(matching_spec(rollout, spec, path), file_size(local))


def stats_chunk(
    items: Sequence[Found | FileCheck], *, spec: RolloutSpec | None, max_bytes: int | None
) -> list[DatasetStats]:
    """The merged `DatasetStats` of a chunk, as a one-item list (for `run_ordered`)."""
    total = DatasetStats()
    for item in items:
        if isinstance(item, FileCheck):
            raise RolloutFileError(item.problems[0], path=item.path)
        total = total.merge(file_stats(item.path, spec=spec, max_bytes=max_bytes))
    return [total]
