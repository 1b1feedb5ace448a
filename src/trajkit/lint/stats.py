"""Statistics across a dataset (TK2xx), gathered in one streaming pass.

Each file is summarised where it is checked (in a worker process): per observation feature
its smallest and largest value, its rewards' count and sum of squares, and a content hash of
its arrays. The summaries are small and mergeable; `DatasetStatistics` folds them in, in file
order, as they come back from the workers, and keeps per file only its reward scale and hash.

- TK201: a feature of a leaf of `obses` whose smallest and largest values are equal over
  every observation of the dataset (at least `MIN_OBSERVATIONS` of them), unless that value
  is a finite bound of the feature in the recording's Box observation space: a flag that
  never went up (LunarLander's leg contacts on a flight that never lands), a limit never
  left.
- TK202: a file whose rewards are on another scale than the others' (files whose rewards
  are all 0 are left out; at least 3 files are needed). Where the other files' rewards take
  a few values (at most `FEW_VALUES` distinct nonzero ones, as CartPole's 1 or Taxi's -1,
  -10, 20): a file whose nonzero rewards share none of them, or take more than that many
  values (normalised). Else (rewards of a continuous range): a file whose typical reward
  magnitude (the median of |r|, which a crash's -100 once an episode does not move) is more
  than `reward_scale_ratio` times that of every other file. A file
  whose rewards are *smaller* than the others' is not judged there: that is what a good
  policy's data looks like (a Pendulum controller that balances earns about -0.001 a step,
  a random one about -5).
- TK203: a file whose arrays (every field and model output: names, dtypes, shapes and
  bytes) are exactly those of an earlier file.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.data import box_bound
from trajkit.lint.registry import Finding

__all__ = ["FEW_VALUES", "MIN_OBSERVATIONS", "DatasetStatistics", "FileSummary", "summarize"]

MIN_OBSERVATIONS = 10
"""TK201 judges a feature constant only over at least this many observations."""

FEW_VALUES = 16
"""TK202: rewards with at most this many distinct nonzero values take "a few values"."""

_SHOWN = 5  # constant features named per leaf


@dataclass(frozen=True)
class FileSummary:
    """What the dataset statistics need of one file.

    Attributes:
        path: The file.
        ranges: Per leaf of `obses` (by its name, e.g. `obses['image']`): the per-feature
            minimum and maximum, float64 of the leaf's per-step shape.
        observations: The number of observations (rows times envs).
        reward_count: The number of rewards.
        reward_sumsq: Their sum of squares.
        digest: A hash of every array (names, dtypes, shapes, bytes).
        bounds: Per leaf, the Box bounds (low, high) of the recording's observation space,
            where the file has one.
        reward_typical: The median reward magnitude (a scale that one terminal bonus
            does not move).
        reward_values: The distinct nonzero rewards, sorted, when at most `FEW_VALUES`;
            `None` when more.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> s = summarize(example_rollout(num_steps=4, num_envs=2), "a.npz")
        >>> s.observations, s.reward_count, sorted(s.ranges)
        (10, 8, ['obses'])
    """

    path: str
    ranges: dict[str, tuple[AnyArray, AnyArray]] = field(repr=False)
    observations: int
    reward_count: int
    reward_sumsq: float
    digest: str
    reward_typical: float = 0.0
    reward_values: tuple[float, ...] | None = ()
    bounds: dict[str, tuple[AnyArray, AnyArray]] = field(default_factory=dict, repr=False)

    @property
    def reward_scale(self) -> float:
        """The root mean square of the rewards (0 without rewards).

        Examples:
            >>> FileSummary("a", {}, 0, 4, 16.0, "").reward_scale
            2.0
        """
        return math.sqrt(self.reward_sumsq / self.reward_count) if self.reward_count else 0.0


def summarize(
    rollout: Rollout, path: str, recording: Mapping[str, Any] | None = None
) -> FileSummary:
    """The `FileSummary` of one rollout (one pass over its arrays).

    The recording, where the file has one, gives the observation space's bounds.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout()
        >>> summarize(r, "a.npz").digest == summarize(r.copy(), "b.npz").digest
        True
    """
    digest = hashlib.blake2b(digest_size=16)
    ranges: dict[str, tuple[AnyArray, AnyArray]] = {}
    rows = rollout.num_steps + 1
    for leaf_path, leaf in _tree.flatten(rollout.obses):
        name = _tree.format_path("obses", leaf_path)
        flat = leaf.reshape(rows * rollout.batch_size, -1)
        ranges[name] = (
            flat.min(axis=0).astype(np.float64).reshape(leaf.shape[2:]),
            flat.max(axis=0).astype(np.float64).reshape(leaf.shape[2:]),
        )
    named: list[tuple[str, Any]] = [
        (_tree.format_path(name, p), leaf)
        for name in ("states", "obses")
        for p, leaf in _tree.flatten(getattr(rollout, name))
    ]
    named += [("rews", rollout.rews), ("dones", rollout.dones)]
    named += [("truncated", rollout.truncated), ("final_values", rollout.final_values)]
    named += [(f"model_outs[{k!r}]", a) for k, a in rollout.model_outs.arrays.items()]
    for name, array in named:
        if array is None:
            continue
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
    rews = rollout.rews.astype(np.float64)
    values = np.unique(rews[rews != 0])
    bounds = {}
    space = (recording or {}).get("observation_space") or {}
    if space.get("type") == "Box" and isinstance(rollout.obses, np.ndarray):
        shape = tuple(rollout.obses.shape[2:])
        try:
            low = box_bound(space.get("low"), shape, -np.inf)
            high = box_bound(space.get("high"), shape, np.inf)
        except (TypeError, ValueError):  # a description this check cannot read
            pass
        else:
            bounds["obses"] = (low, high)
    return FileSummary(
        path=path,
        ranges=ranges,
        observations=rows * rollout.batch_size,
        reward_count=int(rews.size),
        reward_sumsq=float(np.square(rews).sum()),
        digest=digest.hexdigest(),
        reward_typical=float(np.median(np.abs(rews))) if rews.size else 0.0,
        reward_values=tuple(values.tolist()) if values.size <= FEW_VALUES else None,
        bounds=bounds,
    )


class DatasetStatistics:
    """The TK2xx checks, fed one `FileSummary` at a time, in file order.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> stats = DatasetStatistics(LintOptions(frozenset({"TK203"})))
        >>> r = example_rollout()
        >>> stats.add(summarize(r, "a.npz")), stats.add(summarize(r, "b.npz"))[0].message
        ([], 'the same arrays as a.npz: the rollout is saved twice')
    """

    def __init__(self, options: LintOptions) -> None:
        self.options = options
        self.files: int = 0
        self._ranges: dict[str, tuple[AnyArray, AnyArray]] = {}
        self._bounds: dict[str, tuple[AnyArray, AnyArray]] = {}
        self._mixed: set[str] = set()  # leaves whose per-step shape differs between files
        self._observations = 0
        self._scales: list[FileSummary] = []
        self._seen: dict[str, str] = {}

    def add(self, summary: FileSummary) -> list[Finding]:
        """Fold in one file; return the findings known at once (TK203).

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> DatasetStatistics(LintOptions(frozenset())).add(
            ...     FileSummary("a.npz", {}, 0, 0, 0.0, "x"))
            []
        """
        self.files += 1
        self._observations += summary.observations
        for name, bound in summary.bounds.items():
            self._bounds.setdefault(name, bound)
        for name, (low, high) in summary.ranges.items():
            if name in self._mixed:
                continue
            if name not in self._ranges:
                self._ranges[name] = (low, high)
            elif self._ranges[name][0].shape != low.shape:
                self._mixed.add(name)
                del self._ranges[name]
            else:
                old_low, old_high = self._ranges[name]
                self._ranges[name] = (np.minimum(old_low, low), np.maximum(old_high, high))
        if summary.reward_count and summary.reward_scale > 0:
            self._scales.append(
                FileSummary(
                    summary.path,
                    {},
                    0,
                    summary.reward_count,
                    summary.reward_sumsq,
                    "",
                    summary.reward_typical,
                    summary.reward_values,
                )
            )
        found = []
        first = self._seen.setdefault(summary.digest, summary.path)
        if first != summary.path and "TK203" in self.options.codes:
            found.append(
                Finding(
                    "TK203", f"the same arrays as {first}: the rollout is saved twice", summary.path
                )
            )
        return found

    def finish(self) -> list[Finding]:
        """The findings that need every file (TK201, TK202), once all are in.

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> DatasetStatistics(LintOptions(frozenset({"TK201", "TK202"}))).finish()
            []
        """
        found: list[Finding] = []
        if "TK201" in self.options.codes and self._observations >= MIN_OBSERVATIONS:
            for name, (low, high) in self._ranges.items():
                constant = low == high
                if name in self._bounds and self._bounds[name][0].shape == low.shape:
                    floor, ceiling = self._bounds[name]
                    constant &= (low != floor) & (low != ceiling)
                if not constant.any():
                    continue
                index = np.argwhere(constant)
                shown = ", ".join(
                    f"{name}[..., {', '.join(map(str, i))}] = {low[tuple(i)]:.6g}"
                    if i.size
                    else f"{name} = {low[()]:.6g}"
                    for i in index[:_SHOWN]
                )
                more = f" (+{len(index) - _SHOWN} more)" if len(index) > _SHOWN else ""
                found.append(
                    Finding(
                        "TK201",
                        f"{len(index)} of {constant.size} feature(s) of {name} never change over "
                        f"{self._observations} observations in {self.files} file(s): "
                        f"{shown}{more}",
                    )
                )
        if "TK202" in self.options.codes:
            found.extend(self._scale_jumps())
        return found

    def _scale_jumps(self) -> list[Finding]:
        files = self._scales
        if len(files) < 3:
            return []
        found = []
        for i, file in enumerate(files):
            others = files[:i] + files[i + 1 :]
            message = _scale_jump(file, others, self.options.reward_scale_ratio)
            if message is not None:
                found.append(Finding("TK202", message, file.path))
        return found


def _scale_jump(file: FileSummary, others: list[FileSummary], ratio: float) -> str | None:
    """TK202's message for `file` against the `others`, or None.

    Examples:
        >>> few = [FileSummary(p, {}, 0, 4, 4.0, "", 1.0, (1.0,)) for p in "ab"]
        >>> _scale_jump(FileSummary("c", {}, 0, 4, 4e4, "", 100.0, (100.0,)), few, 10)
        ... # doctest: +ELLIPSIS
        'rewards take the values 100 where the other 2 files take 1 (none in common...'
        >>> _scale_jump(FileSummary("c", {}, 0, 4, 4.0, "", 1.0, (1.0,)), few, 10) is None
        True
    """
    n = len(others)
    median = float(np.median([o.reward_scale for o in others]))
    scale = f"reward scale {file.reward_scale:.6g} against the median {median:.6g}"
    listed = [o.reward_values for o in others]
    union = sorted({v for values in listed if values is not None for v in values})
    if all(values is not None for values in listed) and 0 < len(union) <= FEW_VALUES:
        shown = ", ".join(f"{v:g}" for v in union)
        if file.reward_values is None:
            return (
                f"rewards take more than {FEW_VALUES} values where the other {n} files take "
                f"{shown} ({scale}): rewards normalised?"
            )
        if set(file.reward_values) & set(union):
            return None
        own = ", ".join(f"{v:g}" for v in file.reward_values)
        return (
            f"rewards take the values {own} where the other {n} files take {shown} (none in "
            f"common; {scale}): rewards scaled or normalised differently?"
        )
    top = max(o.reward_typical for o in others)
    if top <= 0 or file.reward_typical <= ratio * top:
        return None
    return (
        f"typical reward magnitude (median |r|) {file.reward_typical:.6g} is "
        f"{file.reward_typical / top:.3g}x above the largest {top:.6g} of the other {n} files "
        f"(limit {ratio:g}x): rewards scaled or normalised differently?"
    )
