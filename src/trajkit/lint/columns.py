"""Env columns that copy each other or do not move (TK112, TK115).

- TK112, envs seeded alike (`envs.reset(seed=[seed] * B)`): the k-th episode of every env
  starts from the same observation. The starts of every env are collected over a whole
  recording (joined across files by `trajkit.lint.join`); two starts out of order (another
  k, or one env's own) are alike at a rate p, and the binomial chance of as many k-th
  starts repeating another env's k-th start as there are (m envs starting alike are m - 1
  coincidences; the j-th env's at most (j - 1) p, at their mean rate), must be at most
  `CHANCE` (`trajkit.lint.evidence`). Starts on one row share their time: a running
  normaliser over a fixed start makes them alike, so they are compared only where a
  recording declares the vector wrappers (none that changes observations), and weighed at
  the rate at which two envs' rows on one row are alike, if larger (envs in lockstep
  start alike too), where any pair of rows can be judged (envs alike on every row whose
  starts vary are in lockstep by their seeds). A fixed reset (every start alike) is never
  evidence, nor is one shared start among few.
- TK112, one column copied into another (the loop stores `obs[0]` for every env): two env
  columns whose observations are equal on every row of a file, while their actions,
  rewards or `dones` differ somewhere (envs that do the same thing are a deterministic
  env, not a copy). Over the dataset's files where a pair of envs is so, the column's n
  distinct changes of value (from one observation to the next different one) must make a
  chance of at most `CHANCE` (p^n, p the rate at which a change repeats an earlier one): an
  observation that moves through many values does not follow another env's by chance, a
  coarse one that cycles through a few (a fixed start, short episodes) may. Or, whatever the
  values: the policy's outputs of the two envs differ on at least `MIN_DISAGREE` rows where
  their inputs are equal (see below): the policy saw other observations than those stored.
- TK115, observation rows aliased to one buffer (a loop that appends the env's reused
  `[B, ...]` observation array): a file whose every env column keeps one observation on
  all its rows, across an episode start (a reset that changes nothing), while in the other
  files a step leaves the observation unchanged at a rate q that makes T·B unchanged steps
  a chance of at most `CHANCE` (q^(T·B); where observations stay put at all, q is the
  larger rate at which a kept observation is kept again: they stay put in runs, a coarse
  observation stuck at a level; with float observations only: integers and bits stay put
  by themselves for as long as a deterministic env rests, in runs no rate bounds), or the
  policy's outputs change on at least
  `MIN_DISAGREE` of its steps while its inputs do not (see below). One env that stays put
  in a coarse observation space is not that.

The policy's outputs are a function of its inputs. The outputs in `POLICY_FUNCTIONS`
(logits, value, Gaussian mean and std: not the sampled action or its log-probability) are
computed from the observation, and the recurrent or env state in `states` where there is
one; two places of one file with equal inputs get equal outputs (to `OUTPUT_TOL`,
relative). Where they do not, the stored observation is not the one the policy saw. A
policy that reads more than it is given (a recurrent state not stored in `states`, a
network updated while the file was recorded) breaks this: these checks weigh it only where
the observations already look copied or frozen.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends
from trajkit.lint.episodes import float_leaves
from trajkit.lint.evidence import CHANCE, binomial_tail, rate_bound
from trajkit.lint.registry import Finding

__all__ = [
    "MIN_DISAGREE",
    "lockstep_pairs",
    "OUTPUT_TOL",
    "POLICY_FUNCTIONS",
    "Copy",
    "Frozen",
    "Start",
    "copied_columns",
    "copies",
    "frozen_columns",
    "frozen_findings",
    "shared_starts",
]

POLICY_FUNCTIONS = ("actor", "critic", "mean", "std")
"""The model outputs a policy computes from its inputs alone."""

OUTPUT_TOL = 1e-4
"""How far (relative) two outputs of equal inputs may differ: float noise between batch rows."""

MIN_DISAGREE = 2
"""TK112 (copied column) and TK115: the fewest places whose outputs their equal inputs do
not give (one could be a quirk of one row, such as a row computed in another batch)."""


def _outputs(rollout: Rollout) -> AnyArray | None:
    """`[T+1, B, K]` float64 of the `POLICY_FUNCTIONS` the file holds, or `None`."""
    rows, B = rollout.num_steps + 1, rollout.batch_size
    arrays = rollout.model_outs.arrays
    parts = [
        np.asarray(arrays[k], dtype=np.float64).reshape(rows, B, -1)
        for k in POLICY_FUNCTIONS
        if k in arrays and arrays[k].ndim >= 2 and arrays[k].shape[:2] == (rows, B)
    ]
    return np.concatenate(parts, axis=-1) if parts else None


def _differ(x: AnyArray, y: AnyArray) -> BoolArray:
    """Per place, whether two `[..., K]` outputs differ by more than `OUTPUT_TOL`."""
    scale = 1.0 + np.maximum(np.abs(x), np.abs(y))
    out: BoolArray = (np.abs(x - y) > OUTPUT_TOL * scale).any(axis=-1)
    return out


def _states(rollout: Rollout) -> AnyArray:
    """`[T+1, B, K]` bytes of every row's `states` (K = 0 without any)."""
    T, B = rollout.num_steps, rollout.batch_size
    leaves = [
        np.ascontiguousarray(leaf).reshape(T + 1, B, -1).view(np.uint8)
        for _, leaf in _tree.flatten(rollout.states)
    ]
    return np.concatenate(leaves, axis=-1) if leaves else np.zeros((T + 1, B, 0), np.uint8)


