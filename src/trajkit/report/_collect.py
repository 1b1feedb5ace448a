"""The report's one pass over the files: each profiled and linted where it is read.

Each file is loaded once, profiled and linted (`trajkit.report._profile`) on the engine
behind `trajkit validate`, and the profiles are folded in, in file order, into a
`Collection` (counts, verdicts, schemas, merged samples and per-feature statistics, all
bounded in size whatever the number of files) and lint's results into a `LintFold` (its
findings grouped by code). A progress callback hears of each file as it is folded in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from trajkit._base.types import Float64Array
from trajkit._io.engine import checked_jobs, cpu_count, run_ordered
from trajkit._io.filecheck import FileCheck
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._io.stats import DatasetStats, Moments
from trajkit.lint.config import LintOptions
from trajkit.report._lint import Findings, LintFold
from trajkit.report._profile import (
    EPISODE_SAMPLE,
    REWARD_SAMPLE,
    ActionProfile,
    FileProfile,
    LeafProfile,
    profile_chunk,
)
from trajkit.report._sample import Sample
from trajkit.report._sources import Inputs

__all__ = ["MAX_LISTED", "Collection", "Progress", "collect"]

MAX_LISTED = 200
"""The most files listed (invalid ones, or with another schema); all are counted."""

Progress = Callable[[str], None]
"""Called with a file's path once it has been read (profiled and linted)."""


@dataclass
class Collection:
    """The profiles of a dataset's files, folded in file order.

    Examples:
        >>> from trajkit.report._profile import profile_rollout
        >>> from trajkit.testing import example_rollout
        >>> c = Collection()
        >>> c.add(profile_rollout(example_rollout(num_steps=32), "a.npz"))
        >>> c.add(profile_rollout(example_rollout(num_steps=32, seed=1), "b.npz"))
        >>> c.files, c.stats.steps, c.rewards.population
        (2, 128, 128)
    """

    seed: int = 0
    files: int = 0
    invalid: int = 0
    refused: list[FileCheck] = field(default_factory=list)
    stats: DatasetStats = field(default_factory=DatasetStats)
    metadata: RolloutFileMetadata | None = None
    first_path: str | None = None
    other_schema: list[str] = field(default_factory=list)
    other_schema_count: int = 0
    versions: Counter[int] = field(default_factory=Counter)
    recordings: Counter[str] = field(default_factory=Counter)
    envs: Counter[str] = field(default_factory=Counter)
    num_steps: Counter[int] = field(default_factory=Counter)
    batch_sizes: Counter[int] = field(default_factory=Counter)
    rewards: Sample | None = None
    reward_moments: Moments = field(default_factory=Moments)
    episodes: Sample | None = None  # rows of EPISODE_COLUMNS, then the file's number
    best: Float64Array | None = None
    worst: Float64Array | None = None
    actions: ActionProfile | None = None
    leaves: dict[str, LeafProfile] = field(default_factory=dict)
    mismatched: Counter[str] = field(default_factory=Counter)  # leaves/actions that differ
    _paths: dict[int, str] = field(default_factory=dict)
    _rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def add(self, profile: FileProfile) -> None:
        """Fold in the next file's profile."""
        number = self.files
        self.files += 1
        self.stats = self.stats.merge(
            DatasetStats(files=1, nbytes=profile.check.nbytes)
            if not profile.check.ok
            else profile.stats
        )
        if not profile.check.ok:
            self.invalid += 1
            if len(self.refused) < MAX_LISTED:
                self.refused.append(profile.check)
            return
        self._schema(profile)
        self._samples(profile, number)
        self._actions(profile)
        self._leaves(profile)

    def path_of(self, number: int) -> str:
        """The path of the file numbered `number` (one whose episode is kept)."""
        return self._paths[number]

    def _schema(self, profile: FileProfile) -> None:
        meta = profile.metadata
        if meta is None:
            return
        self.versions[meta.format_version] += 1
        self.num_steps[meta.num_steps] += 1
        self.batch_sizes[meta.batch_size] += 1
        if meta.recording is not None:
            self.recordings[meta.recording.id] += 1
            self.envs[meta.recording.env_id or "(no env id)"] += 1
        if self.metadata is None:
            self.metadata, self.first_path = meta, profile.check.path
        elif meta.spec != self.metadata.spec:
            self.other_schema_count += 1
            if len(self.other_schema) < MAX_LISTED:
                self.other_schema.append(profile.check.path)

    def _samples(self, profile: FileProfile, number: int) -> None:
        rng = self._rng
        self.reward_moments = self.reward_moments.merge(profile.reward_moments)
        if profile.rewards is not None:
            self.rewards = (
                profile.rewards
                if self.rewards is None
                else self.rewards.merge(profile.rewards, REWARD_SAMPLE, rng)
            )
        if profile.episodes is None or profile.best is None or profile.worst is None:
            return
        tagged = Sample(_tag(profile.episodes.values, number), profile.episodes.population)
        self.episodes = (
            tagged if self.episodes is None else self.episodes.merge(tagged, EPISODE_SAMPLE, rng)
        )
        best, worst = _tag(profile.best[None], number)[0], _tag(profile.worst[None], number)[0]
        if self.best is None or best[0] > self.best[0]:
            self.best = best
        if self.worst is None or worst[0] < self.worst[0]:
            self.worst = worst
        self._paths[number] = profile.check.path
        if len(self._paths) > 4 * EPISODE_SAMPLE:
            self._forget_paths()

    def _forget_paths(self) -> None:
        """Keep the paths of the files whose episodes are still kept."""
        kept = {int(n) for n in self.episodes.values[:, -1]} if self.episodes else set()
        kept |= {int(row[-1]) for row in (self.best, self.worst) if row is not None}
        self._paths = {n: p for n, p in self._paths.items() if n in kept}

    def _actions(self, profile: FileProfile) -> None:
        actions = profile.actions
        if actions is None:
            return
        if self.actions is None:
            self.actions = actions
        elif self.actions.fits(actions):
            self.actions = self.actions.merge(actions, self._rng)
        else:
            self.mismatched["model_outs['actions']"] += 1

    def _leaves(self, profile: FileProfile) -> None:
        for leaf in profile.leaves:
            known = self.leaves.get(leaf.name)
            if known is None:
                self.leaves[leaf.name] = leaf
            elif known.fits(leaf):
                self.leaves[leaf.name] = known.merge(leaf)
            else:
                self.mismatched[leaf.name] += 1


