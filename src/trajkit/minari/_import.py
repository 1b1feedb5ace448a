"""A Minari dataset as validated rollouts, one per episode, each checked before it is built."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from functools import partial
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, conform_into, lossless, no_states
from trajkit.minari._spaces import along, optional

__all__ = ["MinariDatasetError", "from_minari", "iter_minari"]


def iter_minari(dataset: Any) -> Generator[Rollout, None, None]:
    """Read a Minari dataset one episode at a time, as validated rollouts (B = 1, T = its length).

    See the module documentation for how episode ends, truncations and the final observation
    map onto a rollout. Each episode is read from the dataset alone, checked, and yielded
    before the next one is read, so the memory it takes is one episode's, whatever the size
    of the dataset. Its structure is checked before its rollout is built: one action,
    reward, termination and truncation flag per step and one more observation; only the last
    step may end the episode; observations of the shape and dtype of the dataset's
    observation space (stored in its dtype only where no value changes), finite. A step both
    terminated and truncated counts as terminated, as the Gymnasium recorder counts it.

    Args:
        dataset: A `minari.MinariDataset`, or the id of a local dataset (loaded by the call).

    Yields:
        One rollout per episode, in the dataset's order.

    Raises:
        ImportError: If minari is not installed.
        MinariDatasetError: If a file, a metadata field or an episode's data that the
            dataset declares is missing (a `ValueError`); for the dataset itself, by the
            call; for an episode, when the iteration comes to it.
        ValueError: Naming the episode and what is wrong with it, when the iteration comes
            to it (the rollouts yielded before were read and checked whole).

    Examples:
        >>> import os, tempfile
        >>> import trajkit.minari
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=2, keys={"actions"}, done_prob=0.0)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     os.environ["MINARI_DATASETS_PATH"] = tmp
        ...     _ = trajkit.minari.to_minari(r, "trajkit/two-v0")
        ...     steps = [e.num_steps for e in trajkit.minari.iter_minari("trajkit/two-v0")]
        >>> steps
        [6, 6]
    """
    minari = optional("minari")
    name = dataset if isinstance(dataset, str) else _dataset_name(dataset)
    with _refusing(name):
        if isinstance(dataset, str):
            try:
                dataset = minari.load_dataset(dataset)
            except ValueError as exc:  # Minari's own refusals: no data, a malformed id, ...
                raise MinariDatasetError(name, str(exc)) from None
        space, indices = dataset.observation_space, dataset.episode_indices
    return _episodes(dataset, indices, space, name)


def _episodes(dataset: Any, indices: Any, space: Any, name: str) -> Generator[Rollout, None, None]:
    """`iter_minari`'s generator: each episode read alone, checked, and let go."""
    for index in indices:
        yield _read_episode(dataset, int(index), space, name)  # not kept here once yielded


def from_minari(dataset: Any) -> list[Rollout]:
    """Read a Minari dataset as validated rollouts, one per episode (B = 1, T = its length).

    The rollouts of [`iter_minari`][trajkit.minari.iter_minari], as a list: each episode is
    read and checked as it reads it (see there).

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
    return list(iter_minari(dataset))


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
    with _refusing(name):
        return _episode_at(dataset, index, space, name)


def _episode_at(dataset: Any, index: int, space: Any, name: str) -> Rollout:
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
    tree = _as_tree(episode.observations)
    obses = along(space, tree, "observations", partial(_observation, T=T), "the observation space")
    if T:  # no action is taken from the final observation: repeat the last one
        actions = np.concatenate([actions, actions[-1:]])
    else:
        actions = np.zeros((1, *actions.shape[1:]), actions.dtype)
    dones = np.zeros((T + 1, 1), dtype=bool)
    dones[0] = 1
    if terminated or truncated:
        dones[T] = 1
    cut = np.zeros((T, 1), dtype=bool)
    if truncated:
        cut[-1] = 1
    start = T if terminated or truncated else T + 1  # the last observation of an ended episode
    return Rollout(  # stores each field in its rule's dtype (rews: refused beyond float32's range)
        states=no_states(T, 1),
        obses=obses,
        rews=rewards[:, None],
        dones=dones,
        infos=None,
        model_outs={"actions": actions[:, None]},
        truncated=cut,
        final_values=np.zeros((T, 1)),
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


def _observation(space: Any, tree: AnyArray, name: str, T: int) -> AnyArray:
    """One array of observations `[T+1, ...]` in its space's shape and dtype, as `[T+1, 1, ...]`.

    Stored in the space's dtype only where no value changes, and finite (a leaf of `along`).
    """
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