# ---------------------------------------------------------------------- seeded alike


@dataclass(frozen=True)
class Start:
    """An episode start: where (file, env, row) and its observation's digest."""

    path: str
    env: int
    row: int
    digest: str


def _kth_starts(starts: Sequence[Start]) -> list[list[Start]]:
    """The k-th episode start of every env that has one, for each k."""
    per_env: dict[int, list[Start]] = {}
    for s in starts:
        per_env.setdefault(s.env, []).append(s)
    depth = max((len(v) for v in per_env.values()), default=0)
    return [[v[k] for _, v in sorted(per_env.items()) if len(v) > k] for k in range(depth)]


def lockstep_pairs(rollout: Rollout) -> tuple[int, int]:
    """Pairs of envs whose observations on one row are alike, of the pairs that could be.

    A pair counts on a row where neither starts an episode (the starts are judged) and
    their observations on the row before differ: how often two envs come to one
    observation by themselves. Envs that move alike from one state on (a deterministic env
    and policy, or envs seeded alike after their alike starts) give no pair.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=3, num_envs=3)
        >>> r.obses[2:, 1] = r.obses[2:, 0]  # env 1 comes to env 0's observation on row 2
        >>> lockstep_pairs(r.replace(dones=np.zeros((4, 3))))
        (1, 8)
    """
    raw = _rows(rollout)
    R, B = raw.shape[:2]
    _, ids = np.unique(raw.reshape(R * B, -1), axis=0, return_inverse=True)
    ids = ids.reshape(R, B)
    same = ids[:, :, None] == ids[:, None, :]  # [R, B, B]
    quiet = rollout.dones != 1
    upper = np.triu(np.ones((B, B), dtype=bool), k=1)
    judged = quiet[1:, :, None] & quiet[1:, None, :] & ~same[:-1] & upper
    return int((judged & same[1:]).sum()), int(judged.sum())