def _tag(rows: Float64Array, number: int) -> Float64Array:
    """`rows` with a last column holding the file's number."""
    return np.column_stack([rows, np.full(len(rows), float(number))])


def collect(
    inputs: Inputs,
    options: LintOptions | None = None,
    *,
    jobs: int | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[Collection, Findings]:
    """Profile and lint every file of `inputs`, in order, on every core (or `jobs` processes).

    Args:
        inputs: The files.
        options: The lint checks to run; `None` for none.
        jobs: Processes, this one included; `None` for every core.
        max_bytes: The size limit per file, as for `trajkit.load`.
        seed: Seeds the samples.
        progress: Called with each file's path once it is read.

    Returns:
        The files' profiles folded, and lint's findings.
    """
    work = partial(profile_chunk, spec=inputs.spec, options=options, max_bytes=max_bytes, seed=seed)
    collection = Collection(seed=seed)
    fold = LintFold(options if options is not None else LintOptions(frozenset()))
    results = run_ordered(work, inputs.items(), jobs=checked_jobs(jobs) or cpu_count())
    try:
        for profile in results:
            collection.add(profile)
            fold.add(profile.lint, profile.lint_failure)
            if progress is not None:
                progress(profile.check.path)
    finally:
        close = getattr(results, "close", None)
        if close is not None:  # stop the workers now (Ctrl-C), not when collected
            close()
    return collection, fold.finish()
