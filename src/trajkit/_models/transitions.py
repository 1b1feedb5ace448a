"""Transitions of rollouts for offline RL and imitation learning: no critic, no discount needed.

The adapters over `trajkit._core.transitions` and the minibatch engine:
[`transitions`][trajkit.transitions] (every transition of one rollout) and
[`transition_minibatches`][trajkit.transition_minibatches] (shuffled minibatches over a
rollout, a list of rollouts or a dataset, streamed file by file). `trajkit.ray.read_steps`
gives the same columns as rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Final, Protocol, TypeAlias, cast, runtime_checkable

import numpy as np

from trajkit._base.deprecation import deprecated
from trajkit._base.types import AnyArray, ArrayTree, Int64Array, Seed
from trajkit._core import transitions as _tr
from trajkit._core import tree as _tree
from trajkit._core.minibatch import MinibatchPlan, sample
from trajkit._models.errors import MissingModelOutputError
from trajkit._models.rollout import Rollout
from trajkit._models.rules import STEP_COLUMNS, episode_ends

__all__ = [
    "RolloutFiles",
    "TRANSITION_KEYS",
    "TransitionSource",
    "n_step_discount",
    "step_columns",
    "transition_minibatches",
    "transitions",
]

TRANSITION_KEYS: Final = (
    "obs",
    "action",
    "reward",
    "next_obs",
    "terminated",
    "truncated",
    "episode",
)
"""The columns of every transition; with `gamma`, also the `n_step_*` columns.

- `obs`: observation `t` (a dict/tuple for nested observations), in its stored dtype;
- `action`: `model_outs['actions'][t]`: int64 for integer (Discrete, MultiDiscrete,
  MultiBinary) actions, float32 for Box actions;
- `reward` (float32): `rews[t]`;
- `next_obs`: the observation after step `t`: the true final observation where the step
  ended an episode and the rollout keeps `final_obses`, else `obses[t+1]`;
- `terminated`, `truncated` (bool): step `t` ended its episode (`dones[t+1] = 1`) by
  termination, or by a time limit (`truncated[t] = 1`); without `truncated`, every end is a
  termination;
- `episode` (int64): the episode id, [`episode_ids`][trajkit.episode_ids] of the source.
"""

N_STEP_KEYS: Final = ("n_step_return", "n_step_discount", "n_step_obs")

Rebuild: TypeAlias = Callable[[dict[str, Any]], dict[str, ArrayTree]]


@runtime_checkable
class RolloutFiles(Protocol):
    """Rollout files loaded one at a time: what a `trajkit.dataset.Dataset` offers."""

    @property
    def files(self) -> tuple[str, ...]:
        """The files, in order."""

    def load(self, path: str) -> Rollout:
        """One file's rollout (checked, memory-mapped where it can be)."""


TransitionSource = Rollout | Sequence[Rollout] | RolloutFiles
"""Where transitions come from: a rollout, a list of rollouts (`trajkit.minari.from_minari`,
`trajkit.arrow.read_parquet`), or a `trajkit.dataset.Dataset` (streamed file by file)."""


def _actions(rollout: Rollout, method: str) -> AnyArray:
    outs = rollout.model_outs.arrays
    if "actions" not in outs:
        raise MissingModelOutputError(
            method,
            "actions",
            outs,
            purpose="for the action of each transition",
            hint="record the actions taken",
        )
    actions = outs["actions"][: rollout.num_steps]
    return actions.astype(np.float32 if actions.dtype.kind == "f" else np.int64)


