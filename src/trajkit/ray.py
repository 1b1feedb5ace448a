"""Rollout files on a Ray cluster: checks and statistics as Ray tasks, Ray Data readers.

Needs `pip install "trajkit[ray]"`. Ray is imported here only, never by `import trajkit`;
without it these functions raise an `ImportError` that says `pip install 'trajkit[ray]'`.

trajkit supplies the per-file work and Ray schedules it: [`stats`][trajkit.ray.stats], and
[`trajkit.dataset.validate_files`][trajkit.dataset.validate_files] with `engine="ray"`, send
chunks of files to Ray tasks (one CPU each), a bounded number at a time, and gather the
results in the order of the paths; the verdicts are those of
[`trajkit.dataset.check_file`][trajkit.dataset.check_file], the same as `trajkit validate`
gives on one machine. (`validate` and `validate_files` here are deprecated aliases of that
function.) Three readers make a lazy `ray.data.Dataset`:
[`read_steps`][trajkit.ray.read_steps] with one row per transition (observations, actions,
rewards, episode ends, advantages and returns computed per rollout: ready for
`iter_torch_batches`), [`read_arrays`][trajkit.ray.read_arrays] with one row per file holding
its whole arrays, and [`read_rollouts`][trajkit.ray.read_rollouts] with one row per file
holding its layout and episode statistics.

Every worker must be able to read the paths: on one machine any path works; on a cluster,
use fsspec URLs (`s3://...`, `gs://...`, with `trajkit[cloud]` installed on every node) or
a file system mounted at the same place on every node.

Connecting: when Ray is not initialized yet, these functions call `ray.init(address=...)`
(`address=None` connects to `RAY_ADDRESS` or starts a local Ray); when it is, they use the
running Ray and ignore `address`.

Examples:
    On a cluster started with `ray start --head` (see the Datasets page of the docs):

    >>> from trajkit.dataset import validate_files
    >>> checks = validate_files(  # doctest: +SKIP
    ...     ["s3://bucket/runs/"], engine="ray", address="auto"
    ... )
    >>> sum(not c.ok for c in checks)  # doctest: +SKIP
    0
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from trajkit._base.deprecation import deprecated
from trajkit._base.errors import RolloutFileError
from trajkit._base.types import AnyArray, Int64Array
from trajkit._core import tree as _tree
from trajkit._core.gae import check_discount
from trajkit._io import raytasks
from trajkit._io.discovery import discover
from trajkit._io.engine import checked_jobs, run_ordered
from trajkit._io.filecheck import FileCheck, matching_spec
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import local_copy, mappable, metadata_and_size, naming
from trajkit._io.stats import DatasetStats, stats_chunk
from trajkit._io.validate import validate_files as _validate_files
from trajkit._models.errors import MissingModelOutputError
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec
from trajkit._models.transitions import n_step_discount, step_columns

if TYPE_CHECKING:
    import ray

__all__ = ["read_arrays", "read_rollouts", "read_steps", "stats", "validate", "validate_files"]

Paths = str | Sequence[str]


def validate_files(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> Iterator[FileCheck]:
    """Deprecated: use `trajkit.dataset.validate_files(paths, engine="ray")`.

    Emits a `DeprecationWarning`, then runs
    [`trajkit.dataset.validate_files`][trajkit.dataset.validate_files] with `engine="ray"`
    and the same arguments: the verdicts are the same.

    Examples:
        >>> import trajkit.ray
        >>> for check in trajkit.ray.validate_files("runs/"):  # doctest: +SKIP
        ...     print(check.path, check.ok)
        runs/a.npz True
    """
    _deprecated("trajkit.ray.validate_files(paths, ...)")
    return _validate_files(
        paths,
        engine="ray",
        address=address,
        spec=spec,
        quick=quick,
        max_bytes=max_bytes,
        jobs=jobs,
    )


def validate(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    quick: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> list[FileCheck]:
    """Deprecated: use `list(trajkit.dataset.validate_files(paths, engine="ray"))`.

    Emits a `DeprecationWarning`, then returns the list of verdicts of
    [`trajkit.dataset.validate_files`][trajkit.dataset.validate_files] with `engine="ray"`.

    Examples:
        >>> import trajkit.ray
        >>> checks = trajkit.ray.validate(["runs/"], address="auto")  # doctest: +SKIP
        >>> [c.path for c in checks if not c.ok]  # doctest: +SKIP
        []
    """
    _deprecated("trajkit.ray.validate(paths, ...)", listed=True)
    return list(
        _validate_files(
            paths,
            engine="ray",
            address=address,
            spec=spec,
            quick=quick,
            max_bytes=max_bytes,
            jobs=jobs,
        )
    )


def _deprecated(name: str, *, listed: bool = False) -> None:
    replacement = "trajkit.dataset.validate_files(paths, engine='ray', ...)"
    deprecated(name, f"list({replacement})" if listed else replacement, stacklevel=4)


def stats(
    paths: Paths,
    *,
    address: str | None = None,
    spec: RolloutSpec | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    jobs: int | None = None,
) -> DatasetStats:
    """Episode statistics of rollout files and folders, computed in Ray tasks.

    Each task loads its files (memory-mapped where they are local) and returns their merged
    statistics; the driver merges the chunks in order, so the result does not depend on how
    many CPUs the cluster has (or on `jobs`).

    Args:
        paths: Files and folders (local paths or fsspec URLs).
        address: The Ray cluster to connect to if Ray is not initialized yet.
        spec: Also require conformance to this spec.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.
        jobs: At most this many Ray tasks at once; `None` for four chunks in flight per CPU
            of the cluster.

    Returns:
        The [`DatasetStats`][trajkit.dataset.DatasetStats] of all the files.

    Raises:
        RolloutFileError: If a path is missing, a file is refused or does not conform to
            `spec`.

    Examples:
        >>> import trajkit.ray
        >>> trajkit.ray.stats("runs/").returns.mean  # doctest: +SKIP
        187.5
    """
    most = checked_jobs(jobs)
    ray = raytasks.connect(address)
    work = partial(stats_chunk, spec=spec, max_bytes=max_bytes)
    total = DatasetStats()
    found = discover(paths)
    limits = raytasks.in_flight(ray, most)
    for part in run_ordered(work, found, **limits, submit=raytasks.submitter(ray)):
        total = total.merge(part)
    return total


def _row(row: dict[str, Any], *, spec: RolloutSpec | None, max_bytes: int | None) -> dict[str, Any]:
    """One file as a row of `read_rollouts`: its layout and episode statistics."""
    path = str(row["path"])
    with local_copy(path, max_bytes) as local, naming(path):
        rollout = matching_spec(load(local, mmap=mappable(path), max_bytes=max_bytes), spec, path)
        file = DatasetStats.of(rollout)
        episodes = rollout.episode_stats()
        return {
            "file": int(row["file"]),
            "path": path,
            "num_steps": rollout.num_steps,
            "batch_size": rollout.batch_size,
            "spec": RolloutSpec.from_rollout(rollout).model_dump_json(),
            "steps": file.steps,
            "terminations": file.terminations,
            "truncations": file.truncations,
            "returns": episodes.returns.tolist(),
            "lengths": episodes.lengths.tolist(),
        }


def read_rollouts(
    paths: Paths, *, spec: RolloutSpec | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per rollout file: its layout and its episodes.

    The files are listed on the driver (folders searched for `*.npz`, sorted) and each is
    loaded and checked in a Ray Data task, memory-mapped where it is local. A row holds
    `file` (the file's index in that listing, as in the rows of
    [`read_steps`][trajkit.ray.read_steps]), `path`, `num_steps` (T), `batch_size` (B),
    `spec` (the file's [`RolloutSpec`][trajkit.RolloutSpec] as JSON), `steps` (T·B),
    `terminations`, `truncations`, and `returns` and `lengths` of the complete episodes
    (lists). For the steps themselves, see [`read_steps`][trajkit.ray.read_steps]; for
    whole arrays, [`read_arrays`][trajkit.ray.read_arrays]. A refused file (or one that
    breaks `spec`) fails the dataset's execution with its `RolloutFileError`.

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        spec: Also require conformance to this spec.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset` (nothing is read until it is consumed).

    Raises:
        RolloutFileError: If a path is missing or a folder holds no `*.npz` file.

    Examples:
        >>> import trajkit.ray
        >>> ds = trajkit.ray.read_rollouts("runs/")  # doctest: +SKIP
        >>> ds.sum("steps"), ds.columns()[:3]  # doctest: +SKIP
        (40960, ['file', 'path', 'num_steps'])
    """
    files = _files(paths)
    rows = _paths_dataset(raytasks.ray_module(), files)
    return rows.map(_row, fn_kwargs={"spec": spec, "max_bytes": max_bytes})  # type: ignore[no-any-return]