def shared_starts(
    starts: Sequence[Start], lockstep: tuple[int, int] = (0, 0), *, declared: bool = True
) -> Finding | None:
    """TK112 over a recording's episode starts, in time order (file, row, env).

    Each k-th start of an env after the first env's that has one is a chance to repeat an
    earlier k-th start (m envs starting alike are m - 1 coincidences, not m(m-1)/2 pairs);
    the j-th, at most (j - 1) p of the time (one of j - 1 earlier starts, each alike at the
    rate p of two starts out of order). The chance of as many is bounded by the binomial's
    at the mean rate (Hoeffding: a sum of unequal trials is no likelier far above its mean).
    Starts on one row (of one file) share their time: a running normaliser over a fixed
    start makes them alike, and a recording declares its vector wrappers. Without one
    (`declared` false) they are not compared; with one, they are weighed at the rate at
    which the envs' rows on one row are alike, `lockstep` (alike, pairs;
    `lockstep_pairs`), if it is larger (a deterministic env and policy move every env
    alike, starts too); where no pair of rows can be judged (the envs are alike on every
    row), at the rate p: only alike seeds keep envs whose starts vary in lockstep, where no
    normaliser moves a fixed start, and a fixed start is alike out of order too.

    Examples:
        >>> s = [Start("a", b, 10 * k + b, f"{k}") for k in range(6) for b in (0, 1)]
        >>> print(shared_starts(s).message)  # doctest: +ELLIPSIS
        envs 0 and 1 start alike: 6 of 6 episode starts repeat another env's start of ...
        >>> shared_starts(s[:4]) is None
        True
    """
    trials = repeats = apart = together = aligned = alike = 0
    first: tuple[Start, Start] | None = None
    for kth in _kth_starts(starts):
        aligned += len(kth) * (len(kth) - 1) // 2
        alike += sum(c * (c - 1) // 2 for c in Counter(s.digest for s in kth).values())
        for j, s in enumerate(kth[1:], start=1):
            earlier = [x for x in kth[:j] if declared or (x.path, x.row) != (s.path, s.row)]
            if not earlier:
                continue
            trials += 1
            same_row = sum((x.path, x.row) == (s.path, s.row) for x in earlier)
            together += same_row
            apart += len(earlier) - same_row
            match = next((x for x in earlier if x.digest == s.digest), None)
            if match is not None:
                repeats += 1
                first = first or (match, s)
    if first is None:
        return None
    n = len(starts)
    equal = sum(c * (c - 1) // 2 for c in Counter(s.digest for s in starts).values())
    p = rate_bound(equal - alike, n * (n - 1) // 2 - aligned)  # from the pairs not aligned
    # Starts on one row are alike as often as the envs' rows on one row are, if more often
    # (with no row to judge, envs alike on every row: as often as starts out of order).
    q = max(p, rate_bound(*lockstep)) if lockstep[1] else p
    # The j-th env's start repeats one of j - 1 earlier ones at most at the sum of their
    # rates: as many repeats are no likelier than at the mean rate per trial (Hoeffding).
    if binomial_tail(trials, min(1.0, (p * apart + q * together) / trials), repeats) > CHANCE:
        return None
    return Finding(
        "TK112",
        f"envs {first[0].env} and {first[1].env} start alike: {repeats} of {trials} episode "
        f"starts repeat another env's start of the same order ({first[0].path} row "
        f"{first[0].row} and {first[1].path} row {first[1].row}), where two starts out of "
        f"order are alike {p:.2g} of the time: every env seeded alike "
        "(envs.reset(seed=[seed] * B))?",
        first[1].path,
        first[1].env,
        first[1].row,
    )


# ---------------------------------------------------------------------- copied column


def _rows(rollout: Rollout) -> AnyArray:
    """`[T+1, B, K]` bytes of every row's observation (all leaves)."""
    T, B = rollout.num_steps, rollout.batch_size
    return np.concatenate(
        [
            np.ascontiguousarray(leaf).reshape(T + 1, B, -1).view(np.uint8)
            for _, leaf in _tree.flatten(rollout.obses)
        ],
        axis=-1,
    )


def _others_differ(rollout: Rollout, a: int, b: int) -> bool:
    """Whether envs a and b differ in their actions, rewards or dones somewhere."""
    fields = [rollout.rews, rollout.dones, *rollout.model_outs.arrays.values()]
    return any(not np.array_equal(f[:, a], f[:, b]) for f in fields)


@dataclass(frozen=True)
class Copy:
    """Two env columns of a file with the same observations on every row, doing otherwise.

    Attributes:
        envs: The pair (a, b), a < b.
        runs: Digests of the column's values, run by run (equal rows in a row are one run).
        disagree: The rows where the two envs' inputs (observations, `states`) are equal
            and their policy outputs are not.
    """

    envs: tuple[int, int]
    runs: tuple[bytes, ...]
    disagree: int = 0


def copies(rollout: Rollout, *, by_values: bool = True) -> tuple[Copy, ...]:
    """The `Copy` pairs of one file (TK112's evidence of a copied column).

    Without `by_values` (a recording whose wrapper changes observations: a running
    normaliser moves equal observations together), a pair's runs are left out: only its
    policy outputs can tell.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=3)
        >>> r.obses[:, 2] = r.obses[:, 0]
        >>> [(c.envs, len(c.runs), c.disagree) for c in copies(r)]
        [((0, 2), 7, 0)]
    """
    B = rollout.batch_size
    raw = _rows(rollout)
    keys = [[raw[t, b].tobytes() for t in range(raw.shape[0])] for b in range(B)]
    outputs, states = _outputs(rollout), _states(rollout)
    found = []
    for a in range(B):
        for b in range(a + 1, B):
            if keys[a] == keys[b] and _others_differ(rollout, a, b):
                runs = [k for t, k in enumerate(keys[a]) if t == 0 or k != keys[a][t - 1]]
                runs = runs if by_values else []
                digests = tuple(hashlib.blake2b(k, digest_size=8).digest() for k in runs)
                disagree = 0
                if outputs is not None:
                    same = (states[:, a] == states[:, b]).all(axis=-1)
                    disagree = int((same & _differ(outputs[:, a], outputs[:, b])).sum())
                found.append(Copy((a, b), digests, disagree))
    return tuple(found)


def copied_columns(files: Sequence[tuple[str, tuple[Copy, ...]]]) -> list[Finding]:
    """TK112 over the dataset: env pairs whose observations follow each other in every file.

    Examples:
        >>> c = Copy((0, 2), tuple(bytes([i]) for i in range(9)))
        >>> [f.format() for f in copied_columns([("a.npz", (c,))])]  # doctest: +ELLIPSIS
        ['a.npz: env 2, step 0: TK112 [warning] envs 0 and 2 have the same observations on ...
    """
    pairs: dict[tuple[int, int], list[bytes]] = {}
    disagree: Counter[tuple[int, int]] = Counter()
    for _, found in files:
        for c in found:
            pairs.setdefault(c.envs, []).extend(c.runs)
            disagree[c.envs] += c.disagree
    out = []
    for (a, b), runs in pairs.items():
        changes = list(itertools.pairwise(runs))
        n = len(set(changes))  # distinct changes of value: a repeated cycle counts once
        chance = rate_bound(len(changes) - n, len(changes)) ** n if n else 1.0
        rows = disagree[(a, b)]
        if chance > CHANCE and rows < MIN_DISAGREE:
            continue
        seen = (
            f"where the policy's outputs differ on {rows} of their rows"
            if rows >= MIN_DISAGREE
            else f"through {n} distinct changes of value in the dataset"
        )
        out += [
            Finding(
                "TK112",
                f"envs {a} and {b} have the same observations on every row, {seen}, and "
                "differ in their actions, rewards or dones: one column copied into another "
                "(obs[0] stored for every env)?",
                path,
                b,
                0,
            )
            for path, found in files
            if any(c.envs == (a, b) for c in found)
        ]
    return out


# ---------------------------------------------------------------------- frozen rows


@dataclass(frozen=True)
class Frozen:
    """A file's evidence for TK115: whether it is frozen, and its unchanged steps.

    Attributes:
        envs: The env columns, when every one keeps its observation on every row and one
            crosses an episode start; else none.
        steps: The file's steps (T times B) and `unchanged`, those whose next row repeats
            the observation.
        disagree: The steps whose inputs (observations, `states`) stay the same while the
            policy outputs change.
        again: The pairs of consecutive steps (one env) whose first keeps the observation,
            and of them, those whose second keeps it too.
        floats: Whether an observation leaf holds floats.
    """

    envs: tuple[int, ...]
    steps: int
    unchanged: int
    disagree: int = 0
    again: tuple[int, int] = (0, 0)
    floats: bool = True


def frozen_columns(rollout: Rollout) -> Frozen:
    """The `Frozen` evidence of one file.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2)
        >>> r.obses[:] = r.obses[-1]
        >>> r.dones[2] = 1
        >>> frozen_columns(r)
        Frozen(envs=(0, 1), steps=8, unchanged=8, disagree=0, again=(6, 6), floats=True)
    """
    raw = _rows(rollout)
    same = (raw[1:] == raw[:-1]).all(axis=-1)
    T, B = same.shape
    frozen = bool(T and same.all() and episode_ends(rollout.dones).any())
    outputs, states = _outputs(rollout), _states(rollout)
    disagree = 0
    if outputs is not None:
        inputs = same & (states[1:] == states[:-1]).all(axis=-1)
        disagree = int((inputs & _differ(outputs[1:], outputs[:-1])).sum())
    pairs = same[:-1]
    again = (int(pairs.sum()), int((pairs & same[1:]).sum()))
    envs = tuple(range(B)) if frozen else ()
    return Frozen(envs, int(same.size), int(same.sum()), disagree, again, float_leaves(rollout))


def _keep_rate(others: Sequence[Frozen]) -> float:
    """TK115's rate q at which a step keeps its observation, over the files not frozen.

    Where observations stay put at all, they stay put in runs (a coarse observation stuck
    at a level): then the rate at which a kept observation is kept again, if larger.
    """
    q = rate_bound(sum(f.unchanged for f in others), sum(f.steps for f in others))
    pairs, again = sum(f.again[0] for f in others), sum(f.again[1] for f in others)
    return max(q, rate_bound(again, pairs)) if pairs else q


def frozen_findings(files: Sequence[tuple[str, int, Frozen]]) -> list[Finding]:
    """TK115 over a dataset: `(path, T, Frozen)` per file.

    Examples:
        >>> moving = ("a.npz", 8, Frozen((), 64, 0))
        >>> frozen_findings([moving, ("b.npz", 8, Frozen((0, 1), 16, 16))])[0].format()
        ... # doctest: +ELLIPSIS
        'b.npz: env 0, step 0: TK115 [warning] every env keeps one observation on all 9 rows, ...
    """
    q = _keep_rate([f for _, _, f in files if not f.envs])
    found = []
    for path, T, frozen in files:
        if not frozen.envs:
            continue
        if frozen.disagree >= MIN_DISAGREE:
            seen = f"while the policy's outputs change on {frozen.disagree} of its steps"
        elif frozen.floats and q**T <= CHANCE:
            seen = f"where a step keeps it {q:.2g} of the time in the other files"
        else:
            continue
        found.append(
            Finding(
                "TK115",
                f"every env keeps one observation on all {T + 1} rows, across an episode "
                f"start, {seen}: rows appended from one reused buffer (copy the observation "
                "before storing it)?",
                path,
                0,
                0,
            )
        )
    return found
