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
* Every value the env and the policy return is checked through the rule table
  (`trajkit._models.rules`) as it is logged, so a refused value stops the recording at the
  step it appeared, and `_build` changes nothing until the rollout is built.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Collection, Mapping, Sequence
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
from trajkit._models.rules import FIELD_RULES, Rule, conform, conform_into, output_rule

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
_F32_MAX: Final = float(np.finfo(np.float32).max)
_I32: Final = np.iinfo(np.int32)
_OBS_RULE: Final = FIELD_RULES["obses"]
_REWS_RULE: Final = FIELD_RULES["rews"]
_FLAG_RULE: Final = FIELD_RULES["dones"]
_STATES_RULE: Final = FIELD_RULES["states"]


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


def _space_leaves(space: spaces.Space[Any], path: _tree.Path = ()) -> list[tuple[_tree.Path, Any]]:
    """The array spaces inside `space` with their paths, in the order the space lists them."""
    if isinstance(space, spaces.Dict):
        return [
            pair for key, sub in space.spaces.items() for pair in _space_leaves(sub, (*path, key))
        ]
    if isinstance(space, spaces.Tuple):
        return [
            pair for i, sub in enumerate(space.spaces) for pair in _space_leaves(sub, (*path, i))
        ]
    return [(path, space)]


@dataclass(frozen=True)
class _ObsLeaf:
    """One array space of the observation space, and what its batches must be."""

    path: _tree.Path
    name: str  # as messages write it: `obses`, `obses['image']`
    space: spaces.Space[Any]
    shape: tuple[int, ...]  # `(B, *space.shape)`
    dtype: np.dtype[Any]  # the space's dtype, which the batch is stored in


@dataclass(frozen=True)
class _Output:
    """One model output as the first policy call fixed it: stored shape and dtype, and rule.

    `fits` is a cheap test that an array of exactly `shape` and `dtype` breaks no rule (None:
    nothing to test); anything else goes through the rule table, which says what is wrong.
    """

    name: str  # `model_outs['critic']`
    rule: Rule
    shape: tuple[int, ...]  # `(B, ...)`
    dtype: np.dtype[Any]
    fits: Callable[[AnyArray], bool] | None


def _all_finite(array: AnyArray) -> bool:
    """Whether every value of a float `array` is finite: one sum (NaN and inf carry over).

    A sum that overflows says False for finite values; the caller's slow path, the rule
    table, then decides. Cheaper than `isfinite` on the small arrays of one step.
    """
    return math.isfinite(np.add.reduce(array, axis=None))


def _within_float32(array: AnyArray) -> bool:
    """Whether every value of a float `array` is finite and within float32's range."""
    return bool(
        np.maximum.reduce(np.abs(array), axis=None, initial=0.0) <= _F32_MAX
    )  # NaN fails too


def _fits_test(
    rule: Rule, dtype: np.dtype[Any], bounds: tuple[int, int] | None
) -> Callable[[AnyArray], bool] | None:
    """The cheap test of `_Output.fits` for arrays of `dtype` under `rule`."""
    if dtype.kind == "f":
        if rule.dtype != "real" and dtype.itemsize > 4:
            return _within_float32  # the rollout stores float32: no overflow to inf
        return _all_finite if rule.finite else None
    if bounds is None:
        return None
    lo, hi = bounds
    if lo == 0 and dtype.kind == "i":  # negative values are huge as unsigned: one reduction
        unsigned = np.dtype(f"u{dtype.itemsize}")
        return lambda array: bool(
            np.maximum.reduce(array.view(unsigned), axis=None, initial=0) <= hi
        )
    minimum, maximum = np.minimum.reduce, np.maximum.reduce
    return lambda array: bool(
        lo <= minimum(array, axis=None, initial=lo) and maximum(array, axis=None, initial=hi) <= hi
    )


def _first_bad_env(check: Callable[[Any], object], value: Any) -> int | None:
    """The first env (row of `value`) that `check` refuses on its own, or None."""
    try:
        rows = len(value)
    except TypeError:
        return None
    for b in range(rows):
        try:
            check(value[b : b + 1])
        except (ValueError, TypeError, IndexError):
            return b
    return None


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

    Each return is the env's own where it reports one: the `r` that
    `RecordEpisodeStatistics` (the vector wrapper, or the per-env one inside the vector env)
    puts in `info["episode"]` on the step that ended the episode, so reward wrappers outside
    it (`NormalizeReward`, scaling, clipping) do not change it. Without one, the return is
    the undiscounted sum of the recorded rewards, counted across `record()` calls (so an
    episode that spanned several rollouts has its full return, equal to the wrapper's up to
    float64 rounding). Lengths are counted by the recorder, in real transitions, as the
    wrapper's `l`. Episodes are ordered by the step they ended at, then by env.

    Attributes:
        returns: Undiscounted returns, float64: the env's `info["episode"]["r"]` where
            present, else the sum of the recorded rewards.
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