# ------------------------------------------------------------------ steps and arrays

_STEP_OUTPUTS = {"actions": "action", "log_probs": "log_prob", "critic": "value"}
"""Model-output keys that every step row carries, and their column names."""

_FIXED_COLUMNS = frozenset(
    {
        "file",
        "env",
        "step",
        "obs",
        "next_obs",
        "reward",
        "terminated",
        "truncated",
        "episode",
        "next_value",
        "advantage",
        "return",
        "n_step_return",
        "n_step_discount",
        "n_step_obs",
        "n_step_value",
    }
    | set(_STEP_OUTPUTS.values())
)

_BLOCK_BYTES = 32 * 2**20
"""About the most bytes of one batch of step rows that a Ray task hands over at once."""


def _obs_column(path: _tree.Path, name: str = "obs") -> str:
    """`obs` for a flat observation, `obs.image` or `obs.proprio.1.goal` for a leaf."""
    return ".".join([name, *map(str, path)])


def _files(paths: Paths) -> list[str]:
    """The rollout files under `paths`, listed on the driver; a missing path raises."""
    files: list[str] = []
    for item in discover(paths):
        if isinstance(item, FileCheck):
            raise RolloutFileError(item.problems[0], path=item.path)
        files.append(item.path)
    return files


class _Layout(NamedTuple):
    """What every file of a dataset must look like, and how to say so when one does not."""

    spec: RolloutSpec
    origin: str | None  # the file the spec was read from; None for the caller's spec


