"""`read_steps`: a Ray Data dataset of one row per transition, its columns made per file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from trajkit._base.types import AnyArray, Int64Array
from trajkit._core import tree as _tree
from trajkit._core.gae import check_discount
from trajkit._io import raytasks
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import local_copy, mappable, naming
from trajkit._models.rollout import Rollout
from trajkit._models.rules import OUTPUT_RULES, STEP_COLUMNS, episode_ends
from trajkit._models.spec import RolloutSpec
from trajkit._models.transitions import TRANSITION_KEYS, n_step_discount, step_columns
from trajkit.ray._listing import Layout, Paths, conformed, layout_of, list_files, paths_dataset

if TYPE_CHECKING:
    import ray

__all__ = ["read_steps"]


_STEP_OUTPUTS = {key: STEP_COLUMNS[key] for key in OUTPUT_RULES if key in STEP_COLUMNS}
"""Model-output keys that every step row carries, and their column names (`critic`: `value`)."""

_ROW_COLUMNS = ("file", "env", "step", "next_value", "advantage", "return", "n_step_value")
_FIXED_COLUMNS = frozenset(
    (*_ROW_COLUMNS, *TRANSITION_KEYS, "n_step_return", "n_step_discount", "n_step_obs")
) | frozenset(_STEP_OUTPUTS.values())
"""Every column a step row may have but those of `keys` (the transitions' columns among them)."""

_BLOCK_BYTES = 32 * 2**20
"""About the most bytes of one batch of step rows that a Ray task hands over at once."""


def _obs_column(path: _tree.Path, name: str = "obs") -> str:
    """`obs` for a flat observation, `obs.image` or `obs.proprio.1.goal` for a leaf."""
    return ".".join([name, *map(str, path)])


class _Discounts(NamedTuple):
    """The discounts of `read_steps`' optional columns: `(gamma, lam)` and `(gamma, n_step)`."""

    gae: tuple[float, float] | None
    n_step: tuple[float, int] | None


def _check_discount(gamma: float | None, lam: float | None, n_step: int | None) -> _Discounts:
    if gamma is None and (lam is not None or n_step is not None):
        raise ValueError(
            f"lam and n_step need gamma, the discount of their columns, got gamma=None, "
            f"lam={lam!r}, n_step={n_step!r}"
        )
    if gamma is not None and lam is None and n_step is None:
        raise ValueError(
            "give gamma and lam together (for the advantage and return columns), or gamma and "
            f"n_step (for the n-step columns), or neither, got gamma={gamma!r}, lam=None"
        )
    gae = None if lam is None else check_discount(gamma, lam)
    return _Discounts(gae, None if n_step is None else n_step_discount(gamma, n_step))


def _check_keys(keys: Sequence[str] | None, layout: Layout) -> tuple[str, ...]:
    if keys is None:
        return ()
    if isinstance(keys, str):
        raise TypeError(f"keys must be a sequence of model-output keys, got the string {keys!r}")
    present = list(layout.spec.model_outputs)
    where = f"the files (the first, {layout.origin}, has" if layout.origin else "the spec (it has"
    for key in keys:
        if key in _STEP_OUTPUTS:
            raise ValueError(
                f"keys: {key!r} is always a column already, named {_STEP_OUTPUTS[key]!r}"
            )
        if key in _FIXED_COLUMNS or key.startswith(("obs.", "next_obs.", "n_step_obs.")):
            raise ValueError(f"keys: {key!r} would clash with the step column of that name")
        if key not in present:
            raise ValueError(f"keys: {key!r} is not a model output of {where} {sorted(present)})")
    return tuple(dict.fromkeys(keys))


def _values_after(rollout: Rollout, steps: Int64Array) -> AnyArray:
    """The critic's value of the observation after step `steps[t, b]`, 0 after a termination.

    `critic[s+1]` where step `s` did not end its episode; at a truncation the value of the
    true final observation (`final_values`); at a termination 0, the value of a terminal
    state. So `reward + gamma * next_value` is the one-step TD target as it stands.
    """
    critic = rollout.model_outs.arrays["critic"]
    envs = np.arange(rollout.batch_size)[None, :]
    values = critic[steps + 1, envs]
    ended = episode_ends(rollout.dones)[steps, envs]
    if rollout.truncated is not None and rollout.final_values is not None:
        cut = rollout.truncated[steps, envs] == 1
        return np.where(ended, np.where(cut, rollout.final_values[steps, envs], 0.0), values)
    return np.where(ended, 0.0, values)


def _step_arrays(
    rollout: Rollout,
    file: int,
    discount: _Discounts,
    keys: tuple[str, ...],
) -> dict[str, AnyArray]:
    """Every column of a file's step rows, as an array indexed `[t, b, ...]` (T or T+1 rows)."""
    T, B = rollout.num_steps, rollout.batch_size
    outs = rollout.model_outs.arrays
    steps, last = step_columns(rollout, file, discount.n_step, "read_steps()", optional=True)
    columns: dict[str, AnyArray] = {
        _obs_column(path): leaf for path, leaf in _tree.flatten(rollout.obses)
    }
    after = rollout.next_obses()
    columns.update((_obs_column(path, "next_obs"), leaf) for path, leaf in _tree.flatten(after))
    columns.update(steps)
    for key in ("log_probs", "critic"):  # (`action` is a transition column)
        if key in outs:
            columns[STEP_COLUMNS[key]] = outs[key]
    if "critic" in outs:
        columns["next_value"] = _values_after(rollout, np.arange(T)[:, None].repeat(B, 1))
    if discount.gae is not None:
        advantages = rollout.advantages(*discount.gae)
        columns["advantage"] = advantages
        columns["return"] = advantages + outs["critic"][:T]
    if last is not None:
        columns["n_step_return"] = columns.pop("n_step_return")
        columns["n_step_discount"] = columns.pop("n_step_discount")
        envs = np.arange(B)[None, :]
        columns.update(
            (_obs_column(path, "n_step_obs"), leaf[last, envs])
            for path, leaf in _tree.flatten(after)
        )
        if "critic" in outs:
            columns["n_step_value"] = _values_after(rollout, last)
    for key in keys:
        array = outs[key]
        if array.ndim == 1:  # a per-step scalar `[T+1]`: the same value for every env
            array = np.broadcast_to(array[:, None], (array.shape[0], B))
        columns[key] = array
    return columns


def _file_steps(
    rollout: Rollout, file: int, discount: _Discounts, keys: tuple[str, ...]
) -> Iterator[dict[str, AnyArray]]:
    """A file's step rows, env by env and step by step, in batches of about `_BLOCK_BYTES`."""
    T, B = rollout.num_steps, rollout.batch_size
    columns = _step_arrays(rollout, file, discount, keys)
    row_bytes = 32 + sum(
        array.dtype.itemsize * int(np.prod(array.shape[2:])) for array in columns.values()
    )
    per_batch = max(1, _BLOCK_BYTES // row_bytes)
    for start in range(0, T * B, per_batch):
        flat = np.arange(start, min(start + per_batch, T * B))
        env, step = np.divmod(flat, T)
        batch: dict[str, AnyArray] = {
            "file": np.full(len(flat), file, dtype=np.int64),
            "env": env,
            "step": step,
        }
        for name, array in columns.items():
            batch[name] = np.ascontiguousarray(array[step, env])
        yield batch


def _steps_batch(
    batch: dict[str, AnyArray],
    *,
    layout: Layout,
    discount: _Discounts,
    keys: tuple[str, ...],
    max_bytes: int | None,
) -> Iterator[dict[str, AnyArray]]:
    """The Ray Data function of `read_steps`: a batch of paths in, their step rows out."""
    for file, path in zip(batch["file"].tolist(), map(str, batch["path"]), strict=True):
        with local_copy(path, max_bytes) as local, naming(path):
            rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
            yield from _file_steps(conformed(rollout, layout, path), file, discount, keys)


def read_steps(
    paths: Paths,
    *,
    gamma: float | None = None,
    lam: float | None = None,
    n_step: int | None = None,
    keys: Sequence[str] | None = None,
    spec: RolloutSpec | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per transition `(t, b)` of every rollout file.

    For training and analysis at scale: `iter_torch_batches`, `groupby`, `map_batches`,
    `random_shuffle` work on the rows as on any Ray dataset. The files are listed on the
    driver (folders searched for `*.npz`, sorted), and each is loaded in a Ray Data task,
    memory-mapped where it is local, and turned into rows there. The columns:

    - `file`, `env`, `step` (int64): the row's file, as its index in the sorted listing of
      the files (the `file` of [`read_rollouts`][trajkit.ray.read_rollouts]' row with its
      `path`), and its `b` and `t`. Every column is numeric, so `iter_torch_batches`
      takes them all.
    - `obs` for a flat observation, or one column per leaf of a nested one, named by its
      path (`obs.image`, `obs.proprio.1.goal`): observation `t`, in its stored dtype.
    - `next_obs` (and `next_obs.<path>` leaves): the observation that followed step `t`,
      from [`Rollout.next_obses`][trajkit.Rollout.next_obses]: the true final observation
      where the step ended an episode and the file keeps `final_obses` (every
      `RolloutRecorder` recording does), else observation `t+1`.
    - `action`: `model_outs['actions']` at `t`: int64 for integer actions (what
      `cross_entropy` needs, as in `trajkit.torch`), float32 for Box actions.
    - `reward` (float32): `rews[t]`.
    - `terminated`, `truncated` (bool): step `t` ended its episode (`dones[t+1] == 1`),
      by a time limit (`truncated[t] == 1`) or not. In a file without `truncated`, every
      end is a termination, as its advantages take it.
    - `episode` (int64): the id of the row's episode, unique across the files: file `i`'s
      episodes are numbered env by env from `i * 2**32` ([`episode_ids`][trajkit.episode_ids]),
      so `groupby("episode")` groups an episode's steps.
    - `log_prob`, `value` (float32): `model_outs['log_probs']`, `model_outs['critic']`.
    - `next_value` (float32), with a critic: the value of `next_obs`: `critic[t+1]`, the
      value of the true final observation (`final_values[t]`) at a truncation, and 0 at a
      termination, so `reward + gamma * next_value` is the one-step TD target.
    - `advantage`, `return` (float32), with `gamma` and `lam`: the file's own GAE,
      [`Rollout.advantages`][trajkit.Rollout.advantages]`(gamma, lam)`, and
      `advantage + value`, the λ-return.
    - `n_step_return`, `n_step_discount` (float32), `n_step_obs` (and its leaves), with
      `gamma` and `n_step`: the n-step target's parts, as
      [`trajkit.transitions`][trajkit.transitions] gives them; with a critic also
      `n_step_value`, the value of `n_step_obs` (by the rule of `next_value`).
    - one column per key of `keys`, named by it: that model output at `t`.

    The columns named as in [`TRANSITION_KEYS`][trajkit.TRANSITION_KEYS] hold what
    [`trajkit.transition_minibatches`][trajkit.transition_minibatches] gives for the same
    files (with `episode` numbered by this sorted listing).

    `action`, `log_prob` and `value` are there when the files have those model outputs.
    Other model outputs (`actor` logits, say) are columns only when named in `keys`; a
    per-step scalar output (`[T+1]`, one value per step for all envs, such as GAIL's
    `prob_pi`) named there is broadcast: every env's row holds the step's value. States,
    infos and the bootstrap row `T` are not in the rows; [`read_arrays`][trajkit.ray.read_arrays]
    gives whole rollouts.

    Multi-dimensional columns are Ray tensor columns, so `iter_torch_batches` and
    `iter_batches` give `[N, ...]` tensors and arrays. Within a file, rows come env by env,
    step by step; Ray Data does not keep the order of files unless told to
    (`DataContext.get_current().execution_options.preserve_order = True`).

    One dataset has one set of columns, so every file must have the layout of the first
    file (or conform to `spec`); one that does not, or a refused file, fails the execution
    of the dataset with a `RolloutFileError` naming it (wrapped by Ray).

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        gamma: The discount of the `advantage` and `return` columns, in [0, 1]; `None`
            (with `lam`) for no such columns.
        lam: The GAE λ of those columns, in [0, 1].
        n_step: With `gamma`, give the n-step columns, summing at most this many rewards.
        keys: More model-output keys to give columns of their own names.
        spec: Hold every file to this spec; `None` for the layout in the first file's
            metadata (read on the driver).
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset` (only the first file's metadata is read until it is
        consumed).

    Raises:
        RolloutFileError: If a path is missing, a folder holds no `*.npz` file, or the first
            file's metadata cannot be read.
        ValueError: If `gamma` comes without `lam` or `n_step` (or they without it), one is
            out of range, or `lam` is given for files without `model_outs['critic']`; if a
            key is not a model output of the files or clashes with a column.

    Examples:
        >>> import trajkit.ray
        >>> steps = trajkit.ray.read_steps("runs/", gamma=0.99, lam=0.95)  # doctest: +SKIP
        >>> batches = steps.random_shuffle().iter_torch_batches(batch_size=256)  # doctest: +SKIP
        >>> for batch in batches:  # doctest: +SKIP
        ...     loss = ppo_loss(batch["obs"], batch["action"], batch["log_prob"],
        ...                     batch["advantage"], batch["return"])
        >>> steps.groupby("file").sum("reward").take(1)  # doctest: +SKIP
        [{'file': 'runs/rollout-000000.npz', 'sum(reward)': 12.0}]
    """
    discount = _check_discount(gamma, lam, n_step)
    files = list_files(paths)
    layout = layout_of(files, spec, max_bytes)
    if discount.gae is not None and "critic" not in layout.spec.model_outputs:
        where = f"the first file, {layout.origin}," if layout.origin else "the spec"
        raise ValueError(
            f"the advantage and return columns need model_outs['critic'], but {where} has "
            f"keys {sorted(layout.spec.model_outputs)}; leave gamma and lam out for rows "
            "without them"
        )
    chosen = _check_keys(keys, layout)
    work = partial(_steps_batch, layout=layout, discount=discount, keys=chosen, max_bytes=max_bytes)
    return paths_dataset(raytasks.ray_module(), files).map_batches(  # type: ignore[no-any-return]
        work, batch_format="numpy", batch_size=None
    )