def step_columns(
    rollout: Rollout,
    source: int,
    discount: tuple[float, int] | None,
    method: str,
    *,
    optional: bool = False,
) -> tuple[dict[str, AnyArray], Int64Array | None]:
    """The per-step transition columns of `rollout` (`[T, B, ...]`) and the n-step `last`.

    What every transition API gives, rows of `trajkit.ray.read_steps` included: `action`,
    `reward`, `terminated`, `truncated`, `episode`, and with `discount = (gamma, n_step)`
    `n_step_return` and `n_step_discount` (`last`: the bootstrap step of each, else `None`).
    With `optional`, a rollout without actions has no `action` column rather than an error.
    """
    ends = episode_ends(rollout.dones)
    cut = np.zeros(ends.shape, bool) if rollout.truncated is None else rollout.truncated == 1
    columns: dict[str, AnyArray] = {}
    if not optional or "actions" in rollout.model_outs.arrays:
        columns[STEP_COLUMNS["actions"]] = _actions(rollout, method)
    columns |= {
        STEP_COLUMNS["rews"]: rollout.rews,
        "terminated": ends & ~cut,
        "truncated": cut,
        "episode": _tr.episode_ids(rollout.dones, source=source),
    }
    if discount is None:
        return columns, None
    returns, discounts, last = _tr.n_step_returns(
        rollout.rews, rollout.dones, discount[0], discount[1], truncated=rollout.truncated
    )
    columns["n_step_return"] = returns
    columns["n_step_discount"] = discounts
    return columns, last


def _table(
    rollout: Rollout, source: int, discount: tuple[float, int] | None, method: str
) -> _tr.TransitionTable:
    """The transition table of `rollout`, the `source`-th of its dataset or list."""
    columns, last = step_columns(rollout, source, discount, method)
    table = _tr.TransitionTable.from_steps(
        _tree.leaves(rollout.obses),
        None if rollout.final_obses is None else _tree.leaves(rollout.final_obses),
        rollout.dones,
        columns,
        last,
    )
    table.finish = _rebuilder(rollout)
    return table


def _file_table(
    files: RolloutFiles, path: str, index: int, discount: tuple[float, int] | None, method: str
) -> _tr.TransitionTable:
    """The transition table of file `path`, the `index`-th of `files`, loaded now."""
    return _table(files.load(path), index, discount, method)


def n_step_discount(gamma: float | None, n_step: int) -> tuple[float, int] | None:
    """Check `gamma=` and `n_step=`: `(gamma, n_step)`, or `None` for no n-step columns."""
    steps = _tr.check_n_step(n_step)
    return None if gamma is None else (_tr.check_gamma(gamma), steps)


def _rebuilder(rollout: Rollout) -> Rebuild:
    """Turn gathered leaf lists back into `obses`' structure."""
    structure = _tree.structure_of(rollout.obses)

    def rebuild(batch: dict[str, Any]) -> dict[str, ArrayTree]:
        for key in ("obs", "next_obs", "n_step_obs"):
            if key in batch:
                batch[key] = _tree.unflatten(structure, batch[key])
        return {key: batch[key] for key in (*TRANSITION_KEYS, *N_STEP_KEYS) if key in batch}

    return rebuild


