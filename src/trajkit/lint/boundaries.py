"""Where episodes end and start: the rows and steps around each boundary (TK104, TK108-9, TK114).

A *boundary* is a row s (1 <= s < T) with `dones[s] = 1`, reached by step s-1 and left by
step s. In a correct rollout `obses[s]` is a reset observation: step s-1 ends an episode,
step s is the first of the next, and `final_obses` holds the true final observation of step
s-1, which the reset replaced.

- TK108, NEXT_STEP's phantom step kept. A loop that keeps every `env.step` of a Gymnasium
  1.x vector env in its default NEXT_STEP mode, with `done = terminated | truncated` on the
  next row, stores the final observation at row s (flagged) and the autoreset step from it
  to the reset observation as step s: reward exactly 0, action ignored, no end. Counted
  over the dataset, reported when every boundary step has reward exactly 0 and ends
  nothing (row 0 counts as a boundary when the recording says the file continues another),
  and:

  - the chance that the boundary steps all earn 0, at the rate q at which the other steps
    that end nothing do, is at most `trajkit.lint.evidence.CHANCE` (q^k, k the distinct
    observations at the boundary rows: steps from one state earn alike, and a fixed start
    state is one piece of evidence however often it is left); or, with at least
    `MIN_BOUNDARIES` of them, the observations after the boundary steps are all one (a
    fixed reset state) while those at the boundary rows are not, and the chance of k - 1
    such coincidences, at the rate p at which two rows of each file are alike, is at most
    `CHANCE` too (a coarse observation repeats by itself);
  - and, with float observations, the observations jump on at least half of the boundary
    steps (final to reset) more than onto their rows (a real first step after a reset that
    earns 0, as LunarLander's, jumps onto its row, not off it).

  Or, exactly, in one file: an episode of L + 1 steps whose last step is flagged as a
  truncation, L the recording's time limit (`max_episode_steps`), and whose first step
  earns exactly 0. `TimeLimit` cuts an episode on its L-th step, so one of its steps is not
  the env's: the first, from the row flagged dones = 1 (the final observation) to the
  reset one. Reported at that first step, in each file that holds such an episode.

  A recording that states the SAME_STEP or DISABLED autoreset mode has no phantom step: TK108
  does not run there.
- TK109, `dones` one row off. With float observations, each step's *jump* is its largest
  change of a feature, in units of that feature's median change per step inside episodes
  of its file. A dataset whose boundaries jump one step after (or before) the flagged row,
  more than `JUMP_FACTOR` times as far as onto it, at most of its boundaries (at least
  `MIN_BOUNDARIES`), has its `dones` one row off, when the binomial chance of as many such
  boundaries, at the rate they jump the other way (the mirror, which no shift explains), is
  at most `trajkit.lint.evidence.CHANCE`: each file where it shows is reported.
- TK104, the reset observation stored twice: every step that ends an episode (at least
  `MIN_BOUNDARIES`) has reward 0 and `obses[t+1]` equal to `obses[t]`, with float
  observations, the repeated observations are not all one (a fixed start state that
  never moves repeats by itself), and the chance of as many repeats, at the rate p at which
  two rows of the file are alike, is at most `CHANCE` (p^k: features saturated at a bound
  repeat by themselves).
- TK114, final and reset observations confused: over the dataset, `final_obses` equal, bit
  for bit, to the observation of the row that follows (the next episode's first) at every
  one of the k episode ends (at least `MIN_BOUNDARIES`), while those first observations are
  not all one (a task that ends where it starts may end on its fixed start state), and the
  chance of as many by coincidence, at the rate p at which two rows of each file are alike,
  is at most `trajkit.lint.evidence.CHANCE` (the product of the files' p^k). One side holds
  the other's observation: `next_obs` after the autoreset stored as the final one, or the
  final observation stored as the next row.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends
from trajkit.lint.episodes import count_places, first_place, float_leaves
from trajkit.lint.evidence import CHANCE, binomial_tail, rate_bound
from trajkit.lint.registry import Finding

__all__ = [
    "JUMP_FACTOR",
    "MIN_BOUNDARIES",
    "FinalEvidence",
    "StartJumps",
    "boundary_rows",
    "final_evidence",
    "final_is_reset",
    "misplaced_starts",
    "PhantomEvidence",
    "phantom_evidence",
    "phantom_finding",
    "phantom_findings",
    "reset_twice",
    "start_jumps",
]

MIN_BOUNDARIES = 2
"""TK104, TK108 (by the reset state), TK109 and TK114: the fewest boundaries judged."""

JUMP_FACTOR = 2.0
"""TK109: how many times farther the observations jump off the flagged row than onto it."""


def boundary_rows(rollout: Rollout) -> BoolArray:
    """`[T, B]`: whether step s leaves a boundary row (`dones[s] = 1`, 1 <= s < T).

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1)
        >>> r = r.replace(dones=np.array([[1], [0], [1], [0], [1]]))
        >>> boundary_rows(r)[:, 0].tolist()
        [False, False, True, False]
    """
    T = rollout.num_steps
    rows = np.zeros((T, rollout.batch_size), dtype=bool)
    rows[1:] = rollout.dones[1:T] == 1
    return rows


def _row_keys(rollout: Rollout, mask: BoolArray, shift: int) -> list[bytes]:
    """The observation of row t + shift, as bytes, for each (t, b) of `mask`, in order."""
    places = np.argwhere(mask)
    keys = [b""] * len(places)
    for _, leaf in _tree.flatten(rollout.obses):
        rows = leaf[places[:, 0] + shift, places[:, 1]]
        for i, row in enumerate(rows):
            keys[i] += np.ascontiguousarray(row).tobytes()
    return keys


@dataclass(frozen=True)
class PhantomEvidence:
    """A file's evidence for TK108.

    Attributes:
        steps: Its boundary steps (the first as `first`, (t, b)); `silent` whether every one
            earns exactly 0 and ends nothing.
        zeros, others: How many of its other steps that end nothing earn exactly 0, of how
            many (a phantom step ends nothing: it is weighed against those).
        wins, judged: With float observations, the boundary steps whose observations jump
            more than onto their rows, of those that can be judged.
        after: Up to two distinct observations after the boundary steps.
        at: The digests of the distinct observations at the boundary rows.
        alike: log10 of the rate at which two rows of the file are alike (`_alike`).
        longer: The episodes of L + 1 steps, truncated on the last and earning 0 on the
            first (L the recording's time limit), and the first step (t, b) of the first.
    """

    steps: int
    silent: bool
    zeros: int
    others: int
    wins: int
    judged: int
    after: frozenset[bytes]
    at: frozenset[bytes]
    first: tuple[int, int] | None
    alike: float = 0.0
    longer: tuple[int, tuple[int, int] | None] = (0, None)


def _alike(rollout: Rollout) -> float:
    """log10 of the rate at which two rows (observations of one env) of a file are alike.

    An upper bound from the counts (`rate_bound`) of equal pairs among all pairs of rows.
    """
    rows = _row_keys(rollout, np.ones((rollout.num_steps + 1, rollout.batch_size), bool), 0)
    n = len(rows)
    equal = sum(c * (c - 1) // 2 for c in Counter(rows).values())
    return math.log10(rate_bound(equal, n * (n - 1) // 2))


def phantom_evidence(
    rollout: Rollout, recording: Mapping[str, Any] | None = None
) -> PhantomEvidence | None:
    """The `PhantomEvidence` of one file; `None` where its recording states no NEXT_STEP.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1)
        >>> r = r.replace(dones=np.array([[1], [0], [0], [1], [0], [0], [1], [0], [0]]),
        ...               rews=np.array([[1.0], [1], [1], [0], [1], [1], [0], [1]]))
        >>> e = phantom_evidence(r)
        >>> e.steps, e.silent, e.zeros, e.others, e.first
        (2, True, 0, 4, (3, 0))
        >>> phantom_evidence(r, {"autoreset_mode": "SAME_STEP"}) is None
        True
    """
    recording = recording or {}
    if recording.get("autoreset_mode") in ("SAME_STEP", "DISABLED"):
        return None
    steps = boundary_rows(rollout)
    if recording.get("index", 0) > 0:  # row 0 is the previous file's row T: a boundary too
        steps[:1] = rollout.dones[:1] == 1  # (no step when T = 0)
    rews = rollout.rews
    ends = episode_ends(rollout.dones)
    k = int(steps.sum())
    others = ~steps & ~ends
    wins, judged = _jump_wins(rollout, steps)
    return PhantomEvidence(
        steps=k,
        silent=bool((rews[steps] == 0).all() and not ends[steps].any()),
        zeros=int((rews[others] == 0).sum()),
        others=int(others.sum()),
        wins=wins,
        judged=judged,
        after=_two(_row_keys(rollout, steps, 1)),
        at=frozenset(_digest(key) for key in _row_keys(rollout, steps, 0)),
        first=first_place(steps) if k else None,
        alike=_alike(rollout) if k else 0.0,
        longer=_one_step_longer(rollout, recording.get("max_episode_steps")),
    )


def _one_step_longer(rollout: Rollout, limit: Any) -> tuple[int, tuple[int, int] | None]:
    """TK108's exact evidence: the episodes of `limit` + 1 steps inside the file.

    Those truncated on their last step and earning exactly 0 on their first: how many, and
    the first step (t, b) of the first (by step, then env).

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1)
        >>> cut = np.array([[0.0], [0], [0], [0], [1], [0]])
        >>> r = r.replace(dones=np.array([[1], [0], [1], [0], [0], [1], [0]]),
        ...               rews=np.zeros((6, 1)), truncated=cut, final_values=0 * cut)
        >>> _one_step_longer(r, 2), _one_step_longer(r, 3), _one_step_longer(r, None)
        ((1, (2, 0)), (0, None), (0, None))
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or rollout.truncated is None:
        return 0, None
    T, cut, rews = rollout.num_steps, rollout.truncated, rollout.rews
    found = []
    for b in range(rollout.batch_size):
        rows = [*np.flatnonzero(rollout.dones[:T, b] == 1).tolist(), T]
        found += [
            (s, b)
            for s, e in itertools.pairwise(rows)
            if e - s == limit + 1 and rollout.dones[e, b] == 1 and cut[e - 1, b] == 1
            if rews[s, b] == 0
        ]
    return len(found), min(found, default=None)


