"""Rewards and actions stored one row off (TK102, TK103).

- TK102, rewards one step late (`prev_reward` stored) or early. Where an env pays its reward
  when an episode terminates (a goal, a crash, the end of a hand), the terminating steps'
  rewards lie outside the range of every other step's. Stored one step late, those rewards
  sit on the first steps of the next episodes instead; one step early, on the steps before
  the terminating ones. In each file, the reward at each alignment of its terminations (as
  recorded, late, early) is compared with the range of its *middle* steps' rewards (those
  at no alignment, nor in a control below); over the
  dataset, a shifted alignment is reported when at least `MIN_SHIFTED` of its steps (one
  per terminated episode) stand out, and most of them do, while most recorded terminating
  steps do not, and the controls do not either: first steps that follow no termination
  (the recording's first, those after a truncation) for late, steps before a truncation
  for early (an env whose first steps earn something special by themselves is not late);
  and the binomial chance of as many standing out, at the rate the recorded terminating
  steps and the controls stand out, is at most `trajkit.lint.evidence.CHANCE` (steps of one
  phase of fixed-length episodes stand out of the middle steps' range by themselves).
  Truncations and one-step episodes (whose first step is their last) are not terminations
  here. Dense rewards (every step alike) give no evidence, and nothing is said.
- TK103, actions stored one row off: `actions[t]` fits the policy outputs of another row
  than t (by `log_probs`, or by the greedy action of the `actor` logits when there are none;
  for Box actions, by the Gaussian `mean` and `std` beside `log_probs`). Every row with a
  neighbour on the side judged counts. Only the *telling* rows say which row an action
  belongs to: its action differs from the neighbouring row's, and by `log_probs` the two
  actions' log-probabilities differ too (a tie fits both), by the greedy action the row's
  greedy action differs from the neighbour's (a greedy action that persists fits both
  rows alike). Over the telling rows, the shifted reading must fit at least
  half, the own reading fewer than half, and the shifted reading at least twice as many
  as the own. At least `MIN_TELLING_LOGP` telling rows are judged by `log_probs` (an action
  fits another row's log-probability only by being its own), `MIN_TELLING` by the greedy
  action; and the binomial chance of as many shifted fits must be at most
  `trajkit.lint.evidence.CHANCE`, at the rate at which readings the data does not follow fit
  by coincidence: the own reading on the telling rows, the other shift where its action
  differs from both, and (by `log_probs`) *decoys*, the actions no reading proposes for a
  row (Discrete: the other actions of the space; Box: the actions two rows away).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._models.rollout import Rollout
from trajkit._models.rules import discrete_actions, episode_ends
from trajkit.lint.episodes import first_place
from trajkit.lint.evidence import CHANCE, binomial_tail, rate_bound
from trajkit.lint.policy import LOGP_TOL, gaussian_logp, log_softmax
from trajkit.lint.registry import Finding

__all__ = [
    "MIN_SHIFTED",
    "MIN_TELLING",
    "MIN_TELLING_LOGP",
    "RewardShift",
    "misaligned_actions",
    "reward_shift",
    "shift_wins",
    "shifted_rewards",
]

MIN_SHIFTED = 5
"""TK102: the fewest terminated episodes whose shifted reward stands out."""

MIN_TELLING = 8
"""TK103: the fewest telling rows (action differs from the neighbour's) judged by the greedy
action..."""

MIN_TELLING_LOGP = 3
"""...and by `log_probs`, which a shifted action fits only by being that row's own."""


def _aligned(rollout: Rollout, first_file: bool) -> dict[str, BoolArray]:
    """`[T, B]` masks of the steps at each alignment of the terminations, and the controls.

    `0`, `late`, `early`: the terminating steps, the next episodes' first steps, the steps
    before them. `first`: first steps of episodes that follow no termination (the
    recording's first, those after a truncation); `before`: the steps before a truncation.
    """
    T = rollout.num_steps
    ends = episode_ends(rollout.dones)
    cut = np.zeros_like(ends) if rollout.truncated is None else ends & (rollout.truncated == 1)
    first = rollout.dones[:T] == 1
    terminal = ends & ~cut & ~first  # a one-step episode's only step is both: left out
    late = np.zeros_like(terminal)
    late[1:] = terminal[:-1] & ~ends[1:]  # the next episode's first step, itself no end
    early = np.zeros_like(terminal)
    early[:-1] = terminal[1:] & ~first[1:]  # the step before, in the same episode
    after_cut = np.zeros_like(terminal)
    after_cut[1:] = cut[:-1] & ~ends[1:]
    after_cut[:1] = first[:1] & ~ends[:1] & first_file  # T = 0: no step, no control
    before_cut = np.zeros_like(terminal)
    before_cut[:-1] = cut[1:] & ~first[1:]
    return {"0": terminal, "late": late, "early": early, "first": after_cut, "before": before_cut}


def _standing_out(rews: AnyArray, mask: BoolArray, middle: BoolArray) -> BoolArray:
    """Where `mask` holds a reward outside the range of the middle steps' rewards."""
    if not middle.any():
        return np.zeros_like(mask)
    low, high = rews[middle].min(), rews[middle].max()
    out: BoolArray = mask & ((rews < low) | (rews > high))
    return out


@dataclass(frozen=True)
class RewardShift:
    """A file's evidence for TK102: per alignment, (steps, standing out, first place).

    The places are `(t, b)`, `None` when no step stands out; the value there is `value`.
    """

    counts: dict[str, tuple[int, int, tuple[int, int] | None, float]]


def reward_shift(rollout: Rollout, recording: Mapping[str, Any] | None) -> RewardShift:
    """The `RewardShift` of one file (`recording` tells whether it is a recording's first).

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=20, num_envs=1)
        >>> dones = np.zeros((21, 1)); dones[[0, 5, 10, 15, 20]] = 1
        >>> rews = np.zeros((20, 1)); rews[[5, 10, 15]] = 1.0  # the reward of step 4, 9, 14
        >>> reward_shift(r.replace(dones=dones, rews=rews), None).counts["late"][:3]
        (3, 3, (5, 0))
    """
    recording = recording or {}
    first_file = int(recording.get("index", 0)) == 0
    rews = rollout.rews.astype(np.float64)
    masks = _aligned(rollout, first_file)
    middle = ~np.logical_or.reduce(list(masks.values()))
    counts = {}
    for name, mask in masks.items():
        out = _standing_out(rews, mask, middle)
        place = first_place(out) if out.any() else None
        value = float(rews[place]) if place is not None else 0.0
        counts[name] = (int(mask.sum()), int(out.sum()), place, value)
    return RewardShift(counts)


def shifted_rewards(files: Sequence[tuple[str, RewardShift]]) -> list[Finding]:
    """TK102 over the dataset: each file where the terminal rewards sit one step off.

    Examples:
        >>> late = RewardShift({"0": (8, 0, None, 0.0), "late": (8, 8, (5, 0), 1.0),
        ...                     "early": (8, 0, None, 0.0), "first": (1, 0, None, 0.0),
        ...                     "before": (0, 0, None, 0.0)})
        >>> [f.step for f in shifted_rewards([("a.npz", late)])]
        [5]
    """
    total = {
        name: (sum(s.counts[name][0] for _, s in files), sum(s.counts[name][1] for _, s in files))
        for name in ("0", "late", "early", "first", "before")
    }
    steps, out = total["0"]
    if 2 * out >= steps and steps:
        return []
    for name, control in (("late", "first"), ("early", "before")):
        steps, out = total[name]
        checked, special = total[control]
        if out < MIN_SHIFTED or 2 * out <= steps or (checked and 2 * special >= checked):
            continue
        # Steps of one phase of an episode may stand out by themselves: as often as the
        # recorded terminating steps and the controls do, as far as the data shows.
        rate = rate_bound(total["0"][1] + special, total["0"][0] + checked)
        if binomial_tail(steps, rate, out) > CHANCE:
            continue
        where = "the next episode's first step" if name == "late" else "the step before"
        found = []
        for path, shift in files:
            n, k, place, value = shift.counts[name]
            if place is None:
                continue
            found.append(
                Finding(
                    "TK102",
                    f"the rewards of {out} of {steps} terminated episodes of the dataset "
                    f"stand out on {where} ({k} of {n} here; rews[{place[0]}, {place[1]}] = "
                    f"{value:.6g}), and {total['0'][1]} of {total['0'][0]} on the "
                    f"terminating steps: rewards stored one step {name}?",
                    path,
                    place[1],
                    place[0],
                )
            )
        return found
    return []


# ------------------------------------------------------------------------------ TK103


def _fits(
    rollout: Rollout, rows: AnyArray, candidate: AnyArray
) -> tuple[BoolArray, str, AnyArray | None] | None:
    """Whether `candidate[i]` (actions) fits the outputs of row `rows[i]`, and by what.

    Also the candidate's log-probability under those outputs (`None` by the greedy action).
    """
    outs = rollout.model_outs.arrays
    logp = outs.get("log_probs")
    if discrete_actions(outs):
        table = log_softmax(outs["actor"][rows])
        A = table.shape[-1]
        a = np.clip(candidate.astype(np.int64), 0, A - 1)
        if logp is None:
            greedy: BoolArray = a == table.argmax(axis=-1)
            return greedy, "the greedy action of actor", None
        chosen = np.take_along_axis(table, a[..., None], axis=-1)[..., 0]
    elif logp is not None and "mean" in outs and candidate.dtype.kind == "f":
        density = gaussian_logp(outs, candidate, rows)
        if density is None:
            return None
        chosen = density
    else:
        return None
    stored = logp[rows]
    ok: BoolArray = np.abs(chosen - stored) <= LOGP_TOL * (1 + np.abs(stored))
    return ok, "log_probs", chosen


def _greedy_moves(rollout: Rollout, rows: AnyArray, shift: int) -> BoolArray:
    """By the greedy action: the rows whose greedy action differs from the neighbour's.

    The neighbour is row `t + shift`, whose action the shifted reading proposes. Where the
    greedy action persists, the neighbour's greedy action is this row's too, and fits it
    whichever row it belongs to (an epsilon-greedy policy's random action on this row, and
    the shifted reading seems to win).
    """
    greedy = rollout.model_outs.arrays["actor"].argmax(axis=-1)
    out: BoolArray = greedy[rows] != greedy[rows + shift]
    return out


def _apart(x: AnyArray | None, y: AnyArray | None) -> BoolArray | bool:
    """Whether two readings' log-probabilities differ: a row where they tie tells nothing."""
    if x is None or y is None:
        return True
    out: BoolArray = np.abs(x - y) > LOGP_TOL * (1 + np.abs(x))
    return out


def shift_wins(own: int, shifted: int, telling: int) -> bool:
    """TK103's rule on the telling rows: the shifted reading wins.

    At least half of them fit the shifted row, fewer than half their own, and the shifted
    reading fits at least twice as many.

    Examples:
        >>> shift_wins(own=3, shifted=5, telling=10), shift_wins(own=2, shifted=5, telling=10)
        (False, True)
        >>> shift_wins(own=2, shifted=4, telling=9)
        False
    """
    return 2 * shifted >= telling and 2 * own < telling and shifted >= 2 * own


@dataclass(frozen=True)
class ActionFit:
    """A file's evidence for TK103: how its actions fit the policy outputs, and by what.

    Attributes:
        by: `log_probs` or `the greedy action of actor`.
        counts: Per shift (`late`: actions[t+1] against row t, `early`: actions[t-1]): the
            telling rows, those that fit their own row, those that fit the shifted row, the
            first row that fits the shifted reading but not its own; then the rows where
            this shift's action differs from both the row's own and the other shift's (and
            their log-probabilities too), and how many of those fit it.
        decoys: By `log_probs`: the actions a row's log-probability could fit only by
            coincidence (`_decoys`), and how many do.
    """

    by: str
    counts: dict[str, tuple[int, int, int, tuple[int, int] | None, int, int]]
    decoys: tuple[int, int] = (0, 0)


def action_fit(rollout: Rollout) -> ActionFit | None:
    """The `ActionFit` of one file, or `None` when its outputs cannot say.

    Every row with a neighbour in the direction judged counts (row 0 for `late`, row T for
    `early`); a telling row is one whose action differs from the neighbour's, where (by
    `log_probs`) the two actions' log-probabilities differ too.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=40, num_envs=2, keys=("actions", "actor", "log_probs"))
        >>> outs = r.model_outs.arrays
        >>> rng = np.random.default_rng(0)
        >>> outs["actor"][:] = rng.normal(size=outs["actor"].shape) * 3
        >>> outs["actions"][:] = rng.integers(0, outs["actor"].shape[-1], size=(41, 2))
        >>> table = log_softmax(outs["actor"])
        >>> outs["log_probs"][:] = np.take_along_axis(table, outs["actions"][..., None], -1)[..., 0]
        >>> outs["actions"][:] = np.roll(outs["actions"], 1, axis=0)
        >>> telling, own, shifted, first, alone, fits = action_fit(r).counts["late"]
        >>> own, shifted == telling, fits == alone
        (0, True, True)
    """
    outs = rollout.model_outs.arrays
    actions = outs.get("actions")
    if actions is None or actions.shape[0] < 3:
        return None
    R = actions.shape[0]
    own_fit = _fits(rollout, np.arange(R), actions)
    if own_fit is None:
        return None
    aligned, by, own_value = own_fit
    flat = actions.reshape(R, actions.shape[1], -1)
    counts = {}
    for shift, name in ((1, "late"), (-1, "early")):
        rows = np.arange(0, R - 1) if shift == 1 else np.arange(1, R)
        moved = _fits(rollout, rows, actions[rows + shift])
        if moved is None:  # the policy outputs fit the aligned actions, so they fit these
            raise ValueError("TK103: the policy outputs fit the actions, but not shifted ones")
        shifted, _, value = moved
        mine = None if own_value is None else own_value[rows]
        telling = (flat[rows] != flat[rows + shift]).any(axis=-1) & _apart(mine, value)
        if own_value is None:
            telling &= _greedy_moves(rollout, rows, shift)
        wins = telling & shifted & ~aligned[rows]
        first = None
        if wins.any():
            t, b = first_place(wins)
            first = (int(rows[t]), b)
        alone, fits = _alone(rollout, flat, (shifted, value, telling), shift)
        counts[name] = (
            int(telling.sum()),
            int((aligned[rows] & telling).sum()),
            int((shifted & telling).sum()),
            first,
            alone,
            fits,
        )
    return ActionFit(by, counts, _decoys(rollout) if by == "log_probs" else (0, 0))


def _decoys(rollout: Rollout) -> tuple[int, int]:
    """Actions that no reading proposes for a row, and how many fit its log-probability.

    A row's candidates are its own action and its neighbours'. Its decoys: Discrete, every
    other action of the space; Box, the actions two rows away, where they differ from
    every candidate. Whichever reading is the truth, a decoy fits by coincidence only.
    """
    outs = rollout.model_outs.arrays
    actions, logp = outs["actions"], outs["log_probs"]
    R = actions.shape[0]
    rows = np.arange(1, R - 1)
    stored = logp[rows].astype(np.float64)
    if discrete_actions(outs):
        table = log_softmax(outs["actor"][rows])
        a = np.clip(actions.astype(np.int64), 0, table.shape[-1] - 1)
        taken = np.zeros(table.shape, dtype=bool)
        for shift in (-1, 0, 1):
            np.put_along_axis(taken, a[rows + shift][..., None], True, axis=-1)
        near = np.abs(table - stored[..., None]) <= LOGP_TOL * (1 + np.abs(stored[..., None]))
        return int((~taken).sum()), int((~taken & near).sum())
    trials = fits = 0
    flat = actions.reshape(R, actions.shape[1], -1)
    for shift in (-2, 2):
        at = rows[(rows + shift >= 0) & (rows + shift < R)]
        if not len(at):
            continue
        decoy = actions[at + shift]
        other = np.ones(decoy.shape[:2], dtype=bool)
        for side in (-1, 0, 1):
            other &= (flat[at + shift] != flat[at + side]).any(axis=-1)
        density = gaussian_logp(outs, decoy, at)
        if density is None:
            return 0, 0
        kept = logp[at].astype(np.float64)
        fit = np.abs(density - kept) <= LOGP_TOL * (1 + np.abs(kept))
        trials += int(other.sum())
        fits += int((other & fit).sum())
    return trials, fits


def _alone(
    rollout: Rollout,
    flat: AnyArray,
    moved: tuple[BoolArray, AnyArray | None, BoolArray],
    shift: int,
) -> tuple[int, int]:
    """The telling rows where this shift's action differs from the other shift's too.

    Those rows (with both neighbours; by `log_probs`, their two log-probabilities differ),
    and how many fit this shift. Were the other shift (or none) the truth, this reading
    would fit there by coincidence only: TK103 weighs its chance against those rows.
    `moved` is this shift's fit, value and telling rows, over its rows (0..T-1 for `late`,
    1..T for `early`).
    """
    R = flat.shape[0]
    rows = np.arange(1, R - 1)
    index = rows if shift == 1 else rows - 1
    actions = rollout.model_outs.arrays["actions"]
    other = _fits(rollout, rows, actions[rows - shift])
    if other is None:  # the outputs fit the aligned actions, so they fit these
        raise ValueError("TK103: the policy outputs fit the actions, but not shifted ones")
    fit, value, telling = moved
    mask = telling[index] & (flat[rows + shift] != flat[rows - shift]).any(axis=-1)
    mask &= _apart(None if value is None else value[index], other[2])
    return int(mask.sum()), int((mask & fit[index]).sum())


def misaligned_actions(files: Sequence[tuple[str, ActionFit]]) -> list[Finding]:
    """TK103 over the dataset: each file whose actions sit one row off.

    Examples:
        >>> fit = ActionFit("log_probs", {"late": (9, 0, 9, (1, 0), 9, 9),
        ...                               "early": (20, 0, 0, None, 20, 0)})
        >>> misaligned_actions([("a.npz", fit)])[0].message.endswith("one row late")
        True
    """
    for name, mirror in (("late", "early"), ("early", "late")):
        for by in ("log_probs", "the greedy action of actor"):
            mine = [(p, f) for p, f in files if f.by == by]
            telling = sum(f.counts[name][0] for _, f in mine)
            own = sum(f.counts[name][1] for _, f in mine)
            shifted = sum(f.counts[name][2] for _, f in mine)
            # The mirror (the other shift) fits as often as a shift does by chance.
            # A reading the data does not follow fits by coincidence only: the own reading
            # on the telling rows, the other shift where it differs from this one, decoys.
            rate = rate_bound(
                own + sum(f.counts[mirror][5] + f.decoys[1] for _, f in mine),
                telling + sum(f.counts[mirror][4] + f.decoys[0] for _, f in mine),
            )
            least = MIN_TELLING_LOGP if by == "log_probs" else MIN_TELLING
            if telling < least or not shift_wins(own, shifted, telling):
                continue
            if binomial_tail(telling, rate, shifted) > CHANCE:
                continue
            neighbour = "next" if name == "late" else "previous"
            sign = "+1" if name == "late" else "-1"
            return [
                Finding(
                    "TK103",
                    f"of the {telling} rows of the dataset whose action differs from the "
                    f"{neighbour} row's, {own / telling:.0%} fit their own policy outputs "
                    f"and {shifted / telling:.0%} those of actions[t{sign}] (by {by}): each "
                    f"action is stored one row {name}",
                    path,
                    f.counts[name][3][1],  # type: ignore[index]
                    f.counts[name][3][0],  # type: ignore[index]
                )
                for path, f in mine
                if f.counts[name][3] is not None
            ]
    return []
