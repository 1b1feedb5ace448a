"""Model outputs that contradict each other (TK110) and env columns that copy each other (TK112).

- TK110: stored `log_probs` against the stored policy outputs for the stored action. Discrete
  (`actor` logits): `log_softmax(actor[t])[actions[t]]`. Box, where the Gaussian's `mean`
  and `std` (or `log_std`) are stored: the diagonal normal log-density of `actions[t]`,
  summed over the action's features. A row fits when the two agree to `LOGP_TOL` (relative).
  Reported when at least half of the rows fit (so the outputs do describe this policy: a
  squashed or masked policy whose formula is another fits none, and is left alone) and some
  do not; for Box, the message says how many of those have an action on a bound of the
  space (the log-probability of the unclipped sample stored beside the clipped action).
- TK112: two env columns whose episodes start from the same float observation, bit for bit
  (every env seeded alike: each of its resets repeats another env's), or whose observations
  are equal on every row. Integer observations (a fixed start state) are not compared, nor
  starts where one env starts twice alike (a fixed reset, or one of a few states).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.model_outputs import discrete_actions
from trajkit._models.rollout import Rollout
from trajkit.lint.registry import Finding

__all__ = [
    "LOGP_TOL",
    "copied_columns",
    "log_probs_mismatch",
    "log_softmax",
    "stored_log_probs_fit",
]

LOGP_TOL = 1e-3
"""A stored log-probability fits a recomputed one within this, relative (`1 + |logp|`)."""


def log_softmax(logits: AnyArray) -> AnyArray:
    """The log-softmax over the last axis, in float64.

    Examples:
        >>> import numpy as np
        >>> np.round(np.exp(log_softmax(np.array([0.0, 0.0]))), 3).tolist()
        [0.5, 0.5]
    """
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    out: AnyArray = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return out


def _recomputed(outs: Mapping[str, AnyArray]) -> AnyArray | None:
    """`[T+1, B]`: the log-probability of the stored action under the stored outputs."""
    actions = outs["actions"]
    if discrete_actions(outs):
        A = outs["actor"].shape[-1]
        index = np.clip(actions.astype(np.int64), 0, A - 1)[..., None]
        chosen: AnyArray = np.take_along_axis(log_softmax(outs["actor"]), index, axis=-1)[..., 0]
        return chosen
    mean = outs.get("mean")
    std = outs.get("std")
    if std is None and outs.get("log_std") is not None:
        std = np.exp(outs["log_std"].astype(np.float64))
    if mean is None or std is None or actions.dtype.kind != "f":
        return None
    if mean.shape != actions.shape or std.shape not in (actions.shape, actions.shape[2:]):
        return None
    R, B = actions.shape[:2]
    a, mu = actions.astype(np.float64), mean.astype(np.float64)
    sd = np.broadcast_to(np.asarray(std, dtype=np.float64), actions.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = -0.5 * np.square((a - mu) / sd) - np.log(sd) - 0.5 * np.log(2 * np.pi)
    out: AnyArray = dens.reshape(R, B, -1).sum(axis=-1)
    return out


def stored_log_probs_fit(outs: Mapping[str, AnyArray]) -> BoolArray | None:
    """`[T+1, B]`: whether `log_probs[t]` fits the stored outputs for `actions[t]`.

    `None` when the outputs cannot say (no `log_probs`, no `actor`, no `mean` and `std`).

    Examples:
        >>> import numpy as np
        >>> outs = {"actions": np.array([[0], [1]]), "actor": np.zeros((2, 1, 2)),
        ...         "log_probs": np.array([[np.log(0.5)], [0.0]])}
        >>> stored_log_probs_fit(outs)[:, 0].tolist()
        [True, False]
    """
    both = _fit_and_again(outs)
    return None if both is None else both[0]


def _fit_and_again(outs: Mapping[str, AnyArray]) -> tuple[BoolArray, AnyArray] | None:
    """`stored_log_probs_fit`, and the recomputed log-probabilities."""
    logp = outs.get("log_probs")
    if logp is None or "actions" not in outs:
        return None
    again = _recomputed(outs)
    if again is None or again.shape != logp.shape:
        return None
    fit: BoolArray = np.abs(again - logp) <= LOGP_TOL * (1 + np.abs(logp))
    return fit, again


def _on_bound(actions: AnyArray, space: Mapping[str, Any] | None) -> BoolArray | None:
    if not space or space.get("type") != "Box":
        return None
    R, B = actions.shape[:2]
    flat = actions.reshape(R, B, -1).astype(np.float64)
    hit = np.zeros((R, B), dtype=bool)
    for key in ("low", "high"):
        value = space.get(key)
        if isinstance(value, int | float):
            hit |= (flat == float(value)).any(axis=-1)
    return hit


def log_probs_mismatch(
    rollout: Rollout, space: Mapping[str, Any] | None, path: str | None
) -> Finding | None:
    """TK110: stored `log_probs` that the stored policy outputs do not give.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=7, num_envs=1, keys=("actions", "actor", "log_probs"))
        >>> outs = r.model_outs.arrays
        >>> outs["log_probs"][:] = np.take_along_axis(
        ...     log_softmax(outs["actor"]), outs["actions"][..., None].astype(int), -1)[..., 0]
        >>> log_probs_mismatch(r, None, "a.npz") is None
        True
        >>> outs["log_probs"][3, 0] += 1.0
        >>> log_probs_mismatch(r, None, "a.npz").step
        3
    """
    outs = rollout.model_outs.arrays
    both = _fit_and_again(outs)
    if both is None:
        return None
    fit, again = both
    if fit.all() or 2 * fit.sum() < fit.size:
        return None
    bad = ~fit
    t, b = (int(x) for x in np.argwhere(bad)[0])
    bounds = _on_bound(outs["actions"], space)
    why = ""
    if bounds is not None:
        why = (
            f", {int((bad & bounds).sum())} of them with an action on a bound of the space "
            "(the log-probability of the unclipped sample beside the clipped action?)"
        )
    n = int(bad.sum())
    return Finding(
        "TK110",
        f"log_probs[{t}, {b}] = {float(outs['log_probs'][t, b]):.6g}, but the stored policy "
        f"outputs give {float(again[t, b]):.6g} for actions[{t}, {b}] ({n} of {fit.size} "
        f"rows{why})",
        path,
        b,
        t,
    )


def copied_columns(rollout: Rollout, path: str | None) -> Finding | None:
    """TK112: env columns that start episodes from the same float observations.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=3)
        >>> r.obses[:, 2] = r.obses[:, 0]
        >>> copied_columns(r, "a.npz").message  # doctest: +ELLIPSIS
        'envs 0 and 2 have the same observations on every row ...
    """
    T, B = rollout.num_steps, rollout.batch_size
    leaves = [leaf for _, leaf in _tree.flatten(rollout.obses) if leaf.dtype.kind == "f"]
    if B < 2 or not leaves:
        return None
    raw = np.concatenate(
        [np.ascontiguousarray(leaf).reshape(T + 1, B, -1).view(np.uint8) for leaf in leaves],
        axis=-1,
    )
    shared = _shared_start(raw, rollout.dones)
    if shared is not None:
        return _copied(*shared, "start an episode from the same observation", path)
    columns: dict[bytes, int] = {}
    for b in range(B):
        column = np.ascontiguousarray(raw[:, b])
        if (column == column[0]).all():  # a constant column says nothing
            continue
        first_b = columns.setdefault(hashlib.blake2b(column.data, digest_size=16).digest(), b)
        if first_b != b:
            same = "have the same observations on every row"
            return _copied((first_b, 0), (b, 0), same, path)
    return None


def _shared_start(raw: AnyArray, dones: AnyArray) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Two envs' episode starts that are the same observation, bit for bit, as `(b, t)` each.

    Not where one env starts twice from one observation: its reset is fixed or draws from a
    few states, so every column starts alike by design, however the envs were seeded. (A file
    in which each env starts once cannot tell a fixed reset from envs seeded alike.)
    """
    starts: dict[bytes, tuple[int, int]] = {}
    shared = None
    for t, b in np.argwhere(dones == 1).tolist():
        first = starts.setdefault(raw[t, b].tobytes(), (b, t))
        if first == (b, t):
            continue
        if first[0] == b:  # a start this env had before: few start states
            return None
        shared = shared or (first, (b, t))
    return shared


def _copied(
    first: tuple[int, int], second: tuple[int, int], what: str, path: str | None
) -> Finding:
    return Finding(
        "TK112",
        f"envs {first[0]} and {second[0]} {what} (rows {first[1]} and {second[1]}): every env "
        "seeded alike, or one column copied into another?",
        path,
        second[0],
        second[1],
    )