def transitions(
    rollout: Rollout, *, gamma: float | None = None, n_step: int = 1, source: int = 0
) -> dict[str, ArrayTree]:
    """Every transition of a rollout, `[T·B, ...]`, for offline RL and imitation learning.

    Needs only observations, rewards, dones and `model_outs['actions']`: no critic, no
    discount. The columns are [`TRANSITION_KEYS`][trajkit.TRANSITION_KEYS]; with `gamma`,
    also the n-step target's parts of [`n_step_returns`][trajkit.n_step_returns]:

    - `n_step_return` (float32): the discounted sum of up to `n_step` rewards, cut at the
      episode's end;
    - `n_step_discount` (float32): the factor of the bootstrap value, `gamma**m` (0 where
      the episode terminated within the `m` steps summed);
    - `n_step_obs`: the observation to bootstrap from (a true final observation where a
      truncation cut the sum).

    So a DQN- or IQL-style target is `n_step_return + n_step_discount * V(n_step_obs)`;
    with `n_step=1` it is the one-step TD target `reward + gamma * (1 - terminated) *
    V(next_obs)`. Rows run env by env, step by step: row `b * T + t` is step `t` of env
    `b`, so an episode's transitions are consecutive.

    Args:
        rollout: The rollout.
        gamma: The discount of the n-step columns, in [0, 1]; `None` for none.
        n_step: Rewards summed at most by `n_step_return`, at least 1.
        source: The rollout's index among several: episode ids start at `source * 2**32`.

    Returns:
        Name to `[T·B, ...]` array (`obs`, `next_obs`, `n_step_obs` as `obses` is nested).

    Raises:
        MissingModelOutputError: If the rollout has no `model_outs['actions']`.
        ValueError: If `gamma` or `n_step` is out of range.

    Examples:
        >>> import numpy as np
        >>> from trajkit import Rollout, transitions
        >>> r = Rollout(
        ...     states=np.zeros((4, 1, 0)),
        ...     obses=np.array([[[0]], [[1]], [[10]], [[11]]]),  # step 1 ends an episode
        ...     rews=np.array([[1.0], [2.0], [3.0]]),
        ...     dones=np.array([[0], [0], [1], [0]]),
        ...     infos=None,
        ...     model_outs={"actions": np.array([[0], [1], [1], [0]])},
        ...     final_obses=np.array([[2]]),  # what the env returned when it ended
        ... )
        >>> t = transitions(r, gamma=0.5, n_step=2)
        >>> t["obs"][:, 0].tolist(), t["next_obs"][:, 0].tolist(), t["episode"].tolist()
        ([0, 1, 10], [1, 2, 11], [0, 0, 1])
        >>> t["n_step_return"].tolist(), t["n_step_discount"].tolist()
        ([2.0, 2.0, 3.0], [0.0, 0.0, 0.5])
        >>> t["action"].dtype, t["terminated"].tolist()
        (dtype('int64'), [False, True, False])
    """
    table = _table(rollout, source, n_step_discount(gamma, n_step), "transitions()")
    everything: dict[str, ArrayTree] = table.finish(table.take(np.arange(table.rows)))
    return everything


def _rollouts(source: object, method: str) -> list[Rollout] | None:
    """The rollouts of an in-memory `source`; `None` for files loaded one at a time."""
    if isinstance(source, Rollout):
        return [source]
    if isinstance(source, RolloutFiles):
        return None
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        for index, item in enumerate(source):
            if not isinstance(item, Rollout):
                raise TypeError(
                    f"{method}: source[{index}] is a {type(item).__name__}, expected a Rollout"
                )
        return list(source)
    raise TypeError(
        f"{method}: source must be a Rollout, a sequence of rollouts or a Dataset, "
        f"got {type(source).__name__}"
    )


def _layout(rollout: Rollout) -> tuple[object, list[tuple[tuple[int, ...], str]]]:
    leaves = _tree.leaves(rollout.obses)
    actions = rollout.model_outs.arrays.get("actions")
    described = [(leaf.shape[2:], str(leaf.dtype)) for leaf in leaves]
    if actions is not None:
        described.append((actions.shape[2:], actions.dtype.kind))
    return _tree.structure_of(rollout.obses), described


def _check_same_layout(rollouts: list[Rollout], method: str) -> None:
    """One minibatch holds one layout: every rollout's observations and actions as the first's."""
    first = _layout(rollouts[0])
    for index, rollout in enumerate(rollouts[1:], start=1):
        if _layout(rollout) != first:
            raise ValueError(
                f"{method}: source[{index}] has observations or actions of another layout than "
                f"source[0] (per-step shapes and dtypes {_layout(rollout)[1]} vs {first[1]}): "
                "the transitions of one source share one layout"
            )


