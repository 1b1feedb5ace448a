"""Stored log-probabilities against the stored policy outputs (TK110).

A row's log-probability is recomputed from its stored outputs for its stored action:
Discrete (`actor` logits), `log_softmax(actor[t])[actions[t]]`; Box, where the Gaussian's
`mean` and `std` (or `log_std`) are stored, the diagonal normal log-density of `actions[t]`,
summed over the action's features. A row fits when the two agree to `LOGP_TOL` (relative).

The evidence is counted over the whole dataset:

- an env whose log-probabilities fit the outputs of another env on at least half of its
  rows (at least `MIN_ROWS` of them) and its own on fewer than half: log-probabilities
  stored in another env order, reported in every file where a row does not fit;
- else, where the rows that fit confirm the formula (a formula that is not the policy's, as
  a squashed Gaussian's or tempered logits', fits no row but by coincidence), every file
  with rows that do not is reported once, at its first: log-probabilities of another
  policy (a stale copy of the network), of the unclipped sample beside the clipped action.
  The formula is confirmed when the binomial chance of as many rows fitting, at the rate
  at which a *decoy* fits (an action the row did not take: Discrete, another action of the
  space whose log-probability differs from the taken one's; Box, the action two rows away),
  is at most `trajkit.lint.evidence.CHANCE`; without decoys, by `MIN_FIT` rows. Logits
  masked before sampling fit where the mask removes nothing: store the masked logits as
  `actor`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._models.rollout import Rollout
from trajkit._models.rules import discrete_actions
from trajkit.lint.episodes import first_place
from trajkit.lint.evidence import CHANCE, binomial_tail, rate_bound
from trajkit.lint.registry import Finding

__all__ = [
    "LOGP_TOL",
    "MIN_FIT",
    "MIN_ROWS",
    "LogpFit",
    "gaussian_logp",
    "log_softmax",
    "logp_fit",
    "mismatch_findings",
]

LOGP_TOL = 1e-3
"""A stored log-probability fits a recomputed one within this, relative (`1 + |logp|`)."""

MIN_ROWS = 4
"""TK110's env-order reading: the fewest rows per env it is judged on."""

MIN_FIT = 8
"""TK110: the fewest fitting rows that confirm the formula where no decoy can be judged."""


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


