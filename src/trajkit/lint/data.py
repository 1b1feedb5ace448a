"""The checks on one rollout's data (TK1xx): each reads the arrays of one file, nothing else.

Vocabulary (trajkit's timeline, see Concepts): row t holds `obses[t]`, `dones[t]` and the
model outputs the policy computed from `obses[t]`; step t is the move from row t to row t+1,
with `rews[t]` and `truncated[t]`. Step t *ends* an episode when `dones[t+1] = 1`. An episode
*starts* at a row with `dones = 1`; its *length* is its number of steps. An episode is
*complete* when it starts and ends inside the file. Every check reports once per file, at
the first env and step where it applies, with the number of places in the message. TK101
(with a time limit) and TK105 also count episodes joined across files: `episode_edges`
summarises a file for that, and `trajkit.lint.join` joins them.

The time limit L is the recording's `max_episode_steps` (the env's `TimeLimit`), else the
`max_episode_steps` option. The action space is the recording's, else the `action_space`
option, else `Discrete(A)` from the `actor` logits of Discrete actions.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.model_outputs import discrete_actions
from trajkit._models.rollout import Rollout
from trajkit.lint.boundaries import misplaced_starts, phantom_finding, phantom_steps
from trajkit.lint.config import LintOptions
from trajkit.lint.consistency import (
    LOGP_TOL,
    copied_columns,
    log_probs_mismatch,
    log_softmax,
)
from trajkit.lint.registry import Finding
from trajkit.lint.rewards import clipped_rewards

__all__ = [
    "MIN_CUTS_RECORDED",
    "MIN_REPEATS",
    "MIN_ROWS_COMPARED",
    "Episode",
    "EpisodeEdges",
    "box_bound",
    "check_rollout",
    "cuts_needed",
    "episode_edges",
    "episodes",
    "over_limit_finding",
    "truncation_finding",
]

MIN_REPEATS = 3
"""TK101 without a known time limit: the fewest complete episodes of the longest length."""

MIN_ROWS_COMPARED = 8
"""TK103: the fewest rows compared before alignment is judged."""

MIN_CUTS_RECORDED = 2
"""TK101 with a time limit, in a file with a recording: the fewest unflagged ends at the limit.