def _digest(key: bytes) -> bytes:
    """A short digest of a row's observation (8 bytes)."""
    return hashlib.blake2b(key, digest_size=8).digest()


def _two(keys: list[bytes]) -> frozenset[bytes]:
    """Up to two distinct keys: all a fixed reset state needs to be told from others."""
    return frozenset(list(dict.fromkeys(keys))[:2])


def phantom_findings(files: list[tuple[str, PhantomEvidence]]) -> list[Finding]:
    """TK108 over the dataset: each file where NEXT_STEP's phantom steps are kept.

    Examples:
        >>> rows = frozenset({b"r1", b"r2", b"r3", b"r4"})
        >>> e = PhantomEvidence(4, True, 0, 30, 0, 0, frozenset(), rows, (3, 0))
        >>> [f.step for f in phantom_findings([("a.npz", e), ("b.npz", e)])]
        [3, 3]
    """
    exact = {path: longer_finding(path, e) for path, e in files if e.longer[0]}
    found = {f.path: f for f in _phantom_steps(files)}
    return [found.get(path) or exact[path] for path, _ in files if path in found or path in exact]


def _phantom_steps(files: list[tuple[str, PhantomEvidence]]) -> list[Finding]:
    """TK108 by the boundary steps' rewards over the dataset (see the module docstring)."""
    mine = [(p, e) for p, e in files if e.steps]
    if not mine or not all(e.silent for _, e in mine):
        return []
    k = sum(e.steps for _, e in mine)
    wins, judged = sum(e.wins for _, e in mine), sum(e.judged for _, e in mine)
    if judged and 2 * wins < judged:
        return []
    q = rate_bound(sum(e.zeros for _, e in mine), sum(e.others for _, e in mine))
    at = set().union(*(e.at for _, e in mine))
    # steps from one state earn alike: a fixed start is one piece of evidence
    if q ** len(at) > CHANCE and not _fixed_reset([e for _, e in mine], len(at)):
        return []
    return [phantom_finding(path, e, k, q) for path, e in mine]