def _layout(files: list[str], spec: RolloutSpec | None, max_bytes: int | None) -> _Layout:
    """The caller's spec, or the spec in the first file's metadata (read on the driver)."""
    if spec is not None:
        return _Layout(spec, None)
    metadata, _ = metadata_and_size(files[0], max_bytes=max_bytes)
    return _Layout(metadata.spec, files[0])


def _conformed(rollout: Rollout, layout: _Layout, path: str) -> Rollout:
    if layout.origin is None:
        return matching_spec(rollout, layout.spec, path)
    problems = layout.spec.check(rollout)
    if problems:
        raise RolloutFileError(
            f"its layout differs from that of the first file, {layout.origin} (one dataset "
            f"has one set of columns; pass spec= to name the layout): {'; '.join(problems)}",
            path=path,
        )
    return rollout


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


def _check_keys(keys: Sequence[str] | None, layout: _Layout) -> tuple[str, ...]:
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
    critic = rollout.model_outs.arrays["critic"].astype(np.float32)
    envs = np.arange(rollout.batch_size)[None, :]
    values = critic[steps + 1, envs]
    ended = rollout.dones[1:][steps, envs] == 1
    if rollout.truncated is not None and rollout.final_values is not None:
        cut = rollout.truncated[steps, envs] == 1
        return np.where(ended, np.where(cut, rollout.final_values[steps, envs], 0.0), values)
    return np.where(ended, np.float32(0.0), values)


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
    if "log_probs" in outs:
        columns["log_prob"] = outs["log_probs"]
    if "critic" in outs:
        columns["value"] = outs["critic"]
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
    layout: _Layout,
    discount: _Discounts,
    keys: tuple[str, ...],
    max_bytes: int | None,
) -> Iterator[dict[str, AnyArray]]:
    """The Ray Data function of `read_steps`: a batch of paths in, their step rows out."""
    for file, path in zip(batch["file"].tolist(), map(str, batch["path"]), strict=True):
        with local_copy(path, max_bytes) as local, naming(path):
            rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
            yield from _file_steps(_conformed(rollout, layout, path), file, discount, keys)


def _paths_dataset(ray: Any, files: list[str]) -> Any:
    """A Ray dataset of the paths and their indices, one block per file (up to 200 blocks)."""
    return ray.data.from_items(
        [{"file": index, "path": path} for index, path in enumerate(files)],
        override_num_blocks=max(1, min(len(files), 200)),
    )


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
    files = _files(paths)
    layout = _layout(files, spec, max_bytes)
    if discount.gae is not None and "critic" not in layout.spec.model_outputs:
        where = f"the first file, {layout.origin}," if layout.origin else "the spec"
        raise ValueError(
            f"the advantage and return columns need model_outs['critic'], but {where} has "
            f"keys {sorted(layout.spec.model_outputs)}; leave gamma and lam out for rows "
            "without them"
        )
    chosen = _check_keys(keys, layout)
    work = partial(_steps_batch, layout=layout, discount=discount, keys=chosen, max_bytes=max_bytes)
    return _paths_dataset(raytasks.ray_module(), files).map_batches(  # type: ignore[no-any-return]
        work, batch_format="numpy", batch_size=None
    )