def transition_minibatches(
    source: TransitionSource,
    minibatch_size: int,
    *,
    gamma: float | None = None,
    n_step: int = 1,
    epochs: int = 1,
    drop_last: bool = False,
    seed: Seed = None,
    shuffle: bool = True,
    files_per_buffer: int = 4,
    rollouts_per_buffer: int | None = None,
) -> Iterator[dict[str, ArrayTree]]:
    """Yield shuffled minibatches of transitions: behaviour cloning, offline RL, GAIL.

    Each minibatch maps the columns of [`transitions`][trajkit.transitions] to `[n, ...]`
    arrays, with no critic and no discount needed, drawn as
    [`MinibatchPlan`][trajkit.MinibatchPlan] describes: every transition appears once per
    epoch; each epoch's last minibatch is smaller unless `drop_last`.

    - From a rollout or a list of rollouts (`trajkit.minari.from_minari`,
      `trajkit.arrow.read_parquet`): the transitions of all of them are shuffled together.
      Episode ids of rollout `i` start at `i * 2**32`.
    - From a `trajkit.dataset.Dataset`, larger than memory: the files stream through a
      shuffle buffer of `files_per_buffer` files, as
      [`Dataset.minibatches`][trajkit.dataset.Dataset.minibatches] does. Files are
      memory-mapped and observations are never copied whole: a minibatch reads its rows
      only. Episode ids of file `i` (in `files` order) start at `i * 2**32`.

    Args:
        source: A `Rollout`, a sequence of rollouts, or a `Dataset`.
        minibatch_size: Transitions per minibatch, at least 1.
        gamma: The discount of the n-step columns, in [0, 1]; `None` for none.
        n_step: Rewards summed at most by `n_step_return`, at least 1.
        epochs: Passes over the data.
        drop_last: Drop each epoch's last, smaller minibatch.
        seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
        shuffle: `False` for the transitions in order: rollout by rollout (file by file),
            env by env, step by step.
        files_per_buffer: For a dataset, files in the shuffle buffer at a time.
        rollouts_per_buffer: Deprecated name of `files_per_buffer` (it warns).

    Returns:
        An iterator of minibatches, each name to `[n, ...]` array.

    Raises:
        MissingModelOutputError: If a rollout has no `model_outs['actions']` (raised at the
            call for a rollout or a list, when the file is reached for a dataset).
        ValueError: If a size argument, `gamma` or `n_step` is out of range, or `drop_last`
            would yield nothing from rollouts in memory.
        TypeError: If `source` or `seed` is of another type.

    Examples:
        >>> from trajkit import transition_minibatches
        >>> from trajkit.testing import example_rollout
        >>> episodes = [example_rollout(num_steps=10, num_envs=1, seed=s) for s in range(3)]
        >>> batches = list(transition_minibatches(episodes, 8, seed=0))
        >>> [len(b["reward"]) for b in batches]
        [8, 8, 8, 6]
        >>> sorted(batches[0])  # doctest: +NORMALIZE_WHITESPACE
        ['action', 'episode', 'next_obs', 'obs', 'reward', 'terminated', 'truncated']
    """
    method = "transition_minibatches()"
    plan = MinibatchPlan(
        minibatch_size,
        epochs=epochs,
        drop_last=drop_last,
        seed=seed,
        shuffle=shuffle,
        files_per_buffer=_renamed_buffer(files_per_buffer, rollouts_per_buffer),
    )
    discount = n_step_discount(gamma, n_step)
    rollouts = _rollouts(source, method)
    if rollouts is None:
        files = cast(RolloutFiles, source)
        loaders = [
            partial(_file_table, files, path, i, discount, method)
            for i, path in enumerate(files.files)
        ]
        return sample(plan, loaders)
    if not rollouts:
        return iter(())
    tables = [_table(r, i, discount, method) for i, r in enumerate(rollouts)]
    _check_same_layout(rollouts, method)
    whole = _tr.concat_tables(tables)
    whole.finish = tables[0].finish
    return sample(plan, [whole])


def _renamed_buffer(files_per_buffer: int, rollouts_per_buffer: int | None) -> int:
    """`files_per_buffer`, or the value of its deprecated name `rollouts_per_buffer`."""
    if rollouts_per_buffer is None:
        return files_per_buffer
    deprecated("transition_minibatches(rollouts_per_buffer=...)", "files_per_buffer", stacklevel=4)
    if files_per_buffer != 4:
        raise ValueError("pass files_per_buffer only: rollouts_per_buffer is its deprecated name")
    return rollouts_per_buffer