def _fixed_reset(evidence: list[PhantomEvidence], states: int) -> bool:
    """TK108's fixed reset state: the observations after the boundary steps are all one.

    The `states` at them are not, and those k - 1 coincidences, were they rows like any
    other, are a chance of at most `CHANCE` (at each file's rate of alike rows; the largest
    left out for the first).
    """
    k = sum(e.steps for e in evidence)
    after = set().union(*(e.after for e in evidence))
    alike = sum(e.steps * e.alike for e in evidence) - max(e.alike for e in evidence)
    return k >= MIN_BOUNDARIES and len(after) == 1 and states > 1 and alike <= math.log10(CHANCE)


def _jump_wins(rollout: Rollout, steps: BoolArray) -> tuple[int, int]:
    """With float observations, the boundary steps that jump more than onto their rows.

    Of those that jump otherwise than onto their rows: a tie (features that never move
    jump 0 both ways) tells nothing.
    """
    jumps = _jumps(rollout)
    places = np.argwhere(steps)
    places = places[places[:, 0] >= 1]
    if jumps is None or not len(places):
        return 0, 0
    off = jumps[places[:, 0], places[:, 1]]
    on = jumps[places[:, 0] - 1, places[:, 1]]
    return int((off > on).sum()), int((off != on).sum())  # a tie tells nothing


