"""Stable-Baselines3's rollouts as validated trajkit rollouts (needs `trajkit[sb3]`).

Two entry points. [`TrajkitCallback`][trajkit.sb3.TrajkitCallback] is the one to use: add it
to `learn()` and every rollout SB3 trains on is converted and validated at the end of
`collect_rollouts`, and, if asked, saved with a recording (for `trajkit lint --replay`) and
linted; a rollout that fails stops training with a
[`RolloutCheckError`][trajkit.sb3.RolloutCheckError] naming it.
[`from_rollout_buffer`][trajkit.sb3.from_rollout_buffer] is the converter underneath, for a
`RolloutBuffer` or `DictRolloutBuffer` (PPO, A2C) you hold yourself.

**Layout.** SB3 keeps `[n_steps, n_envs]` arrays and the bootstrap apart (`last_values`, the
`dones` of the next observation, `_last_obs`); trajkit puts the bootstrap in row T of
`obses`, `dones` and `model_outs['critic']`, which therefore have T+1 rows. SB3's
`episode_starts` are trajkit's `dones`. Actions, stored by SB3 as `[T, B, action_dim]`, become
`[T+1, B, *action_space.shape]` (`[T+1, B]` integers for a Discrete space); observations
`[T+1, B, *observation_space.shape]` per key of a Dict space (`[T+1, B]` for a Discrete
space, which SB3 stores as `[T, B, 1]`), each in its space's dtype (SB3 2.3 to 2.7.0 store
every buffer as float32: converted where no value changes). No action is taken from the
bootstrap observation in this rollout, so row T of `actions` and `log_probs` repeats row T-1
(as `trajkit.minari` does); GAE never reads it. Box actions are the policy's samples, before
SB3 clips them for the env, since those are what the log-probabilities are of. `states` is
empty (`[T+1, B, 0]`).

**The folded bootstrap.** When a time limit cuts an episode (`infos[b]["TimeLimit.truncated"]`
with a `terminal_observation`), SB3 adds `gamma * V(terminal_observation)` to that step's
reward before storing it, so that GAE, which stops at every episode end, still bootstraps
from the critic. The buffer's `rewards` are then not the env's. trajkit keeps the env's
rewards and says where the bootstrap goes: `truncated[t, b] = 1` and `final_values[t, b] =
V(terminal_observation)`. Given `truncated` and `final_values`, the converter subtracts
`gamma * final_values` where truncated (or takes the env's rewards you pass as
`env_rewards`, after checking that they plus the bootstrap are the buffer's rewards). Either
way `Rollout.advantages(buffer.gamma, buffer.gae_lambda)` equals the buffer's `advantages`,
and `Rollout.returns` its `returns`, to float32 rounding.

Examples:
    >>> import numpy as np
    >>> from stable_baselines3 import PPO
    >>> from trajkit.sb3 import TrajkitCallback
    >>> model = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1,
    ...             seed=0, device="cpu")
    >>> check = TrajkitCallback()
    >>> _ = model.learn(64, callback=check)
    >>> check.rollouts, check.last_rollout.num_steps
    (2, 32)
    >>> buffer = model.rollout_buffer  # as SB3 left it: flattened by training on it
    >>> r = check.last_rollout
    >>> bool(np.allclose(r.returns(0.99, 0.95).ravel(), buffer.returns.ravel(), atol=1e-5))
    True
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, ArrayLike, Float32Array
from trajkit._core import tree as _tree
from trajkit._io.files import save
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, conform, conform_into, lossless

try:
    import torch as th
    from gymnasium import Env, Wrapper, spaces
    from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import (
        DummyVecEnv,
        SubprocVecEnv,
        VecEnv,
        VecEnvWrapper,
    )
except ImportError as _missing:  # pragma: no cover - stable-baselines3 hidden
    raise ImportError(
        "trajkit.sb3 needs stable-baselines3 >= 2.3; install it with: pip install 'trajkit[sb3]'"
    ) from _missing

import trajkit.lint
from trajkit.gym.recording import describe_space

__all__ = ["RolloutCheckError", "TrajkitCallback", "from_rollout_buffer"]

# What `gymnasium.make` wraps every env in, and SB3's `Monitor`: none changes what the env
# returns, so a recording through them can be replayed with `make_vec`.
_TRANSPARENT_WRAPPERS = frozenset({"Monitor", "OrderEnforcing", "PassiveEnvChecker", "TimeLimit"})
_REWARD_RTOL = 1e-4  # env_rewards + gamma * final_values against the buffer's float32 sums


class RolloutCheckError(ValueError):
    """A rollout of a `learn()` run failed validation or lint; the message names the rollout.

    Raised by [`TrajkitCallback`][trajkit.sb3.TrajkitCallback], which stops training with it;
    the original error (a [`RolloutValidationError`][trajkit.RolloutValidationError] or
    another `ValueError`) is its `__cause__`.

    Examples:
        >>> err = RolloutCheckError("rollout 3 of this run: rews must be finite")
        >>> isinstance(err, ValueError)
        True
    """


def _numpy(value: Any) -> AnyArray:
    """An array from NumPy data or a torch tensor (detached, on the CPU)."""
    if isinstance(value, th.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _space_shape(space: spaces.Space[Any]) -> tuple[int, ...]:
    """One element's shape as trajkit stores it: `()` for Discrete, else the space's shape."""
    return () if isinstance(space, spaces.Discrete) else tuple(space.shape or ())


def _in_space(stored: AnyArray, space: spaces.Space[Any], name: str) -> AnyArray:
    """A buffer's `[T, B, ...]` array in the space's shape and dtype, where no value changes.

    SB3 2.3 to 2.7.0 store every buffer as float32 (a Discrete action 2 as 2.0); later
    versions in the space's dtype, which is then kept as it is.
    """
    T, B = stored.shape[:2]
    return lossless(stored.reshape(T, B, *_space_shape(space)), np.dtype(space.dtype), name)


def _with_last_row(stored: AnyArray, last: Any, space: spaces.Space[Any], key: str) -> AnyArray:
    """`stored` `[T, B, ...]` in the space's shape and dtype, with `last` (`[B, ...]`) as row T.

    `key` is `"['pos']"` for a key of a Dict space, `""` otherwise.
    """
    B, name = stored.shape[1], f"last_obs{key}"
    shape = _space_shape(space)
    last_array = _numpy(last)
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
    array = _numpy(value)
    if array.shape != (T, B):
        raise ValueError(f"{name} has shape {array.shape}, expected (T, B) = {(T, B)}")
    if name in FIELD_RULES:  # checked here: a NaN would else reach rews (as 0 * NaN)
        return conform(FIELD_RULES[name], array, name)
    return np.asarray(array, dtype=np.float64)


def _row(value: Any, name: str, B: int) -> AnyArray:
    array = _numpy(value)
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
        states=np.zeros((T + 1, B, 0), np.float32),
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
        return conform(FIELD_RULES["final_obses"], _numpy(leaf), name, axes="e")

    return _tree.map_with_path(copied, _tree.normalize(final_obses, "final_obses"))


def _plain(value: Any) -> Any:
    """`value` with NumPy scalars and arrays as Python numbers and lists, as JSON holds them."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _env_wrappers(env: Env[Any, Any]) -> list[str]:
    """The class names of the wrappers around one env that `make` would not re-create."""
    names = []
    while isinstance(env, Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return [name for name in names if name not in _TRANSPARENT_WRAPPERS]


def _describe_vec_env(venv: VecEnv) -> dict[str, Any]:
    """The recording fields of an SB3 vector env (see `trajkit.lint.Recording`)."""
    wrappers = []
    inner = venv
    while isinstance(inner, VecEnvWrapper):
        wrappers.append(type(inner).__name__)
        inner = inner.venv
    modes = {DummyVecEnv: "sync", SubprocVecEnv: "async"}
    if isinstance(inner, DummyVecEnv):
        wrappers += _env_wrappers(inner.envs[0])
    spec = inner.get_attr("spec", indices=[0])[0]
    kwargs = {k: _plain(v) for k, v in (getattr(spec, "kwargs", None) or {}).items()}
    limit = getattr(spec, "max_episode_steps", None)
    if isinstance(limit, int) and limit >= 1:
        kwargs["max_episode_steps"] = limit
    jsonable = (str, int, float, bool, type(None), list, dict)
    return {
        "env_id": getattr(spec, "id", None),
        "env_kwargs": {k: v for k, v in kwargs.items() if isinstance(v, jsonable)},
        "unrecorded_kwargs": sorted(k for k, v in kwargs.items() if not isinstance(v, jsonable)),
        "vectorization_mode": modes.get(type(inner), type(inner).__name__),
        "max_episode_steps": kwargs.get("max_episode_steps"),
        "observation_space": describe_space(venv.observation_space),
        "action_space": describe_space(venv.action_space),
        "wrappers": wrappers,
        "num_envs": venv.num_envs,
        "autoreset_mode": "SAME_STEP",  # the terminal observation comes in the step's info
    }


def _stacked(observations: list[Any], buffer: RolloutBuffer) -> Any:
    """Single observations stacked `[E, ...]` in the space's dtypes (per key of a Dict)."""

    def stack(rows: list[Any], space: spaces.Space[Any]) -> AnyArray:
        shape, dtype = _space_shape(space), np.dtype(space.dtype)
        if not rows:
            return np.zeros((0, *shape), dtype)
        stacked = np.stack([np.asarray(o).reshape(shape) for o in rows])
        return conform_into(FIELD_RULES["final_obses"], dtype, stacked, "final_obses")

    space = buffer.observation_space
    if isinstance(buffer, DictRolloutBuffer) and isinstance(space, spaces.Dict):
        return {k: stack([o[k] for o in observations], space[k]) for k in buffer.observations}
    return stack(observations, space)


class _StepLog:
    """What `_on_step` sees of one rollout that the buffer does not keep."""

    def __init__(self, info_keys: frozenset[str] | None) -> None:
        self.info_keys = info_keys
        self.rewards: list[Float32Array] = []
        self.infos: list[list[dict[str, Any]]] = []
        self.ends: list[tuple[int, int, Any, bool]] = []  # (t, b, terminal obs, truncated)

    def add(self, rewards: Any, dones: Any, infos: Sequence[Mapping[str, Any]]) -> None:
        t = len(self.rewards)
        # A copy: collect_rollouts adds the truncation bootstrap to this array after us.
        self.rewards.append(np.array(rewards, dtype=np.float32))
        keys = self.info_keys
        self.infos.append(
            [
                {
                    k: _plain(v)
                    for k, v in info.items()
                    if (k in keys if keys is not None else k != "terminal_observation")
                }
                for info in infos
            ]
        )
        for b in np.flatnonzero(dones).tolist():
            terminal = infos[b].get("terminal_observation")
            cut = terminal is not None and bool(infos[b].get("TimeLimit.truncated", False))
            self.ends.append((t, b, terminal, cut))


class TrajkitCallback(BaseCallback):
    """An SB3 callback that validates every rollout of `learn()` as a trajkit `Rollout`.

    At the end of each rollout (`_on_rollout_end`, after SB3 computed the advantages and
    before it trains on them) the buffer is converted with
    [`from_rollout_buffer`][trajkit.sb3.from_rollout_buffer], with what the callback saw at
    each step: the env's rewards (before SB3 folds the truncation bootstrap into them), the
    truncations, the terminal observations (`final_obses`, and `final_values` from the
    critic on them, as SB3 computes its bootstrap) and the infos. The rollout is validated
    by the `Rollout` constructor and kept as `last_rollout`. Given `save_dir`, it is saved as
    `rollout-00000.npz`, `rollout-00001.npz`, ... with a recording, so that `trajkit lint
    --replay save_dir` re-runs the actions in the env; with `lint=True` it is linted, and a
    finding of severity error or warning stops training. Any failure stops `learn()` with a
    [`RolloutCheckError`][trajkit.sb3.RolloutCheckError] that names the rollout (counted
    from 0, as the file names) and says what is wrong.

    Replay needs a registered env id, unwrapped but for `Monitor` and what `gymnasium.make`
    adds (no `VecNormalize`, `VecFrameStack`, ...: those are named in the recording, which
    replay then declines with a TK300 note), and a seeded first reset: the model's `seed`
    (`PPO(..., seed=0)`), in the first `learn()` of the model (a later `learn()`, or one of a
    loaded model, is recorded without a seed, which replay declines). Replay sends the
    stored actions; for a Box space SB3 sent the env the clipped ones, which replays the same
    where the env clips them itself (Pendulum, MuJoCo).

    Args:
        save_dir: A folder for the rollout files (created if missing); `None` saves nothing.
        lint: Lint each rollout (in a temporary file when `save_dir` is `None`).
        select: The lint checks to run, codes or prefixes (default: all of TK1xx and TK2xx).
        ignore: Lint checks not to run. The default leaves out TK107 (Box actions outside
            the space, which the env clips): SB3 stores the policy's Gaussian samples and
            clips them only for the env, so they are outside the bounds by design.
        info_keys: The info keys to keep in `infos` (default: Monitor's `episode`), or
            `None` for every key but `terminal_observation`. NumPy values become lists and
            numbers; values that JSON cannot hold make `save` fail.
        compress: Save compressed files.
        verbose: SB3's verbosity; 1 prints each saved file.

    Attributes:
        rollouts: How many rollouts passed.
        last_rollout: The last rollout that passed, or `None`.
        findings: Every lint finding so far (notes included).
        recording: The recording metadata of the current `learn()` (`None` before).

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from stable_baselines3 import A2C
        >>> from trajkit.sb3 import TrajkitCallback
        >>> model = A2C("MlpPolicy", "CartPole-v1", n_steps=16, seed=0, device="cpu")
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     check = TrajkitCallback(tmp, lint=True)
        ...     _ = model.learn(48, callback=check)
        ...     files = sorted(os.listdir(tmp))
        ...     meta = trajkit.read_metadata(os.path.join(tmp, files[-1]))
        >>> files
        ['rollout-00000.npz', 'rollout-00001.npz', 'rollout-00002.npz']
        >>> meta.recording.env_id, meta.recording.index, meta.recording.seed
        ('CartPole-v1', 2, 0)
        >>> [f.code for f in check.findings if f.severity != "note"]
        []
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str] | None = None,
        *,
        lint: bool = False,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = ("TK107",),
        info_keys: Iterable[str] | None = ("episode",),
        compress: bool = False,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.save_dir: Path | None = None if save_dir is None else Path(save_dir)
        self.lint = lint
        self.select: list[str] | None = None if select is None else list(select)
        self.ignore: list[str] | None = None if ignore is None else list(ignore)
        if lint:
            trajkit.lint.lint([], select=self.select, ignore=self.ignore, jobs=1)  # checks them
        self.info_keys: frozenset[str] | None = None if info_keys is None else frozenset(info_keys)
        self.compress = compress
        self.rollouts: int = 0
        self.last_rollout: Rollout | None = None
        self.findings: list[trajkit.lint.Finding] = []
        self.recording: dict[str, Any] | None = None
        self._first = 0  # rollouts before this learn()
        self._log = _StepLog(self.info_keys)

    def _on_training_start(self) -> None:
        if not isinstance(getattr(self.model, "rollout_buffer", None), RolloutBuffer):
            raise TypeError(
                f"TrajkitCallback checks the RolloutBuffer of on-policy algorithms (PPO, A2C); "
                f"{type(self.model).__name__} has none"
            )
        env = self.model.get_env()
        if env is None:  # pragma: no cover - learn() needs an env
            raise TypeError("TrajkitCallback needs the model's env")
        # The env's first reset was seeded with the model's seed only if the model has not
        # trained before: a later learn() resets unseeded, or goes on from where it was.
        fresh = getattr(self.model, "_n_updates", 0) == 0
        self.recording = {
            "id": uuid.uuid4().hex,
            **_describe_vec_env(env),
            "seed": self.model.seed if fresh else None,
        }
        self._first = self.rollouts
        if self.save_dir is not None:
            self.save_dir.mkdir(parents=True, exist_ok=True)

    def _on_rollout_start(self) -> None:
        self._log = _StepLog(self.info_keys)

    def _on_step(self) -> bool:
        self._log.add(self.locals["rewards"], self.locals["dones"], self.locals["infos"])
        return True

    def _on_rollout_end(self) -> None:
        n = self.rollouts
        try:
            rollout = self._rollout()
            if self.save_dir is not None:
                self._save(rollout, self.save_dir / f"rollout-{n:05d}.npz", n)
            elif self.lint:
                with tempfile.TemporaryDirectory() as tmp:
                    self._save(rollout, Path(tmp) / f"rollout-{n:05d}.npz", n)
        except RolloutCheckError:
            raise
        except ValueError as exc:
            raise RolloutCheckError(
                f"rollout {n} of this run (up to num_timesteps={self.num_timesteps}) is "
                f"invalid: {exc}"
            ) from exc
        self.last_rollout = rollout
        self.rollouts += 1

    def _final_values(self, observations: list[Any]) -> AnyArray:
        """The critic's values of terminal observations, as SB3 computes its bootstrap."""
        buffer: RolloutBuffer = self.model.rollout_buffer  # type: ignore[attr-defined]
        policy = self.model.policy
        tensor, _ = policy.obs_to_tensor(_stacked(observations, buffer))
        with th.no_grad():
            values = policy.predict_values(tensor)  # type: ignore[operator]
        return _numpy(values).reshape(-1)

    def _rollout(self) -> Rollout:
        buffer: RolloutBuffer = self.model.rollout_buffer  # type: ignore[attr-defined]
        log, (T, B) = self._log, (buffer.buffer_size, buffer.n_envs)
        if len(log.rewards) != T:
            raise ValueError(f"the callback saw {len(log.rewards)} steps, the buffer holds {T}")
        truncated = np.zeros((T, B), np.float32)
        final_values = np.zeros((T, B), np.float32)
        cut = [(t, b, obs) for t, b, obs, is_cut in log.ends if is_cut]
        if cut:
            values = self._final_values([obs for _, _, obs in cut])
            for (t, b, _), value in zip(cut, values, strict=True):
                truncated[t, b], final_values[t, b] = 1.0, value
        terminal = [obs for _, _, obs, _ in log.ends]
        final_obses = None
        if all(obs is not None for obs in terminal):
            final_obses = _stacked(terminal, buffer)
        return from_rollout_buffer(
            buffer,
            self.locals["new_obs"],
            self.locals["dones"],
            self.locals["values"],
            truncated=truncated,
            final_values=final_values,
            final_obses=final_obses,
            env_rewards=np.stack(log.rewards),
            infos=log.infos,
        )

    def _save(self, rollout: Rollout, path: Path, n: int) -> None:
        recording = {**(self.recording or {}), "index": n - self._first}
        save(rollout, path, compress=self.compress, recording=recording)
        if self.verbose >= 1:
            print(f"trajkit: saved rollout {n} to {path}")
        if not self.lint:
            return
        found = trajkit.lint.lint(path, select=self.select, ignore=self.ignore, jobs=1)
        self.findings.extend(found)
        failing = [f for f in found if f.severity != "note"]
        if failing:
            listed = "; ".join(f.format() for f in failing[:5])
            more = f" (and {len(failing) - 5} more)" if len(failing) > 5 else ""
            raise RolloutCheckError(
                f"rollout {n} of this run (up to num_timesteps={self.num_timesteps}) fails "
                f"lint: {listed}{more}"
            )
