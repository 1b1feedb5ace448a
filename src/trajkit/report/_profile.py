"""One file's profile: what the report needs of it, computed where the file is read.

`profile_file` is the report's per-file work, run by the engine behind `trajkit validate`
(`trajkit._io.engine.run_ordered`) in this process or in workers: it loads the file once, as
`trajkit validate` checks it (memory-mapped, every CRC-32 verified), runs lint's per-file
checks on it (`trajkit.lint.run.lint_rollout`), and returns a small `FileProfile` (its
verdict, lint's results, counts, samples and per-feature statistics), never the arrays.
The profiles merge in file order (`trajkit.report._collect`), so memory stays bounded
whatever the number of files, and the result is the same with any number of processes.

Large observation leaves (images: at least `LARGE_LEAF_BYTES` per step) are not read whole:
their statistics come from `FRAME_ROWS` rows drawn per file. Rewards, episodes and
continuous actions are kept as uniform samples (`Sample`); discrete actions are counted.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import AnyArray, Float64Array
from trajkit._core import tree as _tree
from trajkit._core.episodes import complete_episodes
from trajkit._core.images import image_layout
from trajkit._io.filecheck import FileCheck, file_error
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._io.reader import load_with_metadata
from trajkit._io.remote import file_size, local_copy, mappable, naming
from trajkit._io.stats import DatasetStats, Moments
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec
from trajkit.lint.config import LintOptions
from trajkit.lint.run import FileResult, lint_refused, lint_rollout
from trajkit.report._sample import Sample

if TYPE_CHECKING:
    from trajkit._io.discovery import Found

__all__ = [
    "ACTION_SAMPLE",
    "EPISODE_COLUMNS",
    "EPISODE_SAMPLE",
    "FRAME_ROWS",
    "LARGE_LEAF_BYTES",
    "MAX_CLASSES",
    "MAX_FEATURES",
    "REWARD_SAMPLE",
    "ActionProfile",
    "FileProfile",
    "LeafProfile",
    "image_layout",
    "profile_chunk",
    "profile_file",
    "profile_rollout",
    "refused",
]

EPISODE_SAMPLE = 20_000
"""The most complete episodes kept (a uniform sample) for the return and length plots."""

REWARD_SAMPLE = 20_000
"""The most rewards kept (a uniform sample) for the reward histogram."""

ACTION_SAMPLE = 20_000
"""The most continuous actions kept (a uniform sample) for the per-dimension histograms."""

FRAME_ROWS = 256
"""Rows drawn per file from a large observation leaf for its statistics."""

LARGE_LEAF_BYTES = 1024
"""A leaf with at least this many bytes per step (an image) is sampled, not read whole."""

MAX_FEATURES = 256
"""A leaf with more values per step than this (and not an image) is summarised as a whole."""

MAX_CLASSES = 256
"""Integer actions with more distinct values than this (in one dimension) are not counted."""

EPISODE_COLUMNS = ("return", "length", "truncated", "env", "first")
"""The columns of a sampled episode row (float64): its return, length, whether it was cut by
a time limit, its env and its first row in the file."""

_BLOCK_VALUES = 1 << 20  # float64 values converted at once for the moments (8 MiB)


@dataclass(frozen=True)
class LeafProfile:
    """Per-feature statistics of one observation leaf.

    Attributes:
        name: The leaf, as messages name it (`obses`, `obses['image']`).
        shape: Its per-step shape.
        dtype: Its dtype name.
        layout: Its image layout (`"hw"`, `"hwc"`, `"chw"`, `"nhwc"`), or `None`.
        unit: What a feature is: `"feature"` (one value of the step), `"channel"` (an image
            channel) or `"value"` (every value of the leaf together).
        count: How many observations the statistics cover.
        per_row: How many values of each feature one observation holds (an image's pixels).
        sampled: Whether they come from rows drawn per file rather than every row.
        mean: Per feature, the mean.
        m2: Per feature, the sum of squared deviations from the mean.
        low: Per feature, the smallest value.
        high: Per feature, the largest value.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> (leaf,) = profile_rollout(example_rollout(num_steps=4), "a.npz").leaves
        >>> leaf.name, leaf.unit, leaf.count, leaf.low.shape
        ('obses', 'feature', 10, (4,))
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str | None
    unit: str
    count: int
    per_row: int
    sampled: bool
    mean: Float64Array = field(repr=False)
    m2: Float64Array = field(repr=False)
    low: Float64Array = field(repr=False)
    high: Float64Array = field(repr=False)

    @property
    def std(self) -> Float64Array:
        """Per feature, the population standard deviation.

        Examples:
            >>> import numpy as np
            >>> one = np.ones(1)
            >>> LeafProfile("obses", (1,), "float32", None, "feature", 4, 1, False,
            ...             one, 4 * one, one, one).std.tolist()
            [1.0]
        """
        return np.sqrt(self.m2 / max(self.count * self.per_row, 1))

    def fits(self, other: LeafProfile) -> bool:
        """Whether `other` describes the same leaf (name, shape, dtype, features).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> (a,) = profile_rollout(example_rollout(obs_shape=(4,)), "a").leaves
            >>> (b,) = profile_rollout(example_rollout(obs_shape=(3,)), "b").leaves
            >>> a.fits(a), a.fits(b)
            (True, False)
        """
        return (self.name, self.shape, self.dtype, self.unit, self.low.shape) == (
            other.name,
            other.shape,
            other.dtype,
            other.unit,
            other.low.shape,
        )

    def merge(self, other: LeafProfile) -> LeafProfile:
        """The statistics of both sets of observations (Chan et al.'s pairwise update).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> (a,) = profile_rollout(example_rollout(num_steps=4), "a").leaves
            >>> a.merge(a).count
            20
        """
        mean, m2, _ = _chan(
            self.mean,
            self.m2,
            self.count * self.per_row,
            other.mean,
            other.m2,
            other.count * other.per_row,
        )
        return replace(
            self,
            count=self.count + other.count,
            sampled=self.sampled or other.sampled,
            mean=mean,
            m2=m2,
            low=np.minimum(self.low, other.low),
            high=np.maximum(self.high, other.high),
        )


@dataclass(frozen=True)
class ActionProfile:
    """The actions of the steps (`model_outs['actions'][:T]`): counted or sampled.

    Attributes:
        shape: The per-step shape.
        dtype: The dtype name.
        counts: Integer actions: per dimension (of the flattened step), how often each value
            was taken; `None` for float actions, or integers of more than `MAX_CLASSES`
            values.
        sample: Otherwise a uniform sample of the steps' actions, float64 `[n, D]`.
        low: Per dimension, the smallest action.
        high: Per dimension, the largest action.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> p = profile_rollout(example_rollout(num_steps=8, num_actions=3), "a").actions
        >>> p.shape, sum(p.counts[0].values())
        ((), 16)
    """

    shape: tuple[int, ...]
    dtype: str
    counts: tuple[Counter[int], ...] | None
    sample: Sample | None
    low: Float64Array = field(repr=False)
    high: Float64Array = field(repr=False)

    @property
    def dims(self) -> int:
        """The number of action dimensions (values per step).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(action_kind="box", action_shape=(2,))
            >>> profile_rollout(r, "a").actions.dims
            2
        """
        return len(self.low)

    def fits(self, other: ActionProfile) -> bool:
        """Whether `other` has the same layout and kind (counted or sampled).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> a = profile_rollout(example_rollout(), "a").actions
            >>> a.fits(a)
            True
        """
        return (self.shape, self.dtype, self.counts is None) == (
            other.shape,
            other.dtype,
            other.counts is None,
        )

    def merge(self, other: ActionProfile, rng: np.random.Generator) -> ActionProfile:
        """Both sets of actions: counts added, samples merged; too many classes: sampled.

        Examples:
            >>> import numpy as np
            >>> from trajkit.testing import example_rollout
            >>> a = profile_rollout(example_rollout(num_steps=8), "a").actions
            >>> sum(a.merge(a, np.random.default_rng(0)).counts[0].values())
            32
        """
        counts = sample = None
        if self.counts is not None and other.counts is not None:
            counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        if self.sample is not None and other.sample is not None:
            sample = self.sample.merge(other.sample, ACTION_SAMPLE, rng)
        return ActionProfile(
            self.shape,
            self.dtype,
            counts,
            sample,
            np.minimum(self.low, other.low),
            np.maximum(self.high, other.high),
        )


@dataclass(frozen=True)
class FileProfile:
    """What the report keeps of one file.

    Attributes:
        check: The verdict, as `trajkit validate` gives it.
        metadata: The file's metadata (`None` when the file is refused).
        stats: Its counts: steps, episode ends, complete episodes' returns and lengths.
        rewards: A sample of its rewards.
        reward_moments: The moments of all of its rewards.
        episodes: A sample of its complete episodes, rows of `EPISODE_COLUMNS`.
        best: The complete episode with the highest return (a row), if any.
        worst: The one with the lowest return.
        actions: Its actions, if it has `model_outs['actions']`.
        leaves: Its observation leaves, in `flatten` order.
        lint: Lint's results on the file, when lint runs.
        lint_failure: The error a lint check raised on it (a bug), if one did.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> p = profile_rollout(example_rollout(num_steps=32, num_envs=2), "a.npz")
        >>> p.check.ok, p.stats.steps, p.rewards.population
        (True, 64, 64)
    """

    check: FileCheck
    metadata: RolloutFileMetadata | None = None
    stats: DatasetStats = field(default_factory=DatasetStats)
    rewards: Sample | None = None
    reward_moments: Moments = field(default_factory=Moments)
    episodes: Sample | None = None
    best: Float64Array | None = field(default=None, repr=False)
    worst: Float64Array | None = field(default=None, repr=False)
    actions: ActionProfile | None = None
    leaves: tuple[LeafProfile, ...] = ()
    lint: FileResult | None = field(default=None, repr=False)
    lint_failure: str | None = None


def profile_file(
    path: str,
    *,
    spec: RolloutSpec | None = None,
    options: LintOptions | None = None,
    max_bytes: int | None,
    seed: int,
) -> FileProfile:
    """Load one file as `trajkit validate` checks it, profile and lint it; never raises for it.

    Args:
        path: A local path or an fsspec URL.
        spec: Also require conformance to this spec (a `Dataset`'s).
        options: The lint checks to run on the loaded rollout; `None` for none.
        max_bytes: The size limit, as for `trajkit.load`.
        seed: Seeds the file's samples, with its path.

    Returns:
        The profile; for a refused file, its verdict (and TK001) alone.

    Examples:
        >>> profile_file("missing.npz", max_bytes=None, seed=0).check.problems
        ('cannot open: ...',)
    """
    nbytes = 0
    try:
        with local_copy(path, max_bytes) as local, naming(path):
            nbytes = file_size(local)
            rollout, metadata = load_with_metadata(
                local, mmap=mappable(path), verify=True, max_bytes=max_bytes
            )
            problems = tuple(spec.check(rollout)) if spec is not None else ()
            profile = (
                FileProfile(FileCheck(path, problems, nbytes))  # as trajkit validate --spec
                if problems
                else profile_rollout(rollout, path, nbytes=nbytes, metadata=metadata, seed=seed)
            )
            return _linted(profile, rollout, metadata, options)
    except RolloutFileError as exc:
        problem = file_error(exc)
    except Exception as exc:  # a bug must not stop the report
        problem = f"internal error (please report it): {type(exc).__name__}: {exc}"
    return refused(FileCheck(path, (problem,), nbytes), options)


def refused(check: FileCheck, options: LintOptions | None) -> FileProfile:
    """The profile of a file that cannot be read: its verdict, and lint's TK001."""
    lint = None if options is None else lint_refused(check.path, "; ".join(check.problems), options)
    return FileProfile(check, lint=lint)


def _linted(
    profile: FileProfile,
    rollout: Rollout,
    metadata: RolloutFileMetadata,
    options: LintOptions | None,
) -> FileProfile:
    """`profile` with lint's results on the loaded rollout (or the error a check raised)."""
    if options is None:
        return profile
    try:
        return replace(profile, lint=lint_rollout(rollout, profile.check.path, metadata, options))
    except Exception as exc:  # a bug in a check: reported, and the other files linted
        failure = f"{profile.check.path}: {type(exc).__name__}: {exc}"
        return replace(profile, lint_failure=failure)


def profile_chunk(
    items: Sequence[Found | FileCheck],
    *,
    spec: RolloutSpec | None = None,
    options: LintOptions | None = None,
    max_bytes: int | None,
    seed: int,
) -> list[FileProfile]:
    """`profile_file` over a chunk of discovered files; discovery's verdicts pass through.

    Examples:
        >>> profile_chunk([FileCheck("x", ("no such file",))], max_bytes=None, seed=0)
        [FileProfile(check=FileCheck(path='x', problems=('no such file',), nbytes=0), ...)]
    """
    return [
        refused(item, options)
        if isinstance(item, FileCheck)
        else profile_file(item.path, spec=spec, options=options, max_bytes=max_bytes, seed=seed)
        for item in items
    ]


def profile_rollout(
    rollout: Rollout,
    path: str,
    *,
    nbytes: int = 0,
    metadata: RolloutFileMetadata | None = None,
    seed: int = 0,
) -> FileProfile:
    """The profile of a valid rollout (the file `path` of `nbytes` bytes).

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> p = profile_rollout(example_rollout(num_steps=64, num_envs=2), "a.npz")
        >>> p.episodes.values.shape[1] == len(EPISODE_COLUMNS), p.best is not None
        (True, True)
    """
    rng = np.random.default_rng([seed, zlib.crc32(path.encode("utf-8", "surrogateescape"))])
    episodes, best, worst = _episodes(rollout, rng)
    rews = np.asarray(rollout.rews).reshape(-1)
    return FileProfile(
        check=FileCheck(path, (), nbytes),
        metadata=metadata,
        stats=DatasetStats.of(rollout, nbytes),
        rewards=Sample.of(rews.astype(np.float64), REWARD_SAMPLE, rng),
        reward_moments=Moments.of(rews),
        episodes=episodes,
        best=best,
        worst=worst,
        actions=_actions(rollout, rng),
        leaves=tuple(
            _leaf(_tree.format_path("obses", where), np.asarray(leaf), rng)
            for where, leaf in _tree.flatten(rollout.obses)
        ),
    )


def _episodes(
    rollout: Rollout, rng: np.random.Generator
) -> tuple[Sample, Float64Array | None, Float64Array | None]:
    """The complete episodes' sample, and the best and worst of them (rows)."""
    stats = rollout.episode_stats()
    env, first, last = complete_episodes(rollout.dones)
    cut = np.zeros(len(env))
    if rollout.truncated is not None and len(env):
        cut = (np.asarray(rollout.truncated)[last - 1, env] == 1).astype(np.float64)
    rows = np.column_stack([stats.returns, stats.lengths, cut, env, first]).astype(np.float64)
    if not len(rows):
        return Sample(rows, 0), None, None
    best, worst = rows[int(np.argmax(rows[:, 0]))], rows[int(np.argmin(rows[:, 0]))]
    return Sample.of(rows, EPISODE_SAMPLE, rng), best, worst


def _actions(rollout: Rollout, rng: np.random.Generator) -> ActionProfile | None:
    actions = rollout.model_outs.arrays.get("actions")
    if actions is None:
        return None
    steps = np.asarray(actions)[: rollout.num_steps]
    flat = steps.reshape(steps.shape[0] * steps.shape[1], math.prod(steps.shape[2:]))
    shape, dtype = tuple(actions.shape[2:]), str(actions.dtype)
    if flat.shape[0] == 0:
        empty = np.full(flat.shape[1], np.nan)
        return ActionProfile(
            shape, dtype, None, Sample(np.zeros((0, flat.shape[1])), 0), empty, empty
        )
    low = flat.min(axis=0).astype(np.float64)
    high = flat.max(axis=0).astype(np.float64)
    counts = _counts(flat) if np.issubdtype(flat.dtype, np.integer) else None
    sample = None if counts is not None else Sample.of(flat.astype(np.float64), ACTION_SAMPLE, rng)
    return ActionProfile(shape, dtype, counts, sample, low, high)


def _counts(flat: AnyArray) -> tuple[Counter[int], ...] | None:
    """Per column, how often each value occurs; `None` past `MAX_CLASSES` values in one."""
    counts: list[Counter[int]] = []
    for column in flat.T:
        values, times = np.unique(column, return_counts=True)
        if len(values) > MAX_CLASSES:
            return None
        counts.append(Counter(dict(zip(values.tolist(), times.tolist(), strict=True))))
    return tuple(counts)


def _leaf(name: str, leaf: AnyArray, rng: np.random.Generator) -> LeafProfile:
    """One leaf's per-feature statistics, over every row or (large leaves) drawn rows."""
    shape = tuple(int(d) for d in leaf.shape[2:])
    rows = leaf.reshape(leaf.shape[0] * leaf.shape[1], *shape)
    step_bytes = leaf.dtype.itemsize * math.prod(shape)
    sampled = step_bytes >= LARGE_LEAF_BYTES and len(rows) > FRAME_ROWS
    if sampled:
        rows = rows[np.sort(rng.choice(len(rows), FRAME_ROWS, replace=False))]
    layout = image_layout(shape, leaf.dtype)
    unit, features = _features(rows, shape, layout)
    mean, m2, low, high = _moments(features)
    per_row = len(features) // len(rows) if len(rows) else 1
    return LeafProfile(
        name, shape, str(leaf.dtype), layout, unit, len(rows), per_row, sampled, mean, m2, low, high
    )


def _features(rows: AnyArray, shape: tuple[int, ...], layout: str | None) -> tuple[str, AnyArray]:
    """The rows as `[n, F]` features: flattened, per image channel, or one value.

    The rows of an image become one row per pixel, with a column per channel.
    """
    if layout is not None:
        channels = rows if layout != "chw" else np.moveaxis(rows, 1, -1)
        width = 1 if layout == "hw" else channels.shape[-1]
        return "channel", channels.reshape(-1, width)
    size = math.prod(shape)
    if size <= MAX_FEATURES:
        return "feature", rows.reshape(len(rows), size)
    return "value", rows.reshape(-1, 1)


def _moments(values: AnyArray) -> tuple[Float64Array, Float64Array, Float64Array, Float64Array]:
    """Per column of `[n, F]`: mean, sum of squared deviations, min, max (blocks of rows)."""
    width = values.shape[1]
    if len(values) == 0:
        nan = np.full(width, np.nan)
        return nan, np.zeros(width), nan, nan
    mean, m2, count = np.zeros(width), np.zeros(width), 0
    block = max(1, _BLOCK_VALUES // max(width, 1))
    for start in range(0, len(values), block):
        part = np.asarray(values[start : start + block], dtype=np.float64)
        part_mean = part.mean(axis=0)
        part_m2 = ((part - part_mean) ** 2).sum(axis=0)
        mean, m2, count = _chan(mean, m2, count, part_mean, part_m2, len(part))
    low = np.asarray(values.min(axis=0), dtype=np.float64)
    high = np.asarray(values.max(axis=0), dtype=np.float64)
    return mean, m2, low, high


def _chan(
    mean_a: Float64Array,
    m2_a: Float64Array,
    n_a: int,
    mean_b: Float64Array,
    m2_b: Float64Array,
    n_b: int,
) -> tuple[Float64Array, Float64Array, int]:
    """Merge two sets' means and sums of squared deviations (Chan, Golub and LeVeque)."""
    if n_b == 0:
        return mean_a, m2_a, n_a
    if n_a == 0:
        return mean_b, m2_b, n_b
    n = n_a + n_b
    delta = mean_b - mean_a
    return mean_a + delta * (n_b / n), m2_a + m2_b + delta**2 * (n_a * n_b / n), n
