"""`TrajkitCallback`: every rollout of an SB3 `learn()` converted, validated, saved and linted."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import Env, Wrapper, spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper

import trajkit.lint
from trajkit._base.types import AnyArray, Float32Array
from trajkit._io.files import save
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, conform_into
from trajkit.gym._describe import describe_space
from trajkit.sb3._convert import from_rollout_buffer, numpy_array, space_shape

__all__ = ["RolloutCheckError", "TrajkitCallback"]

# What `gymnasium.make` wraps every env in, and SB3's `Monitor`: none changes what the env
# returns, so a recording through them can be replayed with `make_vec`.
_TRANSPARENT_WRAPPERS = frozenset({"Monitor", "OrderEnforcing", "PassiveEnvChecker", "TimeLimit"})


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
        shape, dtype = space_shape(space), np.dtype(space.dtype)
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
        return numpy_array(values).reshape(-1)

    def _rollout(self) -> Rollout:
        buffer: RolloutBuffer = self.model.rollout_buffer  # type: ignore[attr-defined]
        log, (T, B) = self._log, (buffer.buffer_size, buffer.n_envs)
        if len(log.rewards) != T:
            raise ValueError(f"the callback saw {len(log.rewards)} steps, the buffer holds {T}")
        truncated = np.zeros((T, B), bool)
        final_values = np.zeros((T, B))
        cut = [(t, b, obs) for t, b, obs, is_cut in log.ends if is_cut]
        if cut:
            values = self._final_values([obs for _, _, obs in cut])
            for (t, b, _), value in zip(cut, values, strict=True):
                truncated[t, b], final_values[t, b] = True, value
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