def longer_finding(path: str, evidence: PhantomEvidence) -> Finding:
    """TK108's exact finding: a file with episodes one step longer than the time limit.

    Examples:
        >>> e = PhantomEvidence(0, True, 0, 0, 0, 0, frozenset(), frozenset(), None)
        >>> e = PhantomEvidence(**{**e.__dict__, "longer": (2, (3, 1))})
        >>> print(longer_finding("a.npz", e).format())  # doctest: +ELLIPSIS
        a.npz: env 1, step 3: TK108 [warning] 2 episode(s) run one step more than the ...
    """
    count, first = evidence.longer
    if first is None:  # callers pass evidence with a place; a bug otherwise
        raise ValueError(f"{path}: TK108's evidence names no episode")
    t, b = first
    return Finding(
        "TK108",
        f"{count} episode(s) run one step more than the recording's time limit and are "
        "truncated on their last step, their first step earning exactly 0: the time limit "
        "cut them a step earlier, so the first step, from the row flagged dones = 1, is "
        "NEXT_STEP's autoreset step from the final to the reset observation: a loop that "
        "keeps every env.step of a NEXT_STEP vector env? drop the step after each episode "
        "end (RolloutRecorder does)",
        path,
        b,
        t,
    )


def phantom_finding(path: str, evidence: PhantomEvidence, steps: int, rate: float) -> Finding:
    """TK108's finding for one file of a dataset whose `steps` boundary steps are phantoms.

    Examples:
        >>> e = PhantomEvidence(2, True, 0, 30, 0, 0, frozenset(), frozenset(), (2, 1))
        >>> print(phantom_finding("a.npz", e, 4, 0.09).format())  # doctest: +ELLIPSIS
        a.npz: env 1, step 2: TK108 [warning] every step that leaves a row flagged dones = 1 ...
    """
    if evidence.first is None:  # callers pass evidence with a place; a bug otherwise
        raise ValueError(f"{path}: TK108's evidence names no boundary step")
    t, b = evidence.first
    n = evidence.steps
    return Finding(
        "TK108",
        f"every step that leaves a row flagged dones = 1 ({n} here, {steps} in the dataset, "
        f"where other steps earn 0 at a rate of {rate:.2g}) has reward exactly 0 and ends "
        "nothing, as NEXT_STEP's autoreset step from the final to the reset observation: a "
        "loop that keeps every env.step of a NEXT_STEP vector env? drop the step after each "
        "episode end (RolloutRecorder does)",
        path,
        b,
        t,
    )


def _jumps(rollout: Rollout) -> AnyArray | None:
    """`[T, B]`: each step's largest float-feature change, in median steps; None without."""
    T, B = rollout.num_steps, rollout.batch_size
    inside = ~(boundary_rows(rollout) | np.roll(boundary_rows(rollout), -1, axis=0))
    leaves = [leaf for _, leaf in _tree.flatten(rollout.obses) if leaf.dtype.kind == "f"]
    if not leaves or not inside.any():
        return None
    out = np.zeros((T, B))
    for leaf in leaves:
        change = np.abs(np.diff(leaf.reshape(T + 1, B, -1).astype(np.float64), axis=0))
        typical = np.median(change[inside], axis=0)
        scale = np.where(typical > 0, typical, np.inf)
        out = np.maximum(out, (change / scale).max(axis=-1, initial=0.0))
    return out


