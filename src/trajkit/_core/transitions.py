"""Transitions for offline RL and imitation learning: episode ids, n-step targets, gathering.

A rollout of T steps of B envs holds T·B transitions `(obs, action, reward, next_obs)`.
This module is the pure NumPy part every transition API draws on
([`trajkit.transitions`][trajkit.transitions],
[`trajkit.transition_minibatches`][trajkit.transition_minibatches], the `read_steps` rows of
`trajkit.ray`):

* **Targets**: [`episode_ids`][trajkit.episode_ids] numbers the episodes of a rollout, and
  [`n_step_returns`][trajkit.n_step_returns] computes the n-step return, the discount of its
  bootstrap value and the step whose next observation bootstraps it.
* **Tables**: `TransitionTable` keeps a rollout's per-transition columns (small) next to
  its observation leaves seen as rows (`[(T+1)·B, ...]`: a view of a memory-mapped file,
  never copied) and the rows where each transition's observations are; it is a table of the
  minibatch engine (`trajkit._core.minibatch`), which takes a minibatch's rows from one or
  several of them, reading only the observations it needs. `concat_tables` joins the
  tables of rollouts in memory into one.

Rows are numbered env by env, step by step: row `b * T + t` is step `t` of env `b`, so the
transitions of an episode are consecutive rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from trajkit._base.types import AnyArray, BoolArray, Float32Array, Int64Array, IntArray
from trajkit._core.episodes import check_truncations, episode_ends
from trajkit._core.gae import check_discount
from trajkit._core.minibatch import Table

__all__ = [
    "EPISODE_STRIDE",
    "SOURCE_LIMIT",
    "TransitionTable",
    "check_gamma",
    "check_n_step",
    "concat_tables",
    "episode_ids",
    "n_step_returns",
]

EPISODE_STRIDE = 1 << 32
"""Episode ids of source `i` (a file of a dataset, a rollout of a list) start at `i * 2**32`."""

SOURCE_LIMIT = 1 << 31
"""Sources are numbered below 2**31: the ids of source 2**31 would start at 2**63, past int64."""


def _flags(name: str, value: ArrayLike, shape: tuple[int, ...] | None = None) -> BoolArray:
    array = np.asarray(value)
    if array.ndim != 2 or (shape is not None and array.shape != shape):
        expected = "2-D [T, B]" if shape is None else f"shape {shape}"
        raise ValueError(f"{name} must have {expected}, got shape {array.shape}")
    if array.size and not np.isin(array, (0, 1)).all():
        raise ValueError(f"{name} must hold only 0 and 1")
    flags: BoolArray = array == 1
    return flags


def check_n_step(n_step: object) -> int:
    """Check an `n_step=` argument: an int of at least 1 (a bool is refused)."""
    if isinstance(n_step, bool) or not isinstance(n_step, int | np.integer) or n_step < 1:
        raise ValueError(f"n_step must be an integer of at least 1, got {n_step!r}")
    return int(n_step)


def check_gamma(gamma: object) -> float:
    """Check a `gamma=` argument as `gae` does: a finite number in [0, 1]."""
    return check_discount(gamma, 1.0)[0]


def episode_ids(dones: ArrayLike, *, source: int = 0) -> Int64Array:
    """Number the episodes of a rollout: the id of the episode each step belongs to.

    Step `t` of env `b` belongs to the episode of observation `t`; a new episode starts
    wherever `dones[t, b] = 1`, and each env's first step starts one too (its episode may
    have begun before the rollout). Episodes are numbered env by env, then in time, from
    `source * 2**32`, so ids of different sources (the files of a dataset) never collide and
    the ids of one source are consecutive.

    Args:
        dones: Episode starts `[T+1, B]`, 0/1, at times [0, T].
        source: The index of the rollout among several (its file's index in a dataset), in
            [0, 2**31): the ids are int64, and those of source 2**31 would start at 2**63.

    Returns:
        int64 ids `[T, B]`, for steps [0, T-1].

    Raises:
        ValueError: If `dones` is not 2-D 0/1, or `source` is not an integer in [0, 2**31).

    Examples:
        >>> import numpy as np
        >>> from trajkit import episode_ids
        >>> dones = np.array([[0, 0], [0, 1], [1, 0], [0, 0]])
        >>> episode_ids(dones).T.tolist()  # env 0: one end; env 1: an episode starts at t=1
        [[0, 0, 1], [2, 3, 3]]
        >>> int(episode_ids(dones, source=1)[0, 0]) == 2**32
        True
    """
    flags = _flags("dones", dones)
    if (
        isinstance(source, bool)
        or not isinstance(source, int | np.integer)
        or not 0 <= source < SOURCE_LIMIT
    ):
        raise ValueError(
            f"source must be an integer in [0, 2**31), got {source!r}: episode ids start at "
            "source * 2**32 and are int64"
        )
    T = flags.shape[0] - 1
    starts = flags[:T].copy() if T > 0 else flags[:0].copy()
    if T > 0:
        starts[0] = True
    ids = np.cumsum(starts.T.ravel(), dtype=np.int64) - 1  # env-major
    return ids.reshape(starts.shape[::-1]).T + np.int64(source) * EPISODE_STRIDE


def n_step_returns(
    rews: ArrayLike,
    dones: ArrayLike,
    gamma: float,
    n_step: int,
    *,
    truncated: ArrayLike | None = None,
) -> tuple[Float32Array, Float32Array, Int64Array]:
    r"""n-step returns, cut at episode ends, with their bootstrap discount and step.

    For step `t` of env `b`, with `m` the number of rewards summed (`n_step`, or fewer where
    the episode ends or the rollout runs out first):

    $$G_t = \sum_{k=0}^{m-1} \gamma^k r_{t+k}, \qquad
      d_t = \gamma^m \, (1 - \text{terminated}_{t+m-1}),$$

    and the n-step target of a DQN- or IQL-style learner is
    $G_t + d_t \, V(s')$ with $s'$ the observation after step `last = t+m-1` (the true final
    observation where that step ended its episode, see
    [`Rollout.next_obses`][trajkit.Rollout.next_obses]). The sum stops at an episode's
    last step: a termination (`dones[t+1] = 1`, not truncated) gives `d = 0`; a truncation
    (time limit) bootstraps from the final observation, as does the rollout's last step
    from `obses[T]`. With `n_step=1`, `G = r_t` and `d = gamma * (1 - terminated_t)`: the
    one-step TD target. Summed in float64, returned as float32 (Hessel et al. 2018,
    arXiv:1710.02298, multi-step learning).

    Args:
        rews: Rewards `[T, B]`, at steps [0, T-1].
        dones: Episode starts `[T+1, B]`, 0/1, at times [0, T].
        gamma: Discount, finite, in [0, 1].
        n_step: Rewards summed at most, at least 1.
        truncated: Optional `[T, B]` 0/1: step t's episode end was a time limit. Without it,
            every end is a termination.

    Returns:
        `(returns, discounts, last)`: float32 `[T, B]`, float32 `[T, B]`, and int64
        `[T, B]`, the step whose next observation bootstraps the target.

    Raises:
        ValueError: If the shapes disagree, a flag is not 0/1, or gamma or n_step is out
            of range.

    Examples:
        >>> import numpy as np
        >>> from trajkit import n_step_returns
        >>> rews = np.array([[1.0], [2.0], [4.0], [8.0]])
        >>> dones = np.array([[0], [0], [1], [0], [0]])  # step 1 ends an episode
        >>> G, d, last = n_step_returns(rews, dones, 0.5, 2)
        >>> G[:, 0].tolist(), d[:, 0].tolist(), last[:, 0].tolist()
        ([2.0, 2.0, 8.0, 8.0], [0.0, 0.0, 0.25, 0.5], [1, 1, 3, 3])
    """
    gamma = check_gamma(gamma)
    n = check_n_step(n_step)
    starts = _flags("dones", dones)
    T, B = starts.shape[0] - 1, starts.shape[1]
    r = np.asarray(rews, dtype=np.float64)
    if r.shape != (T, B):
        raise ValueError(f"rews must have shape (T, B) = {(T, B)} (from dones), got {r.shape}")
    ends = episode_ends(starts)
    cut = np.zeros((T, B), bool) if truncated is None else _flags("truncated", truncated, (T, B))
    check_truncations(cut, starts)
    terminated = ends & ~cut
    returns = np.zeros((T, B))
    last = np.broadcast_to(np.arange(T, dtype=np.int64)[:, None], (T, B)).copy()
    alive = np.ones((T, B), bool)
    for k in range(min(n, T)):
        # Row t reads step t+k; rows past the rollout's end stop.
        alive[T - k :] = False
        if not alive.any():
            break
        rows = slice(0, T - k)
        live = alive[rows]
        returns[rows] += np.where(live, gamma**k * r[k:], 0.0)
        last[rows] = np.where(live, np.arange(k, T, dtype=np.int64)[:, None], last[rows])
        alive[rows] &= ~ends[k:]
    m = last - np.arange(T, dtype=np.int64)[:, None] + 1
    bootstrap = ~np.take_along_axis(terminated, last, axis=0) if T else terminated
    discounts = np.where(bootstrap, np.power(gamma, m, dtype=np.float64), 0.0)
    return returns.astype(np.float32), discounts.astype(np.float32), last


def _rows_of(leaf: AnyArray) -> AnyArray:
    """A `[T+1, B, ...]` leaf as `[(T+1)·B, ...]` rows: a view where the layout allows."""
    return leaf.reshape((leaf.shape[0] * leaf.shape[1], *leaf.shape[2:]))


@dataclass
class TransitionTable(Table):
    """Transitions as rows: per-transition columns, and where their observations are.

    Observations are not copied: `leaves` are the rollout's observation leaves seen as rows
    (`obses[t, b]` is row `t * B + b`, a view of a memory-mapped file stays one), `finals`
    the leaves of its true final observations. `take` reads only the rows it is asked for.

    Attributes:
        leaves: Observation rows, one array per leaf of `obses`.
        finals: True final observations, one array per leaf, or `None`.
        columns: Per-transition columns `[N, ...]`.
        obs_at: `[N]` int64: the row of each transition's observation.
        next_at: `[N]` int64: the row of its next observation; `-1 - e` for `finals` row e.
        n_step_at: `[N]` int64: the same for the n-step bootstrap observation, or `None`.
    """

    leaves: list[AnyArray]
    finals: list[AnyArray] | None
    columns: dict[str, AnyArray]
    obs_at: Int64Array
    next_at: Int64Array
    n_step_at: Int64Array | None = None

    def __post_init__(self) -> None:
        Table.__init__(self, len(self.obs_at))

    @classmethod
    def from_steps(
        cls,
        obs_leaves: Sequence[AnyArray],
        final_leaves: Sequence[AnyArray] | None,
        dones: AnyArray,
        columns: dict[str, AnyArray],
        last: Int64Array | None = None,
    ) -> TransitionTable:
        """A rollout's table: `columns` are `[T, B, ...]`, `obs_leaves` `[T+1, B, ...]`.

        Transition `b * T + t` is step `t` of env `b` (an episode's steps are consecutive);
        `final_leaves` are laid out as `Rollout.final_obses`, one row per `dones[t+1] = 1`
        in `np.nonzero` order; `last` is the bootstrap step of each n-step target.
        """
        T, B = dones.shape[0] - 1, dones.shape[1]
        t = np.arange(T, dtype=np.int64)[:, None]
        b = np.arange(B, dtype=np.int64)[None, :]
        after = (t + 1) * B + b  # [T, B]
        if final_leaves is not None:
            ended = episode_ends(dones)
            after = np.where(ended, -1 - (np.cumsum(ended.ravel()) - 1).reshape(T, B), after)
        n_step_at = None
        if last is not None:
            n_step_at = np.take_along_axis(after, last, axis=0).T.ravel()
        return cls(
            leaves=[_rows_of(leaf) for leaf in obs_leaves],
            finals=None if final_leaves is None else list(final_leaves),
            columns={
                name: np.ascontiguousarray(np.swapaxes(col, 0, 1)).reshape(T * B, *col.shape[2:])
                for name, col in columns.items()
            },
            obs_at=np.broadcast_to(t * B + b, (T, B)).T.ravel(),
            next_at=after.T.ravel(),
            n_step_at=n_step_at,
        )

    def _read(self, leaf: int, at: Int64Array) -> AnyArray:
        rows = self.leaves[leaf]
        final = at < 0
        if self.finals is None or not final.any():
            return np.take(rows, at, axis=0)
        out = np.take(rows, np.where(final, 0, at), axis=0)
        out[final] = np.take(self.finals[leaf], -1 - at[final], axis=0)
        return out

    def take(self, rows: IntArray) -> dict[str, Any]:
        """The transitions at `rows`: columns, and `obs`/`next_obs`/`n_step_obs` leaf lists."""
        out: dict[str, Any] = {
            name: np.take(col, rows, axis=0) for name, col in self.columns.items()
        }
        count = range(len(self.leaves))
        out["obs"] = [np.take(self.leaves[i], self.obs_at[rows], axis=0) for i in count]
        out["next_obs"] = [self._read(i, self.next_at[rows]) for i in count]
        if self.n_step_at is not None:
            out["n_step_obs"] = [self._read(i, self.n_step_at[rows]) for i in count]
        return out


def concat_tables(tables: Sequence[TransitionTable]) -> TransitionTable:
    """One table of several (their observations are copied together): rows in order."""
    if len(tables) == 1:
        return tables[0]
    first = tables[0]
    leaf_rows = np.cumsum([0] + [len(t.leaves[0]) if t.leaves else 0 for t in tables])
    final_rows = np.cumsum([0] + [len(t.finals[0]) if t.finals else 0 for t in tables])

    def moved(at: Int64Array, i: int) -> Int64Array:
        out: Int64Array = np.where(at < 0, at - final_rows[i], at + leaf_rows[i])
        return out

    finals = None
    if any(t.finals is not None for t in tables):  # a table without any has none to point to
        finals = [
            np.concatenate([t.leaves[i][:0] if t.finals is None else t.finals[i] for t in tables])
            for i in range(len(first.leaves))
        ]
    return TransitionTable(
        leaves=[np.concatenate([t.leaves[i] for t in tables]) for i in range(len(first.leaves))],
        finals=finals,
        columns={name: np.concatenate([t.columns[name] for t in tables]) for name in first.columns},
        obs_at=np.concatenate([t.obs_at + leaf_rows[i] for i, t in enumerate(tables)]),
        next_at=np.concatenate([moved(t.next_at, i) for i, t in enumerate(tables)]),
        n_step_at=None
        if first.n_step_at is None
        else np.concatenate(
            [moved(t.n_step_at, i) for i, t in enumerate(tables) if t.n_step_at is not None]
        ),
    )
