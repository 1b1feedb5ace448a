"""Rollouts to and from Minari datasets, Farama's standard for offline RL (`trajkit[minari]`).

A Minari dataset is a list of episodes, each with `n + 1` observations (the last one is where
the episode stopped), `n` actions and rewards, and separate `terminations` and `truncations`
flags. A trajkit rollout is B env timelines of T steps cut at arbitrary points. The two meet
as follows.

**Export** ([`to_minari`][trajkit.minari.to_minari]) walks each env's timeline across the
rollouts given (in order: consecutive rollouts of one recorder share a row, so an episode that
spans rollouts is exported whole) and cuts it at episode ends:

- an episode that ended inside the data becomes one Minari episode, flagged terminated or
  truncated as the rollout says (`truncated`); its last observation is the true final
  observation from the rollout's `final_obses` (which the Gymnasium recorder always keeps).
  A rollout without `final_obses` does not know it (row t+1 is already the next episode's
  first, as in obs-tower2), so the observation before it is **repeated** instead;
- the still-running episode of each env at the end of the data becomes an episode with
  neither flag set, whose last observation is the rollout's bootstrap row, which is exact.

The dataset's spaces are the env's when given (`observation_space=`, `action_space=`, or
`env=`), and the data is checked against them; otherwise they are inferred from the data
(see [`to_minari`][trajkit.minari.to_minari]). The dataset is written into a hidden
temporary folder of Minari's datasets root and renamed into place when complete, so a
killed export leaves no partial dataset under its id.

**Import** ([`from_minari`][trajkit.minari.from_minari]) gives one rollout per episode, with
B = 1 and T = n: `obses` are the n + 1 observations, `dones[0] = 1`, and `dones[T] = 1` when
the episode ended (so that GAE does not bootstrap past it). `truncated` and `final_values`
are always given, zeros where nothing was truncated, as the Gymnasium recorder gives them, and
so is `final_obses`: the episode's last observation when it ended (`obses[T]`, then also its
true final observation), empty when it did not. A
truncated episode carries `truncated[T-1] = 1` and `final_values = 0`: there is no critic in
a dataset, so compute `final_values` with yours (on `obses[T]`) before using advantages. A
last step both terminated and truncated counts as terminated, as the recorder counts it.
`model_outs['actions']` has T + 1 rows, the last a copy of the one before (no action is
taken from the final observation). Each episode is checked before its rollout is built (see
[`from_minari`][trajkit.minari.from_minari]).

Examples:
    >>> import os, tempfile
    >>> import trajkit.minari
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=8, num_envs=2, keys={"actions", "critic"})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     os.environ["MINARI_DATASETS_PATH"] = tmp
    ...     dataset = trajkit.minari.to_minari([r], "trajkit/example-v0")
    ...     episodes = trajkit.minari.from_minari(dataset)
    >>> dataset.total_steps == sum(e.num_steps for e in episodes) == 16
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.atomic import fsync_path
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, conform_into, lossless

__all__ = ["MinariDatasetError", "from_minari", "to_minari"]


def _import(name: str) -> Any:
    return require(name, "minari", "trajkit.minari")


@dataclass
class _Episode:
    """An episode being collected from one env's timeline."""

    obs: list[Any] = field(default_factory=list)  # one tree per row
    actions: list[AnyArray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    truncated: bool = False


def _row(tree: Any, t: int, b: int) -> Any:
    return _tree.map_leaves(lambda leaf: leaf[t, b], tree)


def _entry(tree: Any, k: int) -> Any:
    return _tree.map_leaves(lambda leaf: leaf[k], tree)


def _stack(rows: Sequence[Any]) -> Any:
    columns = zip(*map(_tree.leaves, rows), strict=True)
    return _tree.unflatten(rows[0], [np.stack(leaves) for leaves in columns])


def _buffer(index: int, episode: _Episode, final_obs: Any, ended: bool) -> Any:
    n = len(episode.actions)
    terminations = np.zeros(n, dtype=bool)
    truncations = np.zeros(n, dtype=bool)
    if ended:
        (truncations if episode.truncated else terminations)[-1] = True
    data_collector = _import("minari.data_collector")
    return data_collector.EpisodeBuffer(
        id=index,
        observations=_stack([*episode.obs, final_obs]),
        actions=np.stack(episode.actions),
        rewards=np.asarray(episode.rewards, dtype=np.float64),
        terminations=terminations,
        truncations=truncations,
        infos={},
    )


Cut = tuple[_Episode, Any, bool]
"""An episode cut from an env's timeline, its last observation, and whether it ended."""


def _episodes(rollouts: Sequence[Rollout]) -> list[Cut]:
    """Cut every env's timeline at episode ends: (episode, final observation, ended)."""
    B = rollouts[0].batch_size
    done: list[Cut] = []
    open_: list[_Episode] = [_Episode() for _ in range(B)]
    for r in rollouts:
        if r.batch_size != B:
            raise ValueError(
                f"the rollouts must have the same number of envs, got B={B} and B={r.batch_size}"
            )
        if "actions" not in r.model_outs.arrays:
            raise ValueError("to_minari needs model_outs['actions'] in every rollout")
        # Entry k of `final_obses` is the k-th episode end in (t, b) order.
        end_index = np.full(r.dones[1:].shape, -1, np.int64)
        ends = np.nonzero(r.dones[1:] == 1)
        end_index[ends] = np.arange(len(ends[0]))
        for b in range(B):
            open_[b] = _cut_column(r, b, open_[b], end_index[:, b], done)
    last = rollouts[-1]
    for b, episode in enumerate(open_):
        if episode.actions:  # still running: the bootstrap row is its next observation
            done.append((episode, _row(last.obses, last.num_steps, b), False))
    return done


def _cut_column(
    r: Rollout, b: int, episode: _Episode, end_index: AnyArray, done: list[Cut]
) -> _Episode:
    """Add env b's steps of `r` to `episode`, appending every episode that ends to `done`.

    Returns the episode still running at the rollout's end (a new one if the last ended).
    """
    actions = r.model_outs.arrays["actions"]
    if r.dones[0, b] == 1 and episode.actions:  # rollouts that do not join up: no final obs
        done.append((episode, episode.obs[-1], True))
        episode = _Episode()
    for t in range(r.num_steps):
        episode.obs.append(_row(r.obses, t, b))
        episode.actions.append(actions[t, b])
        episode.rewards.append(float(r.rews[t, b]))
        episode.truncated = r.truncated is not None and bool(r.truncated[t, b] == 1)
        if end_index[t] >= 0:  # step t ended the episode
            final = episode.obs[-1]  # (repeated where the rollout does not keep it)
            if r.final_obses is not None:
                final = _entry(r.final_obses, int(end_index[t]))
            done.append((episode, final, True))
            episode = _Episode()
    return episode


def _space(spaces: Any, leaf: AnyArray) -> Any:
    cell = leaf.shape[2:]
    if leaf.dtype.kind == "f":
        return spaces.Box(-np.inf, np.inf, cell, leaf.dtype)
    if leaf.dtype.kind == "b":
        return spaces.MultiBinary(list(cell) or 1)
    info = np.iinfo(leaf.dtype)
    return spaces.Box(info.min, info.max, cell, leaf.dtype)


def _obs_space(spaces: Any, tree: Any) -> Any:
    if isinstance(tree, dict):
        return spaces.Dict({key: _obs_space(spaces, value) for key, value in tree.items()})
    if isinstance(tree, tuple):
        return spaces.Tuple([_obs_space(spaces, value) for value in tree])
    return _space(spaces, tree)


def _action_space(spaces: Any, rollouts: Sequence[Rollout]) -> Any:
    per_rollout = [r.model_outs.arrays["actions"] for r in rollouts]
    actions = np.concatenate([a.reshape(-1, *a.shape[2:]) for a in per_rollout])
    if actions.dtype.kind == "f":
        return spaces.Box(-np.inf, np.inf, actions.shape[1:], np.float32)
    actor = rollouts[0].model_outs.arrays.get("actor")
    if actions.ndim == 1:
        n = actor.shape[-1] if actor is not None else int(actions.max()) + 1
        return spaces.Discrete(max(n, 1))
    return spaces.MultiDiscrete(np.maximum(actions.max(axis=0), 0) + 1)


def to_minari(
    rollouts: Rollout | Iterable[Rollout],
    dataset_id: str,
    *,
    observation_space: Any = None,
    action_space: Any = None,
    **metadata: Any,
) -> Any:
    """Write rollouts as a new local Minari dataset; return it (a `minari.MinariDataset`).

    Episodes are cut as the module documentation describes: one Minari episode per episode
    of each env, joined across consecutive rollouts, terminations and truncations kept apart.
    The dataset goes where Minari keeps local datasets (`MINARI_DATASETS_PATH`, by default
    `~/.minari/datasets`). It is written into a hidden temporary folder there
    (`.trajkit-XXXXXXXX.tmp`, which Minari does not list), its files fsynced, and renamed
    into place when complete: a process killed midway leaves no dataset under `dataset_id`
    (only the hidden folder, safe to delete). While it writes, `MINARI_DATASETS_PATH` points
    at that folder: do not create Minari datasets from another thread at the same time.

    Args:
        rollouts: A rollout, or consecutive rollouts of the same envs (as a recorder returns
            them), each with `model_outs['actions']`.
        dataset_id: The new dataset's id, `namespace/name-vN` (e.g. `"me/cartpole-v0"`).
        observation_space: The env's Gymnasium observation space (`env.observation_space`),
            with its real bounds. By default the `env` keyword's, if given; otherwise one is
            inferred from the observations: `Box` of each leaf's dtype and shape, unbounded
            (`-inf`, `inf`) for floats and the dtype's range for integers, `MultiBinary` for
            bools, `Dict` and `Tuple` for nested observations.
        action_space: The env's Gymnasium action space. By default the `env` keyword's, if
            given; otherwise inferred: `Discrete` (the width of `actor` when present, else
            the largest action + 1), `MultiDiscrete`, or an unbounded float32 `Box`.
        **metadata: Passed to `minari.create_dataset_from_buffers` (`env`, `author`,
            `algorithm_name`, `code_permalink`, `description`, ...). Minari's warnings
            advising them are not shown. `data_format` defaults to `"arrow"` (pyarrow comes
            with `trajkit[minari]`; `"hdf5"` needs h5py), and `jpeg_encoding` to `False`
            where Minari has it: image observations are stored exactly, not JPEG-compressed.

    Returns:
        The dataset, loaded.

    Raises:
        ImportError: If minari is not installed.
        ValueError: If no rollout is given, the rollouts differ in B or lack `actions`, the
            data does not fit the spaces (shape, dtype, bounds), or a dataset with this id
            exists already.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from gymnasium import spaces
        >>> import trajkit.minari
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1, keys={"actions"}, done_prob=0.0)
        >>> box = spaces.Box(-10.0, 10.0, (4,), np.float32)  # the env's real bounds
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     os.environ["MINARI_DATASETS_PATH"] = tmp
        ...     ds = trajkit.minari.to_minari(r, "trajkit/one-v0", observation_space=box)
        ...     ep = next(ds.iterate_episodes())
        >>> ds.total_episodes, ep.observations.shape, ds.observation_space == box
        (1, (7, 4), True)
    """
    minari = _import("minari")
    spaces = _import("gymnasium.spaces")
    items = [rollouts] if isinstance(rollouts, Rollout) else list(rollouts)
    if not items:
        raise ValueError("to_minari needs at least one rollout")
    for r in items:
        r.revalidate()  # ways out since construction: nothing is written that fails the rules
        if "actions" not in r.model_outs.arrays:
            raise ValueError("to_minari needs model_outs['actions'] in every rollout")
    if metadata.get("env") is not None:
        if observation_space is None or action_space is None:
            env_observations, env_actions = _env_spaces(metadata["env"])
            observation_space = observation_space or env_observations
            action_space = action_space or env_actions
        metadata["env"] = _storable_env(metadata["env"])
    if observation_space is None:
        observation_space = _obs_space(spaces, items[0].obses)
    if action_space is None:
        action_space = _action_space(spaces, items)
    items = [_in_spaces(r, observation_space, action_space) for r in items]
    episodes = _episodes(items)
    # One episode's copy at a time: Minari writes the buffers as it iterates over them.
    buffers = (_buffer(i, *episode) for i, episode in enumerate(episodes))
    create = minari.create_dataset_from_buffers
    defaults: dict[str, Any] = {"data_format": "arrow"}
    if "jpeg_encoding" in inspect.signature(create).parameters:
        defaults["jpeg_encoding"] = False  # lossless, as every other trajkit export

    def write() -> None:
        with warnings.catch_warnings():
            # Minari advises, with UserWarnings, naming an env, an author and a code
            # permalink; they are optional metadata, not problems with the data.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"minari\.")
            create(
                dataset_id,
                buffers,
                observation_space=observation_space,
                action_space=action_space,
                **{**defaults, **metadata},
            )

    _write_staged(dataset_id, write)
    return minari.load_dataset(dataset_id)


def _env_spaces(env: Any) -> tuple[Any, Any]:
    """The observation and action spaces of `env` (a `gym.Env`, an env id or an `EnvSpec`)."""
    if hasattr(env, "observation_space") and hasattr(env, "action_space"):
        return env.observation_space, env.action_space
    gymnasium = _import("gymnasium")
    made = gymnasium.make(env)
    try:
        return made.observation_space, made.action_space
    finally:
        made.close()


def _storable_env(env: Any) -> Any:
    """`env` as Minari can store it, as JSON.

    An env registered with a callable entry point (a class or function, which Gymnasium cannot
    write as JSON) becomes a copy of its spec naming that callable as `"module:name"`, which
    `gymnasium.make` imports back.
    """
    gymnasium = _import("gymnasium")
    spec = gymnasium.spec(env) if isinstance(env, str) else getattr(env, "spec", env)
    entry = getattr(spec, "entry_point", None)
    if not callable(entry):
        return env
    name = f"{entry.__module__}:{entry.__qualname__}"
    module = importlib.import_module(entry.__module__)
    found: Any = module
    for part in entry.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not entry:
        raise ValueError(
            f"the env {spec.id!r} is registered with the entry point {entry!r}, which cannot "
            "be stored (Minari stores the env spec as JSON, naming its entry point as "
            "'module:name'); register it with an importable class or function, or pass "
            "observation_space= and action_space= instead of env="
        )
    return dataclasses.replace(spec, entry_point=name)


def _write_staged(dataset_id: str, write: Callable[[], None]) -> None:
    """Run `write` (which creates `dataset_id`) in a hidden folder, then rename it into place."""
    storage = _import("minari.storage")
    final = Path(storage.get_dataset_path(dataset_id))
    root = Path(storage.get_dataset_path())
    if final.exists():
        raise ValueError(
            f"a Minari dataset with id {dataset_id!r} exists already ({final}); choose "
            "another name or version, or delete it first"
        )
    stage = Path(tempfile.mkdtemp(prefix=".trajkit-", suffix=".tmp", dir=root))
    try:
        with _datasets_root(stage):
            write()
        staged = stage / dataset_id
        for folder, _, files in os.walk(staged):
            for name in files:
                fsync_path(Path(folder, name))
        final.parent.mkdir(parents=True, exist_ok=True)
        _adopt_namespace(stage, root, dataset_id)
        try:
            os.rename(staged, final)  # refused where another export got there first
        except OSError as exc:
            raise ValueError(
                f"a Minari dataset with id {dataset_id!r} appeared at {final} while this one "
                f"was written ({exc.strerror}); choose another name or version"
            ) from None
        fsync_path(final.parent, folder=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _datasets_root(path: Path) -> Iterator[None]:
    """Point Minari's datasets root (`MINARI_DATASETS_PATH`) at `path` for a while."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def _adopt_namespace(stage: Path, root: Path, dataset_id: str) -> None:
    """Move the namespace metadata Minari wrote in `stage` to `root` where it has none."""
    namespace = dataset_id.rsplit("/", 1)[0] if "/" in dataset_id else None
    if namespace is None:
        return
    for path in sorted(Path(stage, namespace).glob("*.json")):  # namespace_metadata.json
        target = root / namespace / path.name
        if not target.exists():
            fsync_path(path)
            os.replace(path, target)


def _in_spaces(rollout: Rollout, observation_space: Any, action_space: Any) -> Rollout:
    """`rollout` with observations and actions in their spaces' dtypes, checked against them."""
    T = rollout.num_steps
    obses = _fit(observation_space, rollout.obses, (), "observations")
    finals = rollout.final_obses
    if finals is not None:
        finals = _fit(observation_space, finals, (), "final observations", axes="e")
    actions = rollout.model_outs.arrays["actions"]
    fitted = _fit(action_space, actions[:T], (), "actions")  # the last row is not exported
    outs = {**rollout.model_outs.arrays, "actions": np.concatenate([fitted, fitted[-1:]])}
    if not T:
        outs["actions"] = actions
    return Rollout(  # not copied (`replace` would): only read, to write the dataset
        states=rollout.states,
        obses=obses,
        rews=rollout.rews,
        dones=rollout.dones,
        infos=None,  # not exported
        model_outs=outs,
        truncated=rollout.truncated,
        final_values=rollout.final_values,
        final_obses=finals,
        copy=False,
    )


def _fit(space: Any, tree: Any, path: _tree.Path, what: str, axes: str = "tb") -> Any:
    """`tree` in `space`'s dtypes, shapes and bounds, or refused.

    Its leaves are `[rows, B, ...]`, or with `axes="e"` `[E, ...]` (final observations).
    """
    spaces = _import("gymnasium.spaces")
    name = _tree.format_path(what, path)
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return _fit_nested(space, tree, path, what, axes)
    if isinstance(tree, dict | tuple):
        raise ValueError(f"{name} are nested, but the space is {space}")
    if not isinstance(
        space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary
    ):
        raise ValueError(
            f"{name}: the space {space} is not one trajkit exports (Box, Discrete, "
            "MultiDiscrete, MultiBinary, and Dict and Tuple of them)"
        )
    lead = len(axes)
    if tree.shape[lead:] != space.shape:
        per = "per step and env" if lead == 2 else "each"
        raise ValueError(
            f"{name} have shape {tree.shape[lead:]} {per}, the space {space} has {space.shape}"
        )
    values = lossless(tree, np.dtype(space.dtype), name, axes=axes)
    _check_bounds(values, space, name, axes)
    return values


def _fit_nested(space: Any, tree: Any, path: _tree.Path, what: str, axes: str) -> Any:
    """`_fit` of a Dict or Tuple space: the same keys or length, each item fitted."""
    spaces = _import("gymnasium.spaces")
    name = _tree.format_path(what, path)
    if isinstance(space, spaces.Dict):
        if not isinstance(tree, dict) or set(tree) != set(space.spaces):
            got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
            raise ValueError(f"{name} have keys {got}, the space {sorted(space.spaces)}")
        return {key: _fit(sub, tree[key], (*path, key), what, axes) for key, sub in space.items()}
    if not isinstance(tree, tuple) or len(tree) != len(space.spaces):
        got = f"{len(tree)} items" if isinstance(tree, tuple) else type(tree).__name__
        raise ValueError(f"{name} have {got}; the space is a Tuple of {len(space.spaces)}")
    return tuple(_fit(sub, tree[i], (*path, i), what, axes) for i, sub in enumerate(space.spaces))


def _bounds(space: Any) -> tuple[AnyArray, AnyArray]:
    """The least and greatest value of a Box, Discrete, MultiDiscrete or MultiBinary space."""
    spaces = _import("gymnasium.spaces")
    if isinstance(space, spaces.Box):
        return space.low, space.high
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start), np.asarray(space.start + space.n - 1)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.start), space.start + space.nvec - 1
    return np.zeros(space.shape, int), np.ones(space.shape, int)