@dataclass(frozen=True)
class StartJumps:
    """A file's evidence for TK109, per direction (`after`, `before`).

    The boundaries judged, those whose jump one row off beats the jump onto the row, and
    the first of those.
    """

    counts: dict[str, tuple[int, int, tuple[int, int] | None]]


def start_jumps(rollout: Rollout) -> StartJumps | None:
    """The `StartJumps` of one file, or `None` without float observations or boundaries.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> t = np.arange(13, dtype=np.float32)
        >>> resets = (t >= 4).astype(int) + (t >= 9)  # resets at rows 4 and 9
        >>> obs = (t - 100 * resets)[:, None, None]
        >>> dones = np.isin(t, [0, 5, 10]).astype(float)[:, None]  # flagged one row late
        >>> r = example_rollout(num_steps=12, num_envs=1).replace(obses=obs, dones=dones)
        >>> start_jumps(r).counts["before"]
        (2, 2, (5, 0))
    """
    rows = boundary_rows(rollout)
    jumps = _jumps(rollout) if rows.any() else None
    if jumps is None:
        return None
    T = rollout.num_steps
    places = np.argwhere(rows)
    on = jumps[places[:, 0] - 1, places[:, 1]]
    counts: dict[str, tuple[int, int, tuple[int, int] | None]] = {}
    for shift, word in ((1, "after"), (-1, "before")):
        at = places[:, 0] - 1 + shift
        valid = (at >= 0) & (at < T)
        off = jumps[at[valid], places[valid, 1]]
        wins = off > JUMP_FACTOR * on[valid]
        first = tuple(int(x) for x in places[valid][wins.argmax()]) if wins.any() else None
        counts[word] = (int(valid.sum()), int(wins.sum()), first)  # type: ignore[assignment]
    return StartJumps(counts)


def misplaced_starts(files: list[tuple[str, StartJumps]]) -> list[Finding]:
    """TK109 over the dataset: `dones` one row off the rows where the observations jump.

    Examples:
        >>> late = StartJumps({"after": (12, 0, None), "before": (12, 12, (5, 0))})
        >>> misplaced_starts([("a.npz", late)])[0].message  # doctest: +ELLIPSIS
        'the observations jump one row before the row flagged dones = 1 at 12 of 12 episode ...
    """
    for word, mirror in (("after", "before"), ("before", "after")):
        valid = sum(j.counts[word][0] for _, j in files)
        wins = sum(j.counts[word][1] for _, j in files)
        p = rate_bound(
            sum(j.counts[mirror][1] for _, j in files), sum(j.counts[mirror][0] for _, j in files)
        )
        if valid < MIN_BOUNDARIES or 2 * wins <= valid or binomial_tail(valid, p, wins) > CHANCE:
            continue
        found = []
        for path, jumps in files:
            _, here, first = jumps.counts[word]
            if first is None:
                continue
            t, b = first
            found.append(
                Finding(
                    "TK109",
                    f"the observations jump one row {word} the row flagged dones = 1 at "
                    f"{wins} of {valid} episode starts of the dataset ({here} here; this one: "
                    f"row {t}): dones stored one row {'early' if word == 'after' else 'late'}?",
                    path,
                    b,
                    t,
                )
            )
        return found
    return []


def _equal_rows(rollout: Rollout) -> BoolArray:
    """[T, B]: whether obses[t + 1] equals obses[t] in every leaf."""
    T, B = rollout.num_steps, rollout.batch_size
    same = np.ones((T, B), dtype=bool)
    for _, leaf in _tree.flatten(rollout.obses):
        eq = leaf[1:] == leaf[:-1]
        same &= eq.reshape(T, B, -1).all(axis=-1)
    return same