def _arrays_batch(
    batch: dict[str, AnyArray],
    *,
    layout: _Layout,
    discount: tuple[float, float],
    max_bytes: int | None,
) -> Iterator[dict[str, AnyArray]]:
    """The Ray Data function of `read_arrays`: a batch of paths in, a row per file out."""
    for file, path in zip(batch["file"].tolist(), map(str, batch["path"]), strict=True):
        with local_copy(path, max_bytes) as local, naming(path):
            rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
            rollout = _conformed(rollout, layout, path)
            arrays = _tree.flatten_fields(rollout.training_arrays(*discount))
            row: dict[str, AnyArray] = {
                "file": np.array([file], dtype=np.int64),
                "path": np.array([path], dtype=object),
                "num_steps": np.array([rollout.num_steps]),
                "batch_size": np.array([rollout.batch_size]),
            }
            for name, array in arrays.items():
                row[name] = np.array(array)[None]  # a copy: the mapped file closes after
            yield row


def read_arrays(
    paths: Paths,
    *,
    gamma: float,
    lam: float,
    spec: RolloutSpec | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per rollout file: its whole `[T, B, ...]` arrays.

    For work that needs a rollout at once (recurrent minibatches, your own advantage
    estimate) rather than its steps ([`read_steps`][trajkit.ray.read_steps]). A row holds
    `file` (its index in the sorted listing, as in [`read_steps`][trajkit.ray.read_steps]),
    `path`, `num_steps` (T), `batch_size` (B) and every array of
    [`Rollout.training_arrays`][trajkit.Rollout.training_arrays]`(gamma, lam)`: `obses`,
    `states`, `dones`, `rews`, `advantages` and `returns`, and the model outputs with one
    value per env, each cut to `[T, B, ...]`. Advantages need the critic's values, so the
    files must have `model_outs['critic']`: as [`read_steps`][trajkit.ray.read_steps] with
    `gamma` and `lam`, files without one are refused at the call (read them with
    `read_steps` and no `gamma`, `lam` for rows without advantages). Leaves of nested
    observations and states are columns named by their path, `obses['image']` (as
    `trajkit.gather` names them). Files are loaded in Ray Data tasks, memory-mapped where
    local; every file must have the layout of the first (or conform to `spec`).

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        gamma: The discount of `advantages` and `returns`, in [0, 1].
        lam: The GAE λ, in [0, 1].
        spec: Hold every file to this spec; `None` for the layout of the first file.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset`.

    Raises:
        RolloutFileError: If a path is missing, a folder holds no `*.npz` file, or the first
            file's metadata cannot be read.
        ValueError: If `gamma` or `lam` is not a finite number in [0, 1].
        MissingModelOutputError: If the files (the first file, or `spec`) have no
            `model_outs['critic']` (`trajkit.MissingModelOutputError`, a `ValueError`).

    Examples:
        >>> import trajkit.ray
        >>> rows = trajkit.ray.read_arrays("runs/", gamma=0.99, lam=0.95)  # doctest: +SKIP
        >>> row = rows.take(1)[0]  # doctest: +SKIP
        >>> row["obses"].shape, row["advantages"].shape  # doctest: +SKIP
        ((128, 8, 4), (128, 8))
    """
    discount = check_discount(gamma, lam)
    files = _files(paths)
    layout = _layout(files, spec, max_bytes)
    if "critic" not in layout.spec.model_outputs:
        raise MissingModelOutputError(
            "read_arrays()",
            "critic",
            layout.spec.model_outputs,
            owner=f"the first file, {layout.origin}," if layout.origin else "the spec",
            purpose="to compute advantages and returns",
            hint="read rows without advantages with read_steps() and no gamma and lam",
        )
    work = partial(_arrays_batch, layout=layout, discount=discount, max_bytes=max_bytes)
    return _paths_dataset(raytasks.ray_module(), files).map_batches(  # type: ignore[no-any-return]
        work, batch_format="numpy", batch_size=1
    )
