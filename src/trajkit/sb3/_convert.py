"""SB3's `RolloutBuffer` as a validated `Rollout` (the layout: see the `trajkit.sb3` docs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from trajkit._base.types import AnyArray, ArrayLike
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, conform, conform_into, lossless, no_states

__all__ = ["from_rollout_buffer", "numpy_array", "space_shape"]

_REWARD_RTOL = 1e-4  # env_rewards + gamma * final_values against the buffer's float32 sums


def numpy_array(value: Any) -> AnyArray:
    """An array from NumPy data or a torch tensor (detached, on the CPU)."""
    if isinstance(value, th.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def space_shape(space: spaces.Space[Any]) -> tuple[int, ...]:
    """One element's shape as trajkit stores it: the space's (`()` for Discrete)."""
    return tuple(space.shape or ())


def _in_space(stored: AnyArray, space: spaces.Space[Any], name: str) -> AnyArray:
    """A buffer's `[T, B, ...]` array in the space's shape and dtype, where no value changes.

    SB3 2.3 to 2.7.0 store every buffer as float32 (a Discrete action 2 as 2.0); later
    versions in the space's dtype, which is then kept as it is.
    """
    T, B = stored.shape[:2]
    return lossless(stored.reshape(T, B, *space_shape(space)), np.dtype(space.dtype), name)


def _with_last_row(stored: AnyArray, last: Any, space: spaces.Space[Any], key: str) -> AnyArray:
    """`stored` `[T, B, ...]` in the space's shape and dtype, with `last` (`[B, ...]`) as row T.

    `key` is `"['pos']"` for a key of a Dict space, `""` otherwise.
    """
    B, name = stored.shape[1], f"last_obs{key}"
    shape = space_shape(space)
    last_array = numpy_array(last)
    if last_array.size != B * int(np.prod(shape, dtype=np.int64)):
        raise ValueError(
            f"{name} has shape {last_array.shape}, expected {(B, *shape)} (B={B}, one "
            f"observation of {space} per env)"
        )
    rows = _in_space(stored, space, f"buffer.observations{key}")
    # Into the space's dtype as every other row, refusing a value that changes.
    last_row = conform_into(FIELD_RULES["obses"], rows.dtype, last_array, name, axes="b")
    return np.concatenate([rows, last_row.reshape(1, B, *shape)])


def _observations(buffer: RolloutBuffer, last_obs: Any) -> AnyArray | dict[str, AnyArray]:
    space = buffer.observation_space
    if isinstance(buffer, DictRolloutBuffer):
        if not isinstance(last_obs, Mapping) or set(last_obs) != set(buffer.observations):
            got = sorted(last_obs) if isinstance(last_obs, Mapping) else type(last_obs).__name__
            raise ValueError(
                f"last_obs must be a dict with the keys {sorted(buffer.observations)}, got {got}"
            )
        if not isinstance(space, spaces.Dict):  # pragma: no cover - SB3 builds it from one
            raise TypeError(f"a DictRolloutBuffer needs a Dict space, got {space}")
        return {
            key: _with_last_row(stored, last_obs[key], space[key], f"[{key!r}]")
            for key, stored in buffer.observations.items()
        }
    return _with_last_row(buffer.observations, last_obs, space, "")


def _step_array(value: ArrayLike, name: str, T: int, B: int) -> AnyArray:
    """`[T, B]` float64 env rewards, or a copy of `truncated` or `final_values` by its rule."""
    array = numpy_array(value)
    if array.shape != (T, B):
        raise ValueError(f"{name} has shape {array.shape}, expected (T, B) = {(T, B)}")
    if name in FIELD_RULES:  # checked here: a NaN would else reach rews (as 0 * NaN)
        return conform(FIELD_RULES[name], array, name)
    return np.asarray(array, dtype=np.float64)


def _row(value: Any, name: str, B: int) -> AnyArray:
    array = numpy_array(value)
    if array.size != B:
        raise ValueError(f"{name} has shape {array.shape}, expected ({B},) (B={B})")
    return array.reshape(1, B)


def _env_rewards(
    buffer: RolloutBuffer,
    truncated: AnyArray | None,
    final_values: AnyArray | None,
    env_rewards: ArrayLike | None,
) -> AnyArray:
    """The env's rewards `[T, B]`: the buffer's, less SB3's folded bootstrap where truncated."""
    stored = buffer.rewards
    T, B = stored.shape
    # In float32, as SB3 computes `reward += gamma * value`, so that undoing it is exact
    # wherever the sum was (1.0 + 0.9 * 2.0 - 0.9 * 2.0 is 1.0 again).
    bootstrap = (
        np.zeros_like(stored)
        if truncated is None or final_values is None
        else np.float32(buffer.gamma) * (truncated * final_values).astype(np.float32)
    )
    if env_rewards is None:
        undone: AnyArray = stored - bootstrap
        return undone
    rews = _step_array(env_rewards, "env_rewards", T, B)
    expected = rews + bootstrap.astype(np.float64)
    # NaN and inf are left to the Rollout's own rule on rews, which names them.
    wrong = ~np.isclose(stored, expected, rtol=_REWARD_RTOL, atol=_REWARD_RTOL, equal_nan=True)
    wrong &= np.isfinite(stored) & np.isfinite(expected)
    if wrong.any():
        t, b = (int(i) for i in np.argwhere(wrong)[0])
        raise ValueError(
            f"env_rewards do not match the buffer: rewards[{t}, {b}] is {float(stored[t, b])}, "
            f"but env_rewards + gamma * truncated * final_values gives "
            f"{float(expected[t, b])} (env reward {float(rews[t, b])}, bootstrap "
            f"{float(bootstrap[t, b])}): the step data is not this buffer's"
        )
    return rews


