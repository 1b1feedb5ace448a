"""The checks on one rollout's data (TK1xx): each reads the arrays of one file, nothing else.

Vocabulary (trajkit's timeline, see Concepts): row t holds `obses[t]`, `dones[t]` and the
model outputs the policy computed from `obses[t]`; step t is the move from row t to row t+1,
with `rews[t]` and `truncated[t]`. Step t *ends* an episode when `dones[t+1] = 1`. An episode
*starts* at a row with `dones = 1`; its *length* is its number of steps. An episode is
*complete* when it starts and ends inside the file. Every check reports once per file, at
the first env and step where it applies, with the number of places in the message.

The time limit L is the recording's `max_episode_steps` (the env's `TimeLimit`), else the
`max_episode_steps` option. The action space is the recording's, else the `action_space`
option, else `Discrete(A)` from the `actor` logits of Discrete actions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.model_outputs import discrete_actions
from trajkit._models.rollout import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding

__all__ = [
    "MIN_REPEATS",
    "MIN_ROWS_COMPARED",
    "Episode",
    "check_rollout",
    "episodes",
]

MIN_REPEATS = 3
"""TK101 without a known time limit: the fewest complete episodes of the longest length."""

MIN_ROWS_COMPARED = 8
"""TK103: the fewest rows compared before alignment is judged."""

_LOGP_TOL = 1e-3  # a recorded log-probability matches a recomputed one within this


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
) -> list[Finding]:
    """Run the selected TK1xx checks on one rollout.

    Args:
        rollout: The rollout.
        options: The selected codes and the settings.
        path: The file it came from, named in the findings.
        recording: Its file's `recording` metadata (a dict), if any: the time limit and the
            action space are read from it first.

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
    limit = recording.get("max_episode_steps") or options.max_episode_steps
    space = recording.get("action_space") or options.action_space
    found: list[Finding | None] = []
    codes = options.codes
    listed = list(episodes(rollout)) if codes & {"TK101", "TK105"} else []
    if "TK101" in codes:
        found.append(_truncation_as_termination(rollout, listed, limit, path))
    if "TK102" in codes:
        found.append(_reward_after_end(rollout, path))
    if "TK103" in codes:
        found.append(_misaligned_actions(rollout, path))
    if "TK104" in codes:
        found.append(_reset_twice(rollout, path))
    if "TK105" in codes and limit:
        found.append(_over_time_limit(rollout, listed, int(limit), path))
    if codes & {"TK106", "TK107"}:
        found.extend(_outside_space(rollout, space, codes, path))
    return [f for f in found if f is not None]


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
    rollout: Rollout, listed: list[Episode], limit: int | None, path: str | None
) -> Finding | None:
    complete = [e for e in listed if e.end is not None]
    if limit:
        cut = [e for e in complete if e.length == limit and not e.truncated]
        if not cut:
            return None
        first = min(cut, key=lambda e: (e.end or 0, e.env))
        return Finding(
            "TK101",
            f"{len(cut)} episode(s) end at exactly the time limit of {limit} steps with "
            "truncated = 0: record them as truncations (truncated = 1 and their final_values)",
            path,
            first.env,
            first.end,
        )
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
    after = np.zeros_like(first)
    after[1:] = first[1:] & ends[:-1] & ~trunc[:-1]
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


def _log_softmax(logits: AnyArray) -> AnyArray:
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    out: AnyArray = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return out


def _misaligned_actions(rollout: Rollout, path: str | None) -> Finding | None:
    outs = rollout.model_outs.arrays
    if not discrete_actions(outs):
        return None
    actions = outs["actions"].astype(np.int64)
    actor = outs["actor"]
    R, A = actions.shape[0], actor.shape[-1]
    if R - 1 < MIN_ROWS_COMPARED:
        return None
    logp = outs.get("log_probs")
    table = _log_softmax(actor)

    def fits(shift: int) -> BoolArray:
        """[R-2, B]: whether actions[t + shift] fits the policy outputs of row t (t = 1..R-2)."""
        rows = np.arange(1, R - 1)
        a = np.clip(actions[rows + shift], 0, A - 1)
        if logp is not None:
            chosen = np.take_along_axis(table[rows], a[..., None], axis=-1)[..., 0]
            ok: BoolArray = np.abs(chosen - logp[rows]) <= _LOGP_TOL * (1 + np.abs(logp[rows]))
            return ok
        greedy: BoolArray = a == table[rows].argmax(axis=-1)
        return greedy

    aligned = fits(0)
    rate = float(aligned.mean())
    for shift in (1, -1):
        shifted = fits(shift)
        if rate < 0.5 and float(shifted.mean()) >= 0.9:
            t, b = _first(shifted & ~aligned)
            by = "log_probs" if logp is not None else "the greedy action of actor"
            which = "late" if shift == 1 else "early"
            return Finding(
                "TK103",
                f"actions[t] fit the policy outputs of row t in {rate:.0%} of rows, but "
                f"actions[t{shift:+d}] in {float(shifted.mean()):.0%} (by {by}): each action "
                f"is stored one row {which}",
                path,
                b,
                t + 1,
            )
    return None


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
    if rollout.num_steps == 0:
        return None
    ends = rollout.dones[1:] == 1
    candidates = ends & (rollout.rews == 0)
    if not candidates.any():
        return None
    twice = candidates & _equal_rows(rollout)
    if not twice.any():
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


def _over_time_limit(
    rollout: Rollout, listed: list[Episode], limit: int, path: str | None
) -> Finding | None:
    T = rollout.num_steps
    over = [
        e for e in listed if e.start + limit < T and (e.end is None or e.end >= e.start + limit)
    ]
    if not over:
        return None
    first = min(over, key=lambda e: (e.start + limit, e.env))
    return Finding(
        "TK105",
        f"{len(over)} episode(s) run past the time limit of {limit} steps with no episode end "
        f"or truncation (this one starts at row {first.start})",
        path,
        first.env,
        first.start + limit,
    )


# ---------------------------------------------------------------------------- TK106/107


def _bound(value: Any, shape: tuple[int, ...], infinite: float) -> AnyArray:
    """A Box bound from its JSON description: a number or nested list, `null` for inf."""
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
            low = _bound(space.get("low"), shape, -np.inf).reshape(-1)
            high = _bound(space.get("high"), shape, np.inf).reshape(-1)
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