class _Log:
    """Growable time-major logs `[capacity, B, ...]` of whole vector steps, one per field.

    Each call of `append` writes one batch per field at the next index: a plain row write,
    whatever the envs are doing. Which entries belong to which env's timeline is logged too
    (as masks), and sorted out once per rollout, by `RolloutRecorder._build`. The live
    entries are `start:end` of every array: `drop` only moves `start`, and they move to the
    front (or into larger arrays) only when an append finds the arrays full.
    """

    def __init__(self, dtypes: Mapping[str, type[Any]]) -> None:
        self.arrays: dict[str, AnyArray] = {}
        self.start = 0
        self.end = 0
        self._capacity = 64
        self._dtypes = dtypes  # fields stored in a fixed dtype (others: the first value's)
        self._names: Sequence[str] = ()  # the fields of the last append, in order
        self._targets: list[AnyArray] = []  # their arrays

    @property
    def size(self) -> int:
        """The number of live entries."""
        return self.end - self.start

    def fields(self) -> dict[str, AnyArray]:
        """The live entries of every field, `[size, B, ...]` (views)."""
        return {name: array[self.start : self.end] for name, array in self.arrays.items()}

    def append(self, names: Sequence[str], values: Sequence[AnyArray]) -> None:
        """Write `values[i]` as the next entry of field `names[i]`, for every i.

        The usual call passes the very `names` list of the call before (checked by identity,
        the cheapest check there is), and only writes rows.
        """
        k = self.end
        if names is self._names and k < self._capacity:
            for target, value in zip(self._targets, values, strict=True):
                target[k] = value  # the usual append: same fields, room left
            self.end = k + 1
            return
        if k == self._capacity:
            self._make_room()
            k = self.end
        for name, value in zip(names, values, strict=True):
            array = self.arrays.get(name)
            if array is None:
                dtype = self._dtypes.get(name, value.dtype)
                array = self.arrays[name] = np.zeros((self._capacity, *value.shape), dtype)
            array[k] = value
        self.end = k + 1
        self._names = names
        self._targets = [self.arrays[name] for name in names]

    def column(self, name: str, shape: tuple[int, ...]) -> AnyArray:
        """The array of field `name` (of a fixed dtype), made `[capacity, *shape]` if need be.

        For fields that are not appended entry by entry but filled in later, over many entries
        at once: they grow and move with the others.
        """
        array = self.arrays.get(name)
        if array is None:
            array = self.arrays[name] = np.zeros((self._capacity, *shape), self._dtypes[name])
        return array

    def _make_room(self) -> None:
        """Move the live entries to the front, into arrays twice as large if they fill half."""
        live = self.size
        if 2 * live > self._capacity:
            self._capacity *= 2
        for name, array in self.arrays.items():
            if array.shape[0] != self._capacity:
                moved = np.zeros((self._capacity, *array.shape[1:]), array.dtype)
                moved[:live] = array[self.start : self.end]
                self.arrays[name] = moved
            else:
                array[:live] = array[self.start : self.end]  # NumPy handles the overlap
        self.start, self.end = 0, live

    def drop(self, count: int) -> None:
        """Forget the first `count` live entries."""
        self.start += count


def _positions(mask: BoolArray, count: int) -> Int64Array:
    """For each env (column of `mask`), the indices of its first `count` True entries.

    Every column must hold at least `count` of them. `[count, B]`.
    """
    envs, entries = mask.T.nonzero()  # env by env, entries in order within each
    firsts = envs.searchsorted(np.arange(mask.shape[1]))  # where each env's list starts
    positions: Int64Array = entries[firsts + np.arange(count)[:, None]]
    return positions


