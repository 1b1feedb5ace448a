"""Where episodes start: NEXT_STEP's phantom step kept (TK108), `dones` one row off (TK109).

Both read the same evidence, the steps around each *boundary*: a row s (1 <= s < T) with
`dones[s] = 1`, reached by step s-1 and left by step s. In a correct rollout `obses[s]` is a
reset observation: step s-1 ends an episode and step s is the first of the next.

- NEXT_STEP's phantom step (TK108). A loop that keeps every `env.step` of a Gymnasium 1.x
  vector env in its default NEXT_STEP autoreset mode, with `done = terminated | truncated`,
  stores the final observation at row s (flagged as a start) and the autoreset step from it
  to the reset observation as step s: reward exactly 0, action ignored, never an episode
  end. Judged when every boundary step of the file has reward exactly 0 and ends nothing (at
  least `MIN_BOUNDARIES`; row 0 counts when the recording says the file continues another; a
  file with one boundary is judged only with float observations that jump on it at least
  twice as far as onto its row, and no other step earning exactly 0); with float
  observations, the observations jump on those steps (final to reset) more than onto their
  rows in at least half of them (LunarLander's first step after a reset earns exactly 0 when
  no engine fires: that step does not jump); and either a reward of exactly 0 is rare
  elsewhere (at most half of the other steps), or the observations after the boundary steps
  are all one (a fixed reset state, as in FrozenLake) while those at the boundary rows are
  not.
- `dones` one row off (TK109). Where episodes start, the observations jump: a reset is not a
  step of the dynamics. With float observations, the jump of each step is its largest
  change of a feature, in units of that feature's median change per step inside episodes.
  A file whose boundaries jump one step *after* (or *before*) the row flagged by `dones`, at
  least twice as far as on it, in most boundaries, has its `dones` one row off (a file with
  one boundary needs a jump four times as far).

A recording that states the SAME_STEP or DISABLED autoreset mode has no phantom step: TK108
does not run there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit.lint.registry import Finding

__all__ = [
    "MIN_BOUNDARIES",
    "MIN_OTHER_STEPS",
    "boundary_rows",
    "misplaced_starts",
    "phantom_steps",
]

MIN_BOUNDARIES = 2
"""TK108 and TK109 judge a file with fewer boundaries than this only on clearer evidence."""

MIN_OTHER_STEPS = 8
"""TK108 on a file with one boundary: the fewest other steps, none of which may earn 0."""

_JUMP_FACTOR = 2.0  # TK109: the jump off the flagged row, against the one on it


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


def phantom_steps(rollout: Rollout, recording: Mapping[str, Any] | None = None) -> BoolArray | None:
    """`[T, B]`: the phantom autoreset steps kept, when the file shows the signature; else None.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=1)
        >>> r = r.replace(dones=np.array([[1], [0], [0], [1], [0], [0], [1], [0], [0]]),
        ...               rews=np.array([[1.0], [1], [1], [0], [1], [1], [0], [1]]))
        >>> np.flatnonzero(phantom_steps(r)[:, 0]).tolist()
        [3, 6]
        >>> phantom_steps(r, {"autoreset_mode": "SAME_STEP"}) is None
        True
    """
    recording = recording or {}
    if recording.get("autoreset_mode") in ("SAME_STEP", "DISABLED"):
        return None
    steps = boundary_rows(rollout)
    if recording.get("index", 0) > 0:  # row 0 is the previous file's row T: a boundary too
        steps[0] = rollout.dones[0] == 1
    rews = rollout.rews
    ends = rollout.dones[1:] == 1
    if not steps.any() or not (rews[steps] == 0).all() or ends[steps].any():
        return None
    if steps.sum() < MIN_BOUNDARIES:
        return steps if _one_clear_phantom(rollout, steps) else None
    if not _jumps_after(rollout, steps):
        return None
    others = ~steps
    if not others.any() or float((rews[others] == 0).mean()) <= 0.5:
        return steps
    after, at = set(_row_keys(rollout, steps, 1)), set(_row_keys(rollout, steps, 0))
    return steps if len(after) == 1 and len(at) > 1 else None


def _one_clear_phantom(rollout: Rollout, steps: BoolArray) -> bool:
    """Whether a file's one boundary step is clearly a phantom.

    Only when no other step earns exactly 0 (at least `MIN_OTHER_STEPS` of them) and the
    float observations jump on the step at least `_JUMP_FACTOR` times as far as onto its row.
    """
    (t, b), others = np.argwhere(steps)[0], ~steps
    if t < 1 or others.sum() < MIN_OTHER_STEPS or (rollout.rews[others] == 0).any():
        return False
    jumps = _jumps(rollout)
    return jumps is not None and bool(jumps[t, b] > _JUMP_FACTOR * jumps[t - 1, b])


def _jumps_after(rollout: Rollout, steps: BoolArray) -> bool:
    """Whether the observations jump on the boundary steps more than onto their rows.

    With float observations, in at least half of the boundaries (the phantom step goes from
    the final to the reset observation). Without float observations, or without a step onto
    any boundary row, there is nothing to measure: True.
    """
    jumps = _jumps(rollout)
    places = np.argwhere(steps)
    places = places[places[:, 0] >= 1]
    if jumps is None or not len(places):
        return True
    off = jumps[places[:, 0], places[:, 1]]
    on = jumps[places[:, 0] - 1, places[:, 1]]
    return bool(2 * (off > on).sum() >= len(places))


def phantom_finding(steps: BoolArray, path: str | None) -> Finding:
    """TK108's finding for the phantom steps `steps` (`[T, B]`).

    Examples:
        >>> import numpy as np
        >>> steps = np.zeros((6, 2), dtype=bool); steps[[2, 4], 1] = True
        >>> print(phantom_finding(steps, "a.npz").format())  # doctest: +ELLIPSIS
        a.npz: env 1, step 2: TK108 [warning] every step that leaves a row flagged dones = 1 ...
    """
    t, b = (int(x) for x in np.argwhere(steps)[0])
    n = int(steps.sum())
    return Finding(
        "TK108",
        f"every step that leaves a row flagged dones = 1 ({n} step{'s' * (n != 1)}) has "
        "reward exactly 0 and ends nothing, as NEXT_STEP's autoreset step from the final to "
        "the reset observation: a loop that keeps every env.step of a NEXT_STEP vector env? "
        "drop the step after each episode end (RolloutRecorder does)",
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


def misplaced_starts(rollout: Rollout, path: str | None) -> Finding | None:
    """TK109: `dones` flags the row before or after the one where the observations jump.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> t = np.arange(13, dtype=np.float32)
        >>> resets = (t >= 4).astype(int) + (t >= 9)  # resets at rows 4 and 9
        >>> obs = (t - 100 * resets)[:, None, None]
        >>> dones = np.isin(t, [0, 5, 10]).astype(float)[:, None]  # flagged one row late
        >>> r = example_rollout(num_steps=12, num_envs=1).replace(obses=obs, dones=dones)
        >>> misplaced_starts(r, "a.npz").message  # doctest: +ELLIPSIS
        'the observations jump one row before the row flagged dones = 1 at 2 of 2 ...
    """
    rows = boundary_rows(rollout)
    if not rows.any():
        return None
    jumps = _jumps(rollout)
    if jumps is None:
        return None
    T = rollout.num_steps
    places = np.argwhere(rows)
    on = jumps[places[:, 0] - 1, places[:, 1]]
    for shift, word in ((1, "after"), (-1, "before")):
        at = places[:, 0] - 1 + shift
        valid = (at >= 0) & (at < T)
        if not valid.any():
            continue
        off = jumps[at[valid], places[valid, 1]]
        # One boundary alone is judged on a clearer jump: twice the factor.
        factor = _JUMP_FACTOR if valid.sum() >= MIN_BOUNDARIES else 2 * _JUMP_FACTOR
        wins = off > factor * on[valid]
        if 2 * wins.sum() > valid.sum():
            t, b = (int(x) for x in places[valid][wins.argmax()])
            return Finding(
                "TK109",
                f"the observations jump one row {word} the row flagged dones = 1 at "
                f"{int(wins.sum())} of {int(valid.sum())} episode starts (this one: row {t}): "
                f"dones stored one row {'early' if shift == 1 else 'late'}?",
                path,
                b,
                t,
            )
    return None
