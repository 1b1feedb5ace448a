"""Record validated `Rollout`s from Gymnasium vector environments (the `trajkit[gym]` extra).

Public through [`trajkit.gym`][trajkit.gym]; the package documentation there explains the
choices (phantom transitions, truncation, infos, states). The package's other modules hold
the recorder's parts: `_guard` checks what the env and the policy return, `_log` logs whole
vector steps, `_infos` turns vector infos into per-env ones, `episodes` counts completed
episodes, `_describe` gives the env's fields of the recording metadata, and `_policy` names
the callables the recorder is given. In short:

* Every autoreset mode of Gymnasium >= 1.0 is handled, read from `env.metadata`. The
  NEXT_STEP phantom transition (the reset step, reward 0, action ignored) is dropped, and the
  recorder buffers real transitions per environment, so that `T` counts real transitions and
  every mode gives the same rollouts for the same episodes.
* Rollouts join up: the last row of one rollout is the first row of the next.
* Steps cut by a time limit carry `truncated = 1` and the critic's value of the true final
  observation in `final_values`; every ended episode's true final observation is kept in
  `final_obses`.
* Every value the env and the policy return is checked through the rule table
  (`trajkit._models.rules`, by `trajkit.gym._guard`) as it is logged, so a refused value
  stops the recording at the step it appeared, and `_build` changes nothing until the
  rollout is built.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from trajkit._base.types import AnyArray, ArrayTree
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import no_states, within_float32
from trajkit.gym._describe import describe_env
from trajkit.gym._guard import StepGuard
from trajkit.gym._infos import episode_returns, keeps_infos, step_info
from trajkit.gym._log import Log, positions, rows_and_steps
from trajkit.gym._policy import Policy, StateFn
from trajkit.gym.episodes import EP_FIELDS, CompletedEpisodes, episode_sums, no_episodes

__all__ = ["RolloutRecorder"]


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
        self._guard = StepGuard(env, policy, state_fn)
        self._env = env
        self._info_keys = None if info_keys is None else frozenset(info_keys)
        self._seed = seed
        self._recording_id = uuid.uuid4().hex  # one recording: this recorder's rollouts
        self._returned = 0  # rollouts returned by record() so far
        self._state_fn = state_fn
        self._num_envs = int(env.num_envs)
        # The log of whole vector steps (and the first reset) not yet returned: for each,
        # the rows it showed (observations, model outputs, states) and the step itself
        # (reward, raw ending flags, ...). `row_new` marks the envs for which an entry shows
        # a row of the rollout, `real` the real transitions: both follow from the ending
        # flags, and are filled in over many entries at once (`_settle`), not step by step.
        # Env b's t-th row is the t-th marked entry of its column, and step t (the action
        # taken from row t) the entry right after it.
        self._log = Log(
            {
                "row_new": np.bool_,
                "real": np.bool_,
                "rew": np.float64,
                "terminated": np.bool_,
                "truncs": np.bool_,
                "final_value": np.float64,
            }
        )
        self._fields: list[str] = []  # the log's fields, in the order `_append` writes them
        self._infos: dict[tuple[int, int], dict[str, Any]] = {}  # (step entry, env) -> info
        # (step entry, env) -> the leaves of the true final observation of an episode that
        # ended there, under SAME_STEP and DISABLED (NEXT_STEP's are rows of the log).
        self._finals: dict[tuple[int, int], list[AnyArray]] = {}
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
        self._failure: str | None = None
        # Episode bookkeeping across record() calls, as RecordEpisodeStatistics keeps it.
        self._ep_return = np.zeros(self._num_envs, dtype=np.float64)
        self._ep_length = np.zeros(self._num_envs, dtype=np.int64)
        self._last_episodes = no_episodes()
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
    def recording(self) -> dict[str, Any]:
        """Where the last `record()`'s rollout comes from, for `trajkit lint --replay`.

        Save it with the rollout, `trajkit.save(rollout, path, recording=recorder.recording)`,
        and `trajkit lint --replay` re-creates the env, resets it with the seed, re-runs the
        recorded actions and reports the first step where the env disagrees. The dict is a
        [`Recording`][trajkit.lint.Recording]: the env's id and `make_vec` arguments
        (from `env.spec`), its time limit, the single-env spaces as JSON, the seed, B, the
        autoreset mode, the vector wrappers around the env, an `id` shared by every rollout
        of this recorder and the rollout's `index` among them (0 for the first).

        Raises:
            RuntimeError: Before the first `record()` returned.

        Examples:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from trajkit.gym import RolloutRecorder
            >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
            >>> recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(2, int)}, seed=3)
            >>> _ = recorder.record(4); _ = recorder.record(4)
            >>> rec = recorder.recording
            >>> rec["env_id"], rec["seed"], rec["index"], rec["action_space"]
            ('CartPole-v1', 3, 1, {'type': 'Discrete', 'n': 2, 'start': 0})
            >>> env.close()
        """
        if not self._returned:
            raise RuntimeError("no rollout recorded yet: call record() first")
        return {
            "id": self._recording_id,
            "index": self._returned - 1,
            **describe_env(self._env),
            "num_envs": self._num_envs,
            "seed": self._seed,
            "autoreset_mode": AutoresetMode(self._mode.value).name,
        }

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
            return no_episodes()
        return CompletedEpisodes(
            *(np.concatenate([getattr(e, name) for e in self._all_episodes]) for name in EP_FIELDS)
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
        self._returned += 1
        return rollout

    __call__ = record

    def _ready(self, T: int) -> bool:
        """Whether every env has T real steps logged, and its row T (not a phantom due)."""
        self._settle()
        count, pending = self._count, self._pending
        return bool(np.all((count > T) | ((count == T) & pending)))

    def _start(self) -> None:
        """Reset the env and call the policy; on failure nothing is kept, so a retry is safe."""
        self._guard.step = 0
        reset_obs, _ = self._env.reset(seed=self._seed)
        obs = self._guard.obs_batch(reset_obs)
        outs = self._guard.call_policy(obs)
        states = self._guard.states()
        nobody = ~self._everyone
        zeros = self._zeros if self._mode is not _Mode.NEXT_STEP else None
        self._append(obs, outs, states, self._zeros, nobody, nobody, zeros)
        self._obs, self._outs = obs, outs

    def _settle(self) -> None:
        """Fill in `row_new` and `real` for the entries logged since the last call.

        One pass over whole arrays (`rows_and_steps`) instead of a few small operations per
        step; it also counts each env's real steps and carries `_pending` on.
        """
        log = self._log
        start, stop = log.start + self._settled, log.end
        if start == stop:
            return
        arrays, B = log.arrays, (self._num_envs,)
        ended = np.logical_or(arrays["terminated"][start:stop], arrays["truncs"][start:stop])
        new, real = rows_and_steps(ended, self._pending, self._mode is _Mode.NEXT_STEP)
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
        the values; `outs` keeps the keys of the first call, in that order (`StepGuard.call_policy`
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
        self._guard.step += 1
        obs, rews, terms, truncs, infos = self._env.step(self._outs["actions"])
        new_obs = self._guard.obs_batch(obs)
        rews, terms, truncs = self._checked_flags(rews, terms, truncs)
        final_values = None  # NEXT_STEP's are in the log already: the critic's outputs
        if self._mode is not _Mode.NEXT_STEP:
            # Every step is a real transition of every env under these modes.
            ended = np.logical_or(terms, truncs)
            finals = self._keep_finals(new_obs, infos, ended) if ended.any() else new_obs
            final_values = self._final_values(finals, terms, truncs)
            if self._mode is _Mode.DISABLED:
                new_obs = self._reset_ended(new_obs, ended)
        # Under NEXT_STEP, ended envs show their final observation now, and their next step
        # is the phantom reset (`_settle` tells these entries apart).
        new_outs = self._guard.call_policy(new_obs)
        states = None if self._state_fn is None else self._guard.states()
        if infos:
            self._log_infos(infos)
        self._append(new_obs, new_outs, states, rews, terms, truncs, final_values)
        self._obs, self._outs = new_obs, new_outs

    def _checked_flags(
        self, rews: Any, terms: Any, truncs: Any
    ) -> tuple[AnyArray, AnyArray, AnyArray]:
        """The step's rewards and flags, each checked by the guard unless it is already right.

        The fast path: a `[B]` array of the dtype the guard would give (and rewards that pass
        the float32 rule's own fast test, `rules.within_float32`: the log keeps float64) is
        taken as it is.
        """
        per_env = (self._num_envs,)
        if type(terms) is not np.ndarray or terms.shape != per_env or terms.dtype != np.bool_:
            terms = self._guard.flags(terms, "terminated")
        if type(truncs) is not np.ndarray or truncs.shape != per_env or truncs.dtype != np.bool_:
            truncs = self._guard.flags(truncs, "truncated")
        if (
            type(rews) is not np.ndarray
            or rews.shape != per_env
            or rews.dtype != np.float64
            or not within_float32(rews)
        ):
            rews = self._guard.rewards(rews)
        return rews, terms, truncs

    def _keep_finals(self, new_obs: ArrayTree, infos: Any, ended: AnyArray) -> ArrayTree:
        """Keep the final observations of the envs that `ended`; the batch with them in place.

        Under SAME_STEP they come in `infos["final_obs"]` (checked against the space by the
        guard); under DISABLED the batch holds them, before the recorder resets those envs.
        """
        if self._mode is _Mode.SAME_STEP:
            finals = self._guard.with_final_obs(new_obs, infos, ended)
        else:
            finals = new_obs
        leaves = [finals] if type(finals) is np.ndarray else _tree.leaves(finals)
        entry = self._log.size  # the entry this step is logged at
        for b in np.flatnonzero(ended).tolist():
            self._finals[entry, b] = [leaf[b].copy() for leaf in leaves]
        return finals

    def _final_values(self, finals: ArrayTree, terms: AnyArray, truncs: AnyArray) -> AnyArray:
        """The critic's values of truncated envs' final observations (zeros elsewhere).

        `finals` is the step's batch with the final observations of the envs that ended.
        """
        if "critic" not in self._outs or not truncs.any():
            return self._zeros
        truncated = np.logical_and(truncs, np.logical_not(terms))
        if not truncated.any():
            return self._zeros
        return self._guard.critic(finals)

    def _reset_ended(self, new_obs: ArrayTree, ended: AnyArray) -> ArrayTree:
        """With autoreset disabled: reset the envs that ended, and return their first obs."""
        if not ended.any():
            return new_obs
        reset_obs, _ = self._env.reset(options={"reset_mask": ended})
        return self._guard.obs_batch(reset_obs)

    def _log_infos(self, infos: Any) -> None:
        """Keep the step's infos and the episode returns they report, at the next log entry."""
        B, entry = self._num_envs, self._log.size
        if keeps_infos(infos, self._info_keys):
            # Every env's, phantom steps' too: `_build` takes only real transitions' infos.
            for b in range(B):
                info = step_info(infos, b, B, self._info_keys)
                if info:
                    self._infos[entry, b] = info
        if "episode" in infos or "final_info" in infos:
            for b, value in episode_returns(infos, B).items():
                self._reported[entry, b] = value

    def _build(self, T: int) -> tuple[Rollout, Callable[[], None]]:
        """The rollout of the next T steps, and the function that moves the recorder past it.

        Nothing of the recorder changes until the rollout is built (`_settle` only fills in
        what the logged flags imply), so a failure here leaves it as it was.
        """
        self._settle()
        B, log = self._num_envs, self._log
        fields = log.fields()
        row_at = positions(fields["row_new"], T + 1)  # [T+1, B]
        step_at = row_at[:T] + 1  # [T, B]: step t is the entry after row t's
        envs = np.arange(B)
        real = fields["real"]
        ended = np.logical_or(fields["terminated"], fields["truncs"])
        # A row starts an episode where the step that showed it ended one, or was a phantom.
        dones = np.less_equal(real, ended)[row_at, envs]
        # The steps of this rollout and later ones: those after the entry of its row 0.
        entry = np.arange(log.size)[:, None]
        counted = real & (entry > row_at[0])
        over = ended & counted  # an episode ended at this entry
        returns, lengths = episode_sums(
            counted, fields["rew"], over, self._ep_return, self._ep_length
        )
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
        leaves = [at_rows(f"obs{i}") for i in range(len(self._guard.obs_leaves))]
        states = no_states(T, B)
        if self._state_fn is not None:
            states = at_rows("state")
        rollout = Rollout(
            states=states,
            obses=leaves[0]
            if self._guard.obs_structure is None
            else _tree.unflatten(self._guard.obs_structure, leaves),
            rews=at_steps(fields["rew"], np.float64),
            dones=dones,
            infos=infos,
            model_outs={key: at_rows("out:" + key) for key in self._outs},
            truncated=truncated,
            final_values=np.where(truncated, at_steps(final_value, np.float64), 0.0),
            final_obses=self._final_obses(step_at[t_end, b_end], b_end),
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
            self._finals = {
                (k - drop, b): final for (k, b), final in self._finals.items() if k > first[b]
            }
            log.drop(drop)
            self._settled -= drop
            self._count -= T

        return rollout, commit

    def _final_obses(self, entries: AnyArray, envs: AnyArray) -> ArrayTree:
        """The true final observations of the steps logged at `entries` (of `envs`), `[E, ...]`.

        Under NEXT_STEP they are the observations logged at those very entries (the ending
        step shows its final observation); under the other modes they were kept aside.
        """
        log, count = self._log, len(entries)
        leaves: list[AnyArray] = []
        for i in range(len(self._guard.obs_leaves)):
            logged = log.arrays[f"obs{i}"]
            if self._mode is _Mode.NEXT_STEP:
                leaves.append(logged[entries + log.start, envs])
                continue
            out = np.empty((count, *logged.shape[2:]), logged.dtype)
            for k, (entry, b) in enumerate(zip(entries.tolist(), envs.tolist(), strict=True)):
                out[k] = self._finals[entry, b][i]
            leaves.append(out)
        if self._guard.obs_structure is None:
            return leaves[0]
        return _tree.unflatten(self._guard.obs_structure, leaves)