def _rows_and_steps(
    ended: BoolArray, pending: BoolArray, next_step: bool
) -> tuple[BoolArray, BoolArray]:
    """Which logged entries show rows (`new`) and which are real transitions (`real`), `[K, B]`.

    Worked out from the entries' ending flags (`ended`, `[K, B]`) and `pending`, the `new` of
    the entry before them, by the recurrence the vector env follows, here over whole arrays:

    * `real[k] = new[k - 1]`: a step is a real transition where the env had a row to act from
      (`real[0] = pending`);
    * under NEXT_STEP, `new[k] = not (ended[k] and real[k])`: an env whose real transition
      ended an episode shows its final observation, which is no row, and its next step is the
      phantom reset; under the other modes every entry shows a row of every env.

    So in a run of consecutive endings (in one column), rows alternate, starting with the
    opposite of the entry before the run: a row (the entry is not an ending) or `pending`.
    """
    if not next_step:
        new = np.ones_like(ended)
    else:
        entry = np.arange(len(ended))[:, None]
        last_clear = np.maximum.accumulate(np.where(ended, -1, entry), axis=0)  # -1: none yet
        before = (last_clear >= 0) | pending  # `new` of the entry before the run
        new = ~ended | (before ^ ((entry - last_clear) & 1).astype(bool))
    real = np.concatenate([pending[None], new[:-1]])
    return new, real


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
        self._action_dtype: np.dtype[Any] = np.dtype(act_space.dtype)
        self._env = env
        self._policy = policy
        self._info_keys = None if info_keys is None else frozenset(info_keys)
        self._seed = seed
        self._state_fn = state_fn
        self._num_envs = int(env.num_envs)
        # Every batch of observations is checked leaf by leaf against the space, in its order.
        pairs = _space_leaves(obs_space)
        if not pairs:
            raise ValueError(
                f"cannot record observations from the observation space {obs_space}: it holds "
                "no array space"
            )
        self._obs_leaves = [
            _ObsLeaf(
                path,
                _tree.format_path("obses", path),
                sub,
                (self._num_envs, *sub.shape),
                np.dtype(sub.dtype),
            )
            for path, sub in pairs
        ]
        self._obs_paths = [leaf.path for leaf in self._obs_leaves]
        self._obs_structure = None if pairs[0][0] == () else _tree.unflatten_paths(pairs)
        self._step = 0  # env.step calls so far (0: the first reset), named in messages
        # The log of whole vector steps (and the first reset) not yet returned: for each,
        # the rows it showed (observations, model outputs, states) and the step itself
        # (reward, raw ending flags, ...). `row_new` marks the envs for which an entry shows
        # a row of the rollout, `real` the real transitions: both follow from the ending
        # flags, and are filled in over many entries at once (`_settle`), not step by step.
        # Env b's t-th row is the t-th marked entry of its column, and step t (the action
        # taken from row t) the entry right after it.
        self._log = _Log(
            {
                "row_new": np.bool_,
                "state": np.float32,
                "real": np.bool_,
                "rew": np.float64,
                "terminated": np.bool_,
                "truncs": np.bool_,
                "final_value": np.float64,
            }
        )
        self._fields: list[str] = []  # the log's fields, in the order `_append` writes them
        self._infos: dict[tuple[int, int], dict[str, Any]] = {}  # (step entry, env) -> info
        # (step entry, env) -> the return the env reported in info["episode"]["r"]
        self._reported: dict[tuple[int, int], float] = {}
        self._settled = 0  # the live entries whose `row_new` and `real` are filled in
        self._count = np.zeros(self._num_envs, dtype=np.int64)  # real steps settled per env
        # Whether env b has a current row after the last settled entry (False while
        # NEXT_STEP's phantom step is due, and before the first reset).
        self._pending = np.zeros(self._num_envs, dtype=bool)
        self._obs: ArrayTree | None = None
        self._zeros = np.zeros(self._num_envs, dtype=np.float64)
        self._everyone = np.ones(self._num_envs, dtype=bool)
        self._outs: dict[str, AnyArray] = {}
        self._out_plan: dict[str, _Output] | None = None  # fixed by the first policy call
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

        Each has its whole return and length, including the steps it ran in earlier rollouts:
        use these for learning curves. Returns are the env's own `info["episode"]["r"]`
        (from `RecordEpisodeStatistics`) where the env reports them, so they stay in the
        env's units under `NormalizeReward`; else the sums of the recorded rewards (see
        [`CompletedEpisodes`][trajkit.gym.CompletedEpisodes]).

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
                without the leading batch dimension B, or other keys or shapes than before;
                or if a value breaks a rule of the rollout (observations not of the space's
                shape, not finite or not fitting its dtype; rewards not finite; flags not
                0/1; outputs breaking their rule). The message starts as the constructor's
                (`obses must be finite, ...`) and names the env, the step (the k-th
                `env.step` call since the first reset) and the space.
            RuntimeError: If an earlier call failed after stepping the env: it cannot be
                taken back, so the recorder refuses to go on, repeating the first error (a
                failure in the first call's reset, such as a policy without `actions`, can
                be retried, and records the same steps).

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
                # No env can be ready before T - min(count) more steps: skip the checks.
                for _ in range(max(1, T - int(self._count.min()))):
                    self._advance()
            rollout, commit = self._build(T)
        except Exception as exc:
            # The env has been stepped (and what it returned was checked as it came, so a
            # value trajkit refuses stops the recording at the step it appeared): there is no
            # going back to the state before this call, so no going on either.
            self._failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise
        commit()
        return rollout

    __call__ = record

    def _ready(self, T: int) -> bool:
        """Whether every env has T real steps logged, and its row T (not a phantom due)."""
        self._settle()
        count, pending = self._count, self._pending
        return bool(np.all((count > T) | ((count == T) & pending)))

    def _start(self) -> None:
        """Reset the env and call the policy; on failure nothing is kept, so a retry is safe."""
        self._step = 0
        reset_obs, _ = self._env.reset(seed=self._seed)
        obs = self._obs_batch(reset_obs)
        outs = self._call_policy(obs)
        states = self._states()
        nobody = ~self._everyone
        zeros = self._zeros if self._mode is not _Mode.NEXT_STEP else None
        self._append(obs, outs, states, self._zeros, nobody, nobody, zeros)
        self._obs, self._outs = obs, outs

    def _settle(self) -> None:
        """Fill in `row_new` and `real` for the entries logged since the last call.

        One pass over whole arrays (`_rows_and_steps`) instead of a few small operations per
        step; it also counts each env's real steps and carries `_pending` on.
        """
        log = self._log
        start, stop = log.start + self._settled, log.end
        if start == stop:
            return
        arrays, B = log.arrays, (self._num_envs,)
        ended = np.logical_or(arrays["terminated"][start:stop], arrays["truncs"][start:stop])
        new, real = _rows_and_steps(ended, self._pending, self._mode is _Mode.NEXT_STEP)
        log.column("row_new", B)[start:stop] = new
        log.column("real", B)[start:stop] = real
        self._count += real.sum(axis=0)
        self._pending = new[-1].copy()
        self._settled = log.size

    def _append(
        self,
        obs: ArrayTree,
        outs: Mapping[str, AnyArray],
        states: AnyArray | None,
        rew: AnyArray,
        terminated: AnyArray,
        truncs: AnyArray,
        final_values: AnyArray | None = None,
    ) -> None:
        """Log one entry: the rows shown (and which are new), and the step that showed them.

        The first entry fixes the log's fields (`self._fields`), named here in the order of
        the values; `outs` keeps the keys of the first call, in that order (`_call_policy`
        sees to it), and the other parts are there every time or never.
        """
        values = [rew, terminated, truncs]
        leaves = [obs] if type(obs) is np.ndarray else _tree.leaves(obs)
        values.extend(leaves)
        values.extend(outs.values())
        if states is not None:
            values.append(states)
        if final_values is not None:
            values.append(final_values)
        if not self._fields:
            self._fields = [
                *("rew", "terminated", "truncs"),
                *(f"obs{i}" for i in range(len(leaves))),
                *(f"out:{key}" for key in outs),
                *(["state"] if states is not None else []),
                *(["final_value"] if final_values is not None else []),
            ]
        self._log.append(self._fields, values)

    def _advance(self) -> None:
        """One vector step: log what the env and policy returned.

        Only what the next step needs is worked out here; which entries are rows and real
        transitions (`_settle`), and `dones`, truncation, final values and episode sums
        (`_build`) follow from the raw flags and rewards logged here, over whole arrays.
        """
        B = self._num_envs
        self._step += 1
        obs, rews, terms, truncs, infos = self._env.step(self._outs["actions"])
        new_obs = self._obs_batch(obs)
        per_env = (B,)
        if type(terms) is not np.ndarray or terms.shape != per_env or terms.dtype != np.bool_:
            terms = self._flags(terms, "terminated")
        if type(truncs) is not np.ndarray or truncs.shape != per_env or truncs.dtype != np.bool_:
            truncs = self._flags(truncs, "truncated")
        if (
            type(rews) is not np.ndarray
            or rews.shape != per_env
            or rews.dtype != np.float64
            or not _within_float32(rews)
        ):
            rews = self._rewards(rews)

        final_values = None  # NEXT_STEP's are in the log already: the critic's outputs
        if self._mode is _Mode.NEXT_STEP:
            # Ended envs show their final observation now, and their next step is the
            # phantom reset (`_settle` tells these entries apart).
            new_outs = self._call_policy(new_obs)
        else:
            # Every step is a real transition of every env under these modes.
            final_values = self._zeros
            if "critic" in self._outs and truncs.any():
                truncated = np.logical_and(truncs, np.logical_not(terms))
                if truncated.any():
                    if self._mode is _Mode.SAME_STEP:
                        final_obs = self._with_final_obs(new_obs, infos, truncated)
                    else:  # DISABLED: the batch holds the final observations
                        final_obs = new_obs
                    final_values = self._critic(final_obs)
            if self._mode is _Mode.DISABLED:
                ended = np.logical_or(terms, truncs)
                if ended.any():
                    reset_obs, _ = self._env.reset(options={"reset_mask": ended})
                    new_obs = self._obs_batch(reset_obs)
            new_outs = self._call_policy(new_obs)
        states = None if self._state_fn is None else self._states()

        if infos:
            entry = self._log.size
            if self._keeps_infos(infos):
                # Every env's, phantom steps' too: `_build` takes only real transitions' infos.
                for b in range(B):
                    info = self._info(infos, b)
                    if info:
                        self._infos[entry, b] = info
            if "episode" in infos or "final_info" in infos:
                for b, value in self._episode_returns(infos).items():
                    self._reported[entry, b] = value
        self._append(new_obs, new_outs, states, rews, terms, truncs, final_values)
        self._obs, self._outs = new_obs, new_outs

    def _keeps_infos(self, infos: Mapping[str, Any]) -> bool:
        """Whether this step's vector info can hold anything the rollout keeps."""
        if self._info_keys is not None and not self._info_keys:
            return False
        for key, value in infos.items():
            name = str(key)
            if name.startswith("_") and name[1:] in infos:
                continue  # a mask
            if name not in _BOOKKEEPING_KEYS or (name == "final_info" and value):
                return True
        return False

    def _build(self, T: int) -> tuple[Rollout, Callable[[], None]]:
        """The rollout of the next T steps, and the function that moves the recorder past it.

        Nothing of the recorder changes until the rollout is built (`_settle` only fills in
        what the logged flags imply), so a failure here leaves it as it was.
        """
        self._settle()
        B, log = self._num_envs, self._log
        fields = log.fields()
        row_at = _positions(fields["row_new"], T + 1)  # [T+1, B]
        step_at = row_at[:T] + 1  # [T, B]: step t is the entry after row t's
        envs = np.arange(B)
        real = fields["real"]
        ended = np.logical_or(fields["terminated"], fields["truncs"])
        # A row starts an episode where the step that showed it ended one, or was a phantom.
        dones = np.less_equal(real, ended)[row_at, envs].astype(np.float32)
        # The steps of this rollout and later ones: those after the entry of its row 0.
        entry = np.arange(log.size)[:, None]
        counted = real & (entry > row_at[0])
        over = ended & counted  # an episode ended at this entry
        returns, lengths = self._episode_sums(counted, fields["rew"], over)
        # NEXT_STEP's final value is the critic's output on the same step's observations.
        final_value = fields.get("final_value", fields.get("out:critic"))
        if final_value is None:  # NEXT_STEP without a critic: nothing to bootstrap from
            final_value = np.zeros_like(real)

        def at_steps(array: AnyArray, dtype: type[Any]) -> AnyArray:
            return array[step_at, envs].astype(dtype, copy=False)  # [T, B]

        rows = row_at + log.start  # the rows' entries in the log's arrays

        def at_rows(name: str) -> AnyArray:
            return log.arrays[name][rows, envs]  # [T+1, B, ...]

        # Every gathered step is real, so an ending that is not a termination is a truncation.
        step_ended = at_steps(ended, bool)
        truncated = step_ended & ~at_steps(fields["terminated"], bool)
        t_end, b_end = step_ended.nonzero()  # in (t, b) order
        episode_returns = at_steps(returns, np.float64)[t_end, b_end]
        if self._reported:  # the env's own numbers (RecordEpisodeStatistics) where it gave them
            for i, (t, b) in enumerate(zip(t_end.tolist(), b_end.tolist(), strict=True)):
                reported = self._reported.get((int(step_at[t, b]), b))
                if reported is not None:
                    episode_returns[i] = reported
        episodes = CompletedEpisodes(
            episode_returns,
            at_steps(lengths, np.int64)[t_end, b_end],
            b_end.astype(np.int64),
            truncated[t_end, b_end],
        )

        infos = None
        kept = {kb: info for kb, info in self._infos.items() if real[kb]}  # no phantom steps'
        if kept:
            infos = [[kept.get((int(step_at[t, b]), b), {}) for b in range(B)] for t in range(T)]
        leaves = [at_rows(f"obs{i}") for i in range(len(self._obs_leaves))]
        states = np.zeros((T + 1, B, 0), np.float32)
        if self._state_fn is not None:
            states = at_rows("state")
        rollout = Rollout(
            states=states,
            obses=leaves[0]
            if self._obs_structure is None
            else _tree.unflatten(self._obs_structure, leaves),
            rews=at_steps(fields["rew"], np.float64),
            dones=dones,
            infos=infos,
            model_outs={key: at_rows("out:" + key) for key in self._outs},
            truncated=truncated,
            final_values=np.where(truncated, at_steps(final_value, np.float64), 0.0),
            copy=False,
        )
        # Row T is the next rollout's row 0; every step up to its entry has been used (or
        # was a phantom). The episodes running on carry their sums into the next rollout.
        first = row_at[T]
        at_first = first, envs

        def commit() -> None:
            self._last_episodes = episodes
            self._all_episodes.append(episodes)
            self._ep_return = np.where(over[at_first], 0.0, returns[at_first])
            self._ep_length = np.where(over[at_first], 0, lengths[at_first])
            fields["row_new"][entry < first] = False
            drop = int(first.min())
            # Infos and reported returns of steps after row T stay, for the next rollouts.
            self._infos = {(k - drop, b): info for (k, b), info in kept.items() if k > first[b]}
            self._reported = {
                (k - drop, b): value for (k, b), value in self._reported.items() if k > first[b]
            }
            log.drop(drop)
            self._settled -= drop
            self._count -= T

        return rollout, commit

    def _episode_sums(
        self, real: BoolArray, rew: Float64Array, over: BoolArray
    ) -> tuple[Float64Array, Int64Array]:
        """Return and length of each env's episode so far, after each logged entry `[K, B]`.

        Counted as `RecordEpisodeStatistics` counts them (real transitions, undiscounted
        rewards), from the sums carried over from earlier rollouts; `over` marks the entries
        whose episode ended there (the entry itself still counts in that episode).
        """
        K, B = real.shape
        sums = np.where(real, rew, 0.0).cumsum(axis=0)
        counts = real.cumsum(axis=0, dtype=np.int64)
        # For each entry, the last earlier entry whose episode ended (-1 if none).
        entry = np.arange(K)[:, None]
        last_over = np.maximum.accumulate(np.where(over, entry, -1), axis=0)
        before = np.concatenate([np.full((1, B), -1), last_over[:-1]])
        envs = np.arange(B)
        began = before >= 0
        returns = sums - np.where(began, sums[before, envs], -self._ep_return)
        lengths = counts - np.where(began, counts[before, envs], -self._ep_length)
        return returns, lengths

    # ---------------------------------------------------------------------------- helpers

    def _where(self, env: int | None, space: object = None) -> str:
        """Where a refused value came from, for messages: env, step and space."""
        step = f"step {self._step} of the recording" + (
            " (the first reset)" if self._step == 0 else ""
        )
        where = step if env is None else f"env {env}, {step}"
        return where if space is None else f"{where}; space {space}"

    def _located(
        self, check: Callable[[Any], AnyArray], value: Any, space: object = None
    ) -> AnyArray:
        """`check(value)`; a refusal's message gets the env, the step and the space appended.

        The rule table's message comes first, unchanged (`obses must be finite, ...`), so
        that every door's messages start alike.
        """
        try:
            return check(value)
        except ValueError as exc:
            env = _first_bad_env(check, value)
            raise ValueError(f"{exc} ({self._where(env, space)})") from None

    def _obs_batch(self, obs: Any) -> ArrayTree:
        """The env's observations, checked against the observation space leaf by leaf.

        A batch is `[B, *space.shape]` of the space's dtype exactly: nothing is broadcast,
        and a value is converted to the space's dtype only where no value changes (300 in
        a uint8 space, -1.7 in an integer one, 1e300 in a float32 one are refused), then
        checked by the `obses` rule (finite). A NumPy batch of the right shape and dtype is
        used as it is (the log copies it into place). For Dict and Tuple spaces, the batch
        is a dict or tuple of such arrays, rebuilt in the space's order.
        """
        leaves = self._obs_leaves
        if self._obs_structure is None:
            return self._obs_leaf(leaves[0], obs)
        tree = _tree.normalize(obs, "obses") if not _tree.is_leaf(obs) else obs
        pairs = _tree.flatten(tree)
        if [path for path, _ in pairs] != self._obs_paths:
            pairs = self._by_space(tree)
        return _tree.unflatten(
            self._obs_structure,
            [self._obs_leaf(leaf, value) for leaf, (_, value) in zip(leaves, pairs, strict=True)],
        )

    def _by_space(self, tree: Any) -> list[tuple[_tree.Path, Any]]:
        """The leaves of `tree` at the observation space's paths (a dict in another order)."""
        space = self._env.single_observation_space
        found = set(_tree.paths(tree))
        missing = [leaf.name for leaf in self._obs_leaves if leaf.path not in found]
        extra = [_tree.format_path("obses", p) for p in found - set(self._obs_paths)]
        if missing or extra:
            parts = [f"missing {', '.join(missing)}"] if missing else []
            if extra:
                parts.append(f"not in the space: {', '.join(sorted(extra))}")
            raise ValueError(
                f"obses must have the structure of the observation space: {'; '.join(parts)} "
                f"({self._where(None, space)})"
            )
        return [(leaf.path, _tree.get_leaf(tree, leaf.path)) for leaf in self._obs_leaves]

    def _obs_leaf(self, leaf: _ObsLeaf, value: Any) -> AnyArray:
        if (
            type(value) is np.ndarray
            and value.dtype == leaf.dtype
            and value.shape == leaf.shape
            and (value.dtype.kind != "f" or _all_finite(value))
        ):
            return value  # the common case: nothing to convert, nothing to refuse
        dtype, name = leaf.dtype, leaf.name

        def check(v: Any) -> AnyArray:
            return conform_into(_OBS_RULE, dtype, v, name, axes="b")

        array = self._located(check, value, leaf.space)
        if array.shape != leaf.shape:
            raise ValueError(
                f"{name} must have shape {leaf.shape}: B={self._num_envs} observations of the "
                f"space's shape {leaf.shape[1:]}, got shape {array.shape} "
                f"({self._where(None, leaf.space)})"
            )
        return array

    def _flags(self, value: Any, name: str) -> AnyArray:
        """The env's `terminated` or `truncated` flags as a bool array `[B]`, checked (0/1)."""

        def check(v: Any) -> AnyArray:
            return conform_into(_FLAG_RULE, np.dtype(np.bool_), v, name, axes="b")

        array = self._located(check, value)
        if array.shape != (self._num_envs,):
            raise ValueError(
                f"{name} must hold one flag per env, shape ({self._num_envs},), got shape "
                f"{array.shape} ({self._where(None)})"
            )
        return array

    def _rewards(self, value: Any) -> Float64Array:
        """The env's rewards as float64 `[B]`, checked by the `rews` rule.

        Checked as the rollout stores them (float32: finite, no overflow to inf); kept in
        float64 for the episode sums.
        """

        def check(v: Any) -> AnyArray:
            return conform(_REWS_RULE, v, "rews", copy=False, axes="b", min_ndim=0)

        checked = self._located(check, value)
        if checked.shape != (self._num_envs,):
            raise ValueError(
                f"rews must hold one reward per env, shape ({self._num_envs},), got shape "
                f"{checked.shape} ({self._where(None)})"
            )
        rews: Float64Array = np.asarray(value, dtype=np.float64)  # numeric, checked above
        return rews

    def _call_policy(self, obs: ArrayTree) -> dict[str, AnyArray]:
        """Call the policy and check its outputs: a mapping with `actions`, all `[B, ...]`.

        Each output is checked by its rule (`output_rule`) and stored in the dtype the first
        call fixed: `actions` in the action space's dtype, without changing a value.
        """
        B = self._num_envs
        raw = self._policy(obs)
        plan = self._out_plan
        if type(raw) is dict and plan is not None and len(raw) == len(plan):
            # The usual call: the same keys, shapes and dtypes as before, as NumPy arrays
            # that break no rule (used as they are: the log copies them).
            same: dict[str, AnyArray] = {}
            for key, out in plan.items():  # in the first call's order, as the log has them
                value = raw.get(key)
                if (
                    type(value) is not np.ndarray
                    or value.shape != out.shape
                    or value.dtype != out.dtype
                    or (out.fits is not None and not out.fits(value))
                ):
                    break
                same[key] = value
            else:
                return same
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
            try:
                array = np.asarray(value)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"model_outs[{key!r}] must be a rectangular numeric array: {exc} "
                    f"({self._where(None)})"
                ) from None
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
        if plan is not None:
            known = {key: out.shape[1:] for key, out in plan.items()}
            if shapes != known:
                raise ValueError(
                    "the policy's outputs changed between calls: expected keys and per-env "
                    f"shapes {known}, got {shapes}"
                )
        else:
            plan = {key: self._plan_output(key, array, outs) for key, array in outs.items()}
        checked = {
            key: self._conform_output(key, outs[key], out, outs) for key, out in plan.items()
        }
        if self._out_plan is None:
            self._out_plan = plan
        return checked  # in the first call's order

    def _plan_output(self, key: str, array: AnyArray, outs: Mapping[str, AnyArray]) -> _Output:
        """What the first call fixes for output `key`: its rule, stored dtype and fast test."""
        rule = output_rule(key, array.ndim + 1)  # stacked: [T+1, B, ...]
        name = f"model_outs[{key!r}]"
        bounds = None
        if key == "actions":
            dtype = self._action_dtype
            actor = outs.get("actor")
            if array.ndim == 1 and actor is not None and actor.ndim == 2:
                bounds = (0, int(actor.shape[-1]) - 1)  # indices into the logits
            elif dtype.kind in "iu" and (dtype.itemsize > 4 or dtype == np.uint32):
                bounds = (int(_I32.min), int(_I32.max))  # the rollout stores int32
        else:
            # Checked as the rollout will store it; logged in its own float dtype (the
            # rollout converts the whole field once), or as converted (ints into float32).
            dtype = self._located(
                lambda v: conform(rule, v, name, copy=False, axes="b", min_ndim=1), array
            ).dtype
            if array.dtype.kind == "f":
                dtype = array.dtype
        return _Output(name, rule, array.shape, dtype, _fits_test(rule, dtype, bounds))

    def _conform_output(
        self, key: str, array: AnyArray, out: _Output, outs: Mapping[str, AnyArray]
    ) -> AnyArray:
        """Output `key` in its logged dtype, refused (naming the env) where a rule is broken.

        Converted into the logged dtype only where no value changes, then checked as the
        rollout will store it (float32 or int32: no overflow), and `actions` next to `actor`
        logits as indices into them.
        """
        rule, name, dtype = out.rule, out.name, out.dtype
        actor = outs.get("actor")
        num_actions = None
        if key == "actions" and array.ndim == 1 and actor is not None and actor.ndim == 2:
            num_actions = int(actor.shape[-1])

        def check(v: Any) -> AnyArray:
            logged = conform_into(rule, dtype, v, name, axes="b")
            if rule.dtype != "real":
                conform(rule, logged, name, copy=False, axes="b", min_ndim=1)
            if num_actions is not None and logged.size:
                bad = (logged < 0) | (logged >= num_actions)
                if bad.any():
                    b = int(np.flatnonzero(bad)[0])
                    raise ValueError(
                        f"{name} must be in [0, A) with A={num_actions} from "
                        f"model_outs['actor'], got {logged[b]} at (b={b})"
                    )
            return logged

        space = self._env.single_action_space if key == "actions" else None
        return self._located(check, array, space)

    def _critic(self, obs: ArrayTree) -> Float64Array:
        return np.asarray(self._call_policy(obs)["critic"], dtype=np.float64)

    def _with_final_obs(
        self, obs: ArrayTree, infos: Mapping[str, Any], which: BoolArray
    ) -> ArrayTree:
        """The batch `obs` with the rows of `which` replaced by SAME_STEP's `final_obs`.

        Each final observation is checked against the space as the batch is (shape exactly,
        the space's dtype without changing a value, finite).
        """
        final_obs = infos.get("final_obs")
        mask = infos.get("_final_obs")
        if final_obs is None or mask is None or not np.asarray(mask)[which].all():
            raise RuntimeError(
                "a SAME_STEP env truncated an episode without reporting its final observation "
                "in infos['final_obs'] (mask infos['_final_obs'])"
            )
        batch = _tree.map_leaves(np.copy, obs)
        arrays = [batch] if self._obs_structure is None else _tree.leaves(batch)
        for b in np.flatnonzero(which).tolist():
            where = f"env {b}'s final observation in infos['final_obs'], {self._where(None)}"
            final = final_obs[b]
            if self._obs_structure is not None:  # env b's final observation is a dict/tuple
                final = _tree.normalize(final, "obses")
            for leaf, array in zip(self._obs_leaves, arrays, strict=True):
                try:
                    value = _tree.get_leaf(final, leaf.path) if leaf.path else final
                except KeyError:
                    raise ValueError(
                        f"{leaf.name} is missing ({where}; space {leaf.space})"
                    ) from None
                try:
                    row = conform_into(_OBS_RULE, leaf.dtype, value, leaf.name, axes="")
                except ValueError as exc:
                    raise ValueError(f"{exc} ({where}; space {leaf.space})") from None
                if row.shape != leaf.shape[1:]:
                    raise ValueError(
                        f"{leaf.name} must have shape {leaf.shape[1:]} (the space's), got shape "
                        f"{row.shape} ({where}; space {leaf.space})"
                    )
                array[b] = row
        return batch

    def _states(self) -> AnyArray | None:
        """The envs' states from `state_fn`, `[B, ...]` float32 (the `states` rule: finite)."""
        B = self._num_envs
        if self._state_fn is None:
            return None

        def check(v: Any) -> AnyArray:
            return conform(_STATES_RULE, v, "states", copy=False, axes="b", min_ndim=0)

        states = self._located(check, self._state_fn(self._env))
        if states.ndim < 1 or states.shape[0] != B:
            raise ValueError(f"state_fn returned shape {states.shape}, expected ({B}, ...)")
        if self._state_shape is None:
            self._state_shape = states.shape
        elif states.shape != self._state_shape:
            raise ValueError(
                f"state_fn returned shape {states.shape}, expected {self._state_shape} as before"
            )
        return states

    def _episode_returns(self, infos: Mapping[str, Any]) -> dict[int, float]:
        """The returns the env reports this step in `info["episode"]["r"]`, by env.

        As `RecordEpisodeStatistics` (the vector wrapper, or the per-env one inside the
        vector env) puts them: a dict of per-env arrays with the mask `_episode`; under
        SAME_STEP the per-env wrapper's are in `final_info` (which wins, as in `infos`).
        Anything else is ignored (the recorder's own sums stand).
        """
        B = self._num_envs
        found: dict[int, float] = {}
        for source in (infos, infos.get("final_info")):
            if not isinstance(source, Mapping):
                continue
            episode = source.get("episode")
            if not isinstance(episode, Mapping) or "r" not in episode:
                continue
            returns = np.asarray(episode["r"])
            mask = np.asarray(source.get("_episode", np.ones(B, bool)))
            if returns.shape != (B,) or returns.dtype.kind not in "biuf" or mask.shape != (B,):
                continue
            for b in np.flatnonzero(mask).tolist():
                found[b] = float(returns[b])
        return found

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