Gymnasium sets both flags when an env terminates on the very step its time limit cuts, and
the recorder rightly stores a termination: one such end is not evidence."""


@dataclass(frozen=True)
class Episode:
    """An episode whose start is inside the rollout.

    Attributes:
        env: Its column b.
        start: The row where it starts (`dones[start, env] = 1`).
        end: The step that ends it, or `None` when it runs past the last step.
        truncated: Whether that end is flagged as a truncation.

    Examples:
        >>> Episode(0, 2, 5, False).length
        4
    """

    env: int
    start: int
    end: int | None
    truncated: bool

    @property
    def length(self) -> int | None:
        """Its number of steps (`end - start + 1`), or `None` when it is not complete.

        Examples:
            >>> Episode(1, 0, None, False).length is None
            True
        """
        return None if self.end is None else self.end - self.start + 1


def episodes(rollout: Rollout) -> Iterator[Episode]:
    """The episodes that start inside `rollout`, env by env, in time order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1)
        >>> r = r.replace(dones=np.array([[1], [0], [1], [0], [0]]))
        >>> [(e.start, e.end) for e in episodes(r)]
        [(0, 1), (2, None)]
    """
    T = rollout.num_steps
    ends = rollout.dones[1:] == 1
    trunc = rollout.truncated
    for b in range(rollout.batch_size):
        end_steps = np.flatnonzero(ends[:, b])
        for start in np.flatnonzero(rollout.dones[:T, b] == 1).tolist():
            i = int(np.searchsorted(end_steps, start))
            end = int(end_steps[i]) if i < len(end_steps) else None
            flagged = end is not None and trunc is not None and bool(trunc[end, b] == 1)
            yield Episode(b, start, end, flagged)


def check_rollout(
    rollout: Rollout,
    options: LintOptions,
    *,
    path: str | None = None,
    recording: Mapping[str, Any] | None = None,
    joined: bool = False,
) -> list[Finding]:
    """Run the selected TK1xx checks on one rollout.

    Args:
        rollout: The rollout.
        options: The selected codes and the settings.
        path: The file it came from, named in the findings.
        recording: Its file's `recording` metadata (a dict), if any: the time limit and the
            action space are read from it first.
        joined: Leave out TK105 and TK101 with a known time limit: the caller measures them
            on episodes joined across files, from `episode_edges`.

    Returns:
        The findings, in code order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1, keys=("actions",))
        >>> r.model_outs.arrays["actions"][3, 0] = 9
        >>> space = {"type": "Discrete", "n": 3}
        >>> options = LintOptions(frozenset({"TK106"}), action_space=space)
        >>> [f.code for f in check_rollout(r, options)]
        ['TK106']
    """
    recording = recording or {}
    codes = options.codes
    phantom = phantom_steps(rollout, recording) if codes & {"TK102", "TK108", "TK109"} else None
    misaligned = _misaligned_actions(rollout, path) if codes & {"TK103", "TK110"} else None
    found = [
        *_step_checks(rollout, options, path, recording, joined, phantom, misaligned),
        *_output_checks(rollout, options, path, recording, phantom, misaligned),
    ]
    return [f for f in found if f is not None]


def _step_checks(
    rollout: Rollout,
    options: LintOptions,
    path: str | None,
    recording: Mapping[str, Any],
    joined: bool,
    phantom: BoolArray | None,
    misaligned: Finding | None,
) -> list[Finding | None]:
    """TK101-TK105: episode ends, rewards and actions against the rows they sit on."""
    codes = options.codes
    limit = recording.get("max_episode_steps") or options.max_episode_steps
    listed = list(episodes(rollout)) if codes & {"TK101", "TK105"} else []
    found: list[Finding | None] = []
    if "TK101" in codes and not (joined and limit):
        needed = cuts_needed(rollout, recording)
        found.append(_truncation_as_termination(rollout, listed, limit, path, needed))
    if "TK102" in codes and phantom is None:  # the phantom step's reward 0 is TK108's
        found.append(_reward_after_end(rollout, path))
    if "TK103" in codes:
        found.append(misaligned)
    if "TK104" in codes:
        found.append(_reset_twice(rollout, path))
    if "TK105" in codes and limit and not joined:
        found.append(_over_time_limit(rollout, listed, int(limit), path))
    return found


def _output_checks(
    rollout: Rollout,
    options: LintOptions,
    path: str | None,
    recording: Mapping[str, Any],
    phantom: BoolArray | None,
    misaligned: Finding | None,
) -> list[Finding | None]:
    """TK106-TK112: actions against the space, the autoreset step, outputs and env columns."""
    codes = options.codes
    space = recording.get("action_space") or options.action_space
    found: list[Finding | None] = []
    if codes & {"TK106", "TK107"}:
        found.extend(_outside_space(rollout, space, codes, path))
    if "TK108" in codes and phantom is not None:
        found.append(phantom_finding(phantom, path))
    if "TK109" in codes and phantom is None:
        found.append(misplaced_starts(rollout, path))
    if "TK110" in codes and misaligned is None:  # actions on the wrong row: TK103's
        found.append(log_probs_mismatch(rollout, space, path))
    if "TK111" in codes:
        found.append(clipped_rewards(rollout, recording, path))
    if "TK112" in codes:
        found.append(copied_columns(rollout, path))
    return found


def cuts_needed(rollout: Rollout, recording: Mapping[str, Any] | None) -> int:
    """TK101 with a time limit: how many unflagged ends at the limit make a finding in a file.

    0 (never) when the file flags any truncation: its loop records truncations, so an end it
    does not flag is a termination, even at the limit (both flags set); `MIN_CUTS_RECORDED`
    in a file with a recording; else 1.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1)
        >>> cuts_needed(r, None), cuts_needed(r, {"id": "a"})
        (1, 2)
        >>> cuts_needed(r.replace(truncated=np.array([[0], [1], [0], [0]]),
        ...                       final_values=np.zeros((4, 1))), None)
        0
    """
    if rollout.truncated is not None and bool((rollout.truncated == 1).any()):
        return 0
    return MIN_CUTS_RECORDED if recording else 1


def _count(mask: BoolArray) -> str:
    """`3 steps in 2 envs` for a `[T, B]` mask."""
    n, envs = int(mask.sum()), int(mask.any(axis=0).sum())
    return f"{n} step{'s' * (n != 1)} in {envs} env{'s' * (envs != 1)}"


def _first(mask: BoolArray) -> tuple[int, int]:
    """(t, b) of the first True of a `[T, B]` mask, by time then env."""
    t, b = np.argwhere(mask)[0]
    return int(t), int(b)


# --------------------------------------------------------------------------------- TK101


def _truncation_as_termination(
    rollout: Rollout, listed: list[Episode], limit: int | None, path: str | None, needed: int
) -> Finding | None:
    complete = [e for e in listed if e.end is not None]
    if limit:
        cut = _cut_at_limit(listed, limit)
        if not needed or len(cut) < needed:
            return None
        return truncation_finding(len(cut), 0, limit, path, cut[0])
    if needed != 1:  # a recording states the time limit, or that there is none
        return None
    lengths = Counter(e.length for e in complete)
    if not lengths:
        return None
    longest = max(lengths)  # type: ignore[type-var]
    at = [e for e in complete if e.length == longest]
    if (
        len(at) < MIN_REPEATS
        or any(e.truncated for e in at)
        or lengths[longest] < max(lengths.values())
    ):
        return None
    first = min(at, key=lambda e: (e.end or 0, e.env))
    return Finding(
        "TK101",
        f"{len(at)} of {len(complete)} complete episodes end at the same, longest length "
        f"{longest} with truncated = 0, as a time limit cuts them: record them as truncations "
        "(or set max-episode-steps, if the env has no time limit of that length)",
        path,
        first.env,
        first.end,
    )


def _cut_at_limit(listed: list[Episode], limit: int) -> list[tuple[int, int]]:
    """(end step, env) of the complete episodes of exactly `limit` steps ending untruncated."""
    return sorted(
        (e.end, e.env)
        for e in listed
        if e.end is not None and e.length == limit and not e.truncated
    )


def truncation_finding(
    count: int, joined: int, limit: int, path: str | None, first: tuple[int, int]
) -> Finding:
    """TK101's finding with a known time limit.

    `count` cut episodes, `joined` of them begun in an earlier file, the first ending at
    `first` (step, env).

    Examples:
        >>> truncation_finding(3, 1, 10, "a.npz", (9, 0)).message  # doctest: +ELLIPSIS
        '3 episode(s) end at exactly the time limit of 10 steps with truncated = 0 (1 begun ...'
    """
    across = " (1 begun in an earlier file)" if joined == 1 else ""
    across = f" ({joined} begun in earlier files)" if joined > 1 else across
    return Finding(
        "TK101",
        f"{count} episode(s) end at exactly the time limit of {limit} steps with truncated = 0"
        f"{across}: record them as truncations (truncated = 1 and their final_values)",
        path,
        first[1],
        first[0],
    )


# --------------------------------------------------------------------------------- TK102


def _reward_after_end(rollout: Rollout, path: str | None) -> Finding | None:
    T = rollout.num_steps
    if T < 2:
        return None
    rews, dones = rollout.rews, rollout.dones
    ends = dones[1:] == 1  # step t ends an episode
    trunc = rollout.truncated == 1 if rollout.truncated is not None else np.zeros_like(ends)
    first = dones[:T] == 1  # step t is the first step of an episode
    middle = ~first & ~ends
    if middle.sum() < 2:
        return None
    low, high = float(rews[middle].min()), float(rews[middle].max())
    # First steps right after a termination inside the file.
    # A one-step episode's step is first and last: its reward is its own, not a late one.
    after = np.zeros_like(first)
    after[1:] = first[1:] & ends[:-1] & ~trunc[:-1] & ~ends[1:]
    if not after.any():
        return None
    odd = after & ((rews < low) | (rews > high))
    if odd.sum() < 2 or 2 * odd.sum() < after.sum():
        return None
    t, b = _first(odd)
    return Finding(
        "TK102",
        f"{int(odd.sum())} of {int(after.sum())} first steps after a termination get a reward "
        f"no other step gets (rews[{t}, {b}] = {float(rews[t, b]):.6g}, other steps "
        f"[{low:.6g}, {high:.6g}]): rewards recorded one step late?",
        path,
        b,
        t,
    )


# --------------------------------------------------------------------------------- TK103


def _misaligned_actions(rollout: Rollout, path: str | None) -> Finding | None:
    """TK103, judged on the rows where the two readings disagree.

    Only a row whose action differs from its neighbour's (`actions[t] != actions[t+shift]`)
    tells which row the action belongs to: elsewhere both fit or neither does, and a sharp
    policy repeats its action on most rows.
    """
    outs = rollout.model_outs.arrays
    if not discrete_actions(outs):
        return None
    actions = outs["actions"].astype(np.int64)
    actor = outs["actor"]
    R, A = actions.shape[0], actor.shape[-1]
    if R - 1 < MIN_ROWS_COMPARED:
        return None
    logp = outs.get("log_probs")
    table = log_softmax(actor)
    rows = np.arange(1, R - 1)

    def fits(shift: int) -> BoolArray:
        """[R-2, B]: whether actions[t + shift] fits the policy outputs of row t (t = 1..R-2)."""
        a = np.clip(actions[rows + shift], 0, A - 1)
        if logp is not None:
            chosen = np.take_along_axis(table[rows], a[..., None], axis=-1)[..., 0]
            ok: BoolArray = np.abs(chosen - logp[rows]) <= LOGP_TOL * (1 + np.abs(logp[rows]))
            return ok
        greedy: BoolArray = a == table[rows].argmax(axis=-1)
        return greedy

    aligned = fits(0)
    for shift in (1, -1):
        telling = actions[rows] != actions[rows + shift]
        if telling.sum() < MIN_ROWS_COMPARED:
            continue
        moved = fits(shift)
        own, shifted = aligned[telling], moved[telling]
        if not _shift_wins(int(own.sum()), int(shifted.sum()), int(telling.sum())):
            continue
        t, b = _first(telling & moved & ~aligned)
        by = "log_probs" if logp is not None else "the greedy action of actor"
        which, other = ("late", "next") if shift == 1 else ("early", "previous")
        return Finding(
            "TK103",
            f"of the {int(telling.sum())} rows whose action differs from the {other} row's, "
            f"{float(own.mean()):.0%} fit their own policy outputs and "
            f"{float(shifted.mean()):.0%} those of actions[t{shift:+d}] (by {by}): each "
            f"action is stored one row {which}",
            path,
            b,
            t + 1,
        )
    return None


def _shift_wins(own: int, shifted: int, telling: int) -> bool:
    """TK103's rule on the telling rows: the shifted reading wins.

    At least half of them fit the shifted row, fewer than half their own, and the shifted
    reading fits at least twice as many.

    Examples:
        >>> _shift_wins(own=3, shifted=5, telling=10), _shift_wins(own=2, shifted=5, telling=10)
        (False, True)
        >>> _shift_wins(own=2, shifted=4, telling=9)
        False
    """
    return 2 * shifted >= telling and 2 * own < telling and shifted >= 2 * own


# --------------------------------------------------------------------------------- TK104


def _equal_rows(rollout: Rollout) -> BoolArray:
    """[T, B]: whether obses[t + 1] equals obses[t] in every leaf."""
    T, B = rollout.num_steps, rollout.batch_size
    same = np.ones((T, B), dtype=bool)
    for _, leaf in _tree.flatten(rollout.obses):
        eq = leaf[1:] == leaf[:-1]
        same &= eq.reshape(T, B, -1).all(axis=-1)
    return same


def _reset_twice(rollout: Rollout, path: str | None) -> Finding | None:
    # Float observations only: in a discrete space the last state can be the reset state.
    if rollout.num_steps == 0 or not any(
        leaf.dtype.kind == "f" for _, leaf in _tree.flatten(rollout.obses)
    ):
        return None
    ends = rollout.dones[1:] == 1
    if ends.sum() < MIN_REPEATS - 1:
        return None
    twice = ends & (rollout.rews == 0) & _equal_rows(rollout)
    # Every end, not some: in a discrete space the reset state can equal the last by chance.
    if twice.sum() < ends.sum():
        return None
    t, b = _first(twice)
    return Finding(
        "TK104",
        f"obses[{t + 1}] repeats obses[{t}] across an episode end with reward 0 "
        f"({_count(twice)}): a phantom autoreset step kept as a transition?",
        path,
        b,
        t,
    )


# --------------------------------------------------------------------------------- TK105


def _over_places(rollout: Rollout, listed: list[Episode], limit: int) -> list[tuple[int, int, int]]:
    """(step, env, start row) where episodes starting inside the file pass `limit` steps."""
    T = rollout.num_steps
    return sorted(
        (e.start + limit, e.env, e.start)
        for e in listed
        if e.start + limit < T and (e.end is None or e.end >= e.start + limit)
    )


def over_limit_finding(
    count: int, limit: int, path: str | None, first: tuple[int, int], begun: str
) -> Finding:
    """TK105's finding.

    `count` episodes pass `limit`, the first at `first` (step, env); `begun` says where
    that one began.

    Examples:
        >>> over_limit_finding(1, 10, "a.npz", (12, 1), "starts at row 2").format()
        ... # doctest: +NORMALIZE_WHITESPACE
        'a.npz: env 1, step 12: TK105 [error] 1 episode(s) run past the time limit of 10
         steps with no episode end or truncation (this one starts at row 2)'
    """
    return Finding(
        "TK105",
        f"{count} episode(s) run past the time limit of {limit} steps with no episode end "
        f"or truncation (this one {begun})",
        path,
        first[1],
        first[0],
    )


def _over_time_limit(
    rollout: Rollout, listed: list[Episode], limit: int, path: str | None
) -> Finding | None:
    over = _over_places(rollout, listed, limit)
    if not over:
        return None
    step, env, start = over[0]
    return over_limit_finding(len(over), limit, path, (step, env), f"starts at row {start}")


# ------------------------------------------------------------------------- joining files


@dataclass(frozen=True)
class EpisodeEdges:
    """What joining episodes across files needs of one file (TK101, TK105).

    Per env b: `lead[b]` is the number of steps up to and including the first episode end
    (T when there is none), `lead_truncated[b]` whether that end is a truncation,
    `continues[b]` whether row 0 continues an episode (`dones[0, b] = 0`), `has_end[b]`
    whether any step ends an episode, and `trail[b]` the number of steps after the last end
    (T when there is none). `head` and `tail` hash row 0 and row T (observations and
    dones): a file continues another when its row 0 repeats the other's row T. `cut` and
    `over` are the file's own TK101 (with a time limit) and TK105 places, as (step, env)
    and (step, env, start row), sorted; `cuts_needed` is `cuts_needed` of the file (how
    many unflagged ends at the limit, joined ones counted, make its TK101 finding).

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1)
        >>> r = r.replace(dones=np.array([[0], [0], [1], [0], [1], [0], [0]]))
        >>> e = episode_edges(r, "a.npz", None, None)
        >>> e.lead, e.continues, e.trail
        ((2,), (True,), (2,))
    """

    path: str
    num_steps: int
    lead: tuple[int, ...]
    lead_truncated: tuple[bool, ...]
    continues: tuple[bool, ...]
    has_end: tuple[bool, ...]
    trail: tuple[int, ...]
    head: str
    tail: str
    recording: tuple[str, int, int] | None
    limit: int | None
    cut: tuple[tuple[int, int], ...]
    over: tuple[tuple[int, int, int], ...]
    cuts_needed: int = 1


def _row_digest(rollout: Rollout, row: int) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for _, leaf in _tree.flatten(rollout.obses):
        digest.update(np.ascontiguousarray(leaf[row]).view(np.uint8).reshape(-1).data)
    digest.update(np.ascontiguousarray(rollout.dones[row], dtype=np.float64).data)
    return digest.hexdigest()


def episode_edges(
    rollout: Rollout,
    path: str,
    recording: Mapping[str, Any] | None,
    max_episode_steps: int | None,
) -> EpisodeEdges:
    """The `EpisodeEdges` of one file; the time limit is the recording's, else the option.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> edges = episode_edges(example_rollout(num_steps=4, num_envs=2), "a.npz", None, 3)
        >>> edges.num_steps, edges.limit, edges.recording
        (4, 3, None)
    """
    recording = recording or {}
    limit = recording.get("max_episode_steps") or max_episode_steps
    T, B = rollout.num_steps, rollout.batch_size
    ends = rollout.dones[1:] == 1
    trunc = rollout.truncated
    has_end = ends.any(axis=0)
    first_end = np.where(has_end, ends.argmax(axis=0), T - 1)
    last_end = np.where(has_end, T - 1 - ends[::-1].argmax(axis=0), -1)
    lead_truncated = tuple(
        bool(has_end[b] and trunc is not None and trunc[first_end[b], b] == 1) for b in range(B)
    )
    listed = list(episodes(rollout)) if limit else []
    identity = None
    if "id" in recording:
        identity = (str(recording["id"]), int(recording["index"]), int(recording["num_envs"]))
    return EpisodeEdges(
        path=path,
        num_steps=T,
        lead=tuple(int(x) + 1 for x in first_end),
        lead_truncated=lead_truncated,
        continues=tuple(bool(x) for x in rollout.dones[0] == 0),
        has_end=tuple(bool(x) for x in has_end),
        trail=tuple(int(T - 1 - x) for x in last_end),
        head=_row_digest(rollout, 0),
        tail=_row_digest(rollout, T),
        recording=identity,
        limit=int(limit) if limit else None,
        cut=tuple(_cut_at_limit(listed, int(limit))) if limit else (),
        over=tuple(_over_places(rollout, listed, int(limit))) if limit else (),
        cuts_needed=cuts_needed(rollout, recording),
    )


# ---------------------------------------------------------------------------- TK106/107


def box_bound(value: Any, shape: tuple[int, ...], infinite: float) -> AnyArray:
    """A Box bound from its JSON description: a number or nested list, `null` for inf.

    Examples:
        >>> box_bound([1.0, None], (2,), float("inf")).tolist()
        [1.0, inf]
    """
    if value is None:
        return np.full(shape, infinite)
    array = np.array(value, dtype=object)
    out = np.where(array == None, infinite, array).astype(np.float64)  # noqa: E711
    return np.broadcast_to(out, shape)


def _space_name(space: Mapping[str, Any]) -> str:
    kind = space.get("type")
    if kind == "Discrete":
        start = space.get("start", 0)
        return f"Discrete({space.get('n')}{f', start={start}' if start else ''})"
    if kind == "Box":
        return f"Box({space.get('low')}, {space.get('high')}, {tuple(space.get('shape', ()))})"
    if kind == "MultiDiscrete":
        return f"MultiDiscrete({space.get('nvec')})"
    return f"{kind}({space.get('n', '')})"


def _outside_space(
    rollout: Rollout,
    space: Mapping[str, Any] | None,
    codes: frozenset[str],
    path: str | None,
) -> Iterator[Finding]:
    outs = rollout.model_outs.arrays
    actions = outs.get("actions")
    if actions is None:
        return
    if space is None and discrete_actions(outs):
        space = {"type": "Discrete", "n": int(outs["actor"].shape[-1])}
    if space is None:
        return
    kind = space.get("type")
    R, B = actions.shape[:2]
    per_step = actions.reshape(R, B, -1)
    code = "TK106"
    try:
        if kind == "Discrete":
            first, n = int(space.get("start", 0)), int(space["n"])
            bad: BoolArray = (per_step < first) | (per_step >= first + n)
        elif kind == "MultiDiscrete":
            nvec = np.broadcast_to(np.asarray(space["nvec"]), actions.shape[2:]).reshape(-1)
            starts = np.broadcast_to(np.asarray(space.get("start", 0)), actions.shape[2:])
            lowest = starts.reshape(-1)
            bad = (per_step < lowest) | (per_step >= lowest + nvec)
        elif kind == "MultiBinary":
            bad = (per_step != 0) & (per_step != 1)
        elif kind == "Box":
            code = "TK107"
            shape = tuple(actions.shape[2:])
            low = box_bound(space.get("low"), shape, -np.inf).reshape(-1)
            high = box_bound(space.get("high"), shape, np.inf).reshape(-1)
            bad = (per_step < low) | (per_step > high)
        else:
            return
    except (KeyError, TypeError, ValueError):  # a description this check cannot read
        return
    if code not in codes:
        return
    mask: BoolArray = np.asarray(bad.any(axis=-1))
    if not mask.any():
        return
    t, b = _first(mask)
    value = actions[t, b]
    shown = value.item() if value.ndim == 0 else value.tolist()
    executed = ", which the env clips" if code == "TK107" else ""
    yield Finding(
        code,
        f"actions[{t}, {b}] = {shown} is outside {_space_name(space)}{executed} "
        f"({_count(mask)}, rows 0 to {R - 1})",
        path,
        b,
        t,
    )
