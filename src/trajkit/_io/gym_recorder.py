"""Record validated `Rollout`s from Gymnasium vector environments (the `trajkit[gym]` extra).

Public through [`trajkit.gym`][trajkit.gym]; the module documentation there explains the
choices (phantom transitions, truncation, infos, states). In short:

* Every autoreset mode of Gymnasium >= 1.0 is handled, read from `env.metadata`. The
  NEXT_STEP phantom transition (the reset step, reward 0, action ignored) is dropped, and the
  recorder buffers real transitions per environment, so that `T` counts real transitions and
  every mode gives the same rollouts for the same episodes.
* Rollouts join up: the last row of one rollout is the first row of the next.
* Steps cut by a time limit carry `truncated = 1` and the critic's value of the true final
  observation in `final_values`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import numpy as np

from trajkit._base.types import (
    AnyArray,
    ArrayLike,
    ArrayTree,
    BoolArray,
    Float64Array,
    Int64Array,
)
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout

try:
    from gymnasium import spaces
    from gymnasium.vector import AutoresetMode, VectorEnv
except ImportError as exc:  # pragma: no cover - exercised with gymnasium hidden
    raise ImportError(
        "trajkit.gym needs Gymnasium >= 1.0 (for gymnasium.vector.AutoresetMode); "
        "install it with: pip install 'trajkit[gym]'"
    ) from exc

__all__ = ["CompletedEpisodes", "Policy", "RolloutRecorder", "StateFn"]

Policy: TypeAlias = Callable[[Any], Mapping[str, ArrayLike]]
"""A policy: a batch of observations -> model outputs, each `[B, ...]`.

The batch is what the vector env returns: an array `[B, ...]`, or for `Dict` and `Tuple`
observation spaces a dict or tuple of such arrays. The outputs must include `actions` (an
element of the action space per env: integer `[B]` for Discrete, `[B, K]` for MultiDiscrete
and MultiBinary, float `[B, ...]` for Box); `critic` (float `[B]`), `log_probs` (float `[B]`)
and `actor` (logits `[B, A]`) are recorded when present, as is any other key.
"""

StateFn: TypeAlias = Callable[[Any], ArrayLike]
"""An optional hook: the vector env -> its environments' states `[B, ...]` (stored as float32)."""

_ARRAY_SPACES: Final = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)
_BOOKKEEPING_KEYS: Final = frozenset({"final_obs", "final_info"})
_ONE_D_KEYS: Final = ("critic", "log_probs")


