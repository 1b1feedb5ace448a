"""The recorder's guard: everything the env and the policy return, checked as it comes.

`StepGuard` holds what the spaces and the first policy call fix (each observation leaf's shape
and dtype, each model output's rule, dtype and cheap test) and checks every batch through
the rule table (`trajkit._models.rules`), so a refused value stops the recording at the step
it appeared, with a message that starts as the constructor's and ends with the env, the
step and the space.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from trajkit._base.types import AnyArray, ArrayTree, BoolArray, Float64Array
from trajkit._core import tree as _tree
from trajkit._models.rules import (
    FIELD_RULES,
    INT_ACTIONS,
    PER_ENV_SCALAR_OUTPUTS,
    Rule,
    all_finite,
    check_action_range,
    conform,
    conform_into,
    discrete_actions,
    output_rule,
    within_float32,
)
from trajkit.gym._policy import Policy, StateFn

__all__ = ["StepGuard"]

_ARRAY_SPACES: Final = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)
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


def _fits_test(
    rule: Rule, dtype: np.dtype[Any], bounds: tuple[int, int] | None
) -> Callable[[AnyArray], bool] | None:
    """The cheap test of `_Output.fits` for arrays of `dtype` under `rule`."""
    if dtype.kind == "f":
        if rule.dtype != "real" and dtype.itemsize > 4:
            return within_float32  # the rollout stores float32: no overflow to inf
        return all_finite if rule.finite else None
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


def _first_bad_env(conformed: Callable[[Any], object], value: Any) -> int | None:
    """The first env (row of `value`) that `conformed` refuses on its own, or None."""
    try:
        rows = len(value)
    except TypeError:
        return None
    for b in range(rows):
        try:
            conformed(value[b : b + 1])
        except (ValueError, TypeError, IndexError):
            return b
    return None


class StepGuard:
    """Checks of one vector env's observations, flags, rewards, states and policy outputs.

    Built from the env's spaces (refusing spaces trajkit cannot store); the first policy
    call fixes the outputs' keys, shapes and dtypes. `step` is the `env.step` count that
    messages name; the recorder sets it.

    Args:
        env: The vector env; its single observation and action spaces are checked here.
        policy: The policy, called by `call_policy`.
        state_fn: The optional states hook, called by `states`.

    Raises:
        ValueError: If the observation space has a part that is not an array, or none, or
            the action space is not Discrete, MultiDiscrete, MultiBinary or Box.
    """

    def __init__(
        self, env: VectorEnv[Any, Any, Any], policy: Policy, state_fn: StateFn | None
    ) -> None:
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
        self._state_fn = state_fn
        self.num_envs = int(env.num_envs)
        # Every batch of observations is checked leaf by leaf against the space, in its order.
        pairs = _space_leaves(obs_space)
        if not pairs:
            raise ValueError(
                f"cannot record observations from the observation space {obs_space}: it holds "
                "no array space"
            )
        self.obs_leaves = [
            _ObsLeaf(
                path,
                _tree.format_path("obses", path),
                sub,
                (self.num_envs, *sub.shape),
                np.dtype(sub.dtype),
            )
            for path, sub in pairs
        ]
        self._obs_paths = [leaf.path for leaf in self.obs_leaves]
        self.obs_structure = None if pairs[0][0] == () else _tree.unflatten_paths(pairs)
        self.step = 0  # env.step calls so far (0: the first reset), named in messages
        self._out_plan: dict[str, _Output] | None = None  # fixed by the first policy call
        self._state_shape: tuple[int, ...] | None = None

    def where(self, env: int | None, space: object = None) -> str:
        """Where a refused value came from, for messages: env, step and space."""
        step = f"step {self.step} of the recording" + (
            " (the first reset)" if self.step == 0 else ""
        )
        where = step if env is None else f"env {env}, {step}"
        return where if space is None else f"{where}; space {space}"

    def located(
        self, conformed: Callable[[Any], AnyArray], value: Any, space: object = None
    ) -> AnyArray:
        """`conformed(value)`; a refusal's message gets the env, the step and the space appended.

        The rule table's message comes first, unchanged (`obses must be finite, ...`), so
        that every door's messages start alike.
        """
        try:
            return conformed(value)
        except ValueError as exc:
            env = _first_bad_env(conformed, value)
            raise ValueError(f"{exc} ({self.where(env, space)})") from None

    def obs_batch(self, obs: Any) -> ArrayTree:
        """The env's observations, checked against the observation space leaf by leaf.

        A batch is `[B, *space.shape]` of the space's dtype exactly: nothing is broadcast,
        and a value is converted to the space's dtype only where no value changes (300 in
        a uint8 space, -1.7 in an integer one, 1e300 in a float32 one are refused), then
        checked by the `obses` rule (finite). A NumPy batch of the right shape and dtype is
        used as it is (the log copies it into place). For Dict and Tuple spaces, the batch
        is a dict or tuple of such arrays, rebuilt in the space's order.
        """
        leaves = self.obs_leaves
        if self.obs_structure is None:
            return self._obs_leaf(leaves[0], obs)
        tree = _tree.normalize(obs, "obses") if not _tree.is_leaf(obs) else obs
        pairs = _tree.flatten(tree)
        if [path for path, _ in pairs] != self._obs_paths:
            pairs = self._by_space(tree)
        return _tree.unflatten(
            self.obs_structure,
            [self._obs_leaf(leaf, value) for leaf, (_, value) in zip(leaves, pairs, strict=True)],
        )

    def _by_space(self, tree: Any) -> list[tuple[_tree.Path, Any]]:
        """The leaves of `tree` at the observation space's paths (a dict in another order)."""
        space = self._env.single_observation_space
        found = set(_tree.paths(tree))
        missing = [leaf.name for leaf in self.obs_leaves if leaf.path not in found]
        extra = [_tree.format_path("obses", p) for p in found - set(self._obs_paths)]
        if missing or extra:
            parts = [f"missing {', '.join(missing)}"] if missing else []
            if extra:
                parts.append(f"not in the space: {', '.join(sorted(extra))}")
            raise ValueError(
                f"obses must have the structure of the observation space: {'; '.join(parts)} "
                f"({self.where(None, space)})"
            )
        return [(leaf.path, _tree.get_leaf(tree, leaf.path)) for leaf in self.obs_leaves]

    def _obs_leaf(self, leaf: _ObsLeaf, value: Any) -> AnyArray:
        if (
            type(value) is np.ndarray
            and value.dtype == leaf.dtype
            and value.shape == leaf.shape
            and (value.dtype.kind != "f" or all_finite(value))
        ):
            return value  # the common case: nothing to convert, nothing to refuse
        dtype, name = leaf.dtype, leaf.name

        def conformed(v: Any) -> AnyArray:
            return conform_into(_OBS_RULE, dtype, v, name, axes="b")

        array = self.located(conformed, value, leaf.space)
        if array.shape != leaf.shape:
            raise ValueError(
                f"{name} must have shape {leaf.shape}: B={self.num_envs} observations of the "
                f"space's shape {leaf.shape[1:]}, got shape {array.shape} "
                f"({self.where(None, leaf.space)})"
            )
        return array

    def flags(self, value: Any, name: str) -> AnyArray:
        """The env's `terminated` or `truncated` flags as a bool array `[B]`, checked (0/1)."""

        def conformed(v: Any) -> AnyArray:
            return conform_into(_FLAG_RULE, np.dtype(np.bool_), v, name, axes="b")

        array = self.located(conformed, value)
        if array.shape != (self.num_envs,):
            raise ValueError(
                f"{name} must hold one flag per env, shape ({self.num_envs},), got shape "
                f"{array.shape} ({self.where(None)})"
            )
        return array

    def rewards(self, value: Any) -> Float64Array:
        """The env's rewards as float64 `[B]`, checked by the `rews` rule.

        Checked as the rollout stores them (float32: finite, no overflow to inf); kept in
        float64 for the episode sums.
        """

        def conformed(v: Any) -> AnyArray:
            return conform(_REWS_RULE, v, "rews", copy=False, axes="b", min_ndim=0)

        checked = self.located(conformed, value)
        if checked.shape != (self.num_envs,):
            raise ValueError(
                f"rews must hold one reward per env, shape ({self.num_envs},), got shape "
                f"{checked.shape} ({self.where(None)})"
            )
        rews: Float64Array = np.asarray(value, dtype=np.float64)  # numeric, checked above
        return rews

    def call_policy(self, obs: ArrayTree) -> dict[str, AnyArray]:
        """Call the policy and check its outputs: a mapping with `actions`, all `[B, ...]`.

        Each output is checked by its rule (`output_rule`) and stored in the dtype the first
        call fixed: `actions` in the action space's dtype, without changing a value.
        """
        raw = self._policy(obs)
        plan = self._out_plan
        same = _unchanged_outputs(raw, plan)
        if same is not None:
            return same
        outs = self._output_arrays(raw)
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

    def _output_arrays(self, raw: Any) -> dict[str, AnyArray]:
        """The policy's outputs as arrays: a mapping with `actions`, each output `[B, ...]`."""
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
        return {key: self._output_array(key, value) for key, value in raw.items()}

    def _output_array(self, key: Any, value: Any) -> AnyArray:
        """One output as an array of B rows (`actions`: of the action space's shape)."""
        B = self.num_envs
        if not isinstance(key, str):
            raise ValueError(f"the policy's output keys must be strings, got {key!r}")
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"model_outs[{key!r}] must be a rectangular numeric array: {exc} "
                f"({self.where(None)})"
            ) from None
        if array.ndim == 0 or array.shape[0] != B:
            raise ValueError(
                f"the policy's output {key!r} has shape {array.shape}, expected leading "
                f"dimension B={B} (one row per env, for a batch of {B} observations)"
            )
        if key in PER_ENV_SCALAR_OUTPUTS and array.ndim != 1:
            raise ValueError(
                f"the policy's output {key!r} has shape {array.shape}, expected ({B},)"
            )
        if key == "actions" and array.shape[1:] != self._action_shape:
            raise ValueError(
                f"the policy's output 'actions' has shape {array.shape}, expected "
                f"{(B, *self._action_shape)}: one element of the action space "
                f"{self._env.single_action_space} per env"
            )
        return array

    def _plan_output(self, key: str, array: AnyArray, outs: Mapping[str, AnyArray]) -> _Output:
        """What the first call fixes for output `key`: its rule, stored dtype and fast test."""
        rule = output_rule(key, array.ndim + 1)  # stacked: [T+1, B, ...]
        name = f"model_outs[{key!r}]"
        bounds = None
        if key == "actions":
            dtype = self._action_dtype
            if discrete_actions({"actions": array, "actor": outs.get("actor")}, lead=1):
                bounds = (0, int(outs["actor"].shape[-1]) - 1)  # indices into the logits
            elif not np.can_cast(dtype, INT_ACTIONS) and dtype.kind in "iu":
                info = np.iinfo(INT_ACTIONS)  # what the rollout stores
                bounds = (int(info.min), int(info.max))
        else:
            # Checked as the rollout will store it; logged in its own float dtype (the
            # rollout converts the whole field once), or as converted (ints into float32).
            dtype = self.located(
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
        num_actions = None
        if key == "actions" and discrete_actions({"actions": array, "actor": outs.get("actor")}, 1):
            num_actions = int(outs["actor"].shape[-1])

        def conformed(v: Any) -> AnyArray:
            logged = conform_into(rule, dtype, v, name, axes="b")
            if rule.dtype != "real":
                conform(rule, logged, name, copy=False, axes="b", min_ndim=1)
            if num_actions is not None and logged.size:
                check_action_range(logged, num_actions, name, "b")
            return logged

        space = self._env.single_action_space if key == "actions" else None
        return self.located(conformed, array, space)

    def critic(self, obs: ArrayTree) -> Float64Array:
        return np.asarray(self.call_policy(obs)["critic"], dtype=np.float64)

    def with_final_obs(
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
                "a SAME_STEP env ended an episode without reporting its final observation "
                "in infos['final_obs'] (mask infos['_final_obs'])"
            )
        batch = _tree.map_leaves(np.copy, obs)
        arrays = [batch] if self.obs_structure is None else _tree.leaves(batch)
        for b in np.flatnonzero(which).tolist():
            where = f"env {b}'s final observation in infos['final_obs'], {self.where(None)}"
            final = final_obs[b]
            if self.obs_structure is not None:  # env b's final observation is a dict/tuple
                final = _tree.normalize(final, "obses")
            for leaf, array in zip(self.obs_leaves, arrays, strict=True):
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

    def states(self) -> AnyArray | None:
        """The envs' states from `state_fn`, `[B, ...]` float32 (the `states` rule: finite)."""
        B = self.num_envs
        if self._state_fn is None:
            return None

        def conformed(v: Any) -> AnyArray:
            return conform(_STATES_RULE, v, "states", copy=False, axes="b", min_ndim=0)

        states = self.located(conformed, self._state_fn(self._env))
        if states.ndim < 1 or states.shape[0] != B:
            raise ValueError(f"state_fn returned shape {states.shape}, expected ({B}, ...)")
        if self._state_shape is None:
            self._state_shape = states.shape
        elif states.shape != self._state_shape:
            raise ValueError(
                f"state_fn returned shape {states.shape}, expected {self._state_shape} as before"
            )
        return states


def _unchanged_outputs(raw: Any, plan: dict[str, _Output] | None) -> dict[str, AnyArray] | None:
    """The usual call's outputs, or `None` to check them in full.

    The usual call: a dict of the same keys, shapes and dtypes as before, NumPy arrays that
    break no rule (used as they are: the log copies them), in the first call's order.
    """
    if type(raw) is not dict or plan is None or len(raw) != len(plan):
        return None
    same: dict[str, AnyArray] = {}
    for key, out in plan.items():  # in the first call's order, as the log has them
        value = raw.get(key)
        if (
            type(value) is not np.ndarray
            or value.shape != out.shape
            or value.dtype != out.dtype
            or (out.fits is not None and not out.fits(value))
        ):
            return None
        same[key] = value
    return same