_BOUNDS_CHUNK = 1 << 20  # values compared with a space's bounds at a time


def _check_bounds(values: AnyArray, space: Any, name: str, axes: str) -> None:
    """Refuse the first value outside the space's bounds, naming its position."""
    low, high = _bounds(space)
    rows = max(1, _BOUNDS_CHUNK // max(1, values[:1].size))  # bounded temporaries
    for start in range(0, len(values), rows):
        part = values[start : start + rows]
        outside = (part < low) | (part > high)
        if outside.any():
            first = np.argwhere(outside)[0]
            first[0] += start
            break
    else:
        return
    where = tuple(int(i) for i in first)
    cell = where[len(axes) :]
    lo, hi = np.broadcast_to(low, space.shape)[cell], np.broadcast_to(high, space.shape)[cell]
    at = f"[{', '.join(map(str, cell))}] " if cell else ""
    position = ", ".join(f"{axis}={i}" for axis, i in zip(axes, where, strict=False))
    raise ValueError(
        f"{name} hold {values[where].item()!r} {at}at ({position}), outside the space's "
        f"bounds [{lo.item()!r}, {hi.item()!r}] ({space})"
    )


def from_minari(dataset: Any) -> list[Rollout]:
    """Read a Minari dataset as validated rollouts, one per episode (B = 1, T = its length).

    See the module documentation for how episode ends, truncations and the final observation
    map onto a rollout. Each episode's structure is checked before its rollout is built:
    one action, reward, termination and truncation flag per step and one more observation;
    only the last step may end the episode; observations of the shape and dtype of the
    dataset's observation space (stored in its dtype only where no value changes), finite.
    A step both terminated and truncated counts as terminated, as the Gymnasium recorder
    counts it.

    Args:
        dataset: A `minari.MinariDataset`, or the id of a local dataset.

    Returns:
        One rollout per episode, in the dataset's order.

    Raises:
        ImportError: If minari is not installed.
        MinariDatasetError: If a file, a metadata field or an episode's data that the
            dataset declares is missing (a `ValueError`).
        ValueError: Naming the episode and what is wrong with it.

    Examples:
        >>> import os, tempfile
        >>> import trajkit.minari
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1, keys={"actions"}, done_prob=0.0)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     os.environ["MINARI_DATASETS_PATH"] = tmp
        ...     _ = trajkit.minari.to_minari(r, "trajkit/one-v0")
        ...     (back,) = trajkit.minari.from_minari("trajkit/one-v0")
        >>> back.num_steps, bool((back.obses == r.obses).all())
        (6, True)
    """
    minari = _import("minari")
    name = dataset if isinstance(dataset, str) else _dataset_name(dataset)
    with _refusing(name):
        if isinstance(dataset, str):
            try:
                dataset = minari.load_dataset(dataset)
            except ValueError as exc:  # Minari's own refusals: no data, a malformed id, ...
                raise MinariDatasetError(name, str(exc)) from None
        space = dataset.observation_space
        return [
            _read_episode(dataset, int(index), space, name) for index in dataset.episode_indices
        ]


class MinariDatasetError(ValueError):
    """A Minari dataset that cannot be read as it declares itself.

    A file, a field of its metadata or an episode's data is missing (or malformed).

    Attributes:
        dataset_id: The dataset (its id, or its path where it has none).

    Examples:
        >>> str(MinariDatasetError("me/run-v0", "episode 3 has no data"))
        "Minari dataset 'me/run-v0': episode 3 has no data"
    """

    def __init__(self, dataset_id: str, reason: str) -> None:
        self.dataset_id = dataset_id
        self.reason = reason
        super().__init__(f"Minari dataset {dataset_id!r}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.dataset_id, self.reason))


def _dataset_name(dataset: Any) -> str:
    with contextlib.suppress(Exception):
        return str(dataset.spec.dataset_id)
    return repr(dataset)


@contextlib.contextmanager
def _refusing(name: str) -> Iterator[None]:
    """Turn what Minari raises for a dataset missing a file or a field into a refusal."""
    try:
        yield
    except FileNotFoundError as exc:
        raise MinariDatasetError(name, f"{exc.filename or exc} is missing") from None
    except KeyError as exc:
        what = exc.args[0] if exc.args else exc
        raise MinariDatasetError(name, f"missing from its metadata or data: {what}") from None
    except (AssertionError, IndexError, TypeError, OSError) as exc:
        raise MinariDatasetError(
            name, f"its metadata or data is malformed ({type(exc).__name__}: {exc})"
        ) from None


def _read_episode(dataset: Any, index: int, space: Any, name: str) -> Rollout:
    """Episode `index` as a rollout, read alone: Minari pairs ids with the data it finds."""
    try:
        found = list(dataset.iterate_episodes([index]))
    except FileNotFoundError as exc:
        found = [f"{exc.filename or exc} is missing"]
    if len(found) != 1 or isinstance(found[0], str):
        missing = f" ({found[0]})" if found and isinstance(found[0], str) else ""
        raise MinariDatasetError(
            name,
            f"episode {index} has no data{missing}, but the dataset declares "
            f"{dataset.total_episodes} episodes (total_episodes)",
        )
    try:
        return _episode_rollout(found[0], space)
    except ValueError as exc:
        raise ValueError(f"episode {index}: {exc}") from None


def _episode_rollout(episode: Any, space: Any) -> Rollout:
    rewards = np.asarray(episode.rewards)
    if rewards.ndim != 1:
        raise ValueError(f"rewards have shape {rewards.shape}; an episode has one per step")
    T = len(rewards)
    actions = np.asarray(episode.actions)
    if actions.ndim == 0 or len(actions) != T:
        raise ValueError(
            f"{len(actions) if actions.ndim else 'no'} actions for {T} rewards; an episode "
            "has one action per step"
        )
    ends = [_end_flags(episode, name, T) for name in ("terminations", "truncations")]
    terminated = bool(T and ends[0][-1])
    truncated = bool(T and ends[1][-1]) and not terminated  # both: terminated wins
    obses = _observations(_as_tree(episode.observations), space, T)
    if T:  # no action is taken from the final observation: repeat the last one
        actions = np.concatenate([actions, actions[-1:]])
    else:
        actions = np.zeros((1, *actions.shape[1:]), actions.dtype)
    dones = np.zeros((T + 1, 1), dtype=np.float32)
    dones[0] = 1
    if terminated or truncated:
        dones[T] = 1
    cut = np.zeros((T, 1), dtype=np.float32)
    if truncated:
        cut[-1] = 1
    rews = conform_into(FIELD_RULES["rews"], np.dtype(np.float32), rewards[:, None], "rews")
    start = T if terminated or truncated else T + 1  # the last observation of an ended episode
    return Rollout(
        states=np.zeros((T + 1, 1, 0), np.float32),
        obses=obses,
        rews=rews,
        dones=dones,
        infos=None,
        model_outs={"actions": actions[:, None]},
        truncated=cut,
        final_values=np.zeros((T, 1), np.float32),
        final_obses=_tree.map_leaves(lambda leaf: leaf[start:, 0], obses),
    )


def _end_flags(episode: Any, name: str, T: int) -> AnyArray:
    """An episode's `terminations` or `truncations`: T flags, set at most at the last step."""
    flags = np.asarray(getattr(episode, name))
    if flags.shape != (T,):
        raise ValueError(
            f"{name} has shape {flags.shape}, expected ({T},): one flag per step, as many as "
            "actions and rewards"
        )
    flags = lossless(flags, np.dtype(bool), name, axes="t")
    if T and flags[:-1].any():
        t = int(np.argmax(flags[:-1]))
        raise ValueError(
            f"{name}[{t}] is set, before the last step ({T - 1}); only an episode's last step "
            "may end it"
        )
    return flags


def _observations(tree: Any, space: Any, T: int, path: _tree.Path = ()) -> Any:
    """`tree` checked against the observation `space` (shapes, dtypes, values), as `[T+1, 1, ...]`.

    Each leaf is stored in its space's dtype, only where no value changes, and must be
    finite; Dict and Tuple spaces give dicts and tuples of leaves.
    """
    spaces = _import("gymnasium.spaces")
    name = _tree.format_path("observations", path)
    if isinstance(space, spaces.Dict):
        if not isinstance(tree, dict) or set(tree) != set(space.spaces):
            got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
            raise ValueError(
                f"{name} have keys {got}, the observation space {sorted(space.spaces)}"
            )
        return {key: _observations(tree[key], sub, T, (*path, key)) for key, sub in space.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(tree, tuple) or len(tree) != len(space.spaces):
            got = f"{len(tree)} items" if isinstance(tree, tuple) else type(tree).__name__
            raise ValueError(
                f"{name} have {got}; the observation space is a Tuple of {len(space.spaces)}"
            )
        return tuple(
            _observations(tree[i], sub, T, (*path, i)) for i, sub in enumerate(space.spaces)
        )
    if not isinstance(
        space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary
    ):
        raise ValueError(
            f"{name}: the observation space {space} is not one trajkit reads (Box, "
            "Discrete, MultiDiscrete, MultiBinary, and Dict and Tuple of them)"
        )
    if isinstance(tree, dict | tuple):
        raise ValueError(f"{name} are nested, but the observation space is {space}")
    expected = (T + 1, *space.shape)
    if tree.shape != expected:
        raise ValueError(
            f"{name} have shape {tree.shape}, expected {expected}: {T + 1} rows (one more "
            f"than the steps) of the observation space's shape {space.shape}"
        )
    leaf = conform_into(FIELD_RULES["obses"], np.dtype(space.dtype), tree, name, axes="t")
    return leaf[:, None]


def _as_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _as_tree(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return tuple(_as_tree(item) for item in value)
    return np.asarray(value)