def gaussian_logp(
    outs: Mapping[str, AnyArray], actions: AnyArray, rows: AnyArray | slice = slice(None)
) -> AnyArray | None:
    """The diagonal normal log-density of `actions` under the `mean` and `std` of `rows`.

    Examples:
        >>> import numpy as np
        >>> outs = {"mean": np.zeros((2, 1, 1)), "std": np.ones((2, 1, 1))}
        >>> np.round(gaussian_logp(outs, np.zeros((2, 1, 1))), 4).tolist()
        [[-0.9189], [-0.9189]]
    """
    mean, std = outs.get("mean"), outs.get("std")
    if std is None and outs.get("log_std") is not None:
        std = np.exp(outs["log_std"].astype(np.float64))
    if mean is None or std is None:
        return None
    mu = mean[rows]
    if mu.shape != actions.shape:
        return None
    sd_all = np.asarray(std, dtype=np.float64)
    sd = sd_all[rows] if sd_all.shape == mean.shape else sd_all
    if sd.shape not in (actions.shape, actions.shape[2:]):
        return None
    a, m = actions.astype(np.float64), mu.astype(np.float64)
    sd = np.broadcast_to(sd, actions.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = -0.5 * np.square((a - m) / sd) - np.log(sd) - 0.5 * np.log(2 * np.pi)
    out: AnyArray = dens.reshape(*actions.shape[:2], -1).sum(axis=-1)
    return out


def _recomputed(outs: Mapping[str, AnyArray]) -> AnyArray | None:
    """`[T+1, B]`: the log-probability of the stored action under the stored outputs."""
    actions = outs["actions"]
    if discrete_actions(outs):
        A = outs["actor"].shape[-1]
        index = np.clip(actions.astype(np.int64), 0, A - 1)[..., None]
        chosen: AnyArray = np.take_along_axis(log_softmax(outs["actor"]), index, axis=-1)[..., 0]
        return chosen
    if actions.dtype.kind != "f":
        return None
    return gaussian_logp(outs, actions)


def _fits(stored: AnyArray, again: AnyArray) -> BoolArray:
    out: BoolArray = np.abs(again - stored) <= LOGP_TOL * (1 + np.abs(stored))
    return out


@dataclass(frozen=True)
class LogpFit:
    """A file's evidence for TK110.

    Attributes:
        rows: Its rows with a recomputable log-probability; `fit` of them fit.
        first: The first row that does not fit, as (t, b), if any.
        stored, again: The stored and the recomputed log-probability there.
        on_bound: How many rows that do not fit have an action on a bound of the space
            (`None` without a Box space).
        order: `order[b][c]`: the rows where env b's stored log-probability fits env c's
            recomputed one (the diagonal: its own).
        decoys: Actions a row did not take that its stored log-probability is compared
            with, and how many fit it (`_decoys`).
    """

    rows: int
    fit: int
    first: tuple[int, int] | None
    stored: float = 0.0
    again: float = 0.0
    on_bound: int | None = None
    order: tuple[tuple[int, ...], ...] = ()
    decoys: tuple[int, int] = (0, 0)


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


def logp_fit(rollout: Rollout, space: Mapping[str, Any] | None) -> LogpFit | None:
    """The `LogpFit` of one file, or `None` when its outputs cannot say.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=3, num_envs=1, keys=("actions", "actor", "log_probs"))
        >>> outs = r.model_outs.arrays
        >>> outs["log_probs"][:] = np.take_along_axis(
        ...     log_softmax(outs["actor"]), outs["actions"][..., None].astype(int), -1)[..., 0]
        >>> outs["log_probs"][2, 0] += 1.0
        >>> fit = logp_fit(r, None)
        >>> fit.rows, fit.fit, fit.first, fit.order
        (4, 3, (2, 0), ((3,),))
    """
    outs = rollout.model_outs.arrays
    logp = outs.get("log_probs")
    if logp is None or "actions" not in outs:
        return None
    again = _recomputed(outs)
    if again is None or again.shape != logp.shape:
        return None
    fit = _fits(logp, again)
    B = logp.shape[1]
    order = tuple(
        tuple(int(_fits(logp[:, b], again[:, c]).sum()) for c in range(B)) for b in range(B)
    )
    decoys = _decoys(outs, logp, again)
    if fit.all():
        return LogpFit(int(fit.size), int(fit.size), None, order=order, decoys=decoys)
    bad = ~fit
    t, b = first_place(bad)
    bounds = _on_bound(outs["actions"], space)
    return LogpFit(
        rows=int(fit.size),
        fit=int(fit.sum()),
        first=(t, b),
        stored=float(logp[t, b]),
        again=float(again[t, b]),
        on_bound=None if bounds is None else int((bad & bounds).sum()),
        order=order,
        decoys=decoys,
    )


def _decoys(outs: Mapping[str, AnyArray], logp: AnyArray, again: AnyArray) -> tuple[int, int]:
    """Actions a row did not take, and how many fit its stored log-probability.

    Discrete: every other action of the space whose log-probability differs from the taken
    one's (a tie fits alike); Box: the action two rows away (either side), where it differs.
    Whatever formula the stored log-probabilities come from, a decoy fits by coincidence.
    """
    stored = logp.astype(np.float64)
    if discrete_actions(outs):
        table = log_softmax(outs["actor"])
        apart = ~_fits(again[..., None], table)  # not the taken action, nor tied with it
        near = _fits(stored[..., None], table)
        return int(apart.sum()), int((apart & near).sum())
    actions = outs["actions"]
    R = actions.shape[0]
    flat = actions.reshape(R, actions.shape[1], -1)
    trials = fits = 0
    for shift in (-2, 2):
        rows = np.arange(max(0, -shift), min(R, R - shift))
        if not len(rows):
            continue
        density = gaussian_logp(outs, actions[rows + shift], rows)
        if density is None:
            return 0, 0
        other = (flat[rows + shift] != flat[rows]).any(axis=-1)
        trials += int(other.sum())
        fits += int((other & _fits(stored[rows], density)).sum())
    return trials, fits


def _reordered(files: list[tuple[str, LogpFit]]) -> tuple[int, int, int, int] | None:
    """An env whose log-probabilities fit another env's outputs, summed over the dataset.

    Returns (env, other, rows that fit the other's, rows that fit its own), or `None`.
    """
    B = len(files[0][1].order) if files else 0
    same = [f for _, f in files if len(f.order) == B]
    rows = sum(f.rows for f in same) // max(B, 1)
    if B < 2 or rows < MIN_ROWS:
        return None
    total = np.sum([np.array(f.order) for f in same], axis=0)
    for b in range(B):
        own = int(total[b, b])
        other = int(np.argmax(np.where(np.arange(B) == b, -1, total[b])))
        if 2 * own < rows <= 2 * int(total[b, other]):
            return b, other, int(total[b, other]), own
    return None


def _confirmed(files: list[tuple[str, LogpFit]], fit: int, rows: int) -> bool:
    """Whether the `fit` of `rows` rows that fit confirm the formula (see the module)."""
    trials, fits = sum(f.decoys[0] for _, f in files), sum(f.decoys[1] for _, f in files)
    if not trials:
        return fit >= MIN_FIT
    return binomial_tail(rows, rate_bound(fits, trials), fit) <= CHANCE


def mismatch_findings(files: list[tuple[str, LogpFit]]) -> list[Finding]:
    """TK110 over the dataset: log-probabilities in another env order, or that do not fit.

    Examples:
        >>> good = ("a.npz", LogpFit(10, 10, None, order=((5, 0), (0, 5))))
        >>> bad = ("b.npz", LogpFit(10, 0, (0, 1), -1.0, -2.0, order=((0, 0), (0, 0))))
        >>> [f.path for f in mismatch_findings([good, bad])]
        ['b.npz']
        >>> mismatch_findings([bad, bad])
        []
    """
    reordered = _reordered(files)
    if reordered is not None:
        b, other, theirs, own = reordered
        return [
            Finding(
                "TK110",
                f"log_probs of env {b} fit the policy outputs of env {other} on {theirs} rows "
                f"of the dataset, and their own on {own}: log_probs stored in another env "
                "order than the actions?",
                path,
                f.first[1],
                f.first[0],
            )
            for path, f in files
            if f.first is not None
        ]
    fit = sum(f.fit for _, f in files)
    rows = sum(f.rows for _, f in files)
    if not _confirmed(files, fit, rows):
        return []
    found = []
    for path, f in files:
        if f.first is None:
            continue
        t, b = f.first
        why = ""
        if f.on_bound is not None:
            why = (
                f", {f.on_bound} of them with an action on a bound of the space "
                "(the log-probability of the unclipped sample beside the clipped action?)"
            )
        found.append(
            Finding(
                "TK110",
                f"log_probs[{t}, {b}] = {f.stored:.6g}, but the stored policy outputs give "
                f"{f.again:.6g} for actions[{t}, {b}] ({f.rows - f.fit} of {f.rows} rows{why}; "
                f"{fit} of {rows} rows of the dataset fit)",
                path,
                b,
                t,
            )
        )
    return found