def _unrecordable(space: spaces.Space[Any], path: str) -> str | None:
    """Where `space` has a part trajkit cannot store as arrays (Text, Graph, ...), or `None`."""
    if isinstance(space, _ARRAY_SPACES):
        return None
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            found = _unrecordable(sub, f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            found = _unrecordable(sub, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return f"{path} is {space}"


class _Mode(enum.Enum):
    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"
    DISABLED = "Disabled"


def _parse_mode(value: object, source: str) -> _Mode:
    """Turn a `gymnasium.vector.AutoresetMode` or its value/name as a string into `_Mode`."""
    if isinstance(value, AutoresetMode):
        return _Mode(value.value)
    if isinstance(value, str):
        wanted = value.replace("_", "").replace("-", "").lower()
        for mode in _Mode:
            if wanted == mode.value.lower():
                return mode
    raise ValueError(
        f"{source} must be a gymnasium.vector.AutoresetMode (NEXT_STEP, SAME_STEP or DISABLED) "
        f"or its name as a string, got {value!r}"
    )


# ------------------------------------------------------------------------------------- infos


def _jsonable(value: Any) -> Any:
    """NumPy scalars to Python scalars and arrays to (nested) lists, recursively."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist()) if value.dtype == object else value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _is_per_env(value: Any, num_envs: int) -> bool:
    """Whether `value` holds one entry per env (an array or sequence of length B)."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1 and value.shape[0] == num_envs
    return isinstance(value, list | tuple) and len(value) == num_envs


def _env_info(vector_info: Mapping[str, Any], b: int, num_envs: int) -> dict[str, Any]:
    """Env `b`'s part of a Gymnasium vector info dict (arrays with `_key` masks, nested dicts).

    Keeps only the keys present for env `b` (mask true, or no mask), recursively.
    """
    out: dict[str, Any] = {}
    for key, value in vector_info.items():
        name = str(key)
        if name.startswith("_") and name[1:] in vector_info:
            continue  # the mask of key name[1:]
        mask = vector_info.get(f"_{name}")
        if mask is not None and not bool(np.asarray(mask)[b]):
            continue
        if isinstance(value, Mapping):
            out[name] = _env_info(value, b, num_envs)
        elif _is_per_env(value, num_envs):
            out[name] = _jsonable(value[b])
        else:
            out[name] = _jsonable(value)
    return out


# ------------------------------------------------------------------------------ the recorder


@dataclass(frozen=True)
class CompletedEpisodes:
    """Episodes that ended, with their whole returns and lengths, as Gymnasium reports them.

    The numbers are those `gymnasium.wrappers.vector.RecordEpisodeStatistics` puts in
    `info["episode"]` (undiscounted return `r` and length `l`), counted across `record()`
    calls, so an episode that spanned several rollouts has its full return. Episodes are
    ordered by the step they ended at, then by env.

    Attributes:
        returns: Undiscounted returns, float64.
        lengths: Lengths in real transitions, int64.
        envs: The env each episode ran in, int64.
        truncated: Whether each episode was cut by a time limit (else it terminated).

    Examples:
        >>> import numpy as np
        >>> done = CompletedEpisodes(
        ...     returns=np.array([12.0, 30.0]),
        ...     lengths=np.array([12, 30]),
        ...     envs=np.array([1, 0]),
        ...     truncated=np.array([False, True]),
        ... )
        >>> len(done), done.mean_return
        (2, 21.0)
    """

    returns: Float64Array = field(repr=False)
    lengths: Int64Array = field(repr=False)
    envs: Int64Array = field(repr=False)
    truncated: BoolArray = field(repr=False)

    def __len__(self) -> int:
        return int(self.returns.size)

    @property
    def mean_return(self) -> float:
        """Mean return, or NaN when no episode ended.

        Examples:
            >>> import numpy as np
            >>> e = np.zeros(0)
            >>> CompletedEpisodes(e, e.astype(int), e.astype(int), e > 0).mean_return
            nan
        """
        return float(self.returns.mean()) if self.returns.size else float("nan")

    def __repr__(self) -> str:
        return f"CompletedEpisodes(episodes={len(self)}, mean_return={self.mean_return:.6g})"


_EP_FIELDS: Final = ("returns", "lengths", "envs", "truncated")


def _no_episodes() -> CompletedEpisodes:
    return CompletedEpisodes(
        np.zeros(0, np.float64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    )


def _env_obs(batch: ArrayTree, b: int) -> ArrayTree:
    """Env `b`'s observation out of a batch (an array, or a dict/tuple of arrays)."""
    if isinstance(batch, np.ndarray):
        return batch[b]
    return _tree.map_leaves(lambda leaf: leaf[b], batch)


@dataclass(frozen=True)
class _Row:
    """One row of a rollout: what an env showed and what the policy made of it."""

    obs: ArrayTree
    done: bool
    outs: dict[str, AnyArray]
    state: AnyArray


@dataclass(frozen=True)
class _Step:
    """A real transition: a row, the reward of its action, and how the step ended."""

    row: _Row
    rew: float
    info: dict[str, Any]
    truncated: bool
    final_value: float


def _state_column(row: _Row) -> AnyArray:
    return row.state


@dataclass(frozen=True)
class _OutColumn:
    key: str

    def __call__(self, row: _Row) -> AnyArray:
        return row.outs[self.key]


class RolloutRecorder:
    """Record validated `Rollout`s of `num_steps` real transitions from a vector environment.

    The first call resets the environment (with `seed`); each later call continues where the
    last stopped: the last row of one rollout (observation, `dones` flag, model outputs) is the
    first row of the next, and episodes run on across rollouts. The policy is called on the
    batch of current observations after every reset and step, and its `actions` are sent to
    the env; under SAME_STEP and DISABLED it is called once more on steps that truncate an
    episode, on the batch with the final observations in place (always B rows).

    Rows: `obses[t]`, `model_outs[t]` (the action taken in `obses[t]` among them) and
    `dones[t]` (1 when `obses[t]` is the first of an episode, including the first reset) describe
    the same observation; `rews[t]`, `infos[t]`, `truncated[t]` and `final_values[t]` describe
    the step taken from it. Under every autoreset mode only real transitions are recorded
    (NEXT_STEP's phantom reset step is dropped), so the same episodes give the same rollout.

    Args:
        env: A `gymnasium.vector.VectorEnv`. Observations of any Box, Discrete, MultiBinary
            or MultiDiscrete space, or Dict and Tuple spaces of those (nested too), recorded
            as nested `obses`; actions of a Discrete, MultiDiscrete, MultiBinary or Box space.
            The recorder owns its stepping: do not step or reset it between calls.
        policy: Batch of observations (as the env returns them) -> mapping of model outputs
            with leading dimension B; `actions` is required, `critic` gives truncation
            bootstraps.
        info_keys: Keep only these top-level info keys (`None`: keep every key).
        seed: Seed of the first `env.reset`.
        state_fn: Optional hook returning the envs' states `[B, ...]`, called after every
            reset and step; without it `states` is empty, shape `(T+1, B, 0)`.
        autoreset_mode: Override `env.metadata["autoreset_mode"]` (an `AutoresetMode` or its
            name); needed only for envs whose metadata lacks it.

    Raises:
        TypeError: If `env` is not a `gymnasium.vector.VectorEnv` or `policy` not callable.
        ValueError: If the observation space has a part that is not an array (Text, Graph,
            Sequence, ...), the action space is not Discrete, MultiDiscrete, MultiBinary or Box,
            or the autoreset mode is missing or unknown.

    Examples:
        >>> import gymnasium as gym
        >>> import numpy as np
        >>> from trajkit.gym import RolloutRecorder
        >>> env = gym.make_vec(
        ...     "CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=10
        ... )
        >>> def policy(obs):
        ...     return {
        ...         "actions": (obs[:, 2] > 0).astype(np.int64),
        ...         "critic": obs @ np.array([0.0, 0.0, 1.0, 0.0], np.float32),
        ...     }
        >>> recorder = RolloutRecorder(env, policy, seed=0)
        >>> r = recorder.record(16)
        >>> r.num_steps, r.batch_size, r.states.shape
        (16, 2, (17, 2, 0))
        >>> r2 = recorder.record(16)
        >>> bool((r2.obses[0] == r.obses[-1]).all())
        True
        >>> env.close()
    """

    def __init__(
        self,
        env: VectorEnv[Any, Any, Any],
        policy: Policy,
        *,
        info_keys: Collection[str] | None = None,
        seed: int | None = None,
        state_fn: StateFn | None = None,
        autoreset_mode: AutoresetMode | str | None = None,
    ) -> None:
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"env must be a gymnasium.vector.VectorEnv, got {type(env).__name__}; "
                "make one with gymnasium.make_vec(...) or gymnasium.vector.SyncVectorEnv(...)"
            )
        if not callable(policy):
            raise TypeError(f"policy must be callable, got {type(policy).__name__}")
        if autoreset_mode is None:
            if "autoreset_mode" not in env.metadata:
                raise ValueError(
                    f"{env} has no 'autoreset_mode' in its metadata, so the recorder cannot "
                    "tell how it resets; pass autoreset_mode= (a gymnasium.vector.AutoresetMode)"
                )
            self._mode = _parse_mode(
                env.metadata["autoreset_mode"], "env.metadata['autoreset_mode']"
            )
        else:
            self._mode = _parse_mode(autoreset_mode, "autoreset_mode")
        obs_space = env.single_observation_space
        bad = _unrecordable(obs_space, "the observation space")
        if bad is not None:
            raise ValueError(
                f"cannot record observations from the observation space {obs_space}: {bad}, "
                "but trajkit stores observations as arrays (Box, Discrete, MultiBinary or "
                "MultiDiscrete, possibly inside Dict and Tuple spaces); flatten or drop that "
                "part first (e.g. with a gymnasium.wrappers.TransformObservation)"
            )
        act_space = env.single_action_space
        if not isinstance(act_space, _ARRAY_SPACES):
            raise ValueError(
                f"cannot record actions from the action space {act_space}: trajkit's 'actions' "
                "model output is one array per env, so the space must be Discrete, "
                "MultiDiscrete, MultiBinary or Box"
            )
        self._action_shape: tuple[int, ...] = tuple(act_space.shape or ())
        self._env = env
        self._policy = policy
        self._info_keys = None if info_keys is None else frozenset(info_keys)
        self._seed = seed
        self._state_fn = state_fn
        self._num_envs = int(env.num_envs)
        self._queues: list[deque[_Step]] = [deque() for _ in range(self._num_envs)]
        # The current row of each env, or None while NEXT_STEP's phantom step is due.
        self._pending: list[_Row | None] = [None] * self._num_envs
        self._obs: ArrayTree | None = None
        self._outs: dict[str, AnyArray] = {}
        self._out_shapes: dict[str, tuple[int, ...]] | None = None
        self._state_shape: tuple[int, ...] | None = None
        self._failure: str | None = None
        # Episode bookkeeping across record() calls, as RecordEpisodeStatistics keeps it.
        self._ep_return = np.zeros(self._num_envs, dtype=np.float64)
        self._ep_length = np.zeros(self._num_envs, dtype=np.int64)
        self._last_episodes = _no_episodes()
        self._all_episodes: list[CompletedEpisodes] = []

    # ------------------------------------------------------------------------ properties

    @property
    def env(self) -> VectorEnv[Any, Any, Any]:
        """The vector environment being recorded.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, int)})
            >>> recorder.env is env
            True
            >>> env.close()
        """
        return self._env

    @property
    def num_envs(self) -> int:
        """B, the number of environments.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, int)})
            >>> recorder.num_envs
            2
            >>> env.close()
        """
        return self._num_envs

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The autoreset mode in use, as a `gymnasium.vector.AutoresetMode`.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, int)})
            >>> recorder.autoreset_mode.name
            'NEXT_STEP'
            >>> env.close()
        """
        return AutoresetMode(self._mode.value)

    @property
    def last_episodes(self) -> CompletedEpisodes:
        """The episodes that ended within the rollout the last `record()` returned.

        Each has its whole return and length, including the steps it ran in earlier rollouts,
        as `RecordEpisodeStatistics` reports them: use these for learning curves.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, int)}, seed=0)
            >>> r = recorder.record(40)
            >>> len(recorder.last_episodes) == r.episode_stats().episodes
            True
            >>> env.close()
        """
        return self._last_episodes

    @property
    def episodes(self) -> CompletedEpisodes:
        """Every episode that ended in the rollouts recorded so far, in order.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.ones(2, int)}, seed=0)
            >>> counts = []
            >>> for _ in range(3):
            ...     _ = recorder.record(20)
            ...     counts.append(len(recorder.last_episodes))
            >>> len(recorder.episodes) == sum(counts)
            True
            >>> env.close()
        """
        if not self._all_episodes:
            return _no_episodes()
        return CompletedEpisodes(
            *(np.concatenate([getattr(e, name) for e in self._all_episodes]) for name in _EP_FIELDS)
        )

    # ---------------------------------------------------------------------- recording

    def record(self, num_steps: int) -> Rollout:
        """Step the environment until every env has `num_steps` more real transitions.

        Transitions recorded beyond `num_steps` for some envs (they run ahead of envs that
        spent a step on NEXT_STEP's phantom reset) are kept for the next call, so nothing is
        lost between rollouts.

        Args:
            num_steps: T, the number of transitions per env (0 gives a one-row rollout).

        Returns:
            A validated `Rollout` with `truncated` and `final_values` always set (zeros where
            no episode was truncated), `states` of shape `(T+1, B, 0)` unless a `state_fn`
            was given, and model outputs stacked as `[T+1, B, ...]`.

        Raises:
            TypeError: If `num_steps` is not an int.
            ValueError: If `num_steps` is negative, the policy returns no `actions`, a value
                without the leading batch dimension B, or other keys or shapes than before,
                or observations that are not one numeric array.
            RuntimeError: If an earlier call failed while stepping: the env may then be
                mid-step, so the recorder refuses to go on (a failure in the first call's
                reset, such as a policy without `actions`, can be retried).

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(
            ...     env, lambda obs: {"actions": np.zeros(len(obs), np.int64)}, seed=1
            ... )
            >>> r = recorder.record(5)
            >>> r.obses.shape, r.dones[0].tolist()
            ((6, 3, 4), [1.0, 1.0, 1.0])
            >>> env.close()
        """
        if isinstance(num_steps, bool) or not isinstance(num_steps, int | np.integer):
            raise TypeError(f"num_steps must be an int, got {type(num_steps).__name__}")
        T = int(num_steps)
        if T < 0:
            raise ValueError(f"num_steps must be >= 0, got {T}")
        if self._failure is not None:
            raise RuntimeError(
                f"this recorder failed in an earlier call ({self._failure}) and its env may be "
                "mid-step; make a new RolloutRecorder"
            )
        if self._obs is None:
            self._start()
        try:
            while not self._ready(T):
                self._advance()
        except Exception as exc:
            self._failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise
        return self._build(T)

    __call__ = record

    def _ready(self, T: int) -> bool:
        return all(
            len(queue) > T or (len(queue) == T and pending is not None)
            for queue, pending in zip(self._queues, self._pending, strict=True)
        )

    def _start(self) -> None:
        """Reset the env and call the policy; on failure nothing is kept, so a retry is safe."""
        reset_obs, _ = self._env.reset(seed=self._seed)
        obs = self._obs_batch(reset_obs)
        outs = self._call_policy(obs)
        states = self._states()
        self._pending = [
            _Row(_env_obs(obs, b), True, self._row_outs(outs, b), states[b])
            for b in range(self._num_envs)
        ]
        self._obs, self._outs = obs, outs

    def _advance(self) -> None:
        """One vector step: queue each env's real transition, drop phantom ones."""
        B = self._num_envs
        obs, rews, terms, truncs, infos = self._env.step(self._outs["actions"])
        obs_batch = self._obs_batch(obs)
        rew = np.asarray(rews, dtype=np.float64).reshape(B)
        terminated = np.asarray(terms, dtype=bool).reshape(B)
        ended = terminated | np.asarray(truncs, dtype=bool).reshape(B)
        real = np.array([row is not None for row in self._pending])
        truncated: BoolArray = ended & ~terminated & real
        has_critic = "critic" in self._outs
        final_values = np.zeros(B, dtype=np.float64)

        if self._mode is _Mode.NEXT_STEP:
            # Ended envs show their final observation now; their next step is the phantom.
            new_obs = obs_batch
            new_outs = self._call_policy(new_obs)
            if has_critic:
                final_values = np.asarray(new_outs["critic"], dtype=np.float64)
        elif self._mode is _Mode.SAME_STEP:
            if has_critic and truncated.any():
                final_values = self._critic(self._with_final_obs(obs_batch, infos, truncated))
            new_obs = obs_batch
            new_outs = self._call_policy(new_obs)
        else:  # DISABLED: the batch holds the final observations; reset the ended envs.
            if has_critic and truncated.any():
                final_values = self._critic(obs_batch)
            new_obs = obs_batch
            if ended.any():
                reset_obs, _ = self._env.reset(options={"reset_mask": ended.copy()})
                new_obs = self._obs_batch(reset_obs)
            new_outs = self._call_policy(new_obs)
        states = self._states()

        for b in range(B):
            row = self._pending[b]
            outs_b = self._row_outs(new_outs, b)
            if row is None:  # NEXT_STEP's phantom reset step: dropped, its obs starts an episode
                self._pending[b] = _Row(_env_obs(new_obs, b), True, outs_b, states[b])
                continue
            self._queues[b].append(
                _Step(
                    row=row,
                    rew=float(rew[b]),
                    info=self._info(infos, b),
                    truncated=bool(truncated[b]),
                    final_value=float(final_values[b]) if truncated[b] else 0.0,
                )
            )
            if self._mode is _Mode.NEXT_STEP and ended[b]:
                self._pending[b] = None
            else:
                self._pending[b] = _Row(_env_obs(new_obs, b), bool(ended[b]), outs_b, states[b])
        self._obs, self._outs = new_obs, new_outs

    def _build(self, T: int) -> Rollout:
        B = self._num_envs
        columns: list[list[_Step]] = [[queue.popleft() for _ in range(T)] for queue in self._queues]
        last: list[_Row] = []
        for b, queue in enumerate(self._queues):
            pending = self._pending[b]
            if queue:
                last.append(queue[0].row)
            elif pending is not None:
                last.append(pending)
            else:  # pragma: no cover - _ready() guarantees a real last row
                raise RuntimeError("internal error: no last row")
        rows = [
            [step.row for step in column] + [end] for column, end in zip(columns, last, strict=True)
        ]

        self._track_episodes(columns, rows)

        def stack(column: Callable[[_Row], AnyArray]) -> AnyArray:
            """Stack one column of every row into a time-major `[T+1, B, ...]` array."""
            return np.stack([np.stack([column(row) for row in env_rows]) for env_rows in rows], 1)

        outs = {key: stack(_OutColumn(key)) for key in self._outs}
        structure = self._obs
        obs_leaves = [[_tree.leaves(row.obs) for row in env_rows] for env_rows in rows]
        obses = _tree.unflatten(
            structure,
            [
                np.stack([np.stack([leaves[i] for leaves in env]) for env in obs_leaves], 1)
                for i in range(len(_tree.leaves(structure)))
            ],
        )
        return Rollout(
            states=stack(_state_column).astype(np.float32, copy=False),
            obses=obses,
            rews=np.array([[s.rew for s in column] for column in columns]).T.reshape(T, B),
            dones=np.array([[row.done for row in env_rows] for env_rows in rows]).T,
            infos=[[columns[b][t].info for b in range(B)] for t in range(T)],
            model_outs=outs,
            truncated=np.array([[s.truncated for s in c] for c in columns]).T.reshape(T, B),
            final_values=np.array([[s.final_value for s in c] for c in columns]).T.reshape(T, B),
            copy=False,
        )

    def _track_episodes(self, columns: list[list[_Step]], rows: list[list[_Row]]) -> None:
        """Add the rollout's rewards to the running episodes; log the ones that end in it."""
        ended: list[tuple[int, int, float, int, bool]] = []  # (t, b, return, length, truncated)
        for b, (column, env_rows) in enumerate(zip(columns, rows, strict=True)):
            ret, length = float(self._ep_return[b]), int(self._ep_length[b])
            for t, step in enumerate(column):
                ret += step.rew
                length += 1
                if env_rows[t + 1].done:
                    ended.append((t, b, ret, length, step.truncated))
                    ret, length = 0.0, 0
            self._ep_return[b], self._ep_length[b] = ret, length
        ended.sort(key=lambda e: (e[0], e[1]))
        self._last_episodes = CompletedEpisodes(
            np.array([e[2] for e in ended], dtype=np.float64),
            np.array([e[3] for e in ended], dtype=np.int64),
            np.array([e[1] for e in ended], dtype=np.int64),
            np.array([e[4] for e in ended], dtype=bool),
        )
        self._all_episodes.append(self._last_episodes)

    # ---------------------------------------------------------------------------- helpers

    def _obs_batch(self, obs: Any) -> ArrayTree:
        """The env's observations: a numeric `[B, ...]` array (a copy), or a dict/tuple of them."""
        tree = _tree.normalize(obs, "the env's observations") if not _tree.is_leaf(obs) else obs
        return _tree.map_with_path(self._obs_leaf, tree)

    def _obs_leaf(self, path: _tree.Path, value: Any) -> AnyArray:
        where = _tree.format_path("the env's observations", path)
        try:
            batch = np.array(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where} cannot be stacked into one array: {exc}") from exc
        if batch.dtype.kind not in "biuf" or batch.ndim < 1 or batch.shape[0] != self._num_envs:
            raise ValueError(
                f"{where} must stack into one numeric array with leading dimension "
                f"B={self._num_envs}, got {type(value).__name__} -> array of dtype "
                f"{batch.dtype} and shape {batch.shape}"
            )
        return batch

    def _call_policy(self, obs: ArrayTree) -> dict[str, AnyArray]:
        """Call the policy and check its outputs: a mapping with `actions`, all `[B, ...]`."""
        B = self._num_envs
        raw = self._policy(obs)
        if not isinstance(raw, Mapping):
            raise TypeError(
                "the policy must return a mapping of model outputs (e.g. {'actions': ...}), "
                f"got {type(raw).__name__}"
            )
        if "actions" not in raw:
            raise ValueError(
                "the policy's outputs have no 'actions' key (keys: "
                f"{sorted(map(str, raw))}); return the actions to take as outputs['actions']"
            )
        outs: dict[str, AnyArray] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                raise ValueError(f"the policy's output keys must be strings, got {key!r}")
            array = np.array(value)
            if array.ndim == 0 or array.shape[0] != B:
                raise ValueError(
                    f"the policy's output {key!r} has shape {array.shape}, expected leading "
                    f"dimension B={B} (one row per env, for a batch of {B} observations)"
                )
            if key in _ONE_D_KEYS and array.ndim != 1:
                raise ValueError(
                    f"the policy's output {key!r} has shape {array.shape}, expected ({B},)"
                )
            if key == "actions" and array.shape[1:] != self._action_shape:
                raise ValueError(
                    f"the policy's output 'actions' has shape {array.shape}, expected "
                    f"{(B, *self._action_shape)}: one element of the action space "
                    f"{self._env.single_action_space} per env"
                )
            outs[key] = array
        shapes = {key: array.shape[1:] for key, array in outs.items()}
        if self._out_shapes is None:
            self._out_shapes = shapes
        elif shapes != self._out_shapes:
            raise ValueError(
                "the policy's outputs changed between calls: expected keys and per-env shapes "
                f"{self._out_shapes}, got {shapes}"
            )
        return outs

    def _critic(self, obs: ArrayTree) -> Float64Array:
        return np.asarray(self._call_policy(obs)["critic"], dtype=np.float64)

    def _with_final_obs(
        self, obs: ArrayTree, infos: Mapping[str, Any], which: BoolArray
    ) -> ArrayTree:
        """The batch `obs` with the rows of `which` replaced by SAME_STEP's `final_obs`."""
        final_obs = infos.get("final_obs")
        mask = infos.get("_final_obs")
        if final_obs is None or mask is None or not np.asarray(mask)[which].all():
            raise RuntimeError(
                "a SAME_STEP env truncated an episode without reporting its final observation "
                "in infos['final_obs'] (mask infos['_final_obs'])"
            )
        batch = _tree.map_leaves(np.copy, obs)
        pairs = _tree.flatten(batch)
        for b in np.flatnonzero(which):
            final = final_obs[b]
            if pairs[0][0]:  # nested: env b's final observation is a dict/tuple of its own
                final = _tree.normalize(final, "infos['final_obs']")
            for path, leaf in pairs:
                leaf[b] = _tree.get_leaf(final, path) if path else final
        return batch

    def _states(self) -> AnyArray:
        B = self._num_envs
        if self._state_fn is None:
            return np.zeros((B, 0), dtype=np.float32)
        states = np.array(self._state_fn(self._env), dtype=np.float32)
        if states.ndim < 1 or states.shape[0] != B:
            raise ValueError(f"state_fn returned shape {states.shape}, expected ({B}, ...)")
        if self._state_shape is None:
            self._state_shape = states.shape
        elif states.shape != self._state_shape:
            raise ValueError(
                f"state_fn returned shape {states.shape}, expected {self._state_shape} as before"
            )
        return states

    @staticmethod
    def _row_outs(outs: Mapping[str, AnyArray], b: int) -> dict[str, AnyArray]:
        return {key: array[b] for key, array in outs.items()}

    def _info(self, infos: Mapping[str, Any], b: int) -> dict[str, Any]:
        """Env `b`'s info for this step: JSON-compatible, final_info merged, keys filtered."""
        if self._info_keys is not None and not self._info_keys:
            return {}
        B = self._num_envs
        info = {
            key: value
            for key, value in _env_info(infos, b, B).items()
            if key not in _BOOKKEEPING_KEYS
        }
        final_info = infos.get("final_info")
        final_mask = infos.get("_final_info")
        if isinstance(final_info, Mapping) and final_mask is not None and np.asarray(final_mask)[b]:
            info.update(_env_info(final_info, b, B))  # SAME_STEP: the ending step's own info
        if self._info_keys is not None:
            info = {key: value for key, value in info.items() if key in self._info_keys}
        return info