def _check_buffer(buffer: Any) -> None:
    if not isinstance(buffer, RolloutBuffer):
        raise TypeError(
            f"buffer must be a stable-baselines3 RolloutBuffer or DictRolloutBuffer, got "
            f"{type(buffer).__name__}"
        )
    if buffer.generator_ready:
        raise ValueError(
            "buffer was already read by get(), which flattens its arrays: convert it before "
            "training on it (in a callback's _on_rollout_end)"
        )
    if not buffer.full:
        raise ValueError(
            f"buffer holds {buffer.pos} of its {buffer.buffer_size} steps: convert it once "
            "collect_rollouts has filled it (in a callback's _on_rollout_end)"
        )


def from_rollout_buffer(
    buffer: RolloutBuffer,
    last_obs: Any,
    last_episode_starts: ArrayLike,
    last_values: Any,
    *,
    truncated: ArrayLike | None = None,
    final_values: ArrayLike | None = None,
    final_obses: Any = None,
    env_rewards: ArrayLike | None = None,
    infos: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> Rollout:
    """A validated [`Rollout`][trajkit.Rollout] of a full SB3 `RolloutBuffer`.

    Call it where `collect_rollouts` has filled the buffer and before `train()` reads it (in
    a callback's `_on_rollout_end`; [`TrajkitCallback`][trajkit.sb3.TrajkitCallback] does all
    of this). The bootstrap row T comes from the arguments, which are what SB3 holds then:
    `model._last_obs`, `model._last_episode_starts` and the callback's `locals["values"]`.

    Without `truncated` and `final_values`, `rews` are the buffer's rewards, SB3's folded
    truncation bootstrap included, and the rollout marks no truncation (its advantages are
    SB3's all the same). With them, `rews` are the env's: see the module's "The folded
    bootstrap".

    Args:
        buffer: A full `RolloutBuffer` or `DictRolloutBuffer`, not yet read by `get()`.
        last_obs: The observation after the last step, `[B, ...]` (a dict for a Dict space),
            as the vector env returned it: row T of `obses`.
        last_episode_starts: The `dones` of the last step, `[B]`: row T of `dones`.
        last_values: The critic's values of `last_obs`, `[B]` or `[B, 1]` (a tensor too):
            row T of `model_outs['critic']`.
        truncated: `[T, B]` 0/1: step t was cut by a time limit, where SB3 folded
            `gamma * final_values[t, b]` into the reward. Given with `final_values`.
        final_values: `[T, B]`: the critic's value of the terminal observation where
            `truncated`, as SB3 computed it (any finite value elsewhere is kept, not read).
        final_obses: The true final observation of every episode end, `[E, ...]` in the order
            of `np.nonzero(dones[1:] == 1)` (SB3's `infos[b]["terminal_observation"]`), in
            the observation space's dtype; copied.
        env_rewards: The env's rewards `[T, B]`, if you have them (as a callback's
            `_on_step` sees `locals["rewards"]`): checked against the buffer and stored.
        infos: T rows of B JSON mappings.

    Returns:
        The rollout, with `model_outs` `actions`, `critic` and `log_probs`.

    Raises:
        TypeError: If `buffer` is not a `RolloutBuffer`.
        ValueError: If the buffer is not full or was already read by `get()`, if an
            argument has the wrong shape, if `env_rewards` and the bootstrap do not add up to
            the buffer's rewards, or (a `RolloutValidationError`) if the rollout is invalid.

    Examples:
        >>> import numpy as np
        >>> import torch
        >>> from gymnasium import spaces
        >>> from stable_baselines3.common.buffers import RolloutBuffer
        >>> T, B = 3, 1
        >>> buffer = RolloutBuffer(T, spaces.Box(-1, 1, (2,)), spaces.Discrete(2),
        ...                        device="cpu", gamma=0.5, gae_lambda=1.0, n_envs=B)
        >>> for t in range(T):  # step 1 is truncated, V(terminal observation) = 4
        ...     reward = 1.0 + (0.5 * 4.0 if t == 1 else 0.0)  # as SB3 folds it in
        ...     buffer.add(np.zeros((B, 2)), np.array([[t % 2]]), np.array([reward]),
        ...                np.array([t in (0, 2)]), torch.zeros(B, 1), torch.zeros(B))
        >>> buffer.compute_returns_and_advantage(torch.zeros(B, 1), dones=np.zeros(B))
        >>> r = from_rollout_buffer(buffer, np.zeros((B, 2)), np.zeros(B), np.zeros(B),
        ...                         truncated=[[0], [1], [0]], final_values=[[0], [4.0], [0]])
        >>> r.rews[:, 0], r.model_outs.arrays["actions"][:, 0]
        (array([1., 1., 1.], dtype=float32), array([0, 1, 0, 0], dtype=int32))
        >>> np.allclose(r.advantages(buffer.gamma, buffer.gae_lambda), buffer.advantages)
        True
    """
    _check_buffer(buffer)
    T, B = buffer.buffer_size, buffer.n_envs
    if (truncated is None) != (final_values is None):
        raise ValueError("truncated and final_values must be given together")
    trunc = None if truncated is None else _step_array(truncated, "truncated", T, B)
    finals = None if final_values is None else _step_array(final_values, "final_values", T, B)
    rews = _env_rewards(buffer, trunc, finals, env_rewards)
    actions = _in_space(buffer.actions, buffer.action_space, "buffer.actions")
    outputs = {
        "actions": np.concatenate([actions, actions[-1:]]),
        "critic": np.concatenate([buffer.values, _row(last_values, "last_values", B)]),
        "log_probs": np.concatenate([buffer.log_probs, buffer.log_probs[-1:]]),
    }
    dones = np.concatenate(
        [buffer.episode_starts, _row(last_episode_starts, "last_episode_starts", B)]
    )
    return Rollout(
        states=no_states(T, B),
        obses=_observations(buffer, last_obs),
        rews=rews,
        dones=dones,
        infos=infos,
        model_outs=outputs,
        truncated=trunc,
        final_values=finals,
        final_obses=None if final_obses is None else _copied_finals(final_obses),
        copy=False,
    )


def _copied_finals(final_obses: Any) -> Any:
    """A copy of the caller's `final_obses`, checked by their rule (the rollout keeps it)."""

    def copied(path: _tree.Path, leaf: Any) -> AnyArray:
        name = _tree.format_path("final_obses", path)
        return conform(FIELD_RULES["final_obses"], numpy_array(leaf), name, axes="e")

    return _tree.map_with_path(copied, _tree.normalize(final_obses, "final_obses"))
