"""Rollouts to a Minari dataset: env timelines cut into episodes, fitted to the spaces, staged."""

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
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.atomic import fsync_path
from trajkit._models.rollout import Rollout
from trajkit._models.rules import discrete_actions, episode_ends, lossless
from trajkit.minari._spaces import along, optional

__all__ = ["to_minari"]


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
    data_collector = optional("minari.data_collector")
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
        # Entry k of `final_obses` is the k-th episode end in (t, b) order.
        ended = episode_ends(r.dones)
        end_index = np.full(ended.shape, -1, np.int64)
        ends = np.nonzero(ended)
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
        return spaces.Box(-np.inf, np.inf, actions.shape[1:], actions.dtype)  # as stored
    arrays = rollouts[0].model_outs.arrays
    if actions.ndim == 1:
        n = arrays["actor"].shape[-1] if discrete_actions(arrays) else int(actions.max()) + 1
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
    minari = optional("minari")
    spaces = optional("gymnasium.spaces")
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
    gymnasium = optional("gymnasium")
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
    gymnasium = optional("gymnasium")
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
    storage = optional("minari.storage")
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
    obses = along(observation_space, rollout.obses, "observations", _fit)
    finals = rollout.final_obses
    if finals is not None:
        finals = along(observation_space, finals, "final observations", partial(_fit, axes="e"))
    actions = rollout.model_outs.arrays["actions"]
    fitted = along(action_space, actions[:T], "actions", _fit)  # the last row is not exported
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


def _fit(space: Any, tree: AnyArray, name: str, axes: str = "tb") -> AnyArray:
    """An array in its space's dtype, shape and bounds, or refused (a leaf of `along`).

    Its rows are `[rows, B, ...]`, or with `axes="e"` `[E, ...]` (final observations).
    """
    lead = len(axes)
    if tree.shape[lead:] != space.shape:
        per = "per step and env" if lead == 2 else "each"
        raise ValueError(
            f"{name} have shape {tree.shape[lead:]} {per}, the space {space} has {space.shape}"
        )
    values = lossless(tree, np.dtype(space.dtype), name, axes=axes)
    _check_bounds(values, space, name, axes)
    return values


def _bounds(space: Any) -> tuple[AnyArray, AnyArray]:
    """The least and greatest value of a Box, Discrete, MultiDiscrete or MultiBinary space."""
    spaces = optional("gymnasium.spaces")
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
