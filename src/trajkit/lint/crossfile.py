"""Checks across the files of a dataset (TK2xx; TK110's and TK115's evidence), in one pass.

Each file is summarised where it is checked (in a worker process): per observation feature
its smallest and largest value, its rewards' count, scale and values, a content hash of its
arrays, its recording's identity, and the evidence of TK110 and TK115. The summaries are
small; `CrossFileChecks` folds them in, in file order, as they come back from the workers.

- TK201 (inferred): a feature of a leaf of `obses` whose smallest and largest values are
  equal over the whole dataset, with at least `MIN_OBSERVATIONS` observations and
  `MIN_EPISODES` episode starts, unless that value is a bound of the feature in the
  recording's observation space (a flag that never went up, a level never left: Box bounds,
  Discrete `start` and its last value, 0 and 1 of MultiBinary). A feature that changes
  rarely is constant over a small dataset by chance: below those counts, nothing is said.
  An image leaf (`trajkit._core.images.image_layout`: uint8 frames) is judged by channel,
  not by pixel: its border, background and HUD pixels never change in real frames (Atari's,
  Procgen's), a channel all of whose pixels never change is a camera that does not look
  (a frame-stack slot never filled, a channel dropped), at a bound of its space or not
  (an image's Box(0, 255) is its dtype's range, no level it rests at).
- TK202 (inferred): a file whose rewards are on another scale than the others', among at
  least `MIN_FILES` files with nonzero rewards and at least `MIN_REWARDS` rewards each.
  Where the other files' rewards take a few values (at most `FEW_VALUES` distinct nonzero
  ones, each taken at least twice on average, as CartPole's 1 or Taxi's -1, -10, 20): a
  file whose nonzero rewards share none of them, or take more than that many values, when
  the chance that its k nonzero rewards all miss the others' values, at the rate the
  others took a value once only (an upper bound of the values not seen yet), is at most
  `trajkit.lint.evidence.CHANCE`. Else:
  a file whose typical reward magnitude (the median of |r|) is more than
  `reward_scale_ratio` times that of every other file (a file whose rewards are smaller
  is a good policy's, not judged). Files whose recording names a vector wrapper that
  changes rewards (their scale drifts by design) are left out.
- TK203 (exact): a file whose arrays are exactly those of an earlier file, unless both are
  files of one recording with other indices, or, without recordings, the file continues
  the file listed before it (its row 0 is that file's last): a deterministic env repeats
  itself.
- TK204 (exact): two files that claim the same index of one recording, with other arrays:
  a recording captured once and saved with every file.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._core.images import channel_axes, image_layout
from trajkit._models.rollout import Rollout
from trajkit._models.rules import named_arrays
from trajkit.lint.alignment import (
    ActionFit,
    RewardShift,
    action_fit,
    misaligned_actions,
    reward_shift,
    shifted_rewards,
)
from trajkit.lint.boundaries import (
    FinalEvidence,
    PhantomEvidence,
    StartJumps,
    final_evidence,
    final_is_reset,
    misplaced_starts,
    phantom_evidence,
    phantom_findings,
    start_jumps,
)
from trajkit.lint.columns import (
    Copy,
    Frozen,
    copied_columns,
    copies,
    frozen_columns,
    frozen_findings,
)
from trajkit.lint.config import LintOptions
from trajkit.lint.episodes import changes_observations, row_digest
from trajkit.lint.evidence import CHANCE, rate_bound
from trajkit.lint.policy import LogpFit, logp_fit, mismatch_findings
from trajkit.lint.registry import Finding
from trajkit.lint.spaces import box_bound, leaf_space

__all__ = [
    "FEW_VALUES",
    "MIN_EPISODES",
    "MIN_FILES",
    "MIN_OBSERVATIONS",
    "MIN_REWARDS",
    "CrossFileChecks",
    "FileSummary",
    "summarize",
]

MIN_OBSERVATIONS = 10_000
"""TK201 judges a feature constant only over at least this many observations..."""

MIN_EPISODES = 100
"""...and at least this many episode starts."""

FEW_VALUES = 16
"""TK202: rewards with at most this many distinct nonzero values take "a few values"."""

MIN_FILES = 3
"""TK202: the fewest files compared (the odd one is the one the others outvote)..."""

MIN_REWARDS = 32
"""...each with at least this many rewards (a few steps are no sample of an env's rewards)."""

_SHOWN = 5  # constant features (channels) named per leaf


@dataclass(frozen=True)
class Rewards:
    """A file's rewards, for TK202.

    Attributes:
        count: How many; `sumsq` their sum of squares; `typical` the median magnitude.
        values: The distinct nonzero rewards, sorted, when at most `FEW_VALUES`; else `None`.
        wrapped: The recording names a vector wrapper that changes rewards.
        nonzero: How many rewards are not 0; `common` the `FEW_VALUES` most common of them;
            `counts` how often each of `values` is taken.
    """

    count: int
    sumsq: float
    typical: float
    values: tuple[float, ...] | None
    wrapped: bool = False
    nonzero: int = 0
    common: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()

    @property
    def scale(self) -> float:
        """The root mean square of the rewards (0 without rewards).

        Examples:
            >>> Rewards(4, 16.0, 2.0, (2.0,)).scale
            2.0
        """
        return math.sqrt(self.sumsq / self.count) if self.count else 0.0


@dataclass(frozen=True)
class FileSummary:
    """What the checks across files need of one file.

    Attributes:
        path: The file.
        ranges: Per leaf of `obses` (by its name, e.g. `obses['image']`): the per-feature
            minimum and maximum, float64 of the leaf's per-step shape.
        observations: The number of observations (rows times envs).
        starts: The number of episode starts (rows with `dones = 1`).
        rewards: Its rewards, for TK202.
        digest: A hash of every array (names, dtypes, shapes, bytes).
        recording: `(id, index)` of its recording, if it has one.
        head, tail: Hashes of its first and last rows (observations and dones).
        bounds: Per leaf, the bounds (low, high) of the recording's observation space.
        images: Per image leaf, its layout (`trajkit._core.images.image_layout`).
        actions: TK103's evidence; `logp` TK110's; `phantom` TK108's; `shift` TK102's;
            `jumps` TK109's; `copies` TK112's; `finals` TK114's (each where the file has it).
        frozen: TK115's evidence; `num_steps` is T.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> s = summarize(example_rollout(num_steps=4, num_envs=2), "a.npz")
        >>> s.observations, s.rewards.count, sorted(s.ranges)
        (10, 8, ['obses'])
    """

    path: str
    ranges: dict[str, tuple[AnyArray, AnyArray]] = field(repr=False)
    observations: int
    starts: int
    rewards: Rewards
    digest: str
    recording: tuple[str, int] | None = None
    head: str = ""
    tail: str = ""
    bounds: dict[str, tuple[AnyArray, AnyArray]] = field(default_factory=dict, repr=False)
    images: dict[str, str] = field(default_factory=dict)
    actions: ActionFit | None = None
    logp: LogpFit | None = None
    phantom: PhantomEvidence | None = None
    shift: RewardShift | None = None
    jumps: StartJumps | None = None
    copies: tuple[Copy, ...] = ()
    finals: FinalEvidence | None = None
    frozen: Frozen | None = None
    num_steps: int = 0


def _digest(rollout: Rollout) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for name, array in named_arrays(rollout):
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


def _rewards(rollout: Rollout, recording: Mapping[str, Any]) -> Rewards:
    rews = rollout.rews.astype(np.float64)
    nonzero = rews[rews != 0]
    values, counts = np.unique(nonzero, return_counts=True)
    common = values[np.argsort(-counts, kind="stable")[:FEW_VALUES]]
    wrappers = [str(w) for w in recording.get("wrappers") or ()]
    return Rewards(
        count=int(rews.size),
        sumsq=float(np.square(rews).sum()),
        typical=float(np.median(np.abs(rews))) if rews.size else 0.0,
        values=tuple(values.tolist()) if values.size <= FEW_VALUES else None,
        counts=tuple(counts.tolist()) if values.size <= FEW_VALUES else (),
        wrapped=any("Reward" in w for w in wrappers),
        nonzero=int(nonzero.size),
        common=tuple(common.tolist()),
    )


def _feature_bounds(
    space: Mapping[str, Any] | None, shape: tuple[int, ...]
) -> tuple[AnyArray, AnyArray] | None:
    """A leaf space's per-feature bounds: the values a flag or a level rests at."""
    if space is None:
        return None
    kind = space.get("type")
    try:
        if kind == "Box":
            return box_bound(space.get("low"), shape, -np.inf), box_bound(
                space.get("high"), shape, np.inf
            )
        if kind == "MultiBinary":
            return np.zeros(shape), np.ones(shape)
        if kind in ("Discrete", "MultiDiscrete"):
            size = space.get("n") if kind == "Discrete" else space.get("nvec")
            start = np.broadcast_to(np.asarray(space.get("start", 0), dtype=np.float64), shape)
            top = start + np.broadcast_to(np.asarray(size, dtype=np.float64), shape) - 1
            return start, top
    except (TypeError, ValueError):  # a description this check cannot read
        return None
    return None


def summarize(
    rollout: Rollout,
    path: str,
    recording: Mapping[str, Any] | None = None,
    action_space: Mapping[str, Any] | None = None,
) -> FileSummary:
    """The `FileSummary` of one rollout; the action space is the recording's, else this.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout()
        >>> summarize(r, "a.npz").digest == summarize(r.copy(), "b.npz").digest
        True
    """
    recording = recording or {}
    ranges: dict[str, tuple[AnyArray, AnyArray]] = {}
    bounds: dict[str, tuple[AnyArray, AnyArray]] = {}
    images: dict[str, str] = {}
    rows = rollout.num_steps + 1
    declared = recording.get("observation_space")
    for leaf_path, leaf in _tree.flatten(rollout.obses):
        name = _tree.format_path("obses", leaf_path)
        flat = leaf.reshape(rows * rollout.batch_size, -1)
        shape = leaf.shape[2:]
        ranges[name] = (
            flat.min(axis=0).astype(np.float64).reshape(shape),
            flat.max(axis=0).astype(np.float64).reshape(shape),
        )
        bound = _feature_bounds(leaf_space(declared, tuple(leaf_path)), shape)
        if bound is not None:
            bounds[name] = bound
        layout = image_layout(shape, leaf.dtype)
        if layout is not None:
            images[name] = layout
    identity = None
    if "id" in recording:
        identity = (str(recording["id"]), int(recording["index"]))
    space = recording.get("action_space") or action_space
    return FileSummary(
        path=path,
        ranges=ranges,
        observations=rows * rollout.batch_size,
        starts=int((rollout.dones[:-1] == 1).sum()),
        rewards=_rewards(rollout, recording),
        digest=_digest(rollout),
        recording=identity,
        head=row_digest(rollout, 0),
        tail=row_digest(rollout, rollout.num_steps),
        bounds=bounds,
        images=images,
        actions=action_fit(rollout),
        logp=logp_fit(rollout, space),
        phantom=phantom_evidence(rollout, recording),
        shift=reward_shift(rollout, recording),
        jumps=start_jumps(rollout),
        copies=copies(rollout, by_values=not changes_observations(recording)),
        finals=final_evidence(rollout),
        frozen=frozen_columns(rollout),
        num_steps=rollout.num_steps,
    )


class CrossFileChecks:
    """The checks across files, fed one `FileSummary` at a time, in file order.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> checks = CrossFileChecks(LintOptions(frozenset({"TK203"})))
        >>> r = example_rollout()
        >>> checks.add(summarize(r, "a.npz")), checks.add(summarize(r, "b.npz"))[0].message
        ([], 'the same arrays as a.npz: the rollout is saved twice')
    """

    def __init__(self, options: LintOptions) -> None:
        self.options = options
        self.files: int = 0
        self._ranges: dict[str, tuple[AnyArray, AnyArray]] = {}
        self._bounds: dict[str, tuple[AnyArray, AnyArray]] = {}
        self._images: dict[str, str] = {}
        self._mixed: set[str] = set()  # leaves whose per-step shape differs between files
        self._observations = 0
        self._starts = 0
        self._rewards: list[tuple[str, Rewards]] = []
        self._seen: dict[str, tuple[str, set[tuple[str, int] | None]]] = {}
        self._tail: str | None = None  # the last row of the file before
        self._indices: dict[tuple[str, int], tuple[str, str]] = {}
        self._evidence: list[FileSummary] = []
        self._frozen: list[tuple[str, int, Frozen]] = []

    def add(self, summary: FileSummary) -> list[Finding]:
        """Fold in one file; return the findings known at once (TK203, TK204).

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> CrossFileChecks(LintOptions(frozenset())).add(
            ...     FileSummary("a.npz", {}, 0, 0, Rewards(0, 0.0, 0.0, ()), "x"))
            []
        """
        self.files += 1
        self._observations += summary.observations
        self._starts += summary.starts
        self._fold_ranges(summary)
        rewards = summary.rewards
        if rewards.count >= MIN_REWARDS and rewards.scale > 0 and not rewards.wrapped:
            self._rewards.append((summary.path, summary.rewards))
        self._evidence.append(
            replace(summary, ranges={}, bounds={}, frozen=None)  # what finish() reads
        )
        if summary.frozen is not None:
            self._frozen.append((summary.path, summary.num_steps, summary.frozen))
        found = [f for f in (self._twice(summary), self._reused(summary)) if f is not None]
        self._tail = summary.tail
        return found

    def _fold_ranges(self, summary: FileSummary) -> None:
        for name, bound in summary.bounds.items():
            self._bounds.setdefault(name, bound)
        for name, layout in summary.images.items():
            self._images.setdefault(name, layout)
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

    def _twice(self, summary: FileSummary) -> Finding | None:
        """TK203: the same arrays as an earlier file (not a deterministic repeat)."""
        mine = summary.recording
        first, seen = self._seen.setdefault(summary.digest, (summary.path, set()))
        repeat = (
            mine is not None
            and mine not in seen
            and all(other is not None and other[0] == mine[0] for other in seen)
        )  # one recording, another index: a deterministic env repeats itself
        if mine is None and seen == {None}:
            repeat = summary.head == self._tail  # it continues the file before: a cycle
        seen.add(mine)
        if first == summary.path or repeat or "TK203" not in self.options.codes:
            return None
        return Finding(
            "TK203", f"the same arrays as {first}: the rollout is saved twice", summary.path
        )

    def _reused(self, summary: FileSummary) -> Finding | None:
        """TK204: another file claims this file's recording index."""
        if summary.recording is None:
            return None
        first, digest = self._indices.setdefault(summary.recording, (summary.path, summary.digest))
        if first == summary.path or digest == summary.digest or "TK204" not in self.options.codes:
            return None
        rid, index = summary.recording
        return Finding(
            "TK204",
            f"{first} is index {index} of recording {rid} too, with other arrays: a recording "
            "captured once and saved with every file? (save each rollout with the recorder's "
            "recording of the moment)",
            summary.path,
        )

    def finish(self) -> list[Finding]:
        """The findings whose evidence is the whole dataset, once every file is in.

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> CrossFileChecks(LintOptions(frozenset({"TK201", "TK202"}))).finish()
            []
        """
        codes = self.options.codes
        found = self._steps()
        if "TK115" in codes:
            found.extend(frozen_findings(self._frozen))
        if "TK201" in codes:
            found.extend(self._constant())
        if "TK202" in codes:
            found.extend(self._scale_jumps())
        return found

    def _steps(self) -> list[Finding]:
        """TK102, TK103, TK108-TK110, TK112 and TK114, over the files that show their evidence.

        A file with NEXT_STEP's phantom steps (TK108) is left out of TK102 and TK109 (its
        reward 0 and its jumps are the phantom's); one with its actions on the wrong row
        (TK103), out of TK110.
        """
        codes = self.options.codes

        def evidence(name: str, left_out: Set[str] = frozenset()) -> list[tuple[str, Any]]:
            return [
                (s.path, getattr(s, name))
                for s in self._evidence
                if getattr(s, name) is not None and s.path not in left_out
            ]

        phantom = phantom_findings(evidence("phantom"))
        misaligned = misaligned_actions(evidence("actions"))
        found = [
            *(f for f in phantom if "TK108" in codes),
            *(f for f in misaligned if "TK103" in codes),
        ]
        phantoms = {f.path for f in phantom if f.path is not None}
        if "TK102" in codes:
            found.extend(shifted_rewards(evidence("shift", phantoms)))
        if "TK109" in codes:
            found.extend(misplaced_starts(evidence("jumps", phantoms)))
        if "TK110" in codes:
            shifted = {f.path for f in misaligned if f.path is not None}
            found.extend(mismatch_findings(evidence("logp", shifted)))
        if "TK112" in codes:
            found.extend(copied_columns(evidence("copies")))
        if "TK114" in codes:
            found.extend(final_is_reset(evidence("finals")))
        return found

    def _constant(self) -> list[Finding]:
        if self._observations < MIN_OBSERVATIONS or self._starts < MIN_EPISODES:
            return []
        found = []
        for name, (low, high) in self._ranges.items():
            constant = low == high
            layout = self._images.get(name)
            bounded = name in self._bounds and self._bounds[name][0].shape == low.shape
            if bounded and layout is None:  # an image's Box(0, 255) is its dtype's: no level
                floor, ceiling = self._bounds[name]
                constant &= (low != floor) & (low != ceiling)
            what, index, shown = (
                _features(name, constant, low)
                if layout is None
                else _channels(name, constant, low, layout)
            )
            if not len(index):
                continue
            more = f" (+{len(index) - _SHOWN} more)" if len(index) > _SHOWN else ""
            found.append(
                Finding(
                    "TK201",
                    f"{len(index)} of {what} never change over "
                    f"{self._observations} observations, {self._starts} episode starts and "
                    f"{self.files} file(s): {shown}{more}",
                )
            )
        return found

    def _scale_jumps(self) -> list[Finding]:
        files = self._rewards
        if len(files) < MIN_FILES:
            return []
        pool = _Pool.of([rewards for _, rewards in files])
        found = []
        for path, rewards in files:
            message = _judged(rewards, pool.without(rewards), self.options.reward_scale_ratio)
            if message is not None:
                found.append(Finding("TK202", message, path))
        return found


def _features(name: str, constant: BoolArray, low: AnyArray) -> tuple[str, AnyArray, str]:
    """TK201 by feature: what is judged, the constant features, the first of them named."""
    index = np.argwhere(constant)
    shown = ", ".join(
        f"{name}[..., {', '.join(map(str, i))}] = {low[tuple(i)]:.6g}"
        if i.size
        else f"{name} = {low[()]:.6g}"
        for i in index[:_SHOWN]
    )
    return f"{constant.size} feature(s) of {name}", index, shown


def _channels(
    name: str, constant: BoolArray, low: AnyArray, layout: str
) -> tuple[str, AnyArray, str]:
    """TK201 by channel of an image: the channels every pixel of which is constant.

    Examples:
        >>> low = np.zeros((8, 8, 3)); constant = np.zeros((8, 8, 3), bool)
        >>> constant[:2] = True  # a border: no channel
        >>> len(_channels("obses", constant, low, "hwc")[1])
        0
        >>> constant[..., 2] = True; low[..., 2] = 5
        >>> _channels("obses", constant, low, "hwc")
        ('3 channel(s) of obses (an image, hwc)', array([[2]]), 'obses[..., :, :, 2] = 5')
        >>> low[0, 0, 2] = 9
        >>> _channels("obses", constant, low, "hwc")[2]
        'obses[..., :, :, 2]: one still picture'
    """
    axes = channel_axes(layout)
    still = constant.all(axis=axes)
    index = np.argwhere(still)
    names = []
    for i in index[:_SHOWN]:
        at = iter(i.tolist())
        where = [":" if axis in axes else str(next(at)) for axis in range(low.ndim)]
        pixels = low[tuple(slice(None) if w == ":" else int(w) for w in where)]
        value = (
            f" = {pixels.flat[0]:.6g}"
            if (pixels == pixels.flat[0]).all()
            else ": one still picture"
        )
        names.append(f"{name}[..., {', '.join(where)}]{value}")
    return f"{still.size} channel(s) of {name} (an image, {layout})", index, ", ".join(names)


def _scale_jump(file: Rewards, others: Sequence[Rewards], ratio: float) -> str | None:
    """TK202's message for a file's rewards against the `others`, or None.

    Examples:
        >>> few = [Rewards(40, 40.0, 1.0, (1.0,), nonzero=40, counts=(40,)) for _ in "ab"]
        >>> _scale_jump(Rewards(40, 4e5, 100.0, (100.0,), nonzero=40), few, 10)
        ... # doctest: +ELLIPSIS
        'rewards take the values 100 where the other 2 files take 1 (none in common...'
        >>> _scale_jump(Rewards(40, 40.0, 1.0, (1.0,), nonzero=40), few, 10) is None
        True
    """
    return _judged(file, _Pool.of([file, *others]).without(file), ratio)


@dataclass(frozen=True)
class _Pool:
    """What TK202 weighs of many files' rewards, so that leaving one file out costs no pass.

    Each file is judged against all the others: the pool of every file less that one
    (`without`) gives the numbers of a pool of the others in a time that does not grow with
    their number (n files are judged in n steps, not n * n).
    """

    scales: tuple[float, ...]  # sorted
    typicals: tuple[float, ...]  # sorted
    unlisted: int  # files with too many distinct values to list them
    listed: Counter[float]  # per value, how many files list it
    taken: int  # nonzero rewards
    pooled: Counter[float]  # per value, how often the files took it
    once: int  # values of `pooled` taken once

    @classmethod
    def of(cls, files: Sequence[Rewards]) -> _Pool:
        listed: Counter[float] = Counter()
        pooled: Counter[float] = Counter()
        for o in files:
            listed.update(o.values or ())
            pooled.update(dict(zip(o.values or (), o.counts, strict=False)))
        return cls(
            tuple(sorted(o.scale for o in files)),
            tuple(sorted(o.typical for o in files)),
            sum(o.values is None for o in files),
            listed,
            sum(o.nonzero for o in files),
            pooled,
            sum(1 for c in pooled.values() if c == 1),
        )

    def without(self, file: Rewards) -> _Others:
        """The others of `file`, one of this pool's files."""
        own = dict(zip(file.values or (), file.counts, strict=False))
        listed = set(file.values or ())
        few = len(self.listed) <= FEW_VALUES + len(listed)  # else more than few without it
        return _Others(
            len(self.scales) - 1,
            _median_less(self.scales, file.scale),
            _max_less(self.typicals, file.typical),
            self.unlisted - (file.values is None),
            sorted(v for v, c in self.listed.items() if c > (v in listed)) if few else None,
            self.taken - file.nonzero,
            self.once
            + sum((self.pooled[v] - c == 1) - (self.pooled[v] == 1) for v, c in own.items()),
        )


@dataclass(frozen=True)
class _Others:
    """The other files of a file, as TK202 weighs them.

    Attributes:
        count: How many; `median` their median reward scale; `top` the largest typical
            reward magnitude.
        unlisted: How many of them have too many distinct rewards to list them.
        union: The distinct values they list, sorted; `None` when more than `FEW_VALUES`.
        taken: Their nonzero rewards; `once` how many values they took once.
    """

    count: int
    median: float
    top: float
    unlisted: int
    union: list[float] | None
    taken: int
    once: int


def _median_less(values: tuple[float, ...], value: float) -> float:
    """The median of sorted `values` less one occurrence of `value` (NumPy's median).

    Examples:
        >>> _median_less((1.0, 2.0, 3.0, 10.0), 2.0), _median_less((1.0, 2.0, 3.0), 3.0)
        (3.0, 1.5)
    """
    i = bisect.bisect_left(values, value)
    rest = len(values) - 1

    def at(k: int) -> float:
        return values[k if k < i else k + 1]

    middle = rest // 2
    return at(middle) if rest % 2 else (at(middle - 1) + at(middle)) / 2


def _max_less(values: tuple[float, ...], value: float) -> float:
    """The largest of sorted `values` less one occurrence of `value`."""
    return values[-2] if value == values[-1] else values[-1]


def _judged(file: Rewards, others: _Others, ratio: float) -> str | None:
    """`_scale_jump` against the other files."""
    scale = f"reward scale {file.scale:.6g} against the median {others.median:.6g}"
    union = others.union
    them = f"the other {others.count} files"
    if (
        not others.unlisted
        and union
        and len(union) <= FEW_VALUES
        and others.taken >= 2 * len(union)
    ):
        # a few values, taken often
        return _new_values(file, others, union, them, scale)
    top = others.top
    if top <= 0 or file.typical <= ratio * top:
        return None
    return (
        f"typical reward magnitude (median |r|) {file.typical:.6g} is "
        f"{file.typical / top:.3g}x above the largest {top:.6g} of {them} "
        f"(limit {ratio:g}x): rewards scaled or normalised differently?"
    )


def _new_values(
    file: Rewards, others: _Others, union: list[float], them: str, scale: str
) -> str | None:
    """TK202 where the others' rewards take a few values: a file that takes none of them."""
    # The chance that the file's k nonzero rewards all take values the others never took,
    # at the rate the others' rewards took a value once only (an upper bound of unseen ones).
    if rate_bound(others.once, others.taken) ** file.nonzero > CHANCE:
        return None
    shown = ", ".join(f"{v:g}" for v in union)
    if file.values is None:
        if set(file.common) & set(union):
            return None  # its most common rewards are theirs: a wider range, not a scale
        return (
            f"rewards take a range of values where {them} take only {shown} ({scale}): "
            "rewards normalised?"
        )
    if set(file.values) & set(union):
        return None
    own = ", ".join(f"{v:g}" for v in file.values)
    return (
        f"rewards take the values {own} where {them} take {shown} (none in common; {scale}): "
        "rewards scaled or normalised differently?"
    )