def reset_twice(rollout: Rollout, path: str | None) -> Finding | None:
    """TK104: every episode end repeats its observation with reward 0.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=29, num_envs=1)
        >>> dones = np.zeros((30, 1)); dones[[0, 4, 8]] = 1
        >>> r = r.replace(dones=dones, rews=np.ones((29, 1)))
        >>> r.obses[4], r.obses[8] = r.obses[3], r.obses[7]
        >>> r.rews[[3, 7]] = 0
        >>> reset_twice(r, "a.npz").step
        3
    """
    if rollout.num_steps == 0 or not float_leaves(rollout):
        return None
    ends = episode_ends(rollout.dones)
    if ends.sum() < MIN_BOUNDARIES:
        return None
    twice = ends & (rollout.rews == 0) & _equal_rows(rollout)
    # Every end, not some: in a discrete space the reset state can equal the last by chance;
    # and more often than rows of the file are alike (a Box feature saturated at a bound).
    if twice.sum() < ends.sum() or len(set(_row_keys(rollout, twice, 0))) < 2:
        return None
    if int(ends.sum()) * _alike(rollout) > math.log10(CHANCE):
        return None
    t, b = first_place(twice)
    return Finding(
        "TK104",
        f"obses[{t + 1}] repeats obses[{t}] across an episode end with reward 0 "
        f"({count_places(twice)}): the reset observation stored twice, as the last of an "
        "episode and the first of the next?",
        path,
        b,
        t,
    )


@dataclass(frozen=True)
class FinalEvidence:
    """A file's evidence for TK114.

    Attributes:
        ends: Its episode ends with a final observation; `same` whether every one equals
            the next row's observation.
        chance: log10 of the chance of that by coincidence (`ends` times log10 p, p the rate
            at which two rows of the file are alike).
        resets: Up to two distinct next-row observations.
        first: The first end (t, b).
    """

    ends: int
    same: bool
    chance: float
    resets: frozenset[bytes]
    first: tuple[int, int] | None


def final_evidence(rollout: Rollout) -> FinalEvidence | None:
    """The `FinalEvidence` of one file, or `None` without `final_obses`.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1)
        >>> dones = np.zeros((9, 1)); dones[[0, 3, 6]] = 1
        >>> e = final_evidence(r.replace(dones=dones, final_obses=r.obses[[3, 6], 0]))
        >>> e.ends, e.same, e.first
        (2, True, (2, 0))
    """
    if rollout.final_obses is None:
        return None
    ends = np.argwhere(episode_ends(rollout.dones))
    if not len(ends):
        return None
    finals = _tree.leaves(rollout.final_obses)
    same = np.ones(len(ends), dtype=bool)
    for final, (_, leaf) in zip(finals, _tree.flatten(rollout.obses), strict=True):
        nxt = leaf[ends[:, 0] + 1, ends[:, 1]]
        same &= (np.asarray(final) == nxt).reshape(len(ends), -1).all(axis=-1)
    mask = np.zeros((rollout.num_steps, rollout.batch_size), dtype=bool)
    mask[ends[:, 0], ends[:, 1]] = True
    return FinalEvidence(
        ends=len(ends),
        same=bool(same.all()),
        chance=len(ends) * _alike(rollout),
        resets=_two(_row_keys(rollout, mask, 1)),
        first=first_place(mask),
    )


def final_is_reset(files: list[tuple[str, FinalEvidence]]) -> list[Finding]:
    """TK114 over the dataset: every final observation is the next row's.

    Examples:
        >>> e = FinalEvidence(3, True, -4.0, frozenset({b"a", b"b"}), (2, 0))
        >>> [f.step for f in final_is_reset([("a.npz", e)])]
        [2]
    """
    ends = sum(e.ends for _, e in files)
    resets = set().union(*(e.resets for _, e in files)) if files else set()
    chance = sum(e.chance for _, e in files)
    if (
        ends < MIN_BOUNDARIES
        or not all(e.same for _, e in files)
        or len(resets) < 2
        or chance > math.log10(CHANCE)
    ):
        return []
    found = []
    for path, e in files:
        if e.first is None:  # only files with a final observation that repeats are here
            raise ValueError(f"{path}: TK114's evidence names no final observation")
        t, b = e.first
        found.append(
            Finding(
                "TK114",
                f"final_obses equal the next row's observation, the next episode's first, at "
                f"all {ends} episode ends of the dataset ({e.ends} here; this one: step {t}): "
                "the observation after the autoreset stored as the final one, or the final "
                "one stored as the next row?",
                path,
                b,
                t,
            )
        )
    return found
