"""The env's fields of a recording's metadata (`trajkit.lint.Recording`): id, arguments, spaces.

`describe_space` writes a Gymnasium space as JSON (the form `Recording.observation_space`
and `Recording.action_space` hold); `describe_env` reads the rest from a vector env.
"""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper

__all__ = ["describe_env", "describe_space"]

_MAKE_VEC_OWN = ("num_envs", "vectorization_mode")  # make_vec's arguments recorded apart


def _bound(values: Any) -> Any:
    """A Box bound as JSON: one number when uniform, else a nested list; `null` for inf."""
    array = np.asarray(values, dtype=np.float64)
    if array.size and bool((array == array.flat[0]).all()):
        first = float(array.flat[0])
        return None if math.isinf(first) else first
    listed = array.astype(object)
    listed[np.isinf(array)] = None
    return listed.tolist()


def describe_space(space: spaces.Space[Any]) -> dict[str, Any]:
    """A Gymnasium space as JSON: its type and what defines its elements.

    Box: `shape`, `dtype`, `low`, `high` (a number when every element has the same bound,
    else a nested list; `null` for an infinite bound). Discrete: `n`, `start`.
    MultiDiscrete: `nvec`, `start`. MultiBinary: `n`. Dict and Tuple: `spaces`. Any other
    space: its `type` only.

    Examples:
        >>> from gymnasium import spaces
        >>> describe_space(spaces.Discrete(3))
        {'type': 'Discrete', 'n': 3, 'start': 0}
        >>> describe_space(spaces.Box(-1.0, float("inf"), (2,)))
        {'type': 'Box', 'shape': [2], 'dtype': 'float32', 'low': -1.0, 'high': None}
    """
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
        }
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": n if isinstance(n, int) else list(n)}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: describe_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe_space(s) for s in space.spaces]}
    return {"type": type(space).__name__}


def _plain(value: Any) -> Any:
    """`value` with enums (`AutoresetMode.SAME_STEP`) as their values, which `make_vec` takes."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def describe_env(env: VectorEnv[Any, Any, Any]) -> dict[str, Any]:
    """The recording fields a vector env gives: id, `make_vec` arguments, time limit, spaces.

    Examples:
        >>> import gymnasium as gym
        >>> env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
        ...                    max_episode_steps=50)
        >>> info = describe_env(env)
        >>> info["env_id"], info["env_kwargs"], info["max_episode_steps"], info["wrappers"]
        ('CartPole-v1', {'max_episode_steps': 50}, 50, [])
        >>> info["unrecorded_kwargs"]
        []
        >>> env.close()
    """
    wrappers = []
    inner: Any = env
    while isinstance(inner, VectorWrapper):
        wrappers.append(type(inner).__name__)
        inner = inner.env
    spec = getattr(env, "spec", None)
    kwargs = dict(getattr(spec, "kwargs", None) or {})
    mode = kwargs.get("vectorization_mode")
    kwargs = {k: _plain(v) for k, v in kwargs.items() if k not in _MAKE_VEC_OWN}
    unrecorded = sorted(k for k, v in kwargs.items() if not _jsonable(v))
    kwargs = {k: v for k, v in kwargs.items() if k not in unrecorded}
    limit = kwargs.get("max_episode_steps", getattr(spec, "max_episode_steps", None))
    sub_envs = getattr(inner, "envs", None)
    if sub_envs:  # a SyncVectorEnv: its envs' own TimeLimit
        sub_spec = getattr(sub_envs[0], "spec", None)
        limit = getattr(sub_spec, "max_episode_steps", None) or limit
    return {
        "env_id": getattr(spec, "id", None),
        "env_kwargs": kwargs,
        "unrecorded_kwargs": unrecorded,
        "vectorization_mode": str(getattr(mode, "value", mode)) if mode is not None else None,
        "max_episode_steps": int(limit) if isinstance(limit, int) and limit >= 1 else None,
        "observation_space": describe_space(env.single_observation_space),
        "action_space": describe_space(env.single_action_space),
        "wrappers": wrappers,
    }
